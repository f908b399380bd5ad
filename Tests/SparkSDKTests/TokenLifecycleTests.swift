import Foundation
import SparkDomain
import Testing

@testable import SparkSDK

/// Every transition of the token lifecycle state machine.
@Suite("TokenLifecycle")
struct TokenLifecycleTests {
    static let now = Date(timeIntervalSince1970: 1_000_000)
    static func account(_ token: String, expiresIn seconds: TimeInterval) -> BBMAuthenticatedAccount {
        BBMAuthenticatedAccount(accountId: "alice", idToken: token, expiresAt: now.addingTimeInterval(seconds))
    }

    @Test func signedOutFailsEveryRequest() {
        var machine = TokenLifecycle()
        #expect(machine.tokenRequested(now: Self.now, leeway: 60) == .fail(AuthError(.signedOut, "")))
        #expect(machine.tokenRejected("t") == .fail(AuthError(.signedOut, "")))
        #expect(machine.account == nil)
    }

    @Test func aFreshTokenIsUsedAndADueOneRefreshedOnce() {
        var machine = TokenLifecycle()
        let fresh = Self.account("t1", expiresIn: 600)
        machine.signedIn(fresh)
        #expect(machine.tokenRequested(now: Self.now, leeway: 60) == .use(fresh))
        let due = Self.account("t2", expiresIn: 30)
        machine.signedIn(due)
        #expect(machine.tokenRequested(now: Self.now, leeway: 60) == .refresh(due))
        #expect(machine.tokenRequested(now: Self.now, leeway: 60) == .join, "single flight")
        #expect(machine.tokenRejected("t2") == .join)
        #expect(machine.account == due)
    }

    @Test func rejectionRefreshesOnlyTheCurrentToken() {
        var machine = TokenLifecycle()
        let current = Self.account("t1", expiresIn: 600)
        machine.signedIn(current)
        #expect(machine.tokenRejected("old") == .use(current), "already replaced")
        #expect(machine.tokenRejected("t1") == .refresh(current))
        #expect(machine.state == .refreshing(previous: current))
    }

    @Test func refreshOutcomes() {
        let previous = Self.account("t1", expiresIn: 10)
        let next = Self.account("t2", expiresIn: 3600)

        var succeeded = TokenLifecycle()
        succeeded.signedIn(previous)
        _ = succeeded.tokenRequested(now: Self.now, leeway: 60)
        #expect(succeeded.refreshSucceeded(next, previous: previous) == .cacheAndDeliver(next))
        #expect(succeeded.state == .signedIn(next))

        var passing = TokenLifecycle()
        passing.signedIn(previous)
        _ = passing.tokenRequested(now: Self.now, leeway: 60)
        let offline = AuthError(.refreshFailed, "offline")
        #expect(passing.refreshFailed(offline, previous: previous, final: false) == .failWaiters(offline))
        #expect(passing.state == .signedIn(previous), "a passing failure keeps the user signed in")

        var final = TokenLifecycle()
        final.signedIn(previous)
        _ = final.tokenRequested(now: Self.now, leeway: 60)
        let revoked = AuthError(.refused, "revoked", domainCode: .invalidToken)
        #expect(final.refreshFailed(revoked, previous: previous, final: true) == .signOut(revoked))
        #expect(final.state == .signedOut)
    }

    @Test func resultsArrivingAfterSignOutOrANewSignInAreDiscarded() {
        let previous = Self.account("t1", expiresIn: 10)
        var machine = TokenLifecycle()
        machine.signedIn(previous)
        _ = machine.tokenRequested(now: Self.now, leeway: 60)
        machine.signedOut()
        #expect(machine.refreshSucceeded(Self.account("t2", expiresIn: 600), previous: previous) == .discard)
        #expect(machine.state == .signedOut)

        machine.signedIn(previous)
        _ = machine.tokenRequested(now: Self.now, leeway: 60)
        let other = Self.account("t9", expiresIn: 600)
        machine.signedIn(other)
        #expect(machine.refreshFailed(AuthError(.refreshFailed, ""), previous: previous, final: true) == .discard)
        #expect(machine.state == .signedIn(other))
    }
}
