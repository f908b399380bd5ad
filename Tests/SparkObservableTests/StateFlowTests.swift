import Observation
import SparkObservable
import SparkTestSupport
import Testing

@Suite("StateFlow")
struct StateFlowTests {
    enum LoginState: Equatable, Sendable { case loggedOut, loading, loggedIn(String) }

    @Test func subscribeDeliversTheCurrentValueThenChanges() {
        let owner = MutableStateFlow(LoginState.loggedOut)
        let seen = Box<[LoginState]>([])
        let subscription = owner.flow.subscribe { state in seen.update { $0.append(state) } }
        #expect(seen.value == [.loggedOut])
        owner.value = .loading
        owner.value = .loading  // equal: conflated
        owner.value = .loggedIn("alice")
        #expect(seen.value == [.loggedOut, .loading, .loggedIn("alice")])
        subscription.cancel()
        owner.value = .loggedOut
        #expect(seen.value.count == 3)
        #expect(!subscription.isActive)
    }

    @Test func releasingTheOwnerFinishesTheFlow() async {
        var owner: MutableStateFlow<Int>? = MutableStateFlow(1)
        let flow = owner!.flow
        let seen = Box<[Int]>([])
        let subscription = flow.subscribe { value in seen.update { $0.append(value) } }
        let received = Box<[Int]>([])
        let collector = Task {
            var values: [Int] = []
            for await value in flow.values {
                values.append(value)
                received.update { $0.append(value) }
            }
            return values
        }
        #expect(await eventually { seen.value == [1] })
        owner?.value = 2
        // The collector has subscribed once it has a value (its first is the current one).
        #expect(await eventually { !received.value.isEmpty })
        owner?.value = 3
        owner = nil
        let collected = await collector.value
        #expect(collected.last == 3, "the sequence ended after the last value: \(collected)")
        #expect(flow.isFinished)
        #expect(!subscription.isActive)
        #expect(seen.value == [1, 2, 3])
        // Subscribing to a finished flow gives the last value once and nothing more.
        let late = Box<[Int]>([])
        let lateSubscription = flow.subscribe { value in late.update { $0.append(value) } }
        #expect(late.value == [3] && !lateSubscription.isActive)
        var ended: [Int] = []
        for await value in flow.values { ended.append(value) }
        #expect(ended == [3])
    }

    @Test func readingValueInAMonitorTracksIt() {
        let owner = MutableStateFlow("a")
        let seen = Box<[String]>([])
        let monitor = ObservableMonitor(activatedWithName: "flow", executor: .immediate) {
            seen.update { $0.append(owner.flow.value) }
        }
        owner.value = "b"
        owner.update { $0 += "c" }
        #expect(seen.value == ["a", "b", "bc"])
        _ = monitor
    }

    @Test func trackedPropertyWrapper() {
        // @unchecked Sendable: @Tracked's storage is a reference that is never reassigned (its
        // setter is nonmutating), but the compiler sees the wrapper's `var`.
        final class Model: @unchecked Sendable {
            @Tracked var subject = "hello"
            @Tracked var unread = 0
        }
        let model = Model()
        let seen = Box<[String]>([])
        let monitor = ObservableMonitor(activatedWithName: "model", executor: .immediate) {
            seen.update { $0.append("\(model.subject):\(model.unread)") }
        }
        model.unread = 2
        model.subject = "hi"
        model.$unread.value = 2  // unchanged
        #expect(seen.value == ["hello:0", "hello:2", "hi:2"])
        _ = monitor
    }
}

@Suite("Swift Observation bridge")
struct ObservationBridgeTests {
    @Test func stateFlowIsVisibleToWithObservationTracking() {
        let owner = MutableStateFlow(1)
        let changes = Counter()
        let read = withObservationTracking {
            owner.flow.value
        } onChange: {
            changes.increment()
        }
        #expect(read == 1)
        owner.value = 1  // equal: no change
        #expect(changes.value == 0)
        owner.value = 2
        #expect(changes.value == 1)
    }

    @Test func unbridgedValuesAreNot() {
        let value = TrackedValue(1)
        let changes = Counter()
        _ = withObservationTracking {
            value.value
        } onChange: {
            changes.increment()
        }
        value.value = 2
        #expect(changes.value == 0)
        let bridged = TrackedValue(1, observable: true)
        _ = withObservationTracking {
            bridged.value
        } onChange: {
            changes.increment()
        }
        bridged.value = 2
        #expect(changes.value == 1)
    }
}
