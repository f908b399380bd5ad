import SparkDomain
import SparkLock

/// The mailbox long-polls waiting in this process, woken per user: a post wakes the waiters of
/// the users it reached and nobody else, so no waiter learns of another user's activity (a
/// domain-wide counter would tell every client when anyone posts).
///
/// Take a ``Ticket`` before reading the mailbox and wait with it: an entry routed after the
/// ticket was taken wakes the wait at once, even if it came before the wait began.
package final class MailboxWaiters: Sendable {
    /// Where one user's mailbox stood when a reader looked.
    package struct Ticket: Sendable {
        let user: String
        let generation: UInt64
        let everyone: UInt64
    }

    private struct Waiter {
        var continuation: CheckedContinuation<Void, Never>
        var deadline: ContinuousClock.Instant
    }

    /// Where a read found a user's mailbox to end, with the ticket it was read under.
    private struct Settled {
        let generation: UInt64
        let everyone: UInt64
        let sequence: Int64
    }

    private struct State {
        var clock: UInt64 = 0
        var everyone: UInt64 = 0
        var generations: [String: UInt64] = [:]
        var settled: [String: Settled] = [:]
        var waiters: [String: [UInt64: Waiter]] = [:]
        var waiting = 0
        var ended = false
        var sweeping = false
    }

    private let state = Locked(State())

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

    /// Entries reached these users' mailboxes: wakes their waiters.
    package func notify(_ users: some Sequence<String>) {
        var woken: [CheckedContinuation<Void, Never>] = []
        state.withLock { state in
            for user in users {
                state.clock += 1
                state.generations[user] = state.clock
                if let waiters = state.waiters.removeValue(forKey: user) {
                    woken.append(contentsOf: waiters.values.map(\.continuation))
                }
            }
            state.waiting -= woken.count
        }
        for waiter in woken { waiter.resume() }
    }

    /// Something changed that this process cannot attribute (another process wrote the
    /// embedded file): every waiter looks again.
    package func notifyEveryone() {
        let woken = state.withLock { state in
            state.everyone += 1
            let all = state.waiters.values.flatMap(\.values).map(\.continuation)
            state.waiters = [:]
            state.waiting = 0
            return all
        }
        for waiter in woken { waiter.resume() }
    }

    /// Ends every wait now, and every later one at once (a server shutting down).
    package func endAll() {
        state.withLock { $0.ended = true }
        notifyEveryone()
    }

    /// Whether ``endAll()`` was called.
    package var isEnded: Bool { state.withLock { $0.ended } }

    /// Returns when the ticket's user gets an entry after the ticket was taken, after `timeout`
    /// (within a tenth of a second), or when the task is cancelled.
    ///
    /// A wait holds a continuation and nothing else: one sweeper task for all of them ends the
    /// ones whose time is up, so 10,000 idle long-polls are 10,000 small entries, not 10,000
    /// sleeping tasks.
    package func wait(_ ticket: Ticket, timeout: Duration) async {
        let id = state.withLock { state -> UInt64 in
            state.clock += 1
            return state.clock
        }
        let deadline = ContinuousClock.now + timeout
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let (now, startSweeper) = state.withLock { state -> (Bool, Bool) in
                    if (state.generations[ticket.user] ?? 0) != ticket.generation || state.everyone != ticket.everyone
                        || state.ended || Task.isCancelled
                    {
                        return (true, false)
                    }
                    state.waiters[ticket.user, default: [:]][id] = Waiter(continuation: continuation, deadline: deadline)
                    state.waiting += 1
                    defer { state.sweeping = true }
                    return (false, !state.sweeping)
                }
                if now { continuation.resume() }
                if startSweeper { Task.detached { [weak self] in await self?.sweep() } }
            }
        } onCancel: {
            resume(ticket.user, id)
        }
    }

    /// Ends the waits whose time is up, every 100 ms while there are any.
    private func sweep() async {
        while true {
            try? await Task.sleep(for: .milliseconds(100))
            let now = ContinuousClock.now
            let (expired, done) = state.withLock { state -> ([CheckedContinuation<Void, Never>], Bool) in
                var expired: [CheckedContinuation<Void, Never>] = []
                for (user, waiters) in state.waiters {
                    // Most users' waits are not due: looked at without a copy.
                    guard waiters.values.contains(where: { $0.deadline <= now }) else { continue }
                    let due = waiters.filter { $0.value.deadline <= now }
                    for key in due.keys { state.waiters[user]?.removeValue(forKey: key) }
                    if state.waiters[user]?.isEmpty == true { state.waiters[user] = nil }
                    expired += due.values.map(\.continuation)
                }
                state.waiting -= expired.count
                if state.waiters.isEmpty { state.sweeping = false }
                return (expired, state.waiters.isEmpty)
            }
            for continuation in expired { continuation.resume() }
            if done { return }
        }
    }

    private func resume(_ user: String, _ id: UInt64) {
        let continuation = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiters[user]?.removeValue(forKey: id) else { return nil }
            if state.waiters[user]?.isEmpty == true { state.waiters[user] = nil }
            state.waiting -= 1
            return waiter.continuation
        }
        continuation?.resume()
    }
}
