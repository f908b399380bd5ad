import Foundation
import SparkLock

/// Threads of a store's own that run its transactions, so that no transaction blocks a thread
/// of Swift's cooperative pool: that pool has as many threads as the machine has cores, and a
/// slow query on one of them would stall every other request and every long-poll wake-up of
/// the process. A PostgreSQL store has as many threads as it has pooled connections, so its
/// concurrency is its own and not the core count; transactions wait their turn in the order they
/// came. The SQLite store has four, whose writes commit in groups (`DatabaseQueue.groupWrite`).
package final class TransactionThreads: Sendable {
    /// The transactions waiting for a thread.
    private struct Work {
        var waiting: [@Sendable () -> Void] = []
        var next = 0
    }

    private let work = Locked(Work())
    /// Counts the waiting transactions (and, once closed, wakes every thread to end).
    private let ready = DispatchSemaphore(value: 0)
    /// How many threads run transactions (none: each runs on its caller's thread).
    package let count: Int

    /// Starts `count` threads named `name`; with none, `run` runs each transaction on the
    /// caller's thread.
    package init(count: Int, name: String) {
        self.count = max(0, count)
        for index in 0..<self.count {
            let thread = Thread { [work, ready] in Self.serve(work, ready) }
            thread.name = "\(name) \(index + 1)"
            thread.start()
        }
    }

    /// Ends the threads once the transactions already waiting have run.
    deinit {
        for _ in 0..<count { ready.signal() }
    }

    /// Marks the calling thread as one that may block in a transaction: a thread of
    /// spark-domaind's request executor, which is sized like the store's pool for that. `run`
    /// then runs transactions right there, sparing each the hand-over to a store thread and back
    /// (a fifth of the daemon's request rate).
    package static func allowBlocking() { Thread.current.threadDictionary[mayBlock] = true }

    private static let mayBlock = "spark.transactions-may-block"

    /// Whether the calling thread may block (``allowBlocking()``).
    package static func mayBlockHere() -> Bool { Thread.current.threadDictionary[mayBlock] != nil }

    /// Runs `body` on one of the threads and waits for it without holding a thread of the
    /// caller's (or on the caller's, if it may block: ``allowBlocking()``).
    package func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        if count == 0 || Self.mayBlockHere() { return try body() }
        return try await withCheckedThrowingContinuation { continuation in
            work.withLock { $0.waiting.append { continuation.resume(with: Result { try body() }) } }
            ready.signal()
        }
    }

    private static func serve(_ work: Locked<Work>, _ ready: DispatchSemaphore) {
        while true {
            ready.wait()
            let job = work.withLock { work -> (@Sendable () -> Void)? in
                guard work.next < work.waiting.count else { return nil }
                defer {
                    work.next += 1
                    // Drop what ran once it is most of the array (amortised O(1) a job).
                    if work.next > 64, work.next * 2 > work.waiting.count {
                        work.waiting.removeFirst(work.next)
                        work.next = 0
                    }
                }
                return work.waiting[work.next]
            }
            guard let job else { return }  // closed, and nothing waits
            job()
        }
    }
}
