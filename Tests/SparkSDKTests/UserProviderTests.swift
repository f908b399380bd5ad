import Foundation
import SparkDomain
import SparkObservable
import SparkSDK
import SparkTestSupport
import Testing

@Suite("UserProvider")
struct UserProviderTests {
    @Test func timeoutCountsDownAndReturnsToValid() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (service, _) = try await world.endpoint("alice", "alice-laptop")
            let users = UserProvider(service: service)
            #expect(users.userState.value == .initial)
            await users.refresh()
            #expect(users.userState.value == .valid)
            let seen = Box<[UserState]>([])
            let subscription = users.userState.subscribe { state in seen.update { $0.append(state) } }
            try world.domain.timeOut("alice", for: 3, reason: "cool down")
            await users.refresh()
            guard case .timeout(let remaining) = users.userState.value else {
                Issue.record("expected a timeout")
                return
            }
            #expect((2...3).contains(remaining))
            #expect(await eventually { users.userState.value == .valid }, "back to valid by itself")
            let countdown = Set(
                seen.value.compactMap { state -> Int? in
                    if case .timeout(let remaining) = state { return remaining }
                    return nil
                })
            #expect(countdown.count >= 2, "it counted down: \(seen.value)")
            try world.domain.ban("alice", reason: "abuse")
            await users.refresh()
            #expect(users.userState.value == .banned)
            subscription.cancel()
        }
    }

    @Test func infractionsAreShownDismissedAndAutoDismissed() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (service, _) = try await world.endpoint("alice", "alice-laptop")
            let users = UserProvider(service: service)
            try world.domain.issueInfraction(to: "alice", reason: "first warning")
            try world.domain.issueInfraction(to: "alice", reason: "second warning")
            await users.refresh()
            #expect(users.getNextInfraction()?.reason == "first warning")
            #expect(users.infractions.value.count == 2)
            await users.removeFirstInfraction()
            #expect(users.nextInfraction.value?.reason == "second warning")
            #expect(
                try world.domain.moderationStatus(of: "alice").infractions.map(\.reason) == ["second warning"],
                "dismissed at the domain")
            users.startAutoDismissInfraction(after: 1)
            #expect(users.dismissTimerCountDown.value == 1)
            #expect(await eventually { users.nextInfraction.value == nil })
            #expect(users.dismissTimerCountDown.value == 0)
            users.stopAutoDismissInfraction()
            #expect(try world.domain.moderationStatus(of: "alice").infractions.isEmpty)
        }
    }
}
