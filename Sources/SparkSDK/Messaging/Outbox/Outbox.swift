import Foundation
import SparkDomain
import SparkLock
import SparkMLS
import SparkStore

/// The outbox: what the user sends is sealed in the chat's group, stored with its sealed bytes
/// (state sending) in the same transaction that moves the group's ratchet, and posted under its
/// id until the domain answers; the domain answers a repeated id with the number it gave, so a
/// message is sent exactly once across crashes and outages. A message the domain refuses because
/// a commit overtook it (its epoch is gone) is sealed again in the new epoch, under the same id,
/// after the core caught up to the commit that won (`MessagingContext.catchUp`).
///
/// Nothing is sealed while the chat holds a device this device does not trust (a changed
/// identity, or a device of a previous one): a message waits, held, until the user accepts the
/// change; a subject change is refused (`ChatSession.requireTrusted()` decides).
///
/// The outbox does not read the mailbox: a conflict goes to the core as an input
/// (`MessagingContext.catchUp`), and the mailbox sync never calls the outbox (the messenger's
/// loop resends and flushes receipts after each read).
actor Outbox: MessagingPart {
    nonisolated let context: MessagingContext
    /// The contacts, looked up again when one holds a chat.
    let identities: Identities
    /// The attachments' blobs, deleted from the domain when their message is recalled.
    let attachments: AttachmentTransfers
    /// The latest delivery run per chat; each waits for the one before it (see `deliverPending`).
    private var deliveries: [String: (number: Int, task: DeliveryRun)] = [:]
    /// How many delivery runs were started (each run's number).
    private var runs = 0
    /// A delivery run: whether it posted everything pending, and the messages accepted by id.
    typealias DeliveryRun = Task<(settled: Bool, accepted: [String: ChatMessage]), Never>
    /// The chats whose latest delivery run waits for the one before it and has not read what is
    /// pending yet.
    private var waitingToStart: Set<String> = []
    /// When this device last told each chat that its user is typing (see `sendTyping`).
    var typingSentAt: [String: ContinuousClock.Instant] = [:]

    init(context: MessagingContext, identities: Identities, attachments: AttachmentTransfers) {
        self.context = context
        self.identities = identities
        self.attachments = attachments
    }

    /// Sends a message: sealed and stored at once (or held), then posted. With `untilPosted`,
    /// returns once the domain answered (or the message was left sending); otherwise once it is
    /// stored, while the chat's delivery run posts it with the others pending.
    func send(
        _ content: String, tag: String, data: String?, ref: Int64?, attachment: AttachmentDescriptor? = nil, to chatID: String,
        untilPosted: Bool = true
    ) async throws -> ChatMessage {
        let draft = NewMessage(content, tag: tag, data: data, ref: ref)
        let sent = try await send([draft], attachment: attachment, to: chatID, untilPosted: untilPosted)
        guard let message = sent.first else { throw MessagingError(.storageFailure, "the message was not stored") }
        return message
    }

    /// Sends `drafts` to the chat, in their order: all sealed and stored in one transaction (or
    /// all held, or none stored when it fails), then posted by the chat's delivery run, several
    /// in one request. Returns them as stored, or, with `untilPosted`, once the domain answered.
    func send(
        _ drafts: [NewMessage], attachment: AttachmentDescriptor? = nil, to chatID: String, untilPosted: Bool
    ) async throws -> [ChatMessage] {
        guard !drafts.isEmpty else { return [] }
        guard drafts.count <= BBMAccess.mostQueuedAtOnce else {
            throw MessagingError(.invalidArgument, "at most \(BBMAccess.mostQueuedAtOnce) messages are sent at once")
        }
        for draft in drafts where draft.content.utf8.count + (draft.data?.utf8.count ?? 0) > MessagingContext.maximumContentSize {
            throw MessagingError(.tooLarge, "content and data together are limited to 70 KB")
        }
        let now = clock.now()
        let outgoing = drafts.map { draft in
            OutgoingMessage(
                id: newID(), chatID: chatID, sender: me, content: draft.content, tag: draft.tag, data: draft.data,
                ref: draft.ref, timestamp: now, attachment: attachment)
        }
        let ids = outgoing.map(\.id)
        // The usual case in one transaction: nothing holds the chat and nothing waits held in it,
        // so the messages are sealed and stored at once, and what is to be posted read with them.
        // What is pending is read with the send only for a run that will start at once (a run
        // behind another reads it when it starts).
        if let sent = try await sendAtOnce(outgoing, readingPending: deliveries[chatID] == nil) {
            if sent.expiring { await noteExpiring() }
            guard untilPosted else {
                startDelivery(in: chatID, pending: sent.pending)
                return sent.messages
            }
            let accepted = await deliverPending(in: chatID, pending: sent.pending)
            return try await stored(ids, accepted: accepted)
        }
        // One read: the chat, the messages referred to, what holds the chat, and whether messages
        // wait held in it.
        let (payloads, untrusted, waiting) = try await read { store -> ([ChatPayload], [String], Bool) in
            let session = try self.activeSession(chatID, in: store)
            let payloads = try outgoing.map { try self.payload(of: $0, in: store) }
            return (payloads, try session.untrustedUsers(), try !store.held(chatID: chatID).isEmpty)
        }
        // A contact that holds the chat is looked up again first (see `heldBy`).
        let holding = untrusted.isEmpty ? [] : try await heldBy(chatID)
        // What was held goes first, in the order the user sent it.
        if holding.isEmpty, waiting { await releaseHeld(in: chatID) }
        let flows = self.flows
        let messages = try await write { store -> [ChatMessage] in
            var session = holding.isEmpty ? try self.activeSession(chatID, in: store) : nil
            var shown: [ChatMessage] = []
            for (message, payload) in zip(outgoing, payloads) {
                var sealed: Data?
                if var open = session {
                    do {
                        sealed = try open.seal(payload, localID: message.id)
                        session = open
                    } catch let error as MessagingError where error.code == .identityUnconfirmed {
                        // The group changed while this waited: held after all, with what follows.
                        session = nil
                    }
                }
                try store.insertOutgoing(message, sealed: sealed)
                shown.append(message.shown(as: sealed == nil ? .held : .sending))
            }
            return shown
        } thenShowing: { shown, _ in
            flows.showingMessages(shown, in: chatID)
        }
        await noteExpiring()
        guard untilPosted else {
            startDelivery(in: chatID, pending: nil)
            return messages
        }
        let accepted = await deliverPending(in: chatID)
        return try await stored(ids, accepted: accepted)
    }

    /// The messages `ids` as the domain's answers left them (`accepted`), else as stored now.
    private func stored(_ ids: [String], accepted: [String: ChatMessage]) async throws -> [ChatMessage] {
        let missing = ids.filter { accepted[$0] == nil }
        let found = missing.isEmpty ? [] : try await read { store in try missing.compactMap { try store.message($0) } }
        let byID = accepted.merging(found.map { ($0.id, $0) }) { first, _ in first }
        return try ids.map { id in
            guard let message = byID[id] else { throw MessagingError(.unknownChat, "no message \(id)") }
            return message
        }
    }

    /// Messages sealed and stored in one transaction, with what is to be posted in their chat.
    struct SentAtOnce: Sendable {
        var messages: [ChatMessage]
        var pending: [(id: String, sealed: Data)]?
        /// The chat has a disappearing-messages timer.
        var expiring: Bool
    }

    /// Seals and stores `outgoing` (messages of one chat) in one transaction when nothing holds
    /// their chat and nothing waits held in it; nil otherwise (then `send` looks the holders up
    /// first). The chat's group is loaded once and written once, its ratchet moved by each. With
    /// `readingPending`, the chat's messages still sending come back with them, oldest first.
    private func sendAtOnce(_ outgoing: [OutgoingMessage], readingPending: Bool) async throws -> SentAtOnce? {
        guard let chatID = outgoing.first?.chatID else { return nil }
        let groups = self.groups
        let flows = self.flows
        return try await write { store -> SentAtOnce? in
            try groups.deferringSaves(store) {
                var session = try self.activeSession(chatID, in: store)
                guard try session.untrustedUsers().isEmpty, try store.held(chatID: chatID).isEmpty else { return nil }
                var shown: [ChatMessage] = []
                for message in outgoing {
                    let sealed = try session.seal(try self.payload(of: message, in: store), localID: message.id)
                    try store.insertOutgoing(message, sealed: sealed)
                    shown.append(message.shown(as: .sending))
                }
                return SentAtOnce(
                    messages: shown, pending: readingPending ? try store.sending(chatID: chatID) : nil,
                    expiring: try store.timer(chatID: chatID) > 0)
            }
        } thenShowing: { sent, _ in
            sent.map { flows.showingMessages($0.messages, in: chatID) } ?? {}
        }
    }

    /// The payload of `outgoing`, the message it refers to found by its number, checked: what a
    /// send needs before it seals.
    private nonisolated func payload(of outgoing: OutgoingMessage, in store: any MessagingStore) throws -> ChatPayload {
        let chatID = outgoing.chatID
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
        return payload
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
        let check = { @Sendable (store: any MessagingStore) throws -> [String] in
            // Every device must be signed by a key this device trusts: a changed or unconfirmed
            // contact's key is not among them, nor a key a contact had before a reset.
            try self.session(chatID, in: store)?.untrustedUsers() ?? []
        }
        let first = try await read(check)
        guard !first.isEmpty else { return [] }
        for user in first where user != me { _ = try? await identities.contactRecord(of: user, refresh: true) }
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

    /// The most bytes of sealed messages one batch carries (a single larger message goes alone;
    /// a message is at most about 72 KB, a request body at most 1 MiB).
    static let batchBytes = 512 * 1024
    /// The most messages one batch carries (the domain's limit).
    static let batchCount = 64

    /// Posts every message of the chat still sending, oldest first, in batches that the domain
    /// numbers in order in one transaction each (`DomainService.postMessages`), under their ids,
    /// so that each is sent exactly once across retries and crashes. Stops where a message is
    /// left sending (the domain, its store or the token failed for now), so that the chat's
    /// numbers follow the order the user sent in.
    ///
    /// Runs for one chat go one at a time, each after the one before it; a send that finds a run
    /// waiting to start joins it (that run reads what is pending when it starts). So messages
    /// sent while a batch is in flight go together in the next one: several posts of a chat in
    /// flight, in order, as many as arrive.
    ///
    /// `pending`, read with the send that called it, spares a read when no run is before it.
    /// Returns the messages accepted, by id.
    @discardableResult
    func deliverPending(in chatID: String, pending: [(id: String, sealed: Data)]? = nil) async -> [String: ChatMessage] {
        await startDelivery(in: chatID, pending: pending).value.accepted
    }

    /// The chat's next delivery run, started (or joined, when one waits to start): see
    /// ``deliverPending(in:pending:)``.
    @discardableResult
    private func startDelivery(in chatID: String, pending: [(id: String, sealed: Data)]?) -> DeliveryRun {
        if waitingToStart.contains(chatID), let run = deliveries[chatID] { return run.task }
        let previous = deliveries[chatID]?.task
        let known = previous == nil ? pending : nil
        if previous != nil { waitingToStart.insert(chatID) }
        runs += 1
        let number = runs
        let task = Task {
            _ = await previous?.value
            waitingToStart.remove(chatID)
            let outcome = await postPending(in: chatID, pending: known)
            if deliveries[chatID]?.number == number { deliveries[chatID] = nil }
            return outcome
        }
        deliveries[chatID] = (number, task)
        return task
    }

    private func postPending(
        in chatID: String, pending known: [(id: String, sealed: Data)]?
    ) async -> (settled: Bool, accepted: [String: ChatMessage]) {
        guard !isStopped else { return (false, [:]) }
        var pending = known ?? []
        if known == nil { pending = (try? await read { store in try store.sending(chatID: chatID) }) ?? [] }
        var accepted: [String: ChatMessage] = [:]
        var conflicts = 0
        while !pending.isEmpty {
            var bytes = 0
            let batch = pending.prefix(Self.batchCount).prefix { message in
                defer { bytes += message.sealed.count }
                return bytes == 0 || bytes + message.sealed.count <= Self.batchBytes
            }
            var answer: PostBatchReceipt
            do {
                answer = try await domain.postMessages(
                    token: try await token(), endpointID: endpointID, chatID: chatID,
                    messages: batch.map { MessagePost(clientID: $0.id, payload: $0.sealed) })
            } catch let error as DomainError where !MessagingContext.transientDomainCodes.contains(error.code) {
                // Refused as a whole (the caller, the chat): as the first message's refusal.
                answer = PostBatchReceipt(receipts: [], refusal: error)
            } catch {
                // Left as sending: retried with the same bytes until the domain answers.
                return (false, accepted)
            }
            let receipts = answer.receipts.prefix(batch.count)
            if !receipts.isEmpty {
                guard let shown = await accept(Array(zip(batch.map(\.id), receipts)), in: chatID) else {
                    return (false, accepted)
                }
                for message in shown { accepted[message.id] = message }
            }
            pending.removeFirst(receipts.count)
            // Every message accepted (a refusal after the batch is no message's).
            if receipts.count == batch.count { continue }
            guard let refusal = answer.refusal, let refused = pending.first else {
                // Fewer receipts than messages and no reason (a domain gone wrong): the rest are
                // left sending, posted again under the same ids later, never in a loop now.
                return (false, accepted)
            }
            if refusal.code == .conflict {
                // A commit was ordered after these were sealed: apply it, seal every message
                // still sending again, post again. Still behind after five (a commit the
                // members refused holds the chat until an admin's device replaces it): they
                // stay sending, never failed.
                conflicts += 1
                guard conflicts < 5 else { return (false, accepted) }
                try? await catchUp()
                do {
                    // What the chat now holds held (a device this one does not trust) waits.
                    pending = try await write { store in try self.resealPending(in: chatID, store) }
                } catch {
                    return (false, accepted)
                }
                await flows.reloadMessages(chatID)
            } else if MessagingContext.transientDomainCodes.contains(refusal.code) {
                return (false, accepted)
            } else {
                if (try? await write({ store in try store.refuse(refused.id, reason: refusal.reason) })) == true {
                    report([
                        MessageEvent(messageID: refused.id, chatID: chatID, number: nil, state: .failed(reason: refusal.reason))
                    ])
                }
                await flows.reloadMessages(chatID, changed: .some([refused.id]))
                pending.removeFirst()
            }
        }
        return (true, accepted)
    }

    /// Records the domain's receipts of messages posted, in one transaction, and shows them;
    /// nil when the store failed (they stay sending and are posted again, answered with the
    /// same receipts).
    private func accept(_ receipts: [(id: String, receipt: PostReceipt)], in chatID: String) async -> [ChatMessage]? {
        guard let last = receipts.last?.receipt.postedAt else { return [] }
        let flows = self.flows
        // Not synced: a power cut that takes it back leaves them sending, posted again and answered
        // with the same receipts (docs/ARCHITECTURE.md, "Durability").
        let accepted = try? await write(synced: false) { store -> (events: [MessageEvent], shown: [ChatMessage]) in
            var events: [MessageEvent] = []
            var shown: [ChatMessage] = []
            for (id, receipt) in receipts {
                events += try store.accept(id, number: receipt.messageNumber, at: receipt.postedAt)
                if let message = try store.message(id) { shown.append(message) }
            }
            try store.touchChat(chatID, at: last)
            return (events, shown)
        } thenShowing: { accepted, _ in
            flows.showingMessages(accepted.shown, in: chatID)
        }
        guard let accepted else { return nil }
        report(accepted.events)
        return accepted.shown
    }

    /// Seals every message of the chat still sending again, oldest first, in the group's current
    /// epoch; returns them. When the group now holds a device this one does not trust, they are
    /// held instead (and none is returned).
    private nonisolated func resealPending(in chatID: String, _ store: any MessagingStore) throws -> [(id: String, sealed: Data)]
    {
        var resealed: [(id: String, sealed: Data)] = []
        for (localID, _) in try store.sending(chatID: chatID) {
            guard let (_, payload) = try storedPayload(store, localID: localID) else { continue }
            do {
                let sealed = try sealNext(payload, chatID: chatID, localID: localID, in: store)
                try store.setSealed(localID, sealed)
                resealed.append((localID, sealed))
            } catch let error as MessagingError where error.code == .identityUnconfirmed {
                try store.hold(localID)
            }
        }
        return resealed
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
        await flows.reloadMessages(chatID)
        _ = await deliverPending(in: chatID)
    }

    // MARK: Files

    /// Sends the file at `path` to the chat with `caption`; the transfer's value is the message.
    nonisolated func sendFile(
        at path: String, to chatID: String, caption: String, tag: String, fileName: String?, mediaType: String?,
        thumbnail: Thumbnail?
    ) throws -> AttachmentTransfer<ChatMessage> {
        let file = try TransferFile(reading: path)
        let name = fileName ?? (path as NSString).lastPathComponent
        let type = mediaType ?? AttachmentDescriptor.mediaType(forFileName: name)
        guard AttachmentDescriptor.isFileName(name) else {
            throw MessagingError(.invalidArgument, "a file name is 1 to 255 bytes without '/' or control characters")
        }
        guard AttachmentDescriptor.isMediaType(type) else {
            throw MessagingError(.invalidArgument, "a media type is type/subtype, such as image/png")
        }
        if let thumbnail {
            guard thumbnail.data.count <= Thumbnail.maximumSize, AttachmentDescriptor.isMediaType(thumbnail.mediaType) else {
                throw MessagingError(.invalidArgument, "a thumbnail is at most 256 KiB with a media type such as image/jpeg")
            }
        }
        return AttachmentTransfer(total: file.size) { report in
            defer { file.close() }
            try await self.requireActive(chatID)
            let blob = try await self.attachments.upload(
                to: chatID, size: file.size, mediaType: type, read: { try await file.read(at: $0, count: $1) },
                progress: report)
            let preview = try await thumbnail.asyncMap { thumbnail in
                try await self.attachments.upload(
                    to: chatID, size: Int64(thumbnail.data.count), mediaType: thumbnail.mediaType,
                    read: { offset, count in thumbnail.data.subdata(in: Int(offset)..<(Int(offset) + count)) }, progress: { _ in }
                )
            }
            let descriptor = AttachmentDescriptor(file: blob, fileName: name, thumbnail: preview)
            return try await self.send(caption, tag: tag, data: nil, ref: nil, attachment: descriptor, to: chatID)
        }
    }
}
