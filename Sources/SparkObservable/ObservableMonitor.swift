import Foundation
import SparkLock

/// Runs a block, remembers exactly which tracked properties it read, and runs it again, once,
/// after any of them changes. Its dependencies are recomputed on every run, so a branch that is
/// no longer taken stops being tracked.
///
/// ```swift
/// let monitor = ObservableMonitor(activatedWithName: "title") { [weak self] in
///     guard let self else { return }
///     label = "\(chat.subject) (\(chat.unreadCount))"
/// }
/// ```
///
/// - The block runs on the monitor's ``MonitorExecutor`` (the main actor by default), never
///   concurrently with itself. Tracked values may be written from any thread.
/// - A monitor activated inside another monitor's block records its own reads, not the outer's.
/// - A block that keeps changing what it reads is stopped after ``selfTriggerLimit`` consecutive
///   self-caused runs and reported once through ``ObservableTracker/diagnosticHandler``.
/// - Releasing the monitor deactivates it. A block that captures the monitor's owner strongly
///   while the owner holds the monitor is a retain cycle: capture the owner `weak`.
public final class ObservableMonitor: Sendable {
    /// Consecutive runs, each triggered by the monitor's own writes, after which it stops
    /// re-running itself.
    public static let selfTriggerLimit = 16

    /// The name shown in diagnostics.
    public let name: String
    /// Where the block runs.
    public let executor: MonitorExecutor
    /// The shortest time between two runs; changes in between are coalesced into one later run.
    public let limitFrequency: Duration?

    private let block: @Sendable () -> Bool

    private struct State {
        var active = false
        var terminated = false
        var scheduled = false
        var running = false
        var rerunRequested = false
        var selfTriggered = false
        var selfTriggerStreak = 0
        var loopReported = false
        var lastRun: ContinuousClock.Instant?
        var dependencies: [DependencyNode] = []
        var runCount = 0
    }

    private let state = Locked(State())

    /// Creates an inactive monitor; call ``activate()`` to run it.
    ///
    /// - Parameters:
    ///   - executor: where the block runs; `.main` by default.
    ///   - limitFrequency: when set, runs are at least this far apart (Spark's `limitFrequency`).
    public init(
        name: String, executor: MonitorExecutor = .main, limitFrequency: Duration? = nil,
        block: @escaping @Sendable () -> Void
    ) {
        self.name = name
        self.executor = executor
        self.limitFrequency = limitFrequency
        self.block = {
            block()
            return false
        }
    }

    private init(
        name: String, executor: MonitorExecutor, limitFrequency: Duration?, terminatingBlock: @escaping @Sendable () -> Bool
    ) {
        self.name = name
        self.executor = executor
        self.limitFrequency = limitFrequency
        self.block = terminatingBlock
    }

    /// Creates a monitor and activates it at once.
    public convenience init(
        activatedWithName name: String, executor: MonitorExecutor = .main, limitFrequency: Duration? = nil,
        block: @escaping @Sendable () -> Void
    ) {
        self.init(name: name, executor: executor, limitFrequency: limitFrequency, block: block)
        activate()
    }

    /// Creates a monitor that runs until its block returns `true`, then deactivates for good
    /// (Spark's "wait until it is loaded").
    @_disfavoredOverload
    public convenience init(
        activatedWithName name: String, executor: MonitorExecutor = .main, limitFrequency: Duration? = nil,
        selfTerminatingBlock: @escaping @Sendable () -> Bool
    ) {
        self.init(name: name, executor: executor, limitFrequency: limitFrequency, terminatingBlock: selfTerminatingBlock)
        activate()
    }

    /// Creates a monitor on the main actor whose block is main-actor isolated.
    @MainActor
    public convenience init(mainActorName name: String, limitFrequency: Duration? = nil, block: @escaping @MainActor () -> Void) {
        self.init(name: name, executor: .main, limitFrequency: limitFrequency) {
            MainActor.assumeIsolated { block() }
        }
    }

    deinit {
        let dependencies = state.withLock { state in
            state.active = false
            return state.dependencies
        }
        let id = ObjectIdentifier(self)
        for node in dependencies { node.remove(id) }
    }

    /// Whether the monitor is active.
    public var isActive: Bool { state.withLock { $0.active } }

    /// How many times the block has run.
    public var runCount: Int { state.withLock { $0.runCount } }

    /// Activates the monitor and runs its block: at once when called on its executor, otherwise
    /// as the executor's next job. A self-terminated monitor stays inactive.
    public func activate() {
        let start = state.withLock { state -> Bool in
            guard !state.active, !state.terminated else { return false }
            state.active = true
            return true
        }
        guard start else { return }
        if executor.isCurrent {
            run()
        } else {
            schedule(after: nil)
        }
    }

    /// Stops the monitor: it forgets its dependencies and runs no more until activated again.
    public func deactivate() {
        let dependencies = state.withLock { state -> [DependencyNode] in
            state.active = false
            state.scheduled = false
            state.rerunRequested = false
            defer { state.dependencies = [] }
            return state.dependencies
        }
        let id = ObjectIdentifier(self)
        for node in dependencies { node.remove(id) }
    }

