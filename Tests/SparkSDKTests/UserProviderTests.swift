import Foundation
import SparkDomain
import SparkDomainEngine
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
            let plain = UserProvider(service: service)
            #expect(plain.userState.value == .initial)
            await plain.refresh()
            #expect(plain.userState.value == .valid)
            // An hour at the domain, whose clock is the machine's: a loaded machine cannot end it
            // before the provider reads it.
            try world.domain.timeOut("alice", for: 3_600, reason: "cool down")
            // The countdown ticks every second; its values come from this clock, which the test
            // moves, so a slow machine changes when a value shows, never which values show.
            let clock = TestClock(Date())
            let users = UserProvider(service: service, clock: clock.wallClock)
            await users.refresh()
            guard case .timeout(let until, let reason)? = users.restriction.value else {
                Issue.record("the timeout is not reported as a restriction")
                return
            }
            #expect(reason == "cool down" && until > clock.now)
            // Two and a half seconds before the end: the provider shows three, rounding up.
            clock.advance(by: until.timeIntervalSince(clock.now) - 2.5)
            await users.refresh()
            #expect(users.userState.value == .timeout(remainingSeconds: 3))
            #expect(plain.restriction.value == nil, "read before the timeout")
            clock.advance(by: 1)
            #expect(await eventually { users.userState.value == .timeout(remainingSeconds: 2) })
            clock.advance(by: 1)
            #expect(await eventually { users.userState.value == .timeout(remainingSeconds: 1) })
            clock.advance(by: 1)
            #expect(await eventually { users.userState.value == .valid }, "back to valid by itself")
            #expect(users.restriction.value == nil, "the ended timeout is no restriction")
            try world.domain.ban("alice", reason: "abuse")
            await users.refresh()
            #expect(users.userState.value == .banned && users.restriction.value == .banned(reason: "abuse"))
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
