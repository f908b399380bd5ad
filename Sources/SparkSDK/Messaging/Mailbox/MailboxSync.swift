import Foundation
import SparkCrypto
import SparkDomain
import SparkLock
import SparkMLS
import SparkStore

/// The mailbox sync: entries are read in the domain's order, a page at a time, and applied with
/// the cursor in one transaction, so a crash, or the store, the domain or the token failing,
/// leaves neither and the page is read again: each entry is applied exactly once. A page's run of
/// messages, events, receipts and member lists is one transaction (each entry in a savepoint of
/// its own, so one that contradicts the store is dropped alone); an entry that needs the store as
/// the entries before it left it, or the network, before it can be judged (a commit, a Welcome,
/// a change of this user's devices, an identity notice) is a transaction of its own.
///
/// For each entry of a chat the group decides (`ChatGroup`): apply it, drop it with a reason
/// (reported as ``MessagingEvent/dropped(chatID:reason:)``, nothing changed), or keep it until
/// the commit before it arrives (a domain that withholds a commit delays what follows it; it
/// cannot make a device skip it).
///
/// It calls no part but the contacts (to look up the identities an entry brings): what follows a
/// read (receipts, resends, group changes) the messenger's loop does, with what the sync hands it
/// (``takeReceiptsDue(all:)``).
actor MailboxSync: MessagingPart {
    nonisolated let context: MessagingContext
    /// The contacts: identities an entry brings are looked up before it is checked.
    let identities: Identities
    /// The latest mailbox read; each read waits for the one before it (see `syncOnce`).
    private var lastSync: Task<Read, any Error>?
    /// The long-poll in flight, if the latest read is one.
    private var longPoll: Task<Read, any Error>?
    /// Delivery receipts due, per chat, for the messages the reads brought (see
    /// ``takeReceiptsDue(all:)``), and since when the oldest of them waits.
    private var receiptsDue: [String: [CoveredMessage]] = [:]
    private var receiptsDueSince: ContinuousClock.Instant?
    /// The ephemeral messages seen lately, by nonce, and in the order they came.
    var seenEphemeral: Set<Data> = []
    var seenEphemeralOrder: [Data] = []

    init(context: MessagingContext, identities: Identities) {
        self.context = context
        self.identities = identities
    }

    /// The longest a delivery receipt waits for the reads after it while messages keep coming:
    /// a burst is acknowledged by a receipt every tenth of a second, not one a read (each
    /// receipt is a message sealed, stored, posted and applied by every device of the chat).
    static let receiptDelay: Duration = .milliseconds(100)

    /// The delivery receipts the reads since the last call found due, per chat, once the oldest
    /// has waited ``receiptDelay`` or with `all` (the mailbox is settled: the latest read brought
    /// nothing new); taken, so each goes once.
    func takeReceiptsDue(all: Bool) -> [String: [CoveredMessage]] {
        guard let since = receiptsDueSince, all || ContinuousClock.now - since >= Self.receiptDelay else { return [:] }
        defer { (receiptsDue, receiptsDueSince) = ([:], nil) }
        return receiptsDue
    }

    /// The most entries one read asks for.
    static let pageSize = 200

    /// What one read of the mailbox brought.
    struct Read: Sendable {
        /// How many entries came from elsewhere (this device's own echoes bring nothing new: after
        /// a read of only those, the poll loop goes back to a long-poll at once instead of reading
        /// again in `pollInterval`).
        var fromOthers = 0
        /// Whether the page was full: more entries wait, and the poll loop reads again at once.
        var full = false
    }

    /// Reads and applies the mailbox after the stored cursor (one page, see ``Read``).
    ///
    /// Reads run one at a time: the poll loop and `BBMAccess.refresh()` interleave at every
    /// `await`, and two reads from the same cursor would apply an entry twice (the second time
    /// refused as a replay and reported as dropped).
    func syncOnce(wait: Duration = .zero) async throws -> Read {
        // A read now must not queue behind a long-poll: the long-poll ends (empty) instead.
        if wait == .zero { longPoll?.cancel() }
        let previous = lastSync
        let next = Task {
            _ = try? await previous?.value
            do {
                return try await readMailbox(wait: wait)
            } catch is CancellationError where wait > .zero {
                return Read()
            }
        }
        lastSync = next
        if wait > .zero { longPoll = next }
        return try await withTaskCancellationHandler {
            try await next.value
        } onCancel: {
            next.cancel()
        }
    }

    /// What applying one entry changed, beyond the store: steps of this user's messages,
    /// events for the app, the number to acknowledge as delivered, and whether the chat's group
    /// moved (so that entries waiting for it are offered again).
    struct Effects: Sendable {
        var events: [MessageEvent] = []
        var notices: [MessagingEvent] = []
        /// The chat's messages this changed, for its flow (all of them unless said otherwise).
        var changed: MessageChanges = .all
        /// Received messages a delivery receipt is due for.
        var delivered: [CoveredMessage] = []
        var moved = false
        var waiting = false
        var reconcile = false
        var reconcileAll = false
        /// The echo of something this device posted.
        var echo = false
        /// Messages of other users it brought.
        var arrived: [ChatMessage] = []
        /// A message may have started counting down (see `noteExpiring`).
        var expiring = false
        /// The transparency heads other members' devices gossiped.
        var gossip: [Gossip] = []
    }

    /// A tree head another member's device carried in a message.
    struct Gossip: Sendable {
        var user: String
        var head: Data
    }

    /// What one mailbox entry changes in the store; `process` writes it with the cursor.
    struct Applied {
        /// Run in the write, with the checker of the signatures on messages, receipts and events
        /// when a page's run defers them (nil: the group checks them in line).
        var changes: Changes?
    }

    typealias Changes = @Sendable (any MessagingStore, (any MLSSignatureChecker)?) throws -> Effects

    /// What a batch changed, for the app (the flows show each write as it commits).
    private struct Batch {
        /// What changed of messages already there (not this device's echoes, not new arrivals).
        var altered: [String: MessageChanges] = [:]
        var events: [MessageEvent] = []
        var echoes = 0
    }

    private func readMailbox(wait: Duration) async throws -> Read {
        try requireRunning()
        let cursor = try await read { store in try store.mailboxCursor() }
        let entries = try await domain.readMailbox(
            token: try await token(), endpointID: endpointID, after: cursor, limit: Self.pageSize, wait: wait)
        var batch = Batch()
        var failure: (any Error)?
        var start = 0
        while start < entries.count {
            do {
                if Self.appliesAlone(entries[start]) {
                    let entry = entries[start]
                    if try await process(entry, waiting: false, into: &batch) {
                        try await offerWaiting(entry.chatID, into: &batch)
                    }
                    start += 1
                } else {
                    let end = entries[start...].firstIndex(where: Self.appliesAlone) ?? entries.count
                    try await processRun(entries[start..<end], into: &batch)
                    start = end
                }
            } catch {
                failure = error
                break
            }
        }
        // What committed before a failure is reported all the same (each write showed itself in
        // the flows as it committed, so an app told of a step finds it there).
        for (chatID, altered) in batch.altered {
            switch altered {
            case .none: break
            case .some(let ids): if !ids.isEmpty { changeSinks.yield(MessageChange(chatID: chatID, messageIDs: ids)) }
            case .all: changeSinks.yield(MessageChange(chatID: chatID, messageIDs: nil))
            }
        }
        report(batch.events)
        if let failure { throw failure }
        return Read(fromOthers: max(0, entries.count - batch.echoes), full: entries.count >= Self.pageSize)
    }

    /// Whether an entry is applied in a transaction of its own: it moves a chat's group, or its
    /// preparation reads what the entries before it write, or asks the domain.
    static func appliesAlone(_ entry: MailboxEntry) -> Bool {
        switch entry.kind {
        case .message, .event, .receipt, .membership, .ephemeral: false
        case .commit, .welcome, .devices, .identityReset: true
        }
    }

    /// Applies a run of entries that need nothing but the store (messages, events, receipts,
    /// member lists) in one transaction with the cursor after the last of them. Each entry's
    /// changes are in a savepoint: one that contradicts the store (an id or a number taken) is
    /// rolled back alone and dropped with a reason. Throws, with nothing applied, for a failure
    /// outside the entries.
    private func processRun(_ run: ArraySlice<MailboxEntry>, into batch: inout Batch) async throws {
        guard let last = run.last else { return }
        var steps: [(entry: MailboxEntry, changes: Changes?)] = []
        var notices: [[MessagingEvent]] = []
        for entry in run {
            let (applied, refused) = try await prepare(entry)
            steps.append((entry, applied.changes))
            notices.append(refused)
        }
        let prepared = steps
        let outcomes: [(effects: Effects, conflict: String?)]
        do {
            // A short run gains nothing from checking beside it (its checks would wait for its
            // end), and each message's latency would pay the hand-off: checked in line.
            let deferred = prepared.count >= DeferredSignatures.handOff ? DeferredSignatures() : nil
            outcomes = try await write(prepared, through: last.sequence, signatures: deferred)
        } catch is DeferredSignatures.Failed {
            // A signature failed, and nothing of the page was kept: the page again, every
            // signature checked in line, so that what failed is dropped alone.
            outcomes = try await write(prepared, through: last.sequence, signatures: nil)
        }
        for (index, outcome) in outcomes.enumerated() {
            let entry = prepared[index].entry
            let dropped = outcome.conflict.map { [MessagingEvent.dropped(chatID: entry.chatID, reason: $0)] } ?? []
            await finish(entry, effects: outcome.effects, notices: notices[index] + dropped, into: &batch)
        }
    }

    /// A run's transaction: each step in a savepoint, then the cursor. With `signatures`, the
    /// signatures on its messages are verified beside it, and it commits only once they all held
    /// (it throws ``DeferredSignatures/Failed``, rolled back, when one did not). What it changed
    /// is shown in the flows by the same job of the storage's thread, the moment it commits.
    private func write(
        _ prepared: [(entry: MailboxEntry, changes: Changes?)], through sequence: Int64, signatures: DeferredSignatures?
    ) async throws -> [(effects: Effects, conflict: String?)] {
        let groups = self.groups
        let flows = self.flows
        let apply = { @Sendable (store: any MessagingStore) throws -> [(effects: Effects, conflict: String?)] in
            // Each chat's group is written once, at the end of the page (see `GroupStore.deferringSaves`).
            let outcomes = try groups.deferringSaves(store) {
                var outcomes: [(effects: Effects, conflict: String?)] = []
                for step in prepared {
                    let held = groups.heldSavesSnapshot()
                    do {
                        outcomes.append(
                            (try store.savepoint { try step.changes?(store, signatures) ?? Effects(changed: .none) }, nil))
                    } catch let error as MessagingError where error.code == .conflict {
                        // Rolled back alone: so is what it did to the groups held back.
                        groups.restoreHeldSaves(held)
                        outcomes.append((Effects(changed: .none), error.reason))
                    }
                }
                // Before the groups are written: a page rolled back leaves no session moved.
                if let signatures, !signatures.allValid() { throw DeferredSignatures.Failed() }
                return outcomes
            }
            try store.setMailboxCursor(sequence)
            return outcomes
        }
        return try await write(apply) { outcomes, store in
            var touched: [String: MessageChanges] = [:]
            for (index, outcome) in outcomes.enumerated() where !prepared[index].entry.chatID.isEmpty {
                touched[prepared[index].entry.chatID, default: .none].formUnion(outcome.effects.changed)
            }
            return try flows.showing(touched, in: store)
        }
    }

    /// Opens and checks an entry as far as it can before the write (see `apply`): its changes,
    /// or, when it is refused, none and the reason. Throws only for a failure outside the entry.
    private func prepare(_ entry: MailboxEntry) async throws -> (Applied, [MessagingEvent]) {
        do {
            return (try await apply(entry), [])
        } catch let error where MessagingContext.isRetryable(error) {
            throw error
        } catch {
            return (Applied(), [.dropped(chatID: entry.chatID, reason: (error as? MessagingError)?.reason ?? "\(error)")])
        }
    }

    /// Applies one entry (a fresh one with the cursor, a waiting one by forgetting it) and
    /// returns whether the chat's group moved. Throws only for a failure outside the entry.
    private func process(_ entry: MailboxEntry, waiting: Bool, into batch: inout Batch) async throws -> Bool {
        let (applied, refused) = try await prepare(entry)
        var notices = refused
        let done = { @Sendable (store: any MessagingStore, effects: Effects) throws in
            if waiting {
                if !effects.waiting { try store.forgetDeferred(sequence: entry.sequence) }
            } else {
                try store.setMailboxCursor(entry.sequence)
            }
        }
        var effects = Effects()
        let flows = self.flows
        do {
            let changes = applied.changes
            effects = try await write { store in
                let effects = try changes?(store, nil) ?? Effects(changed: .none)
                try done(store, effects)
                return effects
            } thenShowing: { effects, store in
                try flows.showing(entry.chatID.isEmpty ? [:] : [entry.chatID: effects.changed], in: store)
            }
        } catch let error as MessagingError where error.code == .conflict {
            // The entry contradicts the store (an id or a number already taken): retrying cannot
            // help, so it is dropped like a forgery, its changes rolled back, and only the cursor
            // moves past it.
            notices.append(.dropped(chatID: entry.chatID, reason: error.reason))
            try await write { store in try done(store, Effects(changed: .none)) }
            effects.changed = .none
        }
        await finish(entry, effects: effects, notices: notices, into: &batch)
        return effects.moved
    }

    /// What follows an applied entry, once its transaction committed and the flows show it: the
    /// app's events, the receipts due, the chats to look at, and what the page changed.
    private func finish(_ entry: MailboxEntry, effects: Effects, notices: [MessagingEvent], into batch: inout Batch) async {
        for notice in notices + effects.notices { eventSinks.yield(notice) }
        for message in effects.arrived { arrivalSinks.yield(message) }
        if effects.expiring { await noteExpiring() }
        for gossip in effects.gossip { await identities.heard(gossip.head, from: gossip.user) }
        if !effects.delivered.isEmpty {
            receiptsDue[entry.chatID, default: []] += effects.delivered
            if receiptsDueSince == nil { receiptsDueSince = .now }
        }
        if effects.reconcile { needsReconcile.withLock { _ = $0.insert(entry.chatID) } }
        if effects.reconcileAll {
            context.devicesChanged.withLock { $0 = true }
            if let chats = try? await read({ store in try store.groupChats() }) {
                needsReconcile.withLock { $0.formUnion(chats) }
            }
        }
        // Only what a member sent changes messages already there (a commit or a Welcome reloads
        // the flow, changing none of them; a receipt's step is a `messageEvents` event).
        if !entry.chatID.isEmpty, !effects.echo, [.message, .event].contains(entry.kind) {
            var altered = effects.changed
            if case .some(let ids) = altered { altered = .some(ids.subtracting(effects.arrived.map(\.id))) }
            batch.altered[entry.chatID, default: .none].formUnion(altered)
        }
        batch.events += effects.events
        if effects.echo { batch.echoes += 1 }
    }

    /// Offers the chat's waiting entries again, oldest first, after its group moved; again
    /// from the start each time one of them moves it further.
    private func offerWaiting(_ chatID: String, into batch: inout Batch) async throws {
        var rounds = 0
        while rounds < 1000 {
            rounds += 1
            let waiting = try await read { store in try store.deferred(chatID: chatID) }
            var moved = false
            for entry in waiting where try await process(entry, waiting: true, into: &batch) {
                moved = true
                break
            }
            if !moved { return }
        }
    }

}
