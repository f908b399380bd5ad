import Foundation
import SparkDomainEngine
import SparkLock

/// The threads spark-domaind's requests run on: a task executor (SE-0417) with threads of its
/// own, which the server gives each request's task as its preference. The engine's store calls
/// are synchronous (a SQLite or PostgreSQL transaction blocks its thread until it commits);
/// on Swift's cooperative pool, which has a thread per core, two slow queries on this machine
/// would stall every other request and every long-poll wake-up of the instance. Here a blocking
/// call holds one of this pool's threads, sized like the store's pool of connections, so an
/// instance's concurrency is its store's, not its core count; a request waiting on something
/// (a long-poll) holds no thread at all.
package final class RequestExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    /// Guarded by `condition`.
    private var jobs: [UnownedJob] = []
    private var head = 0
    private var stopping = false
    private var threads: [Thread] = []

    /// Starts `count` threads named `name`.
    package init(threads count: Int, name: String = "spark-domaind.request") {
        precondition(count > 0, "an executor needs a thread")
        for index in 0..<count {
            // Each thread holds the executor until it ends (after `shutdown`).
            let thread = Thread { self.work() }
            thread.name = "\(name)-\(index)"
            thread.stackSize = 1 << 20
            threads.append(thread)
        }
        for thread in threads { thread.start() }
    }

    /// How many threads run the jobs.
    package var threadCount: Int { threads.count }

    /// Queues a job; one of the threads runs it.
    package func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        condition.lock()
        jobs.append(unowned)
        condition.signal()
        condition.unlock()
    }

    private func work() {
        // A request's transactions run on its own thread: it may block (see the type's summary).
        TransactionThreads.allowBlocking()
        while let job = next() { job.runSynchronously(on: asUnownedTaskExecutor()) }
    }

    /// The next job, waiting for one; nil once stopped and drained.
    private func next() -> UnownedJob? {
        condition.lock()
        defer { condition.unlock() }
        while head == jobs.count {
            if stopping { return nil }
            condition.wait()
        }
        let job = jobs[head]
        head += 1
        // Compact now and then, so the queue does not grow with every job ever run.
        if head > 1024, head * 2 > jobs.count {
            jobs.removeFirst(head)
            head = 0
        }
        return job
    }

    /// Lets the threads end once the queue is empty (a server that stopped enqueues nothing more).
    package func shutdown() {
        condition.lock()
        stopping = true
        condition.broadcast()
        condition.unlock()
    }
}
