import Foundation
import SparkTestSupport
import Testing

/// Every input the fuzzers keep (the seeds, and each input that once crashed a decoder) runs
/// again through its harness in every test run, without libFuzzer: a regression fails here.
@Suite("Fuzz corpus replay")
struct FuzzCorpusTests {
    static let binary = Fixtures.executable("spark-fuzz")
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz/corpus")

    @Test func everyHarnessHasACorpusAndReplaysItWithoutACrash() async throws {
        let list = try await Fixtures.run(Self.binary, ["--list"])
        let harnesses = list.stdout.split(separator: "\n").map(String.init)
        #expect(harnesses.count == 19, "\(harnesses)")
        for harness in harnesses {
            let folder = Self.corpus.appendingPathComponent(harness)
            let inputs = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            #expect(!inputs.isEmpty, "\(harness) has no corpus")
            let replay = try await Fixtures.run(Self.binary, [harness, folder.path])
            #expect(replay.status == 0, "\(harness): \(replay.stderr)")
            #expect(replay.stdout.contains("replayed \(inputs.count) inputs"), "\(harness): \(replay.stdout)")
        }
    }

    @Test func theCrashTheFuzzerFoundIsKept() throws {
        // A sealed message with epoch -1 trapped in `UInt64(epoch)` before the epoch check.
        let kept = try FileManager.default.contentsOfDirectory(atPath: Self.corpus.appendingPathComponent("sealed-message").path)
        #expect(kept.contains { $0.hasPrefix("crash-") })
    }

    @Test func anUnknownHarnessIsAUsageError() async throws {
        let result = try await Fixtures.run(Self.binary, ["no-such-harness"])
        #expect(result.status == 64 && result.stderr.contains("no harness 'no-such-harness'"))
    }
}
