public import Dispatch
import Foundation

/// Where an ``ObservableMonitor`` runs its block. A monitor never runs concurrently with itself,
/// whatever its executor.
public struct MonitorExecutor: Sendable {
    enum Kind: Sendable {
        case main
        case immediate
        case queue(DispatchQueue, DispatchSpecificKey<UInt8>)
        case custom(@Sendable (@escaping @Sendable () -> Void) -> Void)
    }

    let kind: Kind

    /// The main actor (the main dispatch queue). Several changes in one main-actor turn re-run a
    /// dependent monitor once, after the turn. This is the default.
    public static let main = MonitorExecutor(kind: .main)

    /// Runs the block synchronously on the thread that made the change (or activated the
    /// monitor), like Swift Observation's `onChange`. Changes made outside a transaction re-run
    /// the monitor once each.
    public static let immediate = MonitorExecutor(kind: .immediate)

    /// A serial dispatch queue of the app's.
    public static func queue(_ queue: DispatchQueue) -> MonitorExecutor {
        let key = DispatchSpecificKey<UInt8>()
        queue.setSpecific(key: key, value: 1)
        return MonitorExecutor(kind: .queue(queue, key))
    }

    /// Any scheduler: `enqueue` must run each job it is given, one at a time.
    public static func custom(_ enqueue: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void) -> MonitorExecutor {
        MonitorExecutor(kind: .custom(enqueue))
    }

    /// Marks the main queue so that running on it can be recognised. `Thread.isMainThread` is not
    /// enough: when a process's `main` is `async` (as under `swift test`), the main queue, and so
    /// the main actor, may be drained by another thread.
    private static let mainQueueKey: DispatchSpecificKey<UInt8> = {
        let key = DispatchSpecificKey<UInt8>()
        DispatchQueue.main.setSpecific(key: key, value: 1)
        return key
    }()

    /// Whether the calling thread is already this executor's, so a job may run inline.
    var isCurrent: Bool {
        switch kind {
        case .main: DispatchQueue.getSpecific(key: Self.mainQueueKey) != nil || Thread.isMainThread
        case .immediate: true
        case .queue(_, let key): DispatchQueue.getSpecific(key: key) != nil
        case .custom: false
        }
    }

    /// Runs `job` on this executor, inline for `.immediate`.
    func execute(_ job: @escaping @Sendable () -> Void) {
        switch kind {
        case .main: DispatchQueue.main.async(execute: job)
        case .immediate: job()
        case .queue(let queue, _): queue.async(execute: job)
        case .custom(let enqueue): enqueue(job)
        }
    }

    /// Runs `job` on this executor after `delay`.
    func execute(after delay: Duration, _ job: @escaping @Sendable () -> Void) {
        let nanoseconds = Int(delay.components.seconds) * 1_000_000_000 + Int(delay.components.attoseconds / 1_000_000_000)
        let deadline = DispatchTime.now() + .nanoseconds(nanoseconds)
        switch kind {
        case .main: DispatchQueue.main.asyncAfter(deadline: deadline, execute: job)
        case .queue(let queue, _): queue.asyncAfter(deadline: deadline, execute: job)
        case .immediate, .custom:
            DispatchQueue.global().asyncAfter(deadline: deadline) { execute(job) }
        }
    }
}
