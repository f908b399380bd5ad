import Foundation
import SparkCrypto
import SparkDomain
import SparkLock
import SparkMLS
import SparkStore

/// What each kind of mailbox entry does: opened and checked as far as it can be before the page's
/// write, then applied inside it (see `MailboxSync`), through the chat's session.
extension MailboxSync {

    /// Opens and checks one entry as far as it can before the write (looking up the identities
    /// a Welcome or a commit brings); returns its changes without writing them.
    func apply(_ entry: MailboxEntry) async throws -> Applied {
        let groups = self.groups
        switch entry.kind {
        case .membership:
            guard let members = entry.members else { return Applied() }
            return Applied { store, _ in try self.applyMembers(members, of: entry.chatID, in: store) }
        case .welcome:
            return try await welcome(entry)
        case .commit:
            let (mine, probed) = try await read { store in
                (try store.sent(payload: entry.payload) != nil, try self.session(entry.chatID, in: store, for: .probe)?.group)
            }
            if mine { return Applied { store, _ in try self.ownCommit(entry, in: store) } }
            // Not in this chat's group (not added yet, or no longer): nothing to apply.
            guard var probe = probed, probe.group.isActive else { return Applied() }
            // The users whose devices the commit adds are looked up first, so that their keys
            // are known when the commit is checked for real.
            if case .commit(let added, _, _) = probe.receive(entry, now: Date()) {
                for user in Set(added.map(\.user)) where user != me {
                    _ = try? await identities.contactRecord(of: user, refresh: false)
                }
            }
            return Applied { store, _ in try self.applyGroupEntry(entry, in: store) }
        case .message, .event, .receipt:
            // Decided inside the page's transaction: no read of its own before it.
            return Applied { store, signatures in
                guard let mine = try store.sent(payload: entry.payload) else {
                    return try self.applyGroupEntry(entry, in: store, signatures: signatures)
                }
                // The echo of what this device sent: a message gets its number.
                try store.forgetSent(payload: entry.payload)
                guard entry.kind == .message, let localID = mine.localID else { return Effects(changed: .none, echo: true) }
                try groups.noteNumber(store, chatID: entry.chatID, number: entry.messageNumber ?? 0)
                return Effects(
                    events: try store.accept(localID, number: entry.messageNumber, at: nil), changed: .some([localID]),
                    echo: true)
            }
        case .ephemeral:
            try await receiveEphemeral(entry)
            return Applied()
        case .devices:
            // This user's devices changed, or the users it blocked: every chat is looked at
            // after this read, and the block list read again.
            try? await identities.refreshBlocked()
            return Applied { _, _ in Effects(reconcileAll: true) }
        case .identityReset:
            guard let notice = try? JSONDecoder().decode(IdentityResetNotice.self, from: entry.payload) else {
                throw MessagingError(.forged, "an identity reset notice is malformed")
            }
            switch (notice.state, notice.pending) {
            case (.pending, let pending?):
                eventSinks.yield(.identityResetPending(userID: entry.sender, effectiveAt: pending.effectiveAt))
            case (.cancelled, _): eventSinks.yield(.identityResetCancelled(userID: entry.sender))
            case (.replaced, _):
                // A hint to look again: the key itself is trusted only as the directory decides.
                if entry.sender != me { _ = try? await identities.contactRecord(of: entry.sender, refresh: true) }
            default: throw MessagingError(.forged, "an identity reset notice is malformed")
            }
            return Applied()
        }
    }

    /// The domain's member list is a hint, never the chat's membership (the group is): a user it
    /// no longer lists left, and an admin's device removes their devices; when it no longer lists
    /// this user, this user left (from another device) and this device forgets the group.
    private nonisolated func applyMembers(_ members: [ChatMember], of chatID: String, in store: any MessagingStore) throws
        -> Effects
    {
        guard try store.groupVersion(chatID: chatID) != nil else { return Effects() }
        let listed = Set(members.map(\.userID))
        guard listed.count == members.count else {
            return Effects(notices: [.dropped(chatID: chatID, reason: "a member list that names a user twice")])
        }
        guard listed.contains(me) else {
            try self.leftChat(store, chatID: chatID)
            return Effects()
        }
        let gone = try store.participants(chatID: chatID).filter { !listed.contains($0) }
        guard !gone.isEmpty else { return Effects() }
        try store.noteDeparted(chatID: chatID, users: gone)
        return Effects(reconcile: true)
    }

