import Foundation
import SparkDomain
import SparkLock
import SparkMLS
import SparkStore

/// The outbox: what the user sends is sealed in the chat's group, stored with its sealed bytes
/// (state sending) in the same transaction that moves the group's ratchet, and posted under its
/// id until the domain answers; the domain answers a repeated id with the number it gave, so a
/// message is sent exactly once across crashes and outages. A message the domain refuses because
/// a commit overtook it (its epoch is gone) is sealed again in the new epoch, under the same id.
///
/// Nothing is sealed while the chat holds a device this device does not trust (a changed
/// identity, or a device of a previous one): a message waits, held, until the user accepts the
/// change; a subject change is refused.
extension Messenger {
    func send(
        _ content: String, tag: String, data: String?, ref: Int64?, attachment: AttachmentDescriptor? = nil, to chatID: String
    ) async throws -> ChatMessage {
        guard content.utf8.count + (data?.utf8.count ?? 0) <= Self.maximumContentSize else {
            throw MessagingError(.tooLarge, "content and data together are limited to 70 KB")
        }
        let id = Self.newID()
        let now = clock.now()
        let outgoing = OutgoingMessage(
            id: id, chatID: chatID, sender: me, content: content, tag: tag, data: data, ref: ref, timestamp: now,
            attachment: attachment)
        // The usual case in one transaction: nothing holds the chat and nothing waits held in it,
        // so the message is sealed and stored at once, and what is to be posted read with it.
        if let sent = try await sendAtOnce(outgoing) {
            if sent.expiring { noteExpiring() }
            showMessages([sent.message], in: chatID)
            let accepted = await deliverPending(in: chatID, pending: sent.pending)
            if let shown = accepted[id] { return shown }
            return try await self.message(id: id)
        }
        // One read: the chat, the message referred to, what holds the chat, and whether messages
        // wait held in it.
        let (payload, untrusted, waiting) = try await read { store -> (ChatPayload, [String], Bool) in
            let (stored, payload) = try self.prepare(outgoing, in: store)
            return (payload, try self.untrustedUsers(in: stored, store), try !store.held(chatID: chatID).isEmpty)
        }
        // A contact that holds the chat is looked up again first (see `heldBy`).
        let holding = untrusted.isEmpty ? [] : try await heldBy(chatID)
        // What was held goes first, in the order the user sent it.
        if holding.isEmpty, waiting { await releaseHeld(in: chatID) }
        let message = try await write { store -> ChatMessage in
            var sealed: Data?
            if holding.isEmpty {
                do {
                    sealed = try self.sealNext(payload, chatID: chatID, localID: id, in: store)
                } catch let error as MessagingError where error.code == .identityUnconfirmed {
                    // The group changed while this waited: held after all.
                    sealed = nil
                }
            }
            try store.insertOutgoing(outgoing, sealed: sealed)
            return outgoing.shown(as: sealed == nil ? .held : .sending)
        }
        noteExpiring()
        showMessages([message], in: chatID)
        _ = await deliverPending(in: chatID)
        return try await self.message(id: id)
    }

    /// A message sealed and stored in one transaction, with what is to be posted in its chat.
    struct SentAtOnce: Sendable {
        var message: ChatMessage
        var pending: [(id: String, sealed: Data)]
        /// The chat has a disappearing-messages timer.
        var expiring: Bool
    }

    /// Seals and stores `outgoing` in one transaction when nothing holds its chat and nothing
    /// waits held in it; nil otherwise (then `send` looks the holders up first). The chat's
    /// messages still sending come back with it, oldest first.
    private func sendAtOnce(_ outgoing: OutgoingMessage) async throws -> SentAtOnce? {
        try await write { store -> SentAtOnce? in
            let chatID = outgoing.chatID
            let (stored, payload) = try self.prepare(outgoing, in: store)
            guard try self.untrustedUsers(in: stored, store).isEmpty, try store.held(chatID: chatID).isEmpty else { return nil }
            let sealed = try self.sealNext(payload, chatID: chatID, localID: outgoing.id, in: store)
            try store.insertOutgoing(outgoing, sealed: sealed)
            return SentAtOnce(
                message: outgoing.shown(as: .sending), pending: try store.sending(chatID: chatID),
                expiring: try store.timer(chatID: chatID) > 0)
        }
    }

