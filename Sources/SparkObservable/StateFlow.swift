import SparkLock

/// A value that changes over time, read-only to its consumers (Kotlin's and Sportradar's
/// `StateFlow`). Its owner holds the ``MutableStateFlow``; when the owner goes away, the flow
/// finishes: subscriptions stop and ``values`` sequences end.
///
/// ```swift
/// let token = loginManager.loginState.subscribe { state in print(state) }   // prints now, then on change
/// for await state in loginManager.loginState.values { ... }                 // ends with the manager
/// ```
///
/// Reading ``value`` inside an ``ObservableMonitor`` tracks it like any tracked property.
public final class StateFlow<Value: Sendable>: Sendable {
    let cell: TrackedValue<Value>
    private let finished = TrackedValue(false, label: "StateFlow.finished")
    private let subscriptions = Locked<[ObjectIdentifier: FlowSubscription]>([:])

    init(cell: TrackedValue<Value>) { self.cell = cell }

    /// The current value (tracked when read inside a monitor).
    public var value: Value { cell.value }

    /// Whether the owner has gone away; no more values will come.
    public var isFinished: Bool { finished.untrackedValue }

    /// Calls `handler` with the current value now, then with each new value (the latest one
    /// when several changes come together) until the returned subscription is cancelled or
    /// released, or the flow finishes.
    ///
    /// - Parameter executor: where `handler` runs; by default on the thread that changed the
    ///   value (and, the first time, on the caller's).
    public func subscribe(
        on executor: MonitorExecutor = .immediate, _ handler: @escaping @Sendable (Value) -> Void
    ) -> FlowSubscription {
        let subscription = FlowSubscription()
        let monitor = ObservableMonitor(name: "StateFlow.subscribe", executor: executor) { [cell] in
            handler(cell.value)
        }
        subscription.attach(monitor) { [weak self] id in self?.subscriptions.withLock { _ = $0.removeValue(forKey: id) } }
        let alreadyFinished = subscriptions.withLock { subscriptions -> Bool in
            if finished.untrackedValue { return true }
            subscriptions[ObjectIdentifier(subscription)] = subscription
            return false
        }
        if alreadyFinished {
            handler(cell.untrackedValue)
            subscription.cancel()
        } else {
            monitor.activate()
        }
        return subscription
    }

    /// The current value, then each new one (the latest when changes come faster than they are
    /// consumed), ending when the flow finishes.
    public var values: AsyncStream<Value> {
        AsyncStream(bufferingPolicy: .bufferingNewest(1)) { continuation in
            let subscription = subscribe { continuation.yield($0) }
            // Runs at once if the flow had already finished.
            subscription.onFinish { continuation.finish() }
            continuation.onTermination = { _ in subscription.cancel() }
        }
    }

    /// Ends the flow: every subscription stops and every `values` sequence finishes.
    func finish() {
        let active = subscriptions.withLock { subscriptions -> [FlowSubscription] in
            finished.set(true)
            defer { subscriptions = [:] }
            return Array(subscriptions.values)
        }
        for subscription in active { subscription.finish() }
    }
}

/// The owner's side of a ``StateFlow``: it can set the value, and releasing it finishes the flow.
public final class MutableStateFlow<Value: Sendable>: Sendable {
    /// The read-only flow to hand to consumers.
    public let flow: StateFlow<Value>

    /// A flow starting at `value`; every assignment is a change.
    public init(_ value: Value, label: String = "StateFlow") {
        flow = StateFlow(cell: TrackedValue(value, label: label, observable: true))
    }

    /// A flow starting at `value`; assigning an equal value is not a change (conflation, as in
    /// Kotlin's `StateFlow`).
    public init(_ value: Value, label: String = "StateFlow") where Value: Equatable {
        flow = StateFlow(cell: TrackedValue(value, label: label, observable: true))
    }

    /// The value; setting it notifies subscribers and monitors.
    public var value: Value {
        get { flow.value }
        set { flow.cell.set(newValue) }
    }

    /// Changes the value in place atomically.
    @discardableResult
    public func update<R>(_ body: (inout Value) throws -> R) rethrows -> R { try flow.cell.update(body) }

    deinit { flow.finish() }
}

/// A subscription to a ``StateFlow``; cancelled when released.
public final class FlowSubscription: Sendable {
    private struct State {
        var monitor: ObservableMonitor?
        var detach: (@Sendable (ObjectIdentifier) -> Void)?
        var finishHandlers: [@Sendable () -> Void] = []
        var ended = false
    }

    private let state = Locked(State())

    init() {}

    func attach(_ monitor: ObservableMonitor, detach: @escaping @Sendable (ObjectIdentifier) -> Void) {
        state.withLock { state in
            state.monitor = monitor
            state.detach = detach
        }
    }

    func onFinish(_ handler: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { state -> Bool in
            if state.ended { return true }
            state.finishHandlers.append(handler)
            return false
        }
        if runNow { handler() }
    }

    /// Whether the subscription still delivers values.
    public var isActive: Bool { state.withLock { !$0.ended } }

    /// Stops delivery; idempotent.
    public func cancel() {
        let (detach, handlers) = end()
        detach?(ObjectIdentifier(self))
        for handler in handlers { handler() }
    }

    /// Called when the flow finishes.
    func finish() {
        let (_, handlers) = end()
        for handler in handlers { handler() }
    }

    private func end() -> ((@Sendable (ObjectIdentifier) -> Void)?, [@Sendable () -> Void]) {
        let (monitor, detach, handlers) = state.withLock { state in
            guard !state.ended else {
                return (ObservableMonitor?.none, (@Sendable (ObjectIdentifier) -> Void)?.none, [@Sendable () -> Void]())
            }
            state.ended = true
            defer {
                state.monitor = nil
                state.finishHandlers = []
            }
            return (state.monitor, state.detach, state.finishHandlers)
        }
        monitor?.deactivate()
        return (detach, handlers)
    }

    deinit {
        let monitor = state.withLock { $0.monitor }
        monitor?.deactivate()
    }
}
