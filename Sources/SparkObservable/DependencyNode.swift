import SparkLock
import Synchronization

/// One observable thing a monitor can depend on: a tracked property of one object. It counts its
/// changes and knows the monitors that read it on their last run.
///
/// Monitors hold their nodes strongly; nodes hold monitors weakly (by identifier, removed when a
/// monitor stops depending on them or goes away), so a node lives exactly as long as its owner
/// or a monitor needs it.
public final class DependencyNode: Sendable {
    private struct Observers {
        var monitors: [ObjectIdentifier: WeakMonitor] = [:]
    }

    private let observers = Locked(Observers())
    /// The number of entries in `observers`, readable without the lock: most changes have no
    /// observer, and then notifying costs one atomic load.
    private let observerCount = Atomic<Int>(0)
    private let changeCount = Atomic<UInt64>(0)
    /// A label for diagnostics, such as `ChatList.chats`.
    public let label: String

    /// Creates a node; `label` appears in loop reports.
    public init(label: String) { self.label = label }

    /// The number of changes so far; a monitor compares it before and after its run so that a
    /// change made while it was still registering is not lost.
    var version: UInt64 { changeCount.load(ordering: .acquiring) }

    /// Records a read by the running monitor on this thread, if any.
    @inline(__always)
    public func didRead() {
        guard let recorder = ThreadContext.currentRecorder else { return }
        recorder.record(self)
    }

    /// Announces a change: monitors that read this node run again (after the transaction, if one
    /// is open on this thread).
    public func didChange() {
        changeCount.add(1, ordering: .releasing)
        if let context = ThreadContext.currentIfPresent, context.transactionDepth > 0 {
            context.pendingChanges.append(self)
            return
        }
        notifyObservers()
    }

    /// Whether any monitor currently depends on this node.
    public var hasObservers: Bool { observers.withLock { !$0.monitors.isEmpty } }

    func notifyObservers() {
        for monitor in currentObservers() { monitor.invalidate(by: self) }
    }

    private func currentObservers() -> [ObservableMonitor] {
        guard observerCount.load(ordering: .acquiring) > 0 else { return [] }
        return observers.withLock { observers in observers.monitors.values.compactMap(\.monitor) }
    }

    /// Invalidates every monitor that depends on any of `nodes`, each once.
    static func notifyObservers(of nodes: [DependencyNode]) {
        var seenNodes = Set<ObjectIdentifier>()
        var seenMonitors = Set<ObjectIdentifier>()
        var work: [(ObservableMonitor, DependencyNode)] = []
        for node in nodes where seenNodes.insert(ObjectIdentifier(node)).inserted {
            for monitor in node.currentObservers() where seenMonitors.insert(ObjectIdentifier(monitor)).inserted {
                work.append((monitor, node))
            }
        }
        for (monitor, node) in work { monitor.invalidate(by: node) }
    }

    func add(_ monitor: ObservableMonitor) {
        observers.withLock { observers in
            observers.monitors[ObjectIdentifier(monitor)] = WeakMonitor(monitor: monitor)
            observerCount.store(observers.monitors.count, ordering: .releasing)
        }
    }

    func remove(_ monitorID: ObjectIdentifier) {
        observers.withLock { observers in
            _ = observers.monitors.removeValue(forKey: monitorID)
            observerCount.store(observers.monitors.count, ordering: .releasing)
        }
    }
}

struct WeakMonitor: Sendable {
    weak var monitor: ObservableMonitor?
}

/// Collects the nodes one monitor run reads, in order, without duplicates.
final class DependencyRecorder {
    private(set) var nodes: [DependencyNode] = []
    private(set) var versions: [UInt64] = []
    private var seen: Set<ObjectIdentifier> = []

    func record(_ node: DependencyNode) {
        // Most blocks read a handful of properties, often the same one repeatedly.
        if let last = nodes.last, last === node { return }
        guard seen.insert(ObjectIdentifier(node)).inserted else { return }
        nodes.append(node)
        versions.append(node.version)
    }
}
