import Dispatch
import SparkLock
import SparkObservable
import SparkTestSupport
import Testing

@Suite("ObservableMonitor")
struct MonitorTests {
    @Test func tracksExactlyWhatTheLastRunRead() {
        let flag = TrackedValue(true, label: "flag")
        let a = TrackedValue(1, label: "a")
        let b = TrackedValue(10, label: "b")
        let seen = Box<[Int]>([])
        let monitor = ObservableMonitor(name: "branch", executor: .immediate) {
            seen.update { $0.append(flag.value ? a.value : b.value) }
        }
        #expect(seen.value.isEmpty, "created inactive")
        monitor.activate()
        #expect(seen.value == [1])
        b.value = 11  // not read: no run
        #expect(seen.value == [1])
        a.value = 2
        #expect(seen.value == [1, 2])
        flag.value = false  // now reads b, and stops reading a
        #expect(seen.value == [1, 2, 11])
        a.value = 3
        #expect(seen.value == [1, 2, 11], "a branch no longer taken is no longer tracked")
        b.value = 12
        #expect(seen.value == [1, 2, 11, 12])
        a.value = 3  // equal value: not a change
        flag.value = false
        #expect(seen.value == [1, 2, 11, 12])
        #expect(monitor.runCount == 4)
    }

    @Test func deactivateAndReleaseStopIt() {
        let value = TrackedValue(0)
        let runs = Counter()
        var monitor: ObservableMonitor? = ObservableMonitor(activatedWithName: "m", executor: .immediate) {
            _ = value.value
            runs.increment()
        }
        #expect(runs.value == 1)
        monitor?.deactivate()
        value.value = 1
        #expect(runs.value == 1)
        #expect(monitor?.isActive == false)
        monitor?.activate()
        #expect(runs.value == 2, "activate runs the block again")
        value.value = 2
        #expect(runs.value == 3)
        weak let weakMonitor = monitor
        monitor = nil
        #expect(weakMonitor == nil)
        value.value = 3
        #expect(runs.value == 3, "a released monitor does not run")
        #expect(!value.node.hasObservers)
    }

    @Test func selfTerminatingMonitorStopsForGood() {
        let loaded = TrackedValue(false)
        let runs = Counter()
        let monitor = ObservableMonitor(activatedWithName: "wait", executor: .immediate) {
            runs.increment()
            return loaded.value
        }
        #expect(runs.value == 1 && monitor.isActive)
        loaded.value = true
        #expect(runs.value == 2 && !monitor.isActive)
        loaded.value = false
        monitor.activate()
        #expect(runs.value == 2, "a terminated monitor cannot be re-activated")
        #expect(!loaded.node.hasObservers)
    }

    @Test func nestedMonitorsKeepTheirOwnReads() {
        let outerValue = TrackedValue(0, label: "outer")
        let innerValue = TrackedValue(0, label: "inner")
        let outerRuns = Counter()
        let innerRuns = Counter()
        let inner = Box<ObservableMonitor?>(nil)
        let outer = ObservableMonitor(activatedWithName: "outer", executor: .immediate) {
            _ = outerValue.value
            outerRuns.increment()
            if inner.value == nil {
                inner.value = ObservableMonitor(activatedWithName: "inner", executor: .immediate) {
                    _ = innerValue.value
                    innerRuns.increment()
                }
            }
            _ = outerValue.value
        }
        #expect(outerRuns.value == 1 && innerRuns.value == 1)
        innerValue.value = 1
        #expect(innerRuns.value == 2)
        #expect(outerRuns.value == 1, "the inner monitor's read did not leak into the outer one")
        outerValue.value = 1
        #expect(outerRuns.value == 2 && innerRuns.value == 2)
        _ = outer
    }

    @Test func aMonitorThatWritesWhatItReadsIsStoppedAndReportedOnce() {
        Diagnostics.install()

        let counter = TrackedValue(0, label: "Loop.counter")
        let runs = Counter()
        let looping = ObservableMonitor(activatedWithName: "increment", executor: .immediate) {
            runs.increment()
            counter.value += 1
        }
        #expect(runs.value <= ObservableMonitor.selfTriggerLimit + 2)
        let loopReports = Diagnostics.about(monitor: "increment")
        #expect(loopReports.count == 1)
        #expect(loopReports.first?.contains("Loop.counter") == true)
        // It still reacts to outside changes, once each, and does not report again.
        let before = runs.value
        counter.value = 100
        #expect(runs.value == before + 1)
        #expect(Diagnostics.about(monitor: "increment").count == 1)
        _ = looping

        // A write that converges (a clamp) is allowed: one extra run, no report.
        let level = TrackedValue(50, label: "level")
        let clampRuns = Counter()
        let clamp = ObservableMonitor(activatedWithName: "clamp", executor: .immediate) {
            clampRuns.increment()
            if level.value > 10 { level.value = 10 }
        }
        #expect(level.untrackedValue == 10)
        #expect(clampRuns.value == 2)
        #expect(Diagnostics.about(monitor: "clamp").isEmpty)
        _ = clamp
    }

    @Test func aMonitorCapturingItsOwnerWeaklyGoesWithIt() {
        final class Owner: Sendable {
            let name = TrackedValue("a")
            let seen = Box<[String]>([])
            let monitor = Box<ObservableMonitor?>(nil)
            init() {
                monitor.value = ObservableMonitor(activatedWithName: "owner", executor: .immediate) { [weak self] in
                    guard let self else { return }
                    seen.update { $0.append(name.value) }
                }
            }
        }
        var owner: Owner? = Owner()
        weak let weakOwner = owner
        weak let weakMonitor = owner?.monitor.value
        owner?.name.value = "b"
        #expect(owner?.seen.value == ["a", "b"])
        owner = nil
        #expect(weakOwner == nil)
        #expect(weakMonitor == nil, "the monitor was released with its owner")
    }

    @Test func spark_styleGetterAndSetterCalls() {
        final class Contact: @unchecked Sendable {
            // @unchecked Sendable: `_name` is only touched under `lock`.
            private let lock = NSLockLike()
            private var _name = "alice"
            var name: String {
                get {
                    ObservableTracker.getterCalled(for: self, propertyName: "name")
                    return lock.withLock { _name }
                }
                set {
                    lock.withLock { _name = newValue }
                    ObservableTracker.setterCalled(for: self, propertyName: "name")
                }
            }
        }
        let contact = Contact()
        let other = Contact()
        let seen = Box<[String]>([])
        let monitor = ObservableMonitor(activatedWithName: "contact", executor: .immediate) {
            seen.update { $0.append(contact.name) }
        }
        contact.name = "bob"
        other.name = "carol"
        #expect(seen.value == ["alice", "bob"])
        #expect(ObservableTracker.isTracking == false)
        _ = monitor
    }

    @Test func readsInsideWithoutTrackingAreNotRecorded() {
        let value = TrackedValue(0)
        let runs = Counter()
        let monitor = ObservableMonitor(activatedWithName: "untracked", executor: .immediate) {
            runs.increment()
            _ = ObservableTracker.withoutTracking { value.value }
        }
        value.value = 1
        #expect(runs.value == 1)
        _ = monitor
    }
}

/// A tiny lock for the Spark-style example (Foundation's NSLock is not imported here).
final class NSLockLike: Sendable {
    private let mutex = Locked(())
    func withLock<T>(_ body: () -> T) -> T { mutex.withLock { _ in body() } }
}
