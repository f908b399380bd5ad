import SparkLock

/// The mailbox long-polls waiting in this process, woken per user: a post wakes the waiters of
/// the users it reached and nobody else, so no waiter learns of another user's activity (a
/// domain-wide counter would tell every client when anyone posts).
///
/// Take a ``Ticket`` before reading the mailbox and wait with it: an entry routed after the
/// ticket was taken wakes the wait at once, even if it came before the wait began.
public final class MailboxWaiters: Sendable {
    /// Where one user's mailbox stood when a reader looked.
    public struct Ticket: Sendable {
        let user: String
        let generation: UInt64
        let everyone: UInt64
    }

    private struct State {
        var clock: UInt64 = 0
        var everyone: UInt64 = 0
        var generations: [String: UInt64] = [:]
        var waiters: [String: [UInt64: CheckedContinuation<Void, Never>]] = [:]
        var waiting = 0
    }

    private let state = Locked(State())

    /// No waiters yet.
    public init() {}

    /// The long-polls waiting now.
    public var waiting: Int { state.withLock { $0.waiting } }

    /// A ticket for `user`'s mailbox as it is now.
    public func ticket(for user: String) -> Ticket {
        state.withLock { Ticket(user: user, generation: $0.generations[user] ?? 0, everyone: $0.everyone) }
    }

    /// Entries reached these users' mailboxes: wakes their waiters.
    public func notify(_ users: some Sequence<String>) {
        var woken: [CheckedContinuation<Void, Never>] = []
        state.withLock { state in
            for user in users {
                state.clock += 1
                state.generations[user] = state.clock
                if let waiters = state.waiters.removeValue(forKey: user) { woken.append(contentsOf: waiters.values) }
            }
            state.waiting -= woken.count
        }
        for waiter in woken { waiter.resume() }
    }

    /// Something changed that this process cannot attribute (another process wrote the
    /// embedded file): every waiter looks again.
    public func notifyEveryone() {
        let woken = state.withLock { state in
            state.everyone += 1
            let all = state.waiters.values.flatMap(\.values)
            state.waiters = [:]
            state.waiting = 0
            return all
        }
        for waiter in woken { waiter.resume() }
    }

    /// Returns when the ticket's user gets an entry after the ticket was taken, after `timeout`,
    /// or when the task is cancelled.
    public func wait(_ ticket: Ticket, timeout: Duration) async {
        let id = state.withLock { state -> UInt64 in
            state.clock += 1
            return state.clock
        }
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            self?.resume(ticket.user, id)
        }
        defer { timer.cancel() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if (state.generations[ticket.user] ?? 0) != ticket.generation || state.everyone != ticket.everyone
                        || Task.isCancelled
                    {
                        return true
                    }
                    state.waiters[ticket.user, default: [:]][id] = continuation
                    state.waiting += 1
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            resume(ticket.user, id)
        }
    }

    private func resume(_ user: String, _ id: UInt64) {
        let continuation = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let continuation = state.waiters[user]?.removeValue(forKey: id) else { return nil }
            if state.waiters[user]?.isEmpty == true { state.waiters[user] = nil }
            state.waiting -= 1
            return continuation
        }
        continuation?.resume()
    }
}
