public import Foundation
import SparkLock
import Synchronization

/// A thread-safe counter for monitor blocks.
public final class Counter: Sendable {
    private let count = Atomic<Int>(0)
    /// Adds one and returns the new count.
    @discardableResult public func increment() -> Int { count.add(1, ordering: .relaxed).newValue }
    /// The count.
    public var value: Int { count.load(ordering: .relaxed) }
    /// A counter at zero.
    public init() {}
}

/// A thread-safe box for what a monitor block saw.
public final class Box<Value: Sendable>: Sendable {
    private let storage: Locked<Value>
    /// A box holding `value`.
    public init(_ value: Value) { storage = Locked(value) }
    /// The value.
    public var value: Value {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }
    /// Changes the value under the lock.
    public func update(_ body: (inout Value) -> Void) { storage.withLock { body(&$0) } }
}

/// How long a test waits, in seconds, for what should come at once: `seconds`, or less where
/// `SPARK_TEST_PATIENCE` caps it. The mutation tests (`scripts/mutants/run.py`) cap it at 10 s: a
/// mutant that stops what a test waits for is then killed in seconds rather than a minute, and
/// what these tests wait for comes in milliseconds when the code is right.
public func patience(_ seconds: Double) -> Double { min(seconds, patienceCap) }

private let patienceCap = ProcessInfo.processInfo.environment["SPARK_TEST_PATIENCE"].flatMap(Double.init) ?? .infinity

/// Polls `condition` until it holds or `seconds` of polling pass (``patience(_:)`` of them); returns whether it held. A
/// wait, not a timing assertion: the generous limit only bounds a test that would otherwise hang.
///
/// Only time this poll could have run counts against the limit. Tests run in parallel on two
/// cores, and a CPU-bound neighbour (the Wycheproof suites, the MLS group simulation, a Python
/// peer starting) can hold both of Swift's cooperative threads for a long while; the work a test
/// waits for is starved as well, so a stall longer than a few polling steps is not charged (CI
/// once saw a one-minute stall end with every wait of the time failing together).
public func eventually(seconds: Double = 60, _ condition: @Sendable () -> Bool) async -> Bool {
    var budget = patience(seconds)
    var last = Date()
    while budget > 0 {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(1))
        let now = Date()
        budget -= min(now.timeIntervalSince(last), 0.25)
        last = now
    }
    return condition()
}

/// ``eventually(seconds:_:)`` for a condition that has to await (an actor's state).
public func eventuallyAwaiting(seconds: Double = 60, _ condition: @Sendable () async -> Bool) async -> Bool {
    var budget = patience(seconds)
    var last = Date()
    while budget > 0 {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
        let now = Date()
        budget -= min(now.timeIntervalSince(last), 0.25)
        last = now
    }
    return await condition()
}

/// Waits until `queue` has run everything submitted before the call.
public func drain(_ queue: DispatchQueue) async {
    await withCheckedContinuation { continuation in queue.async { continuation.resume() } }
}
