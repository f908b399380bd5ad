import Foundation
import SparkLock

/// The entry points of Spark's observation model: getters report reads, setters report changes,
/// and ``ObservableMonitor``s re-run when something they read changes.
///
/// Types built on ``TrackedValue``, the ``Tracked`` property wrapper or ``StateFlow`` call these
/// for you. A class with its own storage calls them from its accessors:
///
/// ```swift
/// final class Contact: @unchecked Sendable {
///     private let lock = NSLock()
///     private var _name = ""
///     var name: String {
///         get {
///             ObservableTracker.getterCalled(for: self, propertyName: "name")
///             return lock.withLock { _name }
///         }
///         set {
///             lock.withLock { _name = newValue }
///             ObservableTracker.setterCalled(for: self, propertyName: "name")
///         }
///     }
/// }
/// ```
public enum ObservableTracker {
    /// Records that the running monitor (if any, on this thread) read `propertyName` of `object`.
    public static func getterCalled(for object: AnyObject, propertyName: String) {
        guard let recorder = ThreadContext.currentRecorder else { return }
        recorder.record(PropertyRegistry.node(for: object, propertyName: propertyName))
    }

    /// Announces that `propertyName` of `object` changed (call it after storing the new value).
    public static func setterCalled(for object: AnyObject, propertyName: String) {
        PropertyRegistry.existingNode(for: object, propertyName: propertyName)?.didChange()
    }

    /// Runs `body` as one transaction: monitors that depend on anything it changes run once,
    /// after it returns, and never while it is half applied (monitor runs and transactions
    /// exclude each other). Transactions nest; the outermost one notifies. Keep them short: a
    /// monitor waiting to run waits for the transaction.
    public static func transaction<T>(_ body: () throws -> T) rethrows -> T {
        let context = ThreadContext.current
        let pending = try TransactionLock.exclusive(context) { () throws -> (T, [DependencyNode]) in
            context.transactionDepth += 1
            defer { context.transactionDepth -= 1 }
            let value = try body()
            guard context.transactionDepth == 1 else { return (value, []) }
            defer { context.pendingChanges = [] }
            return (value, context.pendingChanges)
        }
        // Notify after the lock is released, so that immediate monitors can run, and each
        // dependent monitor once, however many of its dependencies changed.
        DependencyNode.notifyObservers(of: pending.1)
        return pending.0
    }

    /// Whether a monitor is recording reads on this thread.
    public static var isTracking: Bool { ThreadContext.currentIfPresent?.recorder != nil }

    /// Runs `body` without recording its reads into the running monitor.
    public static func withoutTracking<T>(_ body: () throws -> T) rethrows -> T {
        guard let context = ThreadContext.currentIfPresent, let recorder = context.recorder else { return try body() }
        context.recorder = nil
        defer { context.recorder = recorder }
        return try body()
    }

    /// Where diagnostics (a monitor that keeps re-triggering itself) go. The default writes one
    /// line to standard error.
    public static var diagnosticHandler: @Sendable (String) -> Void {
        get { handler.withLock { $0 } }
        set { handler.withLock { $0 = newValue } }
    }

    private static let handler = Locked<@Sendable (String) -> Void>({ message in
        FileHandle.standardError.write(Data("SparkObservable: \(message)\n".utf8))
    })

    static func report(_ message: String) { diagnosticHandler(message) }
}

/// The nodes of properties reported by name through ``ObservableTracker``: one per live
/// (object, property) pair, created on the first tracked read.
enum PropertyRegistry {
    private struct Key: Hashable {
        let object: ObjectIdentifier
        let property: String
    }

    private final class Entry: Sendable {
        let node: DependencyNode
        // An identifier is reused after its object dies; the weak reference tells them apart.
        nonisolated(unsafe) weak var object: AnyObject?
        init(node: DependencyNode, object: AnyObject) {
            self.node = node
            self.object = object
        }
    }

    private struct Table {
        var entries: [Key: Entry] = [:]
        var purgeAt = 1024
    }

    private static let table = Locked(Table())

    static func node(for object: AnyObject, propertyName: String) -> DependencyNode {
        let key = Key(object: ObjectIdentifier(object), property: propertyName)
        return table.withLock { table in
            if let entry = table.entries[key], entry.object === object { return entry.node }
            if table.entries.count >= table.purgeAt {
                table.entries = table.entries.filter { $0.value.object != nil }
                table.purgeAt = max(1024, table.entries.count * 2)
            }
            let node = DependencyNode(label: "\(type(of: object)).\(propertyName)")
            table.entries[key] = Entry(node: node, object: object)
            return node
        }
    }

    static func existingNode(for object: AnyObject, propertyName: String) -> DependencyNode? {
        let key = Key(object: ObjectIdentifier(object), property: propertyName)
        return table.withLock { table in
            guard let entry = table.entries[key], entry.object === object else { return nil }
            return entry.node
        }
    }
}
