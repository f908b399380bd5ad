import Foundation
import SparkDomain
import SparkLock

/// Group commit: writes that arrive while the store is busy are coalesced into one transaction,
/// each in a savepoint of its own, so that a burst of posts costs one commit (one `fsync` on
/// SQLite, one `COMMIT` round on PostgreSQL) instead of one each.
///
/// - Transactions run in lanes, as many as the store has connections (one for SQLite, which has
///   one writer), where the store runs its transactions (`DomainStore.write`: PostgreSQL's on its
///   connections' threads). A write that finds a lane free goes at once, alone, in its caller's
///   task; writes that find every lane busy queue, and the next lane to finish takes them
///   together. So a transaction held in the database (a lock wait, a slow disk) holds up only
///   the writes in it, and an idle domain pays nothing for the batching.
/// - A write's answer is given only after the transaction that holds it committed: a caller never
///   holds a receipt for what a failed commit took back.
/// - A write the engine refuses (it throws a `DomainError`: not a member, a stale epoch, over a
///   limit) is rolled back to its savepoint alone and answered with its refusal; the others in
///   the transaction go on.
/// - Any other failure (the store's) ends the transaction; when it held more than one write, each
///   is then tried alone, so that one write's failure is never another's.
/// - The transaction takes the union of the writes' locks (`WriteScope.locking`, sorted, so two
///   transactions never wait on each other).
///
/// Announcements a write made before its savepoint was rolled back may still wake a long-poll,
/// which then reads nothing new: a spurious wake, never a lost one.
package actor GroupCommit {
    /// One write waiting for its transaction.
    private struct Job: Sendable {
        let locks: [String]
        let body: @Sendable (any DomainStatements) throws -> any Sendable
        /// Where the answer goes; nil for a write that runs its transaction in its own task.
        let answer: CheckedContinuation<any Sendable, any Error>?
        /// Whether it was answered (once only).
        let answered = Locked(false)
    }

    private let store: any DomainStore
    private var queue: [Job] = []
    /// Lanes running, and those started that have not taken their batch yet.
    private var lanes = 0
    private var taking = 0
    /// How many transactions may run at once: the store's connections (one for SQLite, which
    /// has one writer), so that a transaction held in the database (a lock wait, a slow disk)
    /// holds up only the writes in it.
    package let laneLimit: Int
    private var held = false
    /// The most writes one transaction holds.
    package let batchLimit: Int
    /// Runs inside each transaction after the writes and before its commit (tests make it throw,
    /// as a commit that fails would).
    private let beforeCommit: @Sendable (any DomainStatements) throws -> Void
    /// How many transactions held how many writes (the tests read them).
    package private(set) var transactions = 0
    package private(set) var writes = 0

    package init(
        store: any DomainStore, batchLimit: Int = 64,
        beforeCommit: @escaping @Sendable (any DomainStatements) throws -> Void = { _ in }
    ) {
        precondition(batchLimit > 0, "a transaction holds at least one write")
        self.store = store
        self.batchLimit = batchLimit
        laneLimit = max(1, store.writeLanes)
        self.beforeCommit = beforeCommit
    }

    /// Runs `body` under `locks` in the next transaction, beside the writes that arrived with it;
    /// returns once that transaction committed.
    package func write<T: Sendable>(locks: [String], _ body: @escaping @Sendable (any DomainStatements) throws -> T)
        async throws -> T
    {
        let job = { (answer: CheckedContinuation<any Sendable, any Error>?) in
            Job(locks: locks, body: { db in try body(db) }, answer: answer)
        }
        let value: any Sendable
        if lanes < laneLimit, queue.isEmpty, !held {
            // A lane is free and no one waits: this write goes at once, in its own task, with no
            // hand-over; what arrives meanwhile queues for the lanes.
            lanes += 1
            let outcomes = await commit([job(nil)])
            transactions += 1
            writes += 1
            lanes -= 1
            startDraining()
            value = try outcomes[0].get()
        } else {
            value = try await withCheckedThrowingContinuation { answer in
                queue.append(job(answer))
                startDraining()
            }
        }
        guard let typed = value as? T else { preconditionFailure("a write's answer is of its own type") }
        return typed
    }

    /// The writes waiting for a transaction.
    package var queued: Int { queue.count }

    /// Holds the writes that arrive from now on until ``release()`` (the transaction under way
    /// goes on): for tests that need writes to arrive together.
    package func hold() { held = true }

    /// Ends a ``hold()``: what queued meanwhile goes, a transaction at a time.
    package func release() {
        held = false
        startDraining()
    }

    /// Starts a lane for what is queued while one is free.
    private func startDraining() {
        while lanes < laneLimit, !held, queue.count > taking {
            lanes += 1
            taking += 1
            Task { await self.drain() }
        }
    }

    /// One lane: commits what is queued, a transaction at a time, until nothing is.
    private func drain() async {
        taking -= 1
        while !queue.isEmpty, !held {
            // Lanes started beside this one and about to take share the queue with it, so that
            // writes that found lanes free each go at once; a lane that finds none about to take
            // takes everything queued (up to the limit): a group commit.
            let share = (queue.count + taking) / (taking + 1)
            let batch = Array(queue.prefix(min(batchLimit, max(1, share))))
            queue.removeFirst(batch.count)
            let outcomes = await commit(batch)
            transactions += 1
            writes += batch.count
            // After the commit, and only then: each write's answer.
            Self.answer(batch, outcomes)
        }
        lanes -= 1
    }

    /// Answers each write of `jobs` not answered yet with its outcome.
    private static func answer(_ jobs: [Job], _ outcomes: [Result<any Sendable, any Error>]) {
        for (job, outcome) in zip(jobs, outcomes) {
            let first = job.answered.withLock { answered in
                defer { answered = true }
                return !answered
            }
            if first { job.answer?.resume(with: outcome) }
        }
    }

    /// The outcome of each write of `batch`, once their transaction ended.
    private func commit(_ batch: [Job]) async -> [Result<any Sendable, any Error>] {
        do {
            return try await transaction(batch)
        } catch {
            guard batch.count > 1 else { return [.failure(error)] }
            // The store failed the transaction: each write alone, so that it fails only its own.
            var outcomes: [Result<any Sendable, any Error>] = []
            for job in batch {
                do {
                    outcomes += try await transaction([job])
                } catch {
                    outcomes.append(.failure(error))
                }
            }
            return outcomes
        }
    }

    /// One transaction holding `batch`, each write in a savepoint.
    private func transaction(_ batch: [Job]) async throws -> [Result<any Sendable, any Error>] {
        let locks = Array(Set(batch.flatMap(\.locks))).sorted()
        let beforeCommit = self.beforeCommit
        let outcomes = try await store.write(.locking(locks)) { db -> [Outcome] in
            // Built again on each run: a store may run the body again after a serialization failure.
            var outcomes: [Outcome] = []
            for job in batch {
                try db.execute("SAVEPOINT group_commit")
                do {
                    let value = try job.body(db)
                    try db.execute("RELEASE SAVEPOINT group_commit")
                    outcomes.append(Outcome(value: value, refusal: nil))
                } catch let refusal as DomainError {
                    try db.execute("ROLLBACK TO SAVEPOINT group_commit")
                    try db.execute("RELEASE SAVEPOINT group_commit")
                    outcomes.append(Outcome(value: nil, refusal: refusal))
                }
            }
            try beforeCommit(db)
            return outcomes
        }
        return outcomes.map(\.result)
    }

    /// What one write came to inside the transaction.
    private struct Outcome: Sendable {
        let value: (any Sendable)?
        let refusal: DomainError?

        var result: Result<any Sendable, any Error> {
            if let refusal { return .failure(refusal) }
            return .success(value ?? ())
        }
    }
}
