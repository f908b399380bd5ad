import Foundation
import SparkDomain
import SparkLock
import SparkObservable

/// The endpoint's messaging: it wires the parts together and runs the poll loop. Each chat is an
/// MLS group of devices (`ChatGroup`), opened in a transaction as a `ChatSession`; the parts:
///
/// - `MailboxSync` (`Mailbox/`): reads the mailbox a page at a time and applies each page with
///   its cursor in one transaction (each entry applied, dropped with a reason, or kept waiting);
/// - `Outbox` (`Outbox/`): seals, stores and posts what the user sends, exactly once, sealing
///   again when a commit overtook it; held sends; events, receipts, files, history;
/// - `GroupChanges` (`Chats/`): making a chat, changing who is in it, and keeping its group in
///   line with the user's devices and trust (commits, ordered by the domain);
/// - `Identities` (`Identity/`): contacts, blocking, this device's keys, the user's own devices;
/// - `AttachmentTransfers` (`Attachments/`): blobs, sealed, part by part;
/// - `MessageFlows` (`Flows/`) and `Expiry` (`Store/`): what the app sees, and the countdown.
///
/// Calls go one way: the mailbox sync calls the contacts only; the outbox calls the contacts and
/// the attachments; group changes call those and the outbox. No part calls the mailbox sync: a
/// conflict is an input to the core (`MessagingContext.catchUp`, wired here to the mailbox
/// read). What follows a read (receipts, resends, group changes) and what follows a decision of
/// the user's (held messages released, devices added) is done here, after it.
///
/// All state is in the store (`MessagingStorage`: the endpoint store's tables, or memory), reached
/// by awaited transactions on the storage's own thread, so a restart continues where it stopped.
actor Messenger: MessagingPart {
    nonisolated let context: MessagingContext
    nonisolated let identities: Identities
    nonisolated let attachments: AttachmentTransfers
    nonisolated let mailbox: MailboxSync
    nonisolated let outbox: Outbox
    nonisolated let chats: GroupChanges
    nonisolated let search: MessageSearch
    let pollInterval: Duration
    /// Told after each mailbox read whether it reached the domain (connectivity).
    let onMailbox: @Sendable (Bool) async -> Void
    private var syncTask: Task<Void, Never>?
    /// Re-examines the chats when a contact is trusted again (see `MessagingContext.trustRestored`).
    private var trustTask: Task<Void, Never>?
    /// Brings the search index up to date at start (an index of an older version, or a rebuild
    /// an exit interrupted); messages stored meanwhile are indexed as they come.
    private var indexTask: Task<Void, Never>?
    /// How long an idle endpoint's mailbox read waits for an entry (a long-poll).
    static let longPoll: Duration = .seconds(25)
    /// How long the loop pauses after a failed read.
    static let retryAfterFailure: Duration = .seconds(1)

    init(
        domain: any DomainService, storage: MessagingStorage, keys: UnlockedKeys, endpointID: String,
        token: @escaping @Sendable () async throws -> String, pollInterval: Duration,
        ownDeviceApproval: OwnDeviceApproval = .required, clock: WallClock = .system, transparencyAuditor: Data? = nil,
        postQuantumChats: Bool = true, onMailbox: @escaping @Sendable (Bool) async -> Void = { _ in }
    ) {
        let context = MessagingContext(
            domain: domain, storage: storage, keys: keys, endpointID: endpointID, token: token,
            ownDeviceApproval: ownDeviceApproval, clock: clock, transparencyAuditor: transparencyAuditor,
            postQuantumChats: postQuantumChats)
        self.context = context
        identities = Identities(context: context)
        attachments = AttachmentTransfers(context: context)
        let mailbox = MailboxSync(context: context, identities: identities)
        self.mailbox = mailbox
        outbox = Outbox(context: context, identities: identities, attachments: attachments)
        chats = GroupChanges(context: context, identities: identities, outbox: outbox)
        // Weakly: the mailbox sync holds the context, which holds this closure (no cycle).
        context.catchUp.connect { [weak mailbox] in _ = try await mailbox?.syncOnce() }
        search = MessageSearch(context: context)
        self.pollInterval = pollInterval
        self.onMailbox = onMailbox
    }

    /// Whether `stop()` was called.
    nonisolated var hasStopped: Bool { context.stopped.withLock { $0 } }
    nonisolated var chatsOwner: MutableStateFlow<[Chat]> { context.flows.chatsOwner }

    // MARK: Running

    func start() async {
        await flows.reloadChats()
        guard syncTask == nil else { return }
        // The block list as stored, then as the domain has it now (another device may have
        // changed it while this one was off).
        let stored = Set((try? await read { store in try store.blockedUsers() }) ?? [])
        context.blockedList.withLock { $0 = stored }
        try? await identities.refreshBlocked()
        // Others can add this device to chats from the moment setup succeeds, offline or not:
        // its KeyPackages are in the domain before (topped up again at each start; a failure now
        // is retried at the next).
        try? await identities.ensureKeyPackages()
        // Messages carry the transparency head this device last accepted (gossip).
        await identities.loadGossip()
        // The user's other devices approve this one by the credential it publishes.
        try? await identities.publishCredential()
        // Every chat is looked at after the first read (this user's devices may have changed
        // while this one was off).
        if let chats = try? await read({ store in try store.groupChats() }) { needsReconcile.withLock { $0.formUnion(chats) } }
        let interval = pollInterval
        // Messages may have been counting down while this device was off.
        await noteExpiring()
        let search = self.search
        indexTask = Task { try? await search.resumeIfNeeded() }
        let restored = context.trustRestored
        trustTask = Task { [weak self] in
            for await _ in restored {
                guard let self else { return }
                await self.trustChanged()
            }
        }
        syncTask = Task { [weak self] in
            let clock = ContinuousClock()
            var idle = false
            while !Task.isCancelled {
                guard let self else { return }
                let started = clock.now
                // Idle, the read is a long-poll: the domain answers as soon as an entry for
                // this user arrives. While entries keep coming it does not wait, and reads come
                // every `interval`: a burst then arrives in a few reads with one receipt each. A
                // full page means more wait already: the next read goes at once.
                let received: Int
                var full = false
                var reached = true
                do {
                    let read = try await self.mailbox.syncOnce(wait: idle ? Self.longPoll : .zero)
                    (received, full) = (read.fromOthers, read.full)
                } catch {
                    received = -1
                    // A refusal is an answer; only a domain that did not answer is unreachable.
                    reached = (error as? DomainError)?.code != .unavailable
                }
                if Task.isCancelled { return }
                await self.onMailbox(reached)
                await self.afterSync(force: false, settled: received <= 0)
                if received > 0 || full {
                    idle = false
                    if !full { try? await clock.sleep(until: started + interval) }
                } else if received < 0 {
                    // The domain failed or is unreachable: try again shortly, and then resend
                    // what the outage left sending.
                    idle = false
                    try? await clock.sleep(until: started + Self.retryAfterFailure)
                } else {
                    idle = true
                }
            }
        }
    }

    /// Stops for good: when it returns, the poll loop has ended and this messenger will not
    /// write to the store again. A post already on its way may still reach the domain; its
    /// message stays `sending` here, and the next messenger on this store resends the same bytes
    /// under the same id, which the domain answers with the number it already gave.
    func stop() async {
        await flushWaitingReceipts()
        context.stopped.withLock { $0 = true }
        let loop = syncTask
        syncTask = nil
        loop?.cancel()
        trustTask?.cancel()
        indexTask?.cancel()
        context.trustRestoredSink.finish()
        await storage.close()
        await loop?.value
        await context.expiry.stop()
        groups.cache.removeAll()
        eventSinks.finish()
        messageEventSinks.finish()
        arrivalSinks.finish()
        changeSinks.finish()
    }

    /// The delivery receipts a burst left waiting (at most ``MailboxSync/receiptDelay``) go
    /// before a stop, given a second: a domain that does not answer by then loses them, as a
    /// crash would (their messages stay `sent` at their senders).
    private func flushWaitingReceipts() async {
        let due = await mailbox.takeReceiptsDue(all: true)
        guard !due.isEmpty else { return }
        let outbox = self.outbox
        let sent = Task { @Sendable in await outbox.flushReceipts(due) }
        let done = Locked(false)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resume = { @Sendable in
                if done.withLock({ was in
                    defer { was = true }
                    return !was
                }) {
                    continuation.resume()
                }
            }
            Task {
                await sent.value
                resume()
            }
            Task {
                try? await Task.sleep(for: .seconds(1))
                resume()
            }
        }
    }

    /// After each mailbox read: delivery receipts (all that are due when the read brought
    /// nothing new or `force`, else those that waited long enough), the chats that need a look,
    /// and what is left sending.
    func afterSync(force: Bool, settled: Bool = true) async {
        await outbox.flushReceipts(await mailbox.takeReceiptsDue(all: force || settled))
        await chats.reconcile(force: force)
        await outbox.resendPending()
    }

    /// Reads the mailbox now, then does what follows a read (see ``afterSync(force:settled:)``), looking
    /// at every chat.
    func refresh() async throws {
        _ = try await mailbox.syncOnce()
        await afterSync(force: true)
    }

    /// What a newly trusted key changes: chats where this device is an admin evict the
    /// contact's devices of an identity no longer trusted and add those of the new one, and held
    /// messages go once nothing holds them.
    func trustChanged() async {
        if let all = try? await read({ store in try store.groupChats() }) { needsReconcile.withLock { $0.formUnion(all) } }
        await chats.reconcile(force: false)
        await outbox.releaseHeld()
    }

    // MARK: The user's decisions

    /// Trusts the key the domain publishes now for `user`, then sends what was held for it.
    func acceptIdentity(of user: String) async throws {
        try await identities.acceptIdentity(of: user)
        await trustChanged()
    }

    /// Marks `user` verified when `number` is the safety number of their current key (see
    /// `Identities.confirmSafetyNumber`), then sends what was held for them.
    func confirmSafetyNumber(_ number: SafetyNumber, of user: String) async throws {
        try await identities.confirmSafetyNumber(number, of: user)
        await trustChanged()
    }

    /// Approves the user's device `target` (see `Identities.approveDevice`), then adds it to every
    /// chat.
    func approveDevice(_ target: String, code: String) async throws {
        try await identities.approveDevice(target, code: code)
        await chats.reconcile(force: true)
    }

    // MARK: Queries

    func chat(_ chatID: String) async throws -> Chat { try await flows.chat(chatID) }

    // Reads of the store touch nothing of the messenger's own: they go straight to the storage's
    // thread, without a hop onto the messenger first.

    nonisolated func message(id: String) async throws -> ChatMessage {
        guard let message = try await read({ store in try store.message(id) }) else {
            throw MessagingError(.unknownChat, "no message \(id)")
        }
        return message
    }

    /// The latest `limit` messages before `number` (or the newest), oldest first (see
    /// `MessagingStore.page`).
    nonisolated func messages(in chatID: String, before number: Int64?, limit: Int) async throws -> [ChatMessage] {
        try await read { store in try store.page(chatID: chatID, before: number, limit: limit) }
    }

    func messageFlow(_ chatID: String) async throws -> StateFlow<[ChatMessage]> { try await flows.messageFlow(chatID) }
}
