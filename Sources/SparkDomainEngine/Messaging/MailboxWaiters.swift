package import SparkDomain
import SparkLock

/// Each user's entries one transaction wrote, in sequence order: what its announcement hands
/// the long-polls waiting on them (``MailboxWaiters/deliver(_:usable:)``).
package struct AppendedEntries: Sendable, Equatable {
    /// The entries by user.
    package private(set) var byUser: [String: [MailboxEntry]] = [:]

    /// None yet.
    package init() {}

    /// The users reached.
    package var users: [String] { Array(byUser.keys) }

    /// Adds `entry`, written to `user`'s mailbox after those added before.
    package mutating func add(_ entry: MailboxEntry, for user: String) { byUser[user, default: []].append(entry) }

    /// Adds what another part of the same transaction wrote after these.
    package mutating func add(_ other: AppendedEntries) {
        for (user, entries) in other.byUser { byUser[user, default: []].append(contentsOf: entries) }
    }
}

/// The mailbox long-polls waiting in this process, woken per user: a post wakes the waiters of
/// the users it reached and nobody else, so no waiter learns of another user's activity (a
/// domain-wide counter would tell every client when anyone posts).
///
/// Take a ``Ticket`` before reading the mailbox and wait with it: an entry routed after the
/// ticket was taken wakes the wait at once, even if it came before the wait began.
///
/// A post made in this process hands each woken wait the entries it wrote
/// (``deliver(_:usable:)``) where they are exactly what a read would return: the wait's cursor
/// is where the post's entries for its user begin, and its endpoint was found usable in the
/// post's own transaction. Every other wake reads the mailbox.
package final class MailboxWaiters: Sendable {
    /// Where one user's mailbox stood when a reader looked.
    package struct Ticket: Sendable {
        let user: String
        let generation: UInt64
        let everyone: UInt64
    }

    /// Where a read found a user's mailbox to end, with the ticket it was read under.
    private struct Settled {
        let generation: UInt64
        let everyone: UInt64
        let sequence: Int64
    }

    /// A parked read: what it would read (its endpoint, cursor and limit), and where a post
    /// leaves the entries that answer it.
    package final class Reader: Sendable {
        let endpointID: String
        let cursor: Int64
        let limit: Int
        private let delivered = Locked<[MailboxEntry]?>(nil)

        package init(endpointID: String, cursor: Int64, limit: Int) {
            self.endpointID = endpointID
            self.cursor = cursor
            self.limit = limit
        }

        /// The entries a post handed this read, once; nil when it must read the mailbox.
        package func take() -> [MailboxEntry]? {
            delivered.withLock { delivered in
                defer { delivered = nil }
                return delivered
            }
        }

        fileprivate func hand(_ entries: [MailboxEntry]) { delivered.withLock { $0 = entries } }
    }

    /// An endpoint of a user, as a read names it.
    package struct Endpoint: Hashable, Sendable {
        package let user: String
        package let endpointID: String

        package init(user: String, endpointID: String) {
            self.user = user
            self.endpointID = endpointID
        }
    }

    /// A parked wait: how it ends, and what it would read.
    private struct Waiter {
        let wake: Wake
        let reader: Reader?
    }

    private struct State {
        var clock: UInt64 = 0
        var everyone: UInt64 = 0
        var generations: [String: UInt64] = [:]
        var settled: [String: Settled] = [:]
        /// Each user's waits, by id.
        var waiters: [String: [UInt64: Waiter]] = [:]
        /// The waits by the tenth of a second their time is up in (``tick(_:roundingUp:)``, rounded up),
        /// for the sweeper to end without looking at the others. A wait woken before then stays
        /// listed until that tick, and is passed over.
        var due: [Int64: [(user: String, id: UInt64)]] = [:]
        /// The first tick the sweeper has not ended yet.
        var nextTick: Int64 = 0
        var waiting = 0
        var ended = false
        var sweeping = false
    }

    /// What ends a wait: a task's continuation resumed, or a parked long-poll's callback.
    package typealias Wake = @Sendable () -> Void

    private let state = Locked(State())
    /// Where ticks count from.
    private let origin = ContinuousClock.now

    /// Tenths of a second since ``origin`` at `instant`, rounded up or down.
    private func tick(_ instant: ContinuousClock.Instant, roundingUp: Bool) -> Int64 {
        let tenths = (instant - origin) / .milliseconds(100)
        return Int64(min(max(roundingUp ? tenths.rounded(.up) : tenths.rounded(.down), -1e15), 1e15))
    }

    /// No waiters yet.
    package init() {}

    /// The long-polls waiting now.
    package var waiting: Int { state.withLock { $0.waiting } }

    /// A ticket for `user`'s mailbox as it is now.
    package func ticket(for user: String) -> Ticket {
        state.withLock { Ticket(user: user, generation: $0.generations[user] ?? 0, everyone: $0.everyone) }
    }

    /// Records that a read made under `ticket` found the user's mailbox ending at `sequence`
    /// (it returned everything there was after its cursor, up to `sequence`).
    package func settle(_ ticket: Ticket, at sequence: Int64) {
        state.withLock { state in
            // A bound on what is kept: forgetting only costs a read.
            if state.settled.count >= Self.settledKept { state.settled.removeAll(keepingCapacity: true) }
            state.settled[ticket.user] = Settled(generation: ticket.generation, everyone: ticket.everyone, sequence: sequence)
        }
    }

    /// How many users' mailbox ends are kept.
    static let settledKept = 200_000

    /// Whether a read after `cursor` under `ticket` would find nothing: a read under a ticket of
    /// the same generation (no entry announced for the user since it was taken, and no
    /// announcement missed) found the mailbox ending at or before `cursor`. An entry committed
    /// since whose announcement has not come yet is then not read now, but it wakes a wait under
    /// `ticket` when it comes, as it would wake a wait that had read.
    package func isSettled(_ ticket: Ticket, after cursor: Int64) -> Bool {
        state.withLock { state in
            guard let settled = state.settled[ticket.user] else { return false }
            return settled.generation == ticket.generation && settled.everyone == ticket.everyone
                && cursor >= settled.sequence
        }
    }

    /// Entries reached these users' mailboxes: wakes their waiters, each to read.
    package func notify(_ users: some Sequence<String>) {
        var woken: [Wake] = []
        state.withLock { state in
            for user in users {
                state.clock += 1
                state.generations[user] = state.clock
                if let waiters = state.waiters.removeValue(forKey: user) {
                    woken.append(contentsOf: waiters.values.map(\.wake))
                }
            }
            state.waiting -= woken.count
        }
        for wake in woken { wake() }
    }

    /// The endpoints whose reads wait here on these users' mailboxes (for a post to check, in
    /// its transaction, which of them may read: ``deliver(_:usable:)``).
    package func waitingEndpoints(of users: some Sequence<String>) -> [Endpoint] {
        state.withLock { state in
            var endpoints: [Endpoint] = []
            for user in users {
                for waiter in state.waiters[user]?.values ?? [:].values {
                    if let reader = waiter.reader { endpoints.append(Endpoint(user: user, endpointID: reader.endpointID)) }
                }
            }
            return endpoints
        }
    }

    /// A transaction committed `appended` (each user's new entries, in sequence order): wakes
    /// their users' waiters as ``notify(_:)`` does, and hands a waiter the entries (up to its
    /// limit) instead of a read where they are exactly what its read would return: its cursor
    /// is the sequence just before them (so nothing of the mailbox lies between, whatever order
    /// posts' announcements come in), and its endpoint is in `usable` (checked in the
    /// transaction that wrote them, as a read checks it). A user's mailbox end known from a
    /// read (``settle(_:at:)``) that the entries follow moves to their end.
    package func deliver(_ appended: AppendedEntries, usable: Set<Endpoint>) {
        var woken: [Wake] = []
        state.withLock { state in
            for (user, entries) in appended.byUser {
                let before = state.generations[user] ?? 0
                state.clock += 1
                state.generations[user] = state.clock
                guard let first = entries.first, let last = entries.last,
                    zip(entries, entries.dropFirst()).allSatisfy({ $1.sequence == $0.sequence + 1 })
                else {
                    // Not one run of the mailbox: every waiter reads.
                    woken.append(contentsOf: (state.waiters.removeValue(forKey: user) ?? [:]).values.map(\.wake))
                    continue
                }
                let previous = first.sequence - 1
                if let settled = state.settled[user], settled.generation == before, settled.everyone == state.everyone,
                    settled.sequence == previous
                {
                    state.settled[user] = Settled(generation: state.clock, everyone: state.everyone, sequence: last.sequence)
                }
                for waiter in (state.waiters.removeValue(forKey: user) ?? [:]).values {
                    if let reader = waiter.reader, reader.cursor == previous,
                        usable.contains(Endpoint(user: user, endpointID: reader.endpointID))
                    {
                        reader.hand(Array(entries.prefix(reader.limit)))
                    }
                    woken.append(waiter.wake)
                }
            }
            state.waiting -= woken.count
        }
        for wake in woken { wake() }
    }

    /// Something changed that this process cannot attribute (another process wrote the
    /// embedded file): every waiter looks again.
    package func notifyEveryone() {
        let woken = state.withLock { state in
            state.everyone += 1
            let all = state.waiters.values.flatMap(\.values).map(\.wake)
            state.waiters = [:]
            state.due = [:]
            state.waiting = 0
            return all
        }
        for wake in woken { wake() }
    }

    /// Ends every wait now, and every later one at once (a server shutting down).
    package func endAll() {
        state.withLock { $0.ended = true }
        notifyEveryone()
    }

    /// Whether ``endAll()`` was called.
    package var isEnded: Bool { state.withLock { $0.ended } }

    /// Returns when the ticket's user gets an entry after the ticket was taken, after `timeout`
    /// (within two tenths of a second: the sweeper looks every tenth), or when the task is cancelled.
    ///
    /// A wait holds its wake-up and nothing else: one sweeper task for all of them ends the
    /// ones whose time is up, so 10,000 idle long-polls are 10,000 small entries, not 10,000
    /// sleeping tasks; it looks only at the waits due, not at every wait ten times a second.
    /// With a `reader`, a post may hand it the entries that end the wait (``Reader/take()``).
    package func wait(_ ticket: Ticket, reader: Reader? = nil, timeout: Duration) async {
        let id = nextID()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                park(ticket, id: id, reader: reader, timeout: timeout) { continuation.resume() }
            }
        } onCancel: {
            resume(ticket.user, id)
        }
    }

    /// ``wait(_:timeout:)`` without a task: `wake` is called once, when the wait would return
    /// (at once when it would not wait at all), on whichever thread ends it. A long-poll parked
    /// so holds this entry and what `wake` captures, nothing of the request's frames.
    package func park(_ ticket: Ticket, reader: Reader? = nil, timeout: Duration, wake: @escaping Wake) {
        park(ticket, id: nextID(), reader: reader, timeout: timeout, wake: wake)
    }

    private func nextID() -> UInt64 {
        state.withLock { state -> UInt64 in
            state.clock += 1
            return state.clock
        }
    }

    private func park(_ ticket: Ticket, id: UInt64, reader: Reader?, timeout: Duration, wake: @escaping Wake) {
        let deadline = ContinuousClock.now + timeout
        let (now, startSweeper) = state.withLock { state -> (Bool, Bool) in
            if (state.generations[ticket.user] ?? 0) != ticket.generation || state.everyone != ticket.everyone
                || state.ended || Task.isCancelled
            {
                return (true, false)
            }
            state.waiters[ticket.user, default: [:]][id] = Waiter(wake: wake, reader: reader)
            state.waiting += 1
            if !state.sweeping { state.nextTick = tick(.now, roundingUp: false) }
            state.due[max(tick(deadline, roundingUp: true), state.nextTick), default: []].append((ticket.user, id))
            defer { state.sweeping = true }
            return (false, !state.sweeping)
        }
        if now { wake() }
        if startSweeper { Task.detached { [weak self] in await self?.sweep() } }
    }

    /// Ends the waits whose time is up, every 100 ms while there are any.
    private func sweep() async {
        while true {
            try? await Task.sleep(for: .milliseconds(100))
            let now = tick(.now, roundingUp: false)
            let (expired, done) = state.withLock { state -> ([Wake], Bool) in
                var expired: [Wake] = []
                while state.nextTick <= now {
                    for (user, id) in state.due.removeValue(forKey: state.nextTick) ?? [] {
                        // Gone already when it was woken, cancelled or ended.
                        guard let waiter = state.waiters[user]?.removeValue(forKey: id) else { continue }
                        if state.waiters[user]?.isEmpty == true { state.waiters[user] = nil }
                        expired.append(waiter.wake)
                    }
                    state.nextTick += 1
                }
                state.waiting -= expired.count
                if state.waiters.isEmpty {
                    state.sweeping = false
                    state.due = [:]
                }
                return (expired, state.waiters.isEmpty)
            }
            for wake in expired { wake() }
            if done { return }
        }
    }

    private func resume(_ user: String, _ id: UInt64) {
        let wake = state.withLock { state -> Wake? in
            guard let waiter = state.waiters[user]?.removeValue(forKey: id) else { return nil }
            if state.waiters[user]?.isEmpty == true { state.waiters[user] = nil }
            state.waiting -= 1
            return waiter.wake
        }
        wake?()
    }
}