    /// A Welcome: this device joins when it holds the private half of one of the KeyPackages it
    /// names, and when every device in the group is one it accepts.
    private func welcome(_ entry: MailboxEntry) async throws -> Applied {
        let references = (try? MLSGroup.keyPackageReferences(inWelcome: entry.payload)) ?? []
        let found = try await read { store -> (Data, MLSKeyPackageBundle)? in
            for reference in references {
                if let bundle = try DeviceKeys.bundle(store, reference: reference) { return (reference, bundle) }
            }
            return nil
        }
        // For another device (this user's or a member's): nothing to do here.
        guard let (reference, bundle) = found else { return Applied() }
        let (inGroup, leftAt) = try await read { store in
            (try store.groupVersion(chatID: entry.chatID) != nil, try store.leftEpoch(chatID: entry.chatID))
        }
        if inGroup {
            throw MessagingError(.forged, "a Welcome to chat \(entry.chatID), which this device is in already: replayed")
        }
        let probe: ChatGroup
        do {
            probe = try ChatGroup.join(
                chatID: entry.chatID, welcome: entry.payload, bundle: bundle, validator: MLSAcceptAnyCredential())
        } catch {
            throw MessagingError(.forged, "a Welcome this device cannot open: \((error as? MLSError)?.reason ?? "\(error)")")
        }
        // A Welcome to the group as it was when this device left, or before: a replay (a new
        // invitation comes with a later epoch).
        if let leftAt, probe.group.epoch <= leftAt {
            throw MessagingError(
                .forged,
                "a Welcome to chat \(entry.chatID) at epoch \(probe.group.epoch), which this device left at \(leftAt): replayed")
        }
        // An invitation from a user this user blocked, or to a chat with no one else but users
        // it blocked (whoever the domain names as its sender), is not taken.
        let others = probe.users.filter { $0 != me }
        if blocked.contains(entry.sender) || (!others.isEmpty && others.allSatisfy(blocked.contains)) {
            return Applied()
        }
        // Everyone in the group is looked up first (a first contact is met here).
        for user in probe.users where user != me { _ = try? await identities.contactRecord(of: user, refresh: false) }
        return Applied { store, _ in
            guard try store.groupVersion(chatID: entry.chatID) == nil else {
                return Effects(notices: [.dropped(chatID: entry.chatID, reason: "a replayed Welcome")])
            }
            // The Welcome opened once, above; its devices judged now by the contacts as stored.
            let validator = try self.validators.current(store).group
            let joined: ChatGroup
            do {
                joined = try probe.accepted(by: validator)
            } catch {
                return Effects(notices: [
                    .dropped(
                        chatID: entry.chatID,
                        reason:
                            "the Welcome's group holds a device this device does not accept: \((error as? MLSError)?.reason ?? "\(error)")"
                    )
                ])
            }
            guard joined.users.contains(entry.sender) else {
                return Effects(notices: [
                    .dropped(chatID: entry.chatID, reason: "a Welcome from \(entry.sender), who is not in its group")
                ])
            }
            try store.consumeKeyPackageBundle(reference: reference)
            try self.adopt(joined, in: store, updated: true)
            // Added by another user to a chat that had moved on (an invitation, or a new
            // identity's device): no device of this user hands it what came before.
            let history: [MessagingEvent] =
                entry.sender != self.me && joined.group.epoch > 1 ? [.historyUnavailable(chatID: entry.chatID)] : []
            return Effects(notices: history, moved: true, reconcile: true)
        }
    }

    /// The echo of a commit this device posted: when its answer was lost, the pending group
    /// becomes the chat's group now.
    private nonisolated func ownCommit(_ entry: MailboxEntry, in store: any MessagingStore) throws -> Effects {
        try store.forgetSent(payload: entry.payload)
        guard
            let next = try groups.pending(
                store, chatID: entry.chatID, digest: SHA256.hash(entry.payload),
                validator: try validators.current(store).group),
            let current = try session(entry.chatID, in: store, for: .probe),
            current.group.group.epoch + 1 == next.group.epoch
        else { return Effects() }
        try adopt(next, in: store, updated: true)
        return Effects(moved: true)
    }

