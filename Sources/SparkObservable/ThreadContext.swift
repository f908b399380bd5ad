internal import CSparkThreadLocal
import Foundation

/// Per-thread state of the tracker: the monitor run that is recording reads (if any), the
/// transaction depth with its deferred changes, and how this thread holds the transaction lock.
///
/// Monitor blocks and transactions are synchronous closures, so a thread-local (not a task-local)
/// is exact: a block's reads happen on the thread that runs it. Reads outside any monitor cost
/// one `pthread_getspecific` and a nil check.
final class ThreadContext {
    /// The innermost running monitor's recorder; nested monitors push their own and restore this.
    var recorder: DependencyRecorder?
    /// How deep this thread is in `ObservableTracker.transaction`.
    var transactionDepth = 0
    /// Nodes changed inside the current transaction, notified when the outermost one ends.
    var pendingChanges: [DependencyNode] = []
    /// Whether this thread holds the transaction lock exclusively (inside a transaction).
    var holdsExclusive = false
    /// How many nested monitor runs on this thread hold the transaction lock shared.
    var sharedDepth = 0
    /// The monitors running on this thread, innermost last (for self-trigger detection).
    var runningMonitors: [ObjectIdentifier] = []

    /// Releases a thread's context when the thread exits; the context itself is found through
    /// the C thread-local, which has no destructor of its own.
    private static let exitKey: pthread_key_t = {
        var key = pthread_key_t()
        let result = pthread_key_create(&key) { pointer in
            guard let pointer else { return }
            spark_observation_context_set(nil)
            Unmanaged<ThreadContext>.fromOpaque(pointer).release()
        }
        precondition(result == 0, "pthread_key_create failed: \(result)")
        return key
    }()

    /// This thread's context, if it has one (one thread-local load, no allocation).
    @inline(__always)
    static var currentIfPresent: ThreadContext? {
        guard let pointer = spark_observation_context_get() else { return nil }
        return Unmanaged<ThreadContext>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// The running monitor's recorder on this thread, without retaining the context.
    @inline(__always)
    static var currentRecorder: DependencyRecorder? {
        guard let pointer = spark_observation_context_get() else { return nil }
        return Unmanaged<ThreadContext>.fromOpaque(pointer)._withUnsafeGuaranteedRef { $0.recorder }
    }

    /// This thread's context, created on first use and released when the thread exits.
    static var current: ThreadContext {
        if let context = currentIfPresent { return context }
        let context = ThreadContext()
        let pointer = Unmanaged.passRetained(context).toOpaque()
        pthread_setspecific(exitKey, pointer)
        spark_observation_context_set(pointer)
        return context
    }
}

/// The transaction lock: transactions hold it exclusively, monitor runs hold it shared, so a
/// monitor never runs while another thread's transaction is half applied. Writer-preferring,
/// so a stream of monitor runs cannot starve a transaction; never taken recursively (the
/// thread context counts nesting).
enum TransactionLock {
    // nonisolated(unsafe): the pointer is written once here and the lock it points to is a
    // thread-safe pthread object.
    nonisolated(unsafe) private static let lock: UnsafeMutablePointer<pthread_rwlock_t> = {
        let lock = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)
        var attributes = pthread_rwlockattr_t()
        pthread_rwlockattr_init(&attributes)
        pthread_rwlockattr_setkind_np(&attributes, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP))
        pthread_rwlock_init(lock, &attributes)
        pthread_rwlockattr_destroy(&attributes)
        return lock
    }()

    /// Runs `body` holding the lock shared, unless this thread already holds it.
    static func shared<T>(_ context: ThreadContext, _ body: () throws -> T) rethrows -> T {
        if context.holdsExclusive || context.sharedDepth > 0 {
            context.sharedDepth += 1
            defer { context.sharedDepth -= 1 }
            return try body()
        }
        pthread_rwlock_rdlock(lock)
        context.sharedDepth += 1
        defer {
            context.sharedDepth -= 1
            pthread_rwlock_unlock(lock)
        }
        return try body()
    }

    /// Runs `body` holding the lock exclusively, unless this thread already holds it in some way
    /// (a transaction inside a monitor's block, or a nested transaction): then it runs as is.
    static func exclusive<T>(_ context: ThreadContext, _ body: () throws -> T) rethrows -> T {
        if context.holdsExclusive || context.sharedDepth > 0 { return try body() }
        pthread_rwlock_wrlock(lock)
        context.holdsExclusive = true
        defer {
            context.holdsExclusive = false
            pthread_rwlock_unlock(lock)
        }
        return try body()
    }
}
