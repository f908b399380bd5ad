import Foundation
import Observation
import SparkObservable

/// SparkObservable against Swift's Observation module on the same workloads, in the same run.
enum ObservationBenchmarks {
    static let all: [Benchmark] = [
        Benchmark(name: "observe-tracked-read", run: trackedRead),
        Benchmark(name: "observe-change-to-rerun-1", run: { changeToRerun(monitors: 1) }),
        Benchmark(name: "observe-change-to-rerun-1000", run: { changeToRerun(monitors: 1000) }),
        Benchmark(name: "observe-untracked-read", run: untrackedRead),
        Benchmark(name: "observe-untracked-read-observable", run: untrackedReadVersusObservable),
        Benchmark(name: "observe-write-unobserved", run: { unobservedWrite(bridged: false) }),
        Benchmark(name: "observe-untracked-read-bridged", run: bridgedRead),
        Benchmark(name: "observe-write-unobserved-bridged", run: { unobservedWrite(bridged: true) }),
    ]

    @Observable
    final class ObservedModel: @unchecked Sendable {
        // @unchecked Sendable: benchmarks use each model from one thread.
        var value = 0
    }

    final class PlainModel: @unchecked Sendable {
        // @unchecked Sendable: benchmarks use each model from one thread.
        var value = 0
    }

    /// Keeps the optimiser from discarding reads.
    @inline(never)
    static func sink(_ value: Int) { if value == Int.min { print("unreachable") } }

    static let objects = 100
    static let passes = 2000

    /// The cost of one read inside a running monitor (ours) and inside `withObservationTracking`
    /// (Observation): 100 objects read once each per pass, timed inside the tracking scope.
    static func trackedRead() -> BenchmarkResult {
        let ours = (0..<objects).map { TrackedValue($0) }
        let theirs = (0..<objects).map { index in
            let model = ObservedModel()
            model.value = index
            return model
        }
        func measureOurs() -> Double {
            let elapsed = Locked(0.0)
            let monitor = ObservableMonitor(name: "bench", executor: .immediate) {
                let start = ContinuousClock.now
                var sum = 0
                for _ in 0..<passes { for value in ours { sum &+= value.value } }
                elapsed.withLock { $0 = (ContinuousClock.now - start).seconds }
                sink(sum)
            }
            monitor.activate()
            return elapsed.withLock { $0 }
        }
        func measureTheirs() -> Double {
            var elapsed = 0.0
            withObservationTracking {
                let start = ContinuousClock.now
                var sum = 0
                for _ in 0..<passes { for model in theirs { sum &+= model.value } }
                elapsed = (ContinuousClock.now - start).seconds
                sink(sum)
            } onChange: {
            }
            return elapsed
        }
        let reads = Double(objects * passes)
        let oursTime = (0..<5).map { _ in measureOurs() }.min()!
        let theirsTime = (0..<5).map { _ in measureTheirs() }.min()!
        return Harness.result(
            "observe-tracked-read", unit: "ns/read", ours: oursTime / reads * 1e9, reference: theirsTime / reads * 1e9,
            higherIsBetter: false, referenceName: "withObservationTracking access")
    }

    /// Write one property, then every dependent re-runs its block (which reads the property).
    /// Ours: `.immediate` monitors re-run inside the write. Observation: each tracker's `onChange`
    /// marks it, and after the write the marked trackers re-run and re-register, which is what a
    /// monitor does for you.
    static func changeToRerun(monitors count: Int) -> BenchmarkResult {
        let writes = count == 1 ? 100_000 : 200
        let ours = TrackedValue(0)
        let runs = Locked(0)
        let monitors = (0..<count).map { index in
            ObservableMonitor(activatedWithName: "m\(index)", executor: .immediate) {
                sink(ours.value)
                runs.withLock { $0 += 1 }
            }
        }
        let oursTime = Harness.bestTime(repeats: 3) {
            for n in 1...writes { ours.value = n }
        }
        precondition(runs.withLock { $0 } >= count * (writes * 3 + 1), "monitors did not re-run")
        withExtendedLifetime(monitors) {}

        let model = ObservedModel()
        let pending = Locked<[Int]>([])
        let theirRuns = Locked(0)
        func track(_ index: Int) {
            withObservationTracking {
                sink(model.value)
                theirRuns.withLock { $0 += 1 }
            } onChange: {
                pending.withLock { $0.append(index) }
            }
        }
        for index in 0..<count { track(index) }
        let theirsTime = Harness.bestTime(repeats: 3) {
            for n in 1...writes {
                model.value = n
                for index in pending.withLock({ list in
                    defer { list = [] }
                    return list
                }) { track(index) }
            }
        }
        precondition(theirRuns.withLock { $0 } >= count * (writes * 3 + 1), "trackers did not re-run")
        let name = "observe-change-to-rerun-\(count)"
        return Harness.result(
            name, unit: "ns/write", ours: oursTime / Double(writes) * 1e9, reference: theirsTime / Double(writes) * 1e9,
            higherIsBetter: false, referenceName: "Observation, \(count) tracker\(count == 1 ? "" : "s") re-registered")
    }

