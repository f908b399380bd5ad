import Foundation
import SparkTestSupport
import Testing

@testable import SparkDomain

/// The embedded domain tells idle pollers when its file changes, whoever commits.
@Suite("Embedded domain: change hints")
struct ChangeHintTests {
    @Test func aCommitInAnotherProcessWakesAWaiter() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try makeDomain(directory)
            let before = try #require(domain.changeGeneration(), "inotify watches the domain file on Linux")
            // The limit only bounds a broken signal; without a wake-up the generation stays put.
            async let woken: Void = domain.waitForChange(after: before, timeout: .seconds(60))
            let signUp = try await Fixtures.run(
                Fixtures.executable("domain-peer"),
                [domain.path, "signup", "fay", "Correct-Horse-7", "fay@example.com", "FR", "30"])
            #expect(signUp.status == 0, "\(signUp.stderr)")
            await woken
            #expect(try #require(domain.changeGeneration()) > before)
        }
    }

    @Test func aCommitInThisProcessMovesTheGenerationToo() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try makeDomain(directory)
            let before = try #require(domain.changeGeneration())
            try await domain.signUp(
                SignUpRequest(userName: "gus", password: "Correct-Horse-7", email: "gus@example.com", country: "NL", age: 33))
            await domain.waitForChange(after: before, timeout: .seconds(60))
            #expect(try #require(domain.changeGeneration()) > before)
        }
    }

    // The two below watch a file nobody writes: the domain's own file may also move the
    // generation without a logical change (a WAL checkpoint when a connection closes), which
    // is allowed for a hint but would make "nothing happened" unprovable.

    @Test func withoutAChangeTheWaitEndsAtItsTimeout() async {
        await Fixtures.withTemporaryDirectory { directory in
            let signal = FileChangeSignal(path: directory.appendingPathComponent("quiet.sqlite").path)
            #expect(signal.isLive)
            let before = signal.generation
            await signal.wait(after: before, timeout: .milliseconds(50))
            #expect(signal.generation == before)
        }
    }

    @Test func cancellingAWaitEndsIt() async {
        await Fixtures.withTemporaryDirectory { directory in
            let signal = FileChangeSignal(path: directory.appendingPathComponent("quiet.sqlite").path)
            let before = signal.generation
            let ended = Box(false)
            let waiter = Task {
                await signal.wait(after: before, timeout: .seconds(3600))
                ended.value = true
            }
            waiter.cancel()
            #expect(await eventually { ended.value }, "a cancelled wait returns without waiting for its hour")
            #expect(signal.generation == before)
        }
    }

    @Test func writingAWatchedFileWakesAndOthersDoNot() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("watched.sqlite").path
            let signal = FileChangeSignal(path: path)
            let before = signal.generation
            try Data("elsewhere".utf8).write(to: directory.appendingPathComponent("other.txt"))
            await signal.wait(after: before, timeout: .milliseconds(200))
            #expect(signal.generation == before, "a file beside it is not watched")
            try Data("commit".utf8).write(to: URL(fileURLWithPath: path + "-wal"))
            await signal.wait(after: before, timeout: .seconds(60))
            #expect(signal.generation > before, "its WAL is")
        }
    }
}