    /// A commit or an application message of a chat's group, decided by the group.
    private nonisolated func applyGroupEntry(
        _ entry: MailboxEntry, in store: any MessagingStore, signatures: (any MLSSignatureChecker)? = nil
    ) throws -> Effects {
        let chatID = entry.chatID
        guard var session = try session(chatID, in: store) else { return Effects() }
        switch session.stored.group.receive(entry, now: Date(), signatures: signatures) {
        case .retry(let reason):
            guard try store.deferredCount(chatID: chatID) < GroupStore.maximumDeferred else {
                return Effects(
                    notices: [.dropped(chatID: chatID, reason: "\(reason); too many entries wait already")], changed: .none)
            }
            try store.deferEntry(entry)
            return Effects(changed: .none, waiting: true)
        case .drop(let reason):
            return Effects(notices: [.dropped(chatID: chatID, reason: reason)], changed: .none)
        case .refuseCommit(let reason):
            // The domain's epoch moved past every member: an admin's device replaces it.
            try store.noteRefusedCommit(chatID: chatID, epoch: session.group.group.epoch, sender: entry.sender)
            return Effects(notices: [.dropped(chatID: chatID, reason: reason)], changed: .none, reconcile: true)
        case .removed:
            try self.leftChat(store, chatID: chatID)
            return Effects()
        case .commit(_, let removed, let by):
            // A device of this user removed by another device: this one updates its own keys
            // at once (post-compromise security).
            session.stored.sentSinceUpdate = core.sentAfterCommit(session.stored.sentSinceUpdate, removed: removed, by: by)
            try session.save()
            try ChatSession.applyMembership(store, group: session.group, now: entry.postedAt)
            try ChatSession.applySubject(of: session.group, in: store)
            return Effects(moved: true, reconcile: session.stored.sentSinceUpdate >= MessagingCore.updateAfterMessages)
        case .message(let payload, let sender, let gossip):
            // The ratchet moved: the group is kept whatever the payload turns out to be.
            var effects = try applyPayload(payload, from: sender, entry: entry, session: &session, in: store)
            if !gossip.isEmpty, sender.device != endpointID { effects.gossip.append(Gossip(user: sender.user, head: gossip)) }
            return effects
        }
    }

