import Dispatch
import Foundation
import SparkObservable
import SparkTestSupport
import Synchronization
import Testing

/// Threads, executors and transactions. Run under ThreadSanitizer by `.ci/run`.
@Suite("Observation across threads")
struct ConcurrencyTests {
    @Test func manyWritersNoLostUpdateAndNeverConcurrentWithItself() async {
        let values = (0..<4).map { TrackedValue(0, label: "v\($0)") }
        let queue = DispatchQueue(label: "monitor")
        let lastSum = Box(-1)
        let inside = Atomic<Int>(0)
        let overlaps = Counter()
        let monitor = ObservableMonitor(activatedWithName: "sum", executor: .queue(queue)) {
            if inside.add(1, ordering: .acquiring).newValue > 1 { overlaps.increment() }
            lastSum.value = values.reduce(0) { $0 + $1.value }
            inside.subtract(1, ordering: .releasing)
        }
        await withTaskGroup(of: Void.self) { group in
            for writer in 0..<8 {
                group.addTask {
                    for n in 1...500 { values[writer % 4].update { $0 += n % 3 == 0 ? 2 : 1 } }
                }
            }
        }
        let expected = values.reduce(0) { $0 + $1.untrackedValue }
        #expect(
            await eventually { lastSum.value == expected }, "the monitor saw the final values: \(lastSum.value) vs \(expected)")
        #expect(overlaps.value == 0)
        #expect(monitor.runCount >= 2)
    }

    @Test func immediateMonitorsWithWritersOnManyThreads() async {
        let value = TrackedValue(0)
        let inside = Atomic<Int>(0)
        let overlaps = Counter()
        let last = Box(-1)
        let monitor = ObservableMonitor(activatedWithName: "immediate", executor: .immediate) {
            if inside.add(1, ordering: .acquiring).newValue > 1 { overlaps.increment() }
            last.value = value.value
            inside.subtract(1, ordering: .releasing)
        }
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 { group.addTask { for _ in 0..<500 { value.update { $0 += 1 } } } }
        }
        #expect(value.untrackedValue == 4000)
        #expect(last.value == 4000, "the last run, on whichever thread, saw the last value")
        #expect(overlaps.value == 0)
        _ = monitor
    }

    @Test func aTransactionRunsDependentsOnceWithFinalValues() {
        let a = TrackedValue(0)
        let b = TrackedValue(0)
        let c = TrackedValue("")
        let seen = Box<[String]>([])
        let monitor = ObservableMonitor(activatedWithName: "abc", executor: .immediate) {
            seen.update { $0.append("\(a.value),\(b.value),\(c.value)") }
        }
        ObservableTracker.transaction {
            a.value = 1
            b.value = 2
            ObservableTracker.transaction { c.value = "x" }
            a.value = 3
            #expect(seen.value == ["0,0,"], "nothing runs inside the transaction")
        }
        #expect(seen.value == ["0,0,", "3,2,x"])
        _ = monitor
    }

    @Test func aMonitorNeverSeesAHalfAppliedTransaction() async {
        // Invariant: a + b == 0, kept by every transaction.
        let a = TrackedValue(0)
        let b = TrackedValue(0)
        let violations = Counter()
        let runs = Counter()
        let queue = DispatchQueue(label: "invariant")
        let monitor = ObservableMonitor(activatedWithName: "invariant", executor: .queue(queue)) {
            runs.increment()
            if a.value + b.value != 0 { violations.increment() }
        }
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    for n in 1...300 {
                        ObservableTracker.transaction {
                            a.value = n
                            b.value = -n
                        }
                    }
                }
            }
        }
        await drain(queue)
        #expect(await eventually { !monitor.isActive || runs.value >= 2 })
        await drain(queue)
        #expect(violations.value == 0)
        _ = monitor
    }

    @MainActor
    @Test func changesInOneMainActorTurnRunAMainMonitorOnce() async {
        let first = TrackedValue("")
        let last = TrackedValue("")
        let seen = Box<[String]>([])
        let monitor = ObservableMonitor(mainActorName: "name") {
            seen.update { $0.append("\(first.value) \(last.value)") }
        }
        monitor.activate()
        #expect(seen.value == [" "], "activated on the main actor: ran at once")
        first.value = "Ada"
        last.value = "Lovelace"
        #expect(seen.value == [" "], "not yet: the turn is not over")
        #expect(await eventually { seen.value.count == 2 })
        #expect(seen.value == [" ", "Ada Lovelace"])
    }

    @Test func limitFrequencyCoalescesBursts() async {
        let value = TrackedValue(0)
        let runs = Box<[(value: Int, at: ContinuousClock.Instant)]>([])
        let queue = DispatchQueue(label: "limited")
        let limit = Duration.milliseconds(100)
        let monitor = ObservableMonitor(name: "limited", executor: .queue(queue), limitFrequency: limit) {
            let seen = value.value
            runs.update { $0.append((seen, .now)) }
        }
        monitor.activate()
        #expect(await eventually { runs.value.count == 1 })
        for n in 1...1000 { value.value = n }
        #expect(await eventually { runs.value.last?.value == 1000 }, "the last run saw the final value")
        let observed = runs.value
        // Runs are spaced by the limit (whatever the machine's speed), so a burst of a thousand
        // changes becomes a handful of runs.
        for (earlier, later) in zip(observed, observed.dropFirst()) {
            #expect(later.at - earlier.at >= limit * 0.9, "runs \(earlier.value) and \(later.value) were closer than the limit")
        }
        #expect(observed.count < 100, "\(observed.count) runs for 1000 changes")
    }

    @Test func activatingOffTheExecutorRunsThere() async {
        let queue = DispatchQueue(label: "elsewhere")
        let key = DispatchSpecificKey<Int>()
        queue.setSpecific(key: key, value: 7)
        let ranOnQueue = Box<Bool?>(nil)
        let monitor = ObservableMonitor(activatedWithName: "elsewhere", executor: .queue(queue)) {
            ranOnQueue.value = DispatchQueue.getSpecific(key: key) == 7
        }
        #expect(await eventually { ranOnQueue.value != nil })
        #expect(ranOnQueue.value == true)
        _ = monitor
    }

    @Test func aSelfTriggeringMonitorOnAQueueStopsToo() async {
        Diagnostics.install()
        let counter = TrackedValue(0, label: "QueueLoop.counter")
        let queue = DispatchQueue(label: "loop")
        let monitor = ObservableMonitor(activatedWithName: "queue-increment", executor: .queue(queue)) {
            counter.value += 1
        }
        #expect(await eventually { !Diagnostics.about(monitor: "queue-increment").isEmpty })
        await drain(queue)
        let settled = counter.untrackedValue
        try? await Task.sleep(for: .milliseconds(50))
        await drain(queue)
        #expect(counter.untrackedValue == settled, "it stopped re-running itself")
        #expect(settled <= ObservableMonitor.selfTriggerLimit + 2)
        _ = monitor
    }

    @Test func trackedUpdatesAreAtomic() async {
        let value = TrackedValue(0)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 { group.addTask { for _ in 0..<1000 { value.update { $0 += 1 } } } }
        }
        #expect(value.untrackedValue == 8000)
    }
}
