import Foundation
import SparkCrypto
import SparkDomain
import SparkLock
import SparkMLS
import SparkStore

/// What the outbox posts that is not kept for retry: edits, reactions, recalls, receipts (each
/// sealed, and sealed again when a commit overtook it), reports; ephemeral events (typing notices
/// and an app's live chat events, sealed outside the ratchet, `MLSGroup.sealEphemeral`, and never
/// stored); and the history a new device of this user gets (`ChatHistory`, sealed to that
/// device's leaf key alone).
extension Outbox {

    /// Seals and posts a payload that is not stored for retry (a receipt, an edit): refused
    /// while something holds the chat, sealed again when a commit overtook it.
    func postEvent(_ payload: ChatPayload, in chatID: String) async throws {
        let kind: MailboxKind = payload.kind == .receipt ? .receipt : .event
        for attempt in 0..<5 {
            // Sealing checks that this device is in the chat and that nothing holds it; a chat held
            // has its holders looked up again first (the domain may publish the trusted key again).
            let sealed: Data
            do {
                sealed = try await seal(payload, in: chatID)
            } catch let error as MessagingError where error.code == .identityUnconfirmed {
                try await requireNotHeld(chatID)
                sealed = try await seal(payload, in: chatID)
            }
            do {
                _ = try await domainCall {
                    try await domain.post(
                        token: try await token(), endpointID: endpointID, chatID: chatID, kind: kind, payload: sealed,
                        recipient: nil, clientID: nil)
                }
                return
            } catch let error as MessagingError where error.domainCode == .conflict && attempt < 4 {
                try? await write { store in try store.forgetSent(payload: sealed) }
                try await catchUp()
            }
        }
    }

    /// Edits one of this user's sent messages: the new text goes as an authenticated edit that
    /// names the message's id, and every member's device shows it.
    func edit(_ messageID: String, content: String) async throws {
        guard content.utf8.count <= MessagingContext.maximumContentSize else {
            throw MessagingError(.tooLarge, "content and data together are limited to 70 KB")
        }
        guard let chatID = try await read({ store in try store.chatOfNumbered(id: messageID, sender: self.me) }) else {
            throw MessagingError(.unknownChat, "no message \(messageID) this user sent to edit")
        }
        guard try await read({ store in try store.known(chatID: chatID, id: messageID)?.recalled }) != true else {
            throw MessagingError(.invalidArgument, "message \(messageID) was recalled")
        }
        try await postEvent(ChatPayload(kind: .edit, id: newID(), content: content, ref: messageID), in: chatID)
        try await write { store in try store.setContent(messageID, content: content) }
        await flows.reloadMessages(chatID, changed: .some([messageID]))
    }

    /// Adds (or removes) this user's reaction `emoji` to a numbered message of a chat: it goes as
    /// an authenticated reaction naming the message's id, and every member's device counts it.
    func react(_ messageID: String, emoji: String, added: Bool) async throws {
        guard ChatPayload.isReaction(emoji) else { throw MessagingError(.invalidArgument, "a reaction is one emoji") }
        guard let message = try await read({ store in try store.message(messageID) }), message.number != nil,
            !message.isRecalled
        else { throw MessagingError(.unknownChat, "no message \(messageID) here to react to") }
        let current = try await read { store in try store.reactions(of: messageID) }
        guard Reaction.applying(current, user: me, emoji: emoji, added: added) != nil else {
            let has = current.contains { $0.emoji == emoji && $0.userIDs.contains(me) }
            if has == added { return }
            throw MessagingError(.invalidArgument, "a message takes at most \(Reaction.maximumPerUser) reactions of one user")
        }
        try await postEvent(
            ChatPayload(kind: added ? .reaction : .unreaction, id: newID(), content: emoji, ref: messageID),
            in: message.chatID)
        // Applied to the reactions as they are now: others' may have arrived while it was posted.
        try await write { store in
            if let reactions = Reaction.applying(try store.reactions(of: messageID), user: self.me, emoji: emoji, added: added) {
                try store.setReactions(messageID, reactions)
            }
        }
        await flows.reloadMessages(message.chatID, changed: .some([messageID]))
    }

