import Foundation
import SparkDomain
import SparkTestSupport
import Testing

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

    @Test func withoutACommitTheWaitEndsAtItsTimeout() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try makeDomain(directory)
            let before = try #require(domain.changeGeneration())
            _ = try await domain.policy()  // reads do not count as changes
            await domain.waitForChange(after: before, timeout: .milliseconds(50))
            #expect(domain.changeGeneration() == before)
        }
    }

    @Test func cancellingAWaitEndsIt() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try makeDomain(directory)
            let before = try #require(domain.changeGeneration())
            let ended = Box(false)
            let waiter = Task {
                await domain.waitForChange(after: before, timeout: .seconds(3600))
                ended.value = true
            }
            waiter.cancel()
            #expect(await eventually { ended.value }, "a cancelled wait returns without waiting for its hour")
            #expect(domain.changeGeneration() == before)
        }
    }
}