    static let plainReads = 20_000_000
    static let cycle = 1024

    static func timePerRead(_ body: () -> Int) -> Double {
        Harness.bestTime(repeats: 3) { sink(body()) } / Double(plainReads) * 1e9
    }

    /// Reads cycle through 1,024 objects so that the compiler cannot hoist a plain load out of
    /// the loop; both sides use the same pattern.
    static func readLoop<T>(_ objects: [T], _ read: (T) -> Int) -> Double {
        timePerRead {
            var sum = 0
            for index in 0..<plainReads { sum &+= read(objects[index & (cycle - 1)]) }
            return sum
        }
    }

    /// A read with no monitor running vs a plain stored property of a class.
    static func untrackedRead() -> BenchmarkResult {
        let ours = (0..<cycle).map { TrackedValue($0) }
        let plain = (0..<cycle).map { index in
            let model = PlainModel()
            model.value = index
            return model
        }
        return Harness.result(
            "observe-untracked-read", unit: "ns/read", ours: readLoop(ours) { $0.value }, reference: readLoop(plain) { $0.value },
            higherIsBetter: false, referenceName: "plain stored property (not thread-safe)")
    }

    /// A read with no monitor running vs an `@Observable` property outside any tracking.
    static func untrackedReadVersusObservable() -> BenchmarkResult {
        let ours = (0..<cycle).map { TrackedValue($0) }
        let theirs = (0..<cycle).map { index in
            let model = ObservedModel()
            model.value = index
            return model
        }
        return Harness.result(
            "observe-untracked-read-observable", unit: "ns/read", ours: readLoop(ours) { $0.value },
            reference: readLoop(theirs) { $0.value }, higherIsBetter: false,
            referenceName: "@Observable property (not thread-safe)")
    }

    /// A write nobody observes vs the same write to an `@Observable` property; `bridged` also
    /// reports it to Swift Observation (`TrackedValue(observable: true)`, as `StateFlow` does).
    static func unobservedWrite(bridged: Bool) -> BenchmarkResult {
        let ours = TrackedValue(0, observable: bridged)
        let model = ObservedModel()
        let writes = 5_000_000
        let oursTime = Harness.bestTime(repeats: 3) { for n in 0..<writes { ours.value = n } }
        let theirsTime = Harness.bestTime(repeats: 3) { for n in 0..<writes { model.value = n } }
        return Harness.result(
            bridged ? "observe-write-unobserved-bridged" : "observe-write-unobserved", unit: "ns/write",
            ours: oursTime / Double(writes) * 1e9, reference: theirsTime / Double(writes) * 1e9, higherIsBetter: false,
            referenceName: "@Observable property")
    }

    /// An untracked read of a value that is also visible to Swift Observation.
    static func bridgedRead() -> BenchmarkResult {
        let ours = (0..<cycle).map { TrackedValue($0, observable: true) }
        let theirs = (0..<cycle).map { index in
            let model = ObservedModel()
            model.value = index
            return model
        }
        return Harness.result(
            "observe-untracked-read-bridged", unit: "ns/read", ours: readLoop(ours) { $0.value },
            reference: readLoop(theirs) { $0.value }, higherIsBetter: false,
            referenceName: "@Observable property (not thread-safe)")
    }
}

/// A tiny lock for benchmark bookkeeping.
final class Locked<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched under `lock`.
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<R>(_ body: (inout Value) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}
