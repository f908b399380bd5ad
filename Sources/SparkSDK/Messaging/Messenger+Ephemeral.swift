import Foundation
import SparkDomain
import SparkLock
import SparkMLS

/// Ephemeral events: typing notices and an app's live chat events (Spark's `chatEventSend`).
/// Each is sealed to the chat's group outside its ratchet (`MLSGroup.sealEphemeral`: only the
/// epoch's members read it, its sender's device signed it), posted as an
/// ``MailboxKind/ephemeral`` entry the domain delivers to the devices that read within seconds
/// and then deletes, and reported to the app as a ``MessagingEvent``; nothing of it is stored on
/// any device. A receiver drops one it has seen (by its nonce) and ignores one whose own time is
/// more than 30 s from its clock, so one replayed later shows nothing.
extension Messenger {
    /// A device repeats its "typing" notice at most this often while its user types.
    static let typingRepeatInterval: Duration = .seconds(3)

    /// Tells the chat's members' devices that this user is typing (or stopped). While the user
    /// types, a notice goes at most every ``typingRepeatInterval``; a stop goes only after a start.
    func sendTyping(in chatID: String, isTyping: Bool) async throws {
        let now = ContinuousClock.now
        if isTyping {
            if let last = typingSentAt[chatID], now - last < Self.typingRepeatInterval { return }
            typingSentAt[chatID] = now
        } else {
            guard typingSentAt.removeValue(forKey: chatID) != nil else { return }
        }
        try await postEphemeral(ChatPayload(kind: isTyping ? .typing : .typingStopped, id: Self.newID()), in: chatID)
    }

    /// Sends an app-defined live event (`tag`, and `data` of at most 8 KB) to the chat's members'
    /// devices that are online.
    func sendChatEvent(tag: String, data: String?, in chatID: String) async throws {
        guard (1...64).contains(tag.utf8.count), (data?.utf8.count ?? 0) <= ChatPayload.maximumEventData else {
            throw MessagingError(.invalidArgument, "a chat event's tag is 1 to 64 bytes and its data at most 8 KB")
        }
        try await postEphemeral(ChatPayload(kind: .chatEvent, id: Self.newID(), tag: tag, data: data), in: chatID)
    }

    private func postEphemeral(_ payload: ChatPayload, in chatID: String) async throws {
        var stamped = payload
        stamped.upTo = Int64(clock.now().timeIntervalSince1970 * 1000)
        let payload = stamped
        let sealed = try await read { store in
            guard let stored = try self.groups.load(store, chatID: chatID, validator: try self.groupValidator(store)),
                stored.group.group.isActive
            else { throw MessagingError(.unknownChat, "this device is not in chat \(chatID)") }
            let refused = try self.untrustedUsers(in: stored, store)
            guard refused.isEmpty else {
                throw MessagingError(
                    .identityUnconfirmed, "the identity of \(refused.joined(separator: ", ")) is not confirmed")
            }
            var random = MLSSystemRandom()
            return try stored.group.sealEphemeral(payload, random: &random)
        }
        _ = try await domainCall {
            try await domain.post(
                token: try await token(), endpointID: endpointID, chatID: chatID, kind: .ephemeral, payload: sealed,
                recipient: nil, clientID: nil)
        }
    }

    /// Opens an ephemeral entry and tells the app; nothing is written but the mailbox cursor.
    func receiveEphemeral(_ entry: MailboxEntry) async throws {
        let stored = try await read { store in
            try self.groups.load(store, chatID: entry.chatID, validator: try self.groupValidator(store))
        }
        guard let group = stored?.group else { return }
        switch group.receiveEphemeral(entry, now: clock.now()) {
        case .ignore: return
        case .drop(let reason): eventSinks.yield(.dropped(chatID: entry.chatID, reason: reason))
        case .event(let payload, let sender, let nonce):
            guard sender.device != endpointID, !blocked.contains(sender.user), noteEphemeral(nonce) else { return }
            switch payload.kind {
            case .typing, .typingStopped:
                guard sender.user != me else { return }
                eventSinks.yield(.typing(chatID: entry.chatID, userID: sender.user, isTyping: payload.kind == .typing))
            default:
                eventSinks.yield(
                    .chatEvent(chatID: entry.chatID, userID: sender.user, tag: payload.tag, data: payload.data))
            }
        }
    }

    /// Notes an ephemeral message's nonce; false when it was seen (a replay within the window).
    private func noteEphemeral(_ nonce: Data) -> Bool {
        guard seenEphemeral.insert(nonce).inserted else { return false }
        seenEphemeralOrder.append(nonce)
        if seenEphemeralOrder.count > Self.seenEphemeralLimit {
            seenEphemeral.remove(seenEphemeralOrder.removeFirst())
        }
        return true
    }

    /// How many ephemeral nonces a device remembers: more than arrive in the 30 s window.
    static let seenEphemeralLimit = 4096
}
