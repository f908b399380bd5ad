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
        #expect(harnesses.count == 24, "\(harnesses)")
        for harness in harnesses {
            let folder = Self.corpus.appendingPathComponent(harness)
            let inputs = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            #expect(!inputs.isEmpty, "\(harness) has no corpus")
            let replay = try await Fixtures.run(Self.binary, [harness, folder.path])
            #expect(replay.status == 0, "\(harness): \(replay.stderr)")
            #expect(replay.stdout.contains("replayed \(inputs.count) inputs"), "\(harness): \(replay.stdout)")
        }
    }

    @Test func anUnknownHarnessIsAUsageError() async throws {
        let result = try await Fixtures.run(Self.binary, ["no-such-harness"])
        #expect(result.status == 64 && result.stderr.contains("no harness 'no-such-harness'"))
    }
}