    /// The chat's group and the payload of `outgoing` (the message it refers to found by its
    /// number), checked: what a send needs before it seals.
    private nonisolated func prepare(
        _ outgoing: OutgoingMessage, in store: any MessagingStore
    ) throws -> (stored: GroupStore.Stored, payload: ChatPayload) {
        let chatID = outgoing.chatID
        guard let stored = try groups.load(store, chatID: chatID, validator: try groupValidator(store)) else {
            throw MessagingError(.unknownChat, "this device is not in chat \(chatID)")
        }
        let refID = try outgoing.ref.map { number in
            guard let id = try store.messageID(chatID: chatID, number: number) else {
                throw MessagingError(.unknownChat, "no message #\(number) in chat \(chatID) to refer to")
            }
            return id
        }
        let payload = ChatPayload(
            kind: .text, id: outgoing.id, content: outgoing.content, tag: outgoing.tag, data: outgoing.data, ref: refID,
            attachment: outgoing.attachment)
        try payload.validate()
        return (stored, payload)
    }

    func requireActive(_ chatID: String) async throws {
        guard try await read({ store in try store.groupVersion(chatID: chatID) != nil }) else {
            throw MessagingError(.unknownChat, "this device is not in chat \(chatID)")
        }
    }

    /// The users whose devices in the chat this device does not trust (their identity changed,
    /// or the policy holds a first contact, or a device is of an identity no longer trusted):
    /// while there are any, nothing is sealed in the chat. The domain may publish the trusted
    /// key again (a substitution withdrawn), so untrusted contacts are looked up once more.
    func heldBy(_ chatID: String) async throws -> [String] {
        let groups = self.groups
        let check = { @Sendable (store: any MessagingStore) throws -> [String] in
            guard
                let stored = try groups.load(store, chatID: chatID, validator: try self.groupValidator(store))
            else { return [] }
            // Every device must be signed by a key this device trusts: a changed or unconfirmed
            // contact's key is not among them, nor a key a contact had before a reset.
            return try self.untrustedUsers(in: stored, store)
        }
        let first = try await read(check)
        guard !first.isEmpty else { return [] }
        for user in first where user != me { _ = try? await contactRecord(of: user, refresh: true) }
        return try await read(check)
    }

    /// Refuses with `identityUnconfirmed` while the chat holds a device this device does not
    /// trust (for what is not stored to wait, held: a rename, a receipt, an edit).
    func requireNotHeld(_ chatID: String) async throws {
        let holding = try await heldBy(chatID)
        guard holding.isEmpty else {
            throw MessagingError(
                .identityUnconfirmed,
                "the identity of \(holding.joined(separator: ", ")) changed: accept it or confirm the safety number first")
        }
    }

    /// Seals `payload` as this device's next message in the chat; the group's ratchet moves in
    /// the same transaction, and the bytes are remembered as this device's (for their echo).
    ///
    /// It is also where "nothing is sealed to a device this device does not trust" holds: the
    /// group is checked in the same transaction (a commit applied while the caller awaited may
    /// have added such a device), and a group holding one is refused with `identityUnconfirmed`.
    /// Only a history, whose records are sealed to one device of this user, goes regardless.
    nonisolated func sealNext(
        _ payload: ChatPayload, chatID: String, localID: String?, in store: any MessagingStore, requireTrusted: Bool = true
    ) throws -> Data {
        guard var stored = try groups.load(store, chatID: chatID, validator: try groupValidator(store)),
            stored.group.group.isActive
        else { throw MessagingError(.unknownChat, "this device is not in chat \(chatID)") }
        if requireTrusted {
            let refused = try untrustedUsers(in: stored, store)
            guard refused.isEmpty else {
                throw MessagingError(
                    .identityUnconfirmed,
                    "the identity of \(refused.joined(separator: ", ")) is not confirmed: accept it or confirm the safety number first"
                )
            }
        }
        // A text carries its place among this device's texts in the chat, and the places of
        // those the domain refused, so that recipients see one the domain withholds.
        var payload = payload
        if payload.kind == .text, let localID {
            let sequence = try store.sendingSequence(chatID: chatID, localID: localID)
            payload.sequence = sequence
            payload.withdrawn = try store.withdrawnSequences(chatID: chatID).filter { $0 < sequence }
        }
        var random = MLSSystemRandom()
        let sealed = try stored.group.seal(payload, random: &random)
        stored.sentSinceUpdate += 1
        if stored.sentSinceUpdate >= MessagingCore.updateAfterMessages { needsReconcile.withLock { _ = $0.insert(chatID) } }
        try groups.save(store, stored)
        try store.recordSent(chatID: chatID, payload: sealed, localID: localID)
        return sealed
    }