    /// Recalls one of this user's sent messages (deletes it for everyone): an authenticated
    /// recall naming its id goes to every member's device, each of which removes its content;
    /// this device removes it once the domain took the recall.
    func recall(_ messageID: String) async throws {
        guard let chatID = try await read({ store in try store.chatOfNumbered(id: messageID, sender: self.me) }) else {
            throw MessagingError(.unknownChat, "no message \(messageID) this user sent to recall")
        }
        guard try await read({ store in try store.known(chatID: chatID, id: messageID)?.recalled }) != true else { return }
        let attachment = try await read { store in try store.attachment(of: messageID) }
        try await postEvent(ChatPayload(kind: .recall, id: newID(), ref: messageID), in: chatID)
        try await write { store in try store.recall(messageID) }
        await flows.reloadMessages(chatID, changed: .some([messageID]))
        // The file goes from the domain too (the members' devices forgot its key already).
        if let attachment { await attachments.deleteBlobs(of: attachment) }
    }

    /// Reports a participant with messages of theirs this device holds (read again from the store,
    /// so what is revealed is what arrived, not what the app passed).
    func report(_ userID: String, in chatID: String, messages: [ChatMessage], reason: String) async throws -> Int64 {
        let stored = try await read { store in try store.messages(chatID: chatID, ids: messages.map(\.id)) }
        guard !messages.isEmpty, stored.count == messages.count,
            stored.allSatisfy({ $0.sender == userID && $0.isIncoming && !$0.isRecalled })
        else { throw MessagingError(.invalidArgument, "a report reveals received messages of the reported user in this chat") }
        let revealed = stored.sorted { ($0.number ?? 0) < ($1.number ?? 0) }.map {
            ReportedMessage(id: $0.id, sender: $0.sender, number: $0.number, content: $0.content, sentAt: $0.timestamp)
        }
        return try await domainCall {
            try await domain.report(
                token: try await token(), endpointID: endpointID, chatID: chatID, user: userID, reason: reason,
                messages: revealed)
        }
    }

    /// Seals a payload that is not stored as a message (see `sealNext`).
    func seal(_ payload: ChatPayload, in chatID: String) async throws -> Data {
        try await write { store in try self.sealNext(payload, chatID: chatID, localID: nil, in: store) }
    }

    func markRead(_ chatID: String, upTo number: Int64?) async throws {
        try requireRunning()
        let newest = try await read { store in try store.newestReceived(chatID: chatID) }
        let upTo = number ?? newest ?? 0
        guard upTo > 0 else { return }
        let read = try await write { store in
            let unread = try store.unreadReceived(chatID: chatID, upTo: upTo)
            try store.readReceived(chatID: chatID, upTo: upTo)
            try store.startExpiry(chatID: chatID, at: self.clock.now())
            return unread
        }
        await noteExpiring()
        await flows.reloadMessages(chatID)
        await flows.reloadChats()
        do {
            try await sendReceipts(chatID: chatID, receipt: .read, covering: read)
        } catch let error as MessagingError where error.code == .identityUnconfirmed {
            // Read here all the same; the chat holds a device this one does not trust, so the
            // receipt is not sealed to it (the senders see these messages delivered, not read).
        }
    }

    /// Receipts for exactly `messages` (received ones of the chat), at most
    /// ``ChatPayload/maximumCovered`` to a receipt, each naming the messages by their
    /// authenticated ids: the receiving device moves those and no other (never a range, which a
    /// domain withholding one message could have counted as delivered).
    func sendReceipts(chatID: String, receipt: ChatPayload.Receipt, covering messages: [CoveredMessage]) async throws {
        let ordered = messages.sorted { $0.number < $1.number }
        for start in stride(from: 0, to: ordered.count, by: ChatPayload.maximumCovered) {
            let chunk = ordered[start..<min(start + ChatPayload.maximumCovered, ordered.count)]
            guard let newest = chunk.last else { continue }
            try await postEvent(
                ChatPayload(
                    kind: .receipt, id: newID(), ref: newest.id, receipt: receipt, upTo: newest.number,
                    covers: chunk.map(\.id)),
                in: chatID)
        }
    }