    // MARK: Running

    /// Called by a node this monitor read when it changes.
    /// `selfTriggered` is nil when the caller does not know; then it is whether this monitor is
    /// running on the calling thread, which is when its own block made the change.
    func invalidate(by node: DependencyNode, selfTriggered known: Bool? = nil) {
        let selfTriggered =
            known ?? ThreadContext.currentIfPresent?.runningMonitors.contains(ObjectIdentifier(self)) ?? false
        enum Decision { case none, schedule(Duration?), report }
        let decision = state.withLock { state -> Decision in
            guard state.active else { return .none }
            if selfTriggered {
                state.selfTriggered = true
                if state.selfTriggerStreak >= Self.selfTriggerLimit {
                    if state.loopReported { return .none }
                    state.loopReported = true
                    return .report
                }
            }
            if state.running {
                // The running thread runs the block again when it finishes: no concurrent run.
                state.rerunRequested = true
                return .none
            }
            guard !state.scheduled else { return .none }
            state.scheduled = true
            if let limit = limitFrequency, let last = state.lastRun {
                let wait = last + limit - ContinuousClock.now
                if wait > .zero { return .schedule(wait) }
            }
            return .schedule(nil)
        }
        switch decision {
        case .none: break
        case .schedule(let delay): dispatch(after: delay)
        case .report:
            ObservableTracker.report(
                "ObservableMonitor '\(name)' changes '\(node.label)', which it reads, every time it runs; "
                    + "stopped re-running it after \(Self.selfTriggerLimit) runs")
        }
    }

    private func schedule(after delay: Duration?) {
        let proceed = state.withLock { state -> Bool in
            guard state.active, !state.scheduled else { return false }
            state.scheduled = true
            return true
        }
        if proceed { dispatch(after: delay) }
    }

    private func dispatch(after delay: Duration?) {
        let job: @Sendable () -> Void = { [weak self] in self?.run(clearingSchedule: true) }
        if let delay { executor.execute(after: delay, job) } else { executor.execute(job) }
    }

    /// Runs the block, then again while runs were requested during it. A scheduled job clears
    /// its schedule in the same critical section that marks the run started, so a change arriving
    /// in between waits for this run instead of scheduling an immediate second one (which would
    /// break the frequency limit).
    private func run(clearingSchedule: Bool = false) {
        let begin = state.withLock { state -> Bool in
            if clearingSchedule { state.scheduled = false }
            guard state.active else { return false }
            if state.running {
                state.rerunRequested = true
                return false
            }
            state.running = true
            state.selfTriggered = false
            return true
        }
        guard begin else { return }
        let context = ThreadContext.current
        while true {
            let finished = TransactionLock.shared(context) { runOnce(context) }
            let again = state.withLock { state -> Bool in
                state.runCount += 1
                state.lastRun = .now
                state.selfTriggerStreak = state.selfTriggered ? state.selfTriggerStreak + 1 : 0
                if finished {
                    state.terminated = true
                    state.active = false
                }
                let again = state.active && state.rerunRequested
                state.rerunRequested = false
                state.selfTriggered = false
                if !again { state.running = false }
                return again
            }
            if finished { deactivate() }
            if !again { return }
            if let limit = limitFrequency {
                // Honour the frequency limit for runs requested while running, too.
                state.withLock { $0.running = false }
                schedule(after: limit)
                return
            }
        }
    }

    /// One run of the block with its reads recorded; returns whether a self-terminating block
    /// asked to stop.
    private func runOnce(_ context: ThreadContext) -> Bool {
        let recorder = DependencyRecorder()
        let outer = context.recorder
        context.recorder = recorder
        context.runningMonitors.append(ObjectIdentifier(self))
        let finished = block()
        context.runningMonitors.removeLast()
        context.recorder = outer
        updateDependencies(recorder)
        return finished
    }

    /// Registers with the nodes read this run and leaves those no longer read; then re-runs if
    /// something it read changed before the registration took effect (no lost update).
    private func updateDependencies(_ recorder: DependencyRecorder) {
        let nodes = recorder.nodes
        let previous = state.withLock { state -> [DependencyNode]? in
            guard state.active else { return nil }
            defer { state.dependencies = nodes }
            return state.dependencies
        }
        guard let previous else { return }
        let unchanged = previous.count == nodes.count && zip(previous, nodes).allSatisfy { $0 === $1 }
        if !unchanged {
            let id = ObjectIdentifier(self)
            let current = Set(nodes.map(ObjectIdentifier.init))
            for node in previous where !current.contains(ObjectIdentifier(node)) { node.remove(id) }
            for node in nodes { node.add(self) }
        }
        // A change before registration would otherwise be lost. It may have been the block's own
        // write, so it counts toward the self-trigger limit.
        for (node, version) in zip(nodes, recorder.versions) where node.version != version {
            invalidate(by: node, selfTriggered: true)
            break
        }
    }
}