    /// The payload of a stored message of this device (to seal it again, or for the first time
    /// once released).
    nonisolated func storedPayload(_ store: any MessagingStore, localID: String) throws -> (chatID: String, payload: ChatPayload)?
    {
        guard let message = try store.outgoing(localID) else { return nil }
        let ref = try message.ref.flatMap { try store.messageID(chatID: message.chatID, number: $0) }
        return (
            message.chatID,
            ChatPayload(
                kind: .text, id: localID, content: message.content, tag: message.tag, data: message.data, ref: ref,
                attachment: message.attachment)
        )
    }

    /// Posts a stored message; the same id on every retry, so it is sent exactly once. Returns
    /// false when it is left sending (the domain, its store or the token failed for now), and the
    /// message as accepted, when it was.
    private func deliver(localID: String, chatID: String, sealed first: Data) async -> (settled: Bool, accepted: ChatMessage?) {
        var sealed = first
        var settled = true
        var shown: ChatMessage?
        for attempt in 0..<5 {
            do {
                let receipt = try await domain.post(
                    token: try await token(), endpointID: endpointID, chatID: chatID, kind: .message, payload: sealed,
                    recipient: nil, clientID: localID)
                let (events, accepted) = try await write { store in
                    let events = try store.accept(localID, number: receipt.messageNumber, at: receipt.postedAt)
                    try store.touchChat(chatID, at: receipt.postedAt)
                    return (events, try store.message(localID))
                }
                if let accepted {
                    showMessages([accepted], in: chatID)
                    shown = accepted
                }
                report(events)
            } catch let error as DomainError where error.code == .conflict {
                // A commit was ordered after this was sealed: apply it, seal again, post again.
                // Still behind after five (a commit the members refused holds the chat until an
                // admin's device replaces it): the message stays sending, never failed.
                guard attempt < 4 else {
                    settled = false
                    break
                }
                _ = try? await syncOnce()
                let resealed: Data?
                do {
                    resealed = try await write { store in try self.reseal(localID, in: store) }
                } catch {
                    settled = false
                    break
                }
                // The chat now holds a device this one does not trust: the message waits, held.
                guard let resealed else { break }
                sealed = resealed
                continue
            } catch let error as DomainError where !Self.transientDomainCodes.contains(error.code) {
                let failed = try? await write { store in try store.refuse(localID, reason: error.reason) }
                if failed == true {
                    report([MessageEvent(messageID: localID, chatID: chatID, number: nil, state: .failed(reason: error.reason))])
                }
            } catch {
                // Left as sending: retried with the same bytes until the domain answers.
                settled = false
            }
            break
        }
        if shown == nil { await reloadMessages(chatID, changed: .some([localID])) }
        return (settled, shown)
    }

    /// Seals a message still sending again, in the group's current epoch; nil when the group now
    /// holds a device this one does not trust (the message is held instead).
    private nonisolated func reseal(_ localID: String, in store: any MessagingStore) throws -> Data? {
        guard let (chatID, payload) = try storedPayload(store, localID: localID) else {
            throw MessagingError(.unknownChat, "no message \(localID)")
        }
        do {
            let sealed = try sealNext(payload, chatID: chatID, localID: localID, in: store)
            try store.setSealed(localID, sealed)
            return sealed
        } catch let error as MessagingError where error.code == .identityUnconfirmed {
            try store.hold(localID)
            return nil
        }
    }

    /// Posts every message of the chat still sending, oldest first, and stops at the first one
    /// left sending, so that the chat's numbers follow the order the user sent in.
    ///
    /// Runs for one chat go one at a time, each after the one before it: concurrent sends would
    /// otherwise each post every message still pending (harmless, the domain answers a repeated
    /// id with its first number, but quadratic in the number of concurrent sends).
    ///
    /// `pending`, read with the send that called it, spares a read when no run is before it.
    /// Returns the messages accepted, by id.
    @discardableResult
    func deliverPending(in chatID: String, pending: [(id: String, sealed: Data)]? = nil) async -> [String: ChatMessage] {
        let previous = deliveries[chatID]
        let known = previous == nil ? pending : nil
        let run = Task {
            _ = await previous?.value
            return await postPending(in: chatID, pending: known)
        }
        deliveries[chatID] = run
        let outcome = await run.value
        if deliveries[chatID] == run { deliveries[chatID] = nil }
        return outcome.accepted
    }