    /// Sends the delivery receipts the last reads found due (per chat, for the messages they
    /// brought); one that fails now is not retried (the sender sees those messages sent). The
    /// chats' receipts go at once, each chat's in order: their posts reach the domain together,
    /// which writes them in one transaction (its group commit), instead of one after another.
    func flushReceipts(_ due: [String: [CoveredMessage]]) async {
        await withTaskGroup(of: Void.self) { group in
            for (chatID, messages) in due {
                group.addTask { try? await self.sendReceipts(chatID: chatID, receipt: .delivered, covering: messages) }
            }
        }
    }

    // MARK: Ephemeral events

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
        try await postEphemeral(ChatPayload(kind: isTyping ? .typing : .typingStopped, id: newID()), in: chatID)
    }

    /// Sends an app-defined live event (`tag`, and `data` of at most 8 KB) to the chat's members'
    /// devices that are online.
    func sendChatEvent(tag: String, data: String?, in chatID: String) async throws {
        guard (1...64).contains(tag.utf8.count), (data?.utf8.count ?? 0) <= ChatPayload.maximumEventData else {
            throw MessagingError(.invalidArgument, "a chat event's tag is 1 to 64 bytes and its data at most 8 KB")
        }
        try await postEphemeral(ChatPayload(kind: .chatEvent, id: newID(), tag: tag, data: data), in: chatID)
    }

    private func postEphemeral(_ payload: ChatPayload, in chatID: String) async throws {
        var stamped = payload
        stamped.upTo = Int64(clock.now().timeIntervalSince1970 * 1000)
        let payload = stamped
        let sealed = try await read { store in
            let session = try self.activeSession(chatID, in: store)
            try session.requireTrusted()
            var random = MLSSystemRandom()
            return try session.group.sealEphemeral(payload, random: &random)
        }
        _ = try await domainCall {
            try await domain.post(
                token: try await token(), endpointID: endpointID, chatID: chatID, kind: .ephemeral, payload: sealed,
                recipient: nil, clientID: nil)
        }
    }

    // MARK: History transfer

    /// Hands the chat's history to each of `devices` (this user's, just added).
    func sendHistory(of chatID: String, to devices: [ChatGroup.Device]) async {
        guard !devices.isEmpty,
            let chunks = try? await read({ store in ChatHistory.chunks(of: try store.numbered(chatID: chatID)) })
        else { return }
        for device in devices {
            for chunk in chunks {
                do {
                    try await postHistory(chunk, of: chatID, to: device)
                } catch {
                    eventSinks.yield(
                        .dropped(chatID: chatID, reason: "the chat's history did not reach \(device.device): \(error)"))
                    break
                }
            }
        }
    }

    private func postHistory(_ history: ChatHistory, of chatID: String, to device: ChatGroup.Device) async throws {
        for attempt in 0..<5 {
            let sealed = try await write { store -> Data in
                guard
                    var session = try self.session(chatID, in: store),
                    let leaf = session.group.group.members.first(where: { ChatGroup.device(of: $0) == device })?.leafIndex
                else { throw MessagingError(.unknownChat, "\(device.device) is not in chat \(chatID)") }
                var random = MLSSystemRandom()
                let records = try session.group.group.seal(
                    toMember: leaf, context: ChatHistory.sealContext(device: device.device), history.encoded, random: &random)
                let payload = ChatPayload(
                    kind: .history, id: self.newID(), data: records.base64EncodedString(), ref: device.device)
                return try session.seal(payload, localID: nil, reach: .ownDevice)
            }
            do {
                _ = try await domainCall {
                    try await domain.post(
                        token: try await token(), endpointID: endpointID, chatID: chatID, kind: .event, payload: sealed,
                        recipient: me, clientID: nil)
                }
                return
            } catch let error as MessagingError where error.domainCode == .conflict && attempt < 4 {
                try? await write { store in try store.forgetSent(payload: sealed) }
                try await catchUp()
            }
        }
    }
}