    /// Carries out what the messaging core decides for an opened payload, in the entry's
    /// transaction: the group is kept first (its ratchet moved, whatever the payload turns out to be).
    private nonisolated func applyPayload(
        _ payload: ChatPayload, from sender: ChatGroup.Device, entry: MailboxEntry, session: inout ChatSession,
        in store: any MessagingStore
    ) throws -> Effects {
        let chatID = entry.chatID
        // Another device's text names its place among that device's texts: one that was missing
        // arrives late (and is taken whatever its number), one past a gap makes the gap missing.
        var (sequences, known): (TextSequences?, TextSequences?) = (nil, nil)
        var late = false
        if entry.kind == .message, payload.kind == .text, let sequence = payload.sequence, sender.device != endpointID {
            known = try groups.textSequences(store, chatID: chatID, device: sender.device)
            late = known?.awaits(sequence) ?? false
            sequences = TextSequences.noting(
                known, chatID: chatID, user: sender.user, device: sender.device, sequence: sequence,
                withdrawn: payload.withdrawn)
        }
        if sender.user != me, blocked.contains(sender.user) {
            // A blocked user's message, receipt or event: the ratchet moved (the group is kept)
            // and a text's place is noted (so it is not counted missing later); nothing else.
            if let sequences { try groups.saveTextSequences(store, sequences, previous: known) }
            try session.save()
            return Effects(changed: .none)
        }
        let outcome = try core.apply(
            payload, from: sender.user, entry: entry, lastNumber: session.stored.lastNumber, late: late, lookup: store.lookup)
        session.stored.lastNumber = outcome.lastNumber
        try session.save()
        var effects = Effects(changed: .none)
        if let sequences, outcome.actions.contains(where: { if case .insert = $0 { true } else { false } }) {
            try groups.saveTextSequences(store, sequences, previous: known)
            // The user's count changes only when this device's does (the usual text changes neither).
            if sequences.missing != known?.missing ?? [] {
                let count = try store.missingTexts(chatID: chatID)[sender.user] ?? 0
                effects.notices.append(.messagesMissing(chatID: chatID, userID: sender.user, count: count))
                effects.changed.formUnion(.all)
            }
        }
        for action in outcome.actions {
            switch action {
            case .drop(let reason):
                effects.notices.append(.dropped(chatID: chatID, reason: reason))
            case .insert(let message):
                try store.insertReceived(message, chatID: chatID, incoming: message.sender != me, ignoringTaken: false)
                if message.sender != me {
                    effects.arrived.append(
                        ChatMessage(
                            id: message.id, chatID: chatID, number: message.number, sender: message.sender, isIncoming: true,
                            content: message.content, tag: message.tag, data: message.data, ref: message.ref,
                            state: message.state, timestamp: message.timestamp,
                            attachment: message.attachment.map(Attachment.init)))
                }
                if message.sender == me { effects.expiring = true }
                effects.changed.formUnion(.some([message.id]))
            case .touchChat(let time):
                try store.touchChat(chatID, at: time)
            case .setContent(let messageID, let content):
                try store.setContent(messageID, content: content)
                effects.changed.formUnion(.some([messageID]))
            case .react(let messageID, let user, let emoji, let added):
                if let reactions = Reaction.applying(try store.reactions(of: messageID), user: user, emoji: emoji, added: added) {
                    try store.setReactions(messageID, reactions)
                    effects.changed.formUnion(.some([messageID]))
                }
            case .recall(let messageID):
                try store.recall(messageID)
                effects.changed.formUnion(.some([messageID]))
            case .advanceSent(let ids, let step):
                let moved = try store.advanceSent(chatID: chatID, ids: ids, step)
                effects.events += moved
                effects.changed.formUnion(.some(Set(moved.map(\.messageID))))
            case .readReceived(let ids):
                try store.readReceived(chatID: chatID, ids: ids)
                try store.startExpiry(chatID: chatID, at: clock.now())
                effects.expiring = true
                effects.changed.formUnion(.some(Set(ids)))
            case .openHistory(let history):
                let opened = try applyHistory(history, group: session.group, chatID: chatID, in: store)
                effects.notices += opened.notices
                effects.changed.formUnion(.all)
            case .reportSent(let messageID, let number):
                effects.events.append(MessageEvent(messageID: messageID, chatID: chatID, number: number, state: .sent))
            case .acknowledge(let message):
                effects.delivered.append(message)
            }
        }
        return effects
    }

    // MARK: Ephemeral events

    /// Opens an ephemeral entry and tells the app; nothing is written but the mailbox cursor.
    func receiveEphemeral(_ entry: MailboxEntry) async throws {
        let group = try await read { store in try self.session(entry.chatID, in: store)?.group }
        guard let group else { return }
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

    // MARK: History transfer

    /// Applies a history transfer meant for this device: its messages are kept as the sibling
    /// had them (states included), each once.
    nonisolated func applyHistory(_ payload: ChatPayload, group: ChatGroup, chatID: String, in store: any MessagingStore) throws
        -> Effects
    {
        guard let data = payload.data, let sealed = Data(base64Encoded: data) else {
            return Effects(notices: [.dropped(chatID: chatID, reason: "a history transfer without its records")])
        }
        let history: ChatHistory
        do {
            let opened = try group.group.openSealedToSelf(sealed, context: ChatHistory.sealContext(device: endpointID))
            history = try ChatHistory(encoded: opened.unsafeData())
        } catch {
            return Effects(notices: [
                .dropped(chatID: chatID, reason: "a history transfer this device cannot open: \(error)"),
                .historyUnavailable(chatID: chatID),
            ])
        }
        for record in history.records {
            try store.insertReceived(record, chatID: chatID, incoming: record.sender != me, ignoringTaken: true)
            try store.touchChat(chatID, at: record.timestamp)
        }
        return Effects()
    }
}
