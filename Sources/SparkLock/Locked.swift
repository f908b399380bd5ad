import Foundation

/// A value behind a `pthread_mutex_t`: every lock of the project's.
///
/// Used instead of `Synchronization.Mutex` because ThreadSanitizer sees pthread locks (it
/// intercepts them) but not `Mutex`, whose futex code is compiled into the toolchain without
/// instrumentation; the suite runs under `--sanitize=thread` in CI. Uncontended cost is the same
/// order (one atomic each way).
public final class Locked<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched while `mutex` is held. It lives behind a
    // pointer, not in a stored `var`, so that access needs no dynamic exclusivity check (which
    // cost a thread-local lookup per read); the lock provides the exclusivity.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let value: UnsafeMutablePointer<Value>

    /// A lock around `value`.
    public init(_ value: Value) {
        self.value = UnsafeMutablePointer<Value>.allocate(capacity: 1)
        self.value.initialize(to: value)
        mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        value.deinitialize(count: 1)
        value.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value while holding the lock.
    @inline(__always)
    public func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value.pointee)
    }
}
