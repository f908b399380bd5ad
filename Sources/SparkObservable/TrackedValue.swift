public import Observation
import SparkLock

/// A thread-safe value whose reads are tracked by running monitors and whose changes re-run
/// them. The building block of the SDK's observable models and of ``StateFlow``.
///
/// ```swift
/// let unread = TrackedValue(0, label: "Chat.unread")
/// unread.value += 1          // any thread
/// ```
///
/// With `observable: true` the value is also visible to Swift's `withObservationTracking` (its
/// `onChange` fires after the new value is stored). That bridge roughly doubles the cost of a
/// write and adds two thirds to a read (measured by `spark-bench`), so it is opt-in: the SDK
/// turns it on for app-facing state such as ``StateFlow``, not for every internal value.
public final class TrackedValue<Value: Sendable>: Sendable, Observable {
    private let storage: Locked<Value>
    private let isEqual: (@Sendable (Value, Value) -> Bool)?
    private let registrar: ObservationRegistrar
    /// Checked before touching `registrar`, so unbridged values pay for one load of a Bool.
    private let bridged: Bool
    /// Made once: a key path into a generic class is instantiated anew on every use otherwise
    /// (about 0.9 µs here). `nonisolated(unsafe)`: a key path is immutable.
    nonisolated(unsafe) private let valueKeyPath: KeyPath<TrackedValue<Value>, Value> = \.value
    /// The node monitors depend on.
    public let node: DependencyNode

    /// A tracked value; every assignment counts as a change.
    public init(_ value: Value, label: String = "TrackedValue", observable: Bool = false) {
        storage = Locked(value)
        isEqual = nil
        registrar = ObservationRegistrar()
        bridged = observable
        node = DependencyNode(label: label)
    }

    /// A tracked value; assigning an equal value is not a change.
    public init(_ value: Value, label: String = "TrackedValue", observable: Bool = false) where Value: Equatable {
        storage = Locked(value)
        isEqual = { $0 == $1 }
        registrar = ObservationRegistrar()
        bridged = observable
        node = DependencyNode(label: label)
    }

    /// The value. Reading it inside a monitor's block makes the monitor depend on it; setting it
    /// re-runs those monitors.
    public var value: Value {
        get {
            node.didRead()
            if bridged { registrar.access(self, keyPath: valueKeyPath) }
            return storage.withLock { $0 }
        }
        set { set(newValue) }
    }

    private func didChange() {
        node.didChange()
        if bridged {
            registrar.willSet(self, keyPath: valueKeyPath)
            registrar.didSet(self, keyPath: valueKeyPath)
        }
    }

    /// Reads the value without recording a dependency.
    public var untrackedValue: Value { storage.withLock { $0 } }

    /// Stores `newValue`; returns whether it was a change (always, for non-Equatable values).
    @discardableResult
    public func set(_ newValue: Value) -> Bool {
        let changed = storage.withLock { value -> Bool in
            if let isEqual, isEqual(value, newValue) { return false }
            value = newValue
            return true
        }
        if changed { didChange() }
        return changed
    }

    /// Changes the value in place atomically (a read-modify-write no other writer can interleave
    /// with) and returns what `body` returns.
    @discardableResult
    public func update<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        let (result, changed) = try storage.withLock { value -> (R, Bool) in
            let before = value
            let result = try body(&value)
            let changed = isEqual.map { !$0(before, value) } ?? true
            return (result, changed)
        }
        if changed { didChange() }
        return result
    }
}

/// A stored property whose reads are tracked and whose changes re-run the monitors that read it.
///
/// ```swift
/// // @unchecked Sendable: the wrappers' storage is never reassigned (their setters are
/// // nonmutating), but the compiler sees each wrapper's `var`.
/// final class ChatModel: @unchecked Sendable {
///     @Tracked var subject = ""
///     @Tracked var unreadCount = 0
/// }
/// ```
///
/// A `Sendable` class that prefers not to say `@unchecked` stores `let` ``TrackedValue``s
/// instead and exposes computed properties.
@propertyWrapper
public struct Tracked<Value: Sendable>: Sendable {
    /// The tracked storage, for passing around or reading without tracking.
    public let projectedValue: TrackedValue<Value>

    /// Wraps an initial value; every assignment is a change.
    public init(wrappedValue: Value) { projectedValue = TrackedValue(wrappedValue, label: "@Tracked") }

    /// Wraps an initial value; assigning an equal value is not a change.
    public init(wrappedValue: Value) where Value: Equatable {
        projectedValue = TrackedValue(wrappedValue, label: "@Tracked")
    }

    /// The value, tracked on read.
    public var wrappedValue: Value {
        get { projectedValue.value }
        nonmutating set { projectedValue.value = newValue }
    }
}