    private func postPending(
        in chatID: String, pending known: [(id: String, sealed: Data)]?
    ) async -> (settled: Bool, accepted: [String: ChatMessage]) {
        guard !stopped else { return (false, [:]) }
        var pending = known ?? []
        if known == nil { pending = (try? await read { store in try store.sending(chatID: chatID) }) ?? [] }
        var accepted: [String: ChatMessage] = [:]
        for (id, sealed) in pending {
            let outcome = await deliver(localID: id, chatID: chatID, sealed: sealed)
            if let message = outcome.accepted { accepted[id] = message }
            guard outcome.settled else { return (false, accepted) }
        }
        return (true, accepted)
    }

    /// Messages still sending after a crash or an outage are posted again (idempotently).
    func resendPending() async {
        let chats = (try? await read { store in try store.chatsSending() }) ?? []
        for chatID in chats { _ = await deliverPending(in: chatID) }
    }

    /// Seals and sends, oldest first, the held messages of every chat that nothing holds now.
    func releaseHeld() async {
        let chats = (try? await read { store in try store.chatsHolding() }) ?? []
        for chatID in chats { await releaseHeld(in: chatID) }
    }

    /// Seals and sends the chat's held messages, oldest first, when nothing holds it now.
    func releaseHeld(in chatID: String) async {
        guard let holding = try? await heldBy(chatID), holding.isEmpty else { return }
        let released = try? await write { store -> Int in
            let held = try store.held(chatID: chatID)
            for localID in held {
                guard let (_, payload) = try self.storedPayload(store, localID: localID) else { continue }
                try store.setSealed(localID, try self.sealNext(payload, chatID: chatID, localID: localID, in: store))
            }
            return held.count
        }
        guard (released ?? 0) > 0 else { return }
        await reloadMessages(chatID)
        _ = await deliverPending(in: chatID)
    }

    // MARK: Events and receipts

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
                _ = try await syncOnce()
            }
        }
    }

    /// Edits one of this user's sent messages: the new text goes as an authenticated edit that
    /// names the message's id, and every member's device shows it.
    func edit(_ messageID: String, content: String) async throws {
        guard content.utf8.count <= Self.maximumContentSize else {
            throw MessagingError(.tooLarge, "content and data together are limited to 70 KB")
        }
        guard let chatID = try await read({ store in try store.chatOfNumbered(id: messageID, sender: self.me) }) else {
            throw MessagingError(.unknownChat, "no message \(messageID) this user sent to edit")
        }
        guard try await read({ store in try store.known(chatID: chatID, id: messageID)?.recalled }) != true else {
            throw MessagingError(.invalidArgument, "message \(messageID) was recalled")
        }
        try await postEvent(ChatPayload(kind: .edit, id: Self.newID(), content: content, ref: messageID), in: chatID)
        try await write { store in try store.setContent(messageID, content: content) }
        await reloadMessages(chatID, changed: .some([messageID]))
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
            ChatPayload(kind: added ? .reaction : .unreaction, id: Self.newID(), content: emoji, ref: messageID),
            in: message.chatID)
        // Applied to the reactions as they are now: others' may have arrived while it was posted.
        try await write { store in
            if let reactions = Reaction.applying(try store.reactions(of: messageID), user: self.me, emoji: emoji, added: added) {
                try store.setReactions(messageID, reactions)
            }
        }
        await reloadMessages(message.chatID, changed: .some([messageID]))
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
        try await postEvent(ChatPayload(kind: .recall, id: Self.newID(), ref: messageID), in: chatID)
        try await write { store in try store.recall(messageID) }
        await reloadMessages(chatID, changed: .some([messageID]))
        // The file goes from the domain too (the members' devices forgot its key already).
        if let attachment { await deleteBlobs(of: attachment) }
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
        noteExpiring()
        await reloadMessages(chatID)
        await reloadChats()
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
                    kind: .receipt, id: Self.newID(), ref: newest.id, receipt: receipt, upTo: newest.number,
                    covers: chunk.map(\.id)),
                in: chatID)
        }
    }

    /// Sends the delivery receipts the last reads found due (per chat, for the messages they
    /// brought); one that fails now is not retried (the sender sees those messages sent).
    func flushReceipts() async {
        let due = receiptsDue
        receiptsDue = [:]
        for (chatID, messages) in due.sorted(by: { $0.key < $1.key }) {
            try? await sendReceipts(chatID: chatID, receipt: .delivered, covering: messages)
        }
    }
}
