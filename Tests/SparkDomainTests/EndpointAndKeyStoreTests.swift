import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkStore
import SparkTestSupport
import Testing

/// Endpoints, the key store and the identity directory, with every call authorised.
@Suite("Embedded domain: endpoints and key store")
struct EndpointAndKeyStoreTests {
    static func token(_ domain: EmbeddedDomain, _ user: String) async throws -> String {
        try await domain.testToken(userID: user).token
    }

    static func registered(_ outcome: RegistrationOutcome) -> EndpointInfo? {
        if case .registered(let info) = outcome { return info }
        return nil
    }

    static func identity(_ user: String, version: Int = 1) throws -> (PublishedIdentity, Ed25519.PrivateKey) {
        try Fixtures.publishedIdentity(user, version: version)
    }

    @Test func registrationLimitsAndDeregistration() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try makeDomain(directory, policy: DomainPolicy(maximumEndpoints: 2, passwordIterations: 1000))
            let alice = try await Self.token(domain, "alice")
            let first = try #require(
                Self.registered(
                    try await domain.registerEndpoint(token: alice, registration: .init(endpointID: "a1", description: "laptop")))
            )
            #expect(first.registrationID == 1 && first.isActive)
            let again = try await domain.registerEndpoint(
                token: alice, registration: .init(endpointID: "a1", description: "laptop"))
            #expect(Self.registered(again)?.registrationID == 1, "registering twice is idempotent")
            #expect(
                Self.registered(
                    try await domain.registerEndpoint(token: alice, registration: .init(endpointID: "a2", description: "phone")))?
                    .registrationID == 2)
            guard
                case .full(let endpoints, let maximum) = try await domain.registerEndpoint(
                    token: alice, registration: .init(endpointID: "a3", description: "tablet"))
            else {
                Issue.record("expected full")
                return
            }
            #expect(endpoints.map(\.endpointID) == ["a1", "a2"] && maximum == 2)
            // An endpoint not registered yet makes no call but registering.
            await #expect(throws: DomainError(.endpointRemoved, "")) {
                try await domain.endpoints(token: alice, endpointID: "a3")
            }
            await #expect(throws: DomainError(.endpointRemoved, "")) {
                try await domain.deregisterEndpoint(token: alice, endpointID: "a3", target: "a1")
            }

            // Another device's removal takes an approved device's signature (DeviceApprovalTests).
            await #expect(throws: DomainError(.forbidden, "")) {
                try await domain.deregisterEndpoint(token: alice, endpointID: "a2", target: "a1")
            }
            try await domain.deregisterEndpoint(token: alice, endpointID: "a1", target: "a1")
            await #expect(throws: DomainError(.endpointRemoved, "")) { try await domain.checkIn(token: alice, endpointID: "a1") }
            // It cannot come back under the removed id: it must wipe and register anew.
            await #expect(throws: DomainError(.endpointRemoved, "")) {
                try await domain.registerEndpoint(token: alice, registration: .init(endpointID: "a1", description: "laptop"))
            }
            do {
                _ = try await domain.checkIn(token: alice, endpointID: "a1")
            } catch let error as DomainError {
                #expect(error.reason == "deregistered by the user")
            }
            #expect(
                Self.registered(
                    try await domain.registerEndpoint(token: alice, registration: .init(endpointID: "a3", description: "tablet")))?
                    .registrationID == 3)
            #expect(try await domain.endpoints(token: alice, endpointID: "a2").map(\.endpointID) == ["a2", "a3"])

            // Another user reaches none of it.
            let mallory = try await Self.token(domain, "mallory")
            _ = try await domain.registerEndpoint(token: mallory, registration: .init(endpointID: "m1", description: "m"))
            await #expect(throws: DomainError(.notFound, "")) {
                try await domain.deregisterEndpoint(token: mallory, endpointID: "m1", target: "a2")
            }
            await #expect(throws: DomainError(.endpointRemoved, "")) {
                try await domain.endpoints(token: mallory, endpointID: "a2")
            }
            await #expect(throws: DomainError(.forbidden, "")) {
                try await domain.registerEndpoint(token: mallory, registration: .init(endpointID: "a2", description: "stolen id"))
            }
            await #expect(throws: DomainError(.endpointRemoved, "")) {
                try await domain.checkIn(token: mallory, endpointID: "a2")
            }
            #expect(try await domain.endpoints(token: mallory, endpointID: "m1").map(\.endpointID) == ["m1"])
            await #expect(throws: DomainError(.invalidToken, "")) {
                try await domain.endpoints(token: "forged.token.here", endpointID: "a2")
            }
        }
    }

    @Test func oneActiveEndpointMeansADeviceSwitch() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try makeDomain(directory, policy: DomainPolicy(multipleActiveEndpoints: false, passwordIterations: 1000))
            let bob = try await Self.token(domain, "bob")
            _ = try await domain.registerEndpoint(token: bob, registration: .init(endpointID: "b1", description: "old phone"))
            guard
                case .deviceSwitchRequired(let active) = try await domain.registerEndpoint(
                    token: bob, registration: .init(endpointID: "b2", description: "new phone"))
            else {
                Issue.record("expected a device switch")
                return
            }
            #expect(active.map(\.endpointID) == ["b1"])
            let taken = try await domain.registerEndpoint(
                token: bob, registration: .init(endpointID: "b2", description: "new phone", takeOver: true))
            #expect(Self.registered(taken)?.endpointID == "b2")
            do {
                _ = try await domain.checkIn(token: bob, endpointID: "b1")
                Issue.record("the old endpoint should be removed")
            } catch let error as DomainError {
                #expect(error.code == .endpointRemoved && error.reason.contains("superseded"))
            }
        }
    }

    @Test func keyBlobsUseCompareAndSwapAndStayPerUser() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try makeDomain(directory)
            let alice = try await Self.token(domain, "alice")
            _ = try await domain.registerEndpoint(token: alice, registration: .init(endpointID: "a1", description: "laptop"))
            #expect(try await domain.fetchKeyBlob(token: alice, endpointID: "a1", name: "profile").blob == nil)
            #expect(
                try await domain.putKeyBlob(
                    token: alice, endpointID: "a1", name: "profile", data: Data("v1".utf8), expectedVersion: nil) == 1)
            await #expect(throws: DomainError(.conflict, "")) {
                try await domain.putKeyBlob(
                    token: alice, endpointID: "a1", name: "profile", data: Data("other".utf8), expectedVersion: nil)
            }
            #expect(
                try await domain.putKeyBlob(
                    token: alice, endpointID: "a1", name: "profile", data: Data("v2".utf8), expectedVersion: 1) == 2)
            await #expect(throws: DomainError(.conflict, "")) {
                try await domain.putKeyBlob(
                    token: alice, endpointID: "a1", name: "profile", data: Data("stale".utf8), expectedVersion: 1)
            }
            #expect(
                try await domain.fetchKeyBlob(token: alice, endpointID: "a1", name: "profile").blob
                    == KeyBlob(name: "profile", data: Data("v2".utf8), version: 2))
            await #expect(throws: DomainError(.invalidRequest, "")) {
                try await domain.putKeyBlob(
                    token: alice, endpointID: "a1", name: "../x", data: Data("x".utf8), expectedVersion: nil)
            }
            await #expect(throws: DomainError(.invalidRequest, "")) {
                try await domain.putKeyBlob(
                    token: alice, endpointID: "a1", name: "big", data: Data(count: 70_000), expectedVersion: nil)
            }
            // Mallory, even naming alice's endpoint, cannot read or write alice's blobs.
            let mallory = try await Self.token(domain, "mallory")
            await #expect(throws: DomainError(.endpointRemoved, "")) {
                try await domain.fetchKeyBlob(token: mallory, endpointID: "a1", name: "profile")
            }
            _ = try await domain.registerEndpoint(token: mallory, registration: .init(endpointID: "m1", description: "x"))
            #expect(try await domain.fetchKeyBlob(token: mallory, endpointID: "m1", name: "profile").blob == nil)
        }
    }

    @Test func unlockAttemptsAreLimitedUntilProven() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let clock = TestClock(Date())
            let domain = try makeDomain(
                directory, clock: clock, policy: DomainPolicy(passwordIterations: 1000, unlockAttemptsPerHour: 3))
            let alice = try await Self.token(domain, "alice")
            _ = try await domain.registerEndpoint(token: alice, registration: .init(endpointID: "a1", description: "laptop"))
            let (identity, signing) = try Self.identity("alice")
            try await domain.publishIdentity(token: alice, endpointID: "a1", identity: identity)
            // Each passcode attempt is an OPRF evaluation the domain counts.
            let blinded = try OPRF.passcodeHardening.blind(Data("stretched".utf8)).element
            func attempt() async throws -> PasscodeEvaluation {
                try await domain.evaluatePasscode(token: alice, endpointID: "a1", blindedElement: blinded, keyID: nil)
            }
            var challenges: [Data] = []
            for expected in [2, 1, 0] {
                let evaluation = try await attempt()
                #expect(evaluation.attemptsLeft == expected && evaluation.challenge.count == 32)
                challenges.append(evaluation.challenge)
            }
            do {
                _ = try await attempt()
                Issue.record("expected the limit")
            } catch let error as DomainError {
                #expect(error.code == .tooManyAttempts && (1...3600).contains(error.retryAfter ?? 0))
            }
            // Past the limit the domain does no OPRF work at all: even an element that is not a
            // point is refused for the count, before anything looks at it.
            await #expect(throws: DomainError(.tooManyAttempts, "")) {
                try await domain.evaluatePasscode(token: alice, endpointID: "a1", blindedElement: Data([1, 2, 3]), keyID: nil)
            }
            // Reading the blob is not an attempt, and is not refused at the limit.
            #expect(try await domain.fetchKeyBlob(token: alice, endpointID: "a1", name: KeyBlob.managementName).blob == nil)
            // A wrong signature, another user's signature, or a replay prove nothing.
            let message = unlockProofMessage(userID: "alice", endpointID: "a1", challenge: challenges[2])
            await #expect(throws: DomainError(.invalidProof, "")) {
                try await domain.proveUnlock(
                    token: alice, endpointID: "a1", challenge: challenges[2],
                    signature: try Ed25519.PrivateKey().signature(for: message))
            }
            let wrongEndpoint = unlockProofMessage(userID: "alice", endpointID: "a2", challenge: challenges[2])
            await #expect(throws: DomainError(.invalidProof, "")) {
                try await domain.proveUnlock(
                    token: alice, endpointID: "a1", challenge: challenges[2], signature: try signing.signature(for: wrongEndpoint)
                )
            }
            try await domain.proveUnlock(
                token: alice, endpointID: "a1", challenge: challenges[2], signature: try signing.signature(for: message))
            await #expect(throws: DomainError(.invalidProof, "")) {
                try await domain.proveUnlock(
                    token: alice, endpointID: "a1", challenge: challenges[2], signature: try signing.signature(for: message))
            }
            // The proven attempt no longer counts: one more is allowed.
            #expect(try await attempt().attemptsLeft == 0)
            // An hour later the allowance is back, and the attempts of the hour before, proven
            // or not, are gone from the database.
            clock.advance(by: 3601)
            #expect(try await attempt().attemptsLeft == 2)
            let database = try DatabaseQueue(path: directory.appendingPathComponent("domain.sqlite").path)
            let rows = try database.read { db in try db.scalar("SELECT count(*) FROM unlock_challenges", as: Int.self) }
            #expect(rows == 1, "only the newest attempt is kept")
        }
    }

    /// A check-in marks the endpoint seen to the minute: one within a minute of the time
    /// recorded reads it back unchanged, one after writes the new time; a removed endpoint is
    /// told so either way.
    @Test func checkInRecordsWhenSeenToTheMinute() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let clock = TestClock(Date(timeIntervalSince1970: 1_800_000_000))
            let domain = try makeDomain(directory, clock: clock)
            let alice = try await Self.token(domain, "alice")
            _ = try await domain.registerEndpoint(token: alice, registration: .init(endpointID: "a1", description: "laptop"))
            let registered = try await domain.checkIn(token: alice, endpointID: "a1").lastSeen
            #expect(registered == clock.now)
            clock.advance(by: 59)
            #expect(try await domain.checkIn(token: alice, endpointID: "a1").lastSeen == registered)
            #expect(try await domain.endpoints(token: alice, endpointID: "a1").first?.lastSeen == registered)
            clock.advance(by: 1)
            #expect(try await domain.checkIn(token: alice, endpointID: "a1").lastSeen == clock.now)
            #expect(try await domain.endpoints(token: alice, endpointID: "a1").first?.lastSeen == clock.now)
            try await domain.deregisterEndpoint(token: alice, endpointID: "a1", target: "a1")
            await #expect(throws: DomainError(.endpointRemoved, "")) { try await domain.checkIn(token: alice, endpointID: "a1") }
        }
    }

    @Test func identitiesAreSelfSignedVersionedAndResettable() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let clock = TestClock(Date())
            let domain = try makeDomain(directory, clock: clock)
            var alice = try await Self.token(domain, "alice")
            _ = try await domain.registerEndpoint(token: alice, registration: .init(endpointID: "a1", description: "laptop"))
            _ = try await domain.registerEndpoint(token: alice, registration: .init(endpointID: "a2", description: "phone"))
            let (identity, _) = try Self.identity("alice")
            var tampered = identity
            tampered.encryptionKey = try X25519.PrivateKey().publicKey.rawRepresentation
            await #expect(throws: DomainError(.invalidRequest, "")) {
                try await domain.publishIdentity(token: alice, endpointID: "a1", identity: tampered)
            }
            let (bobs, _) = try Self.identity("bob")
            await #expect(throws: DomainError(.forbidden, "")) {
                try await domain.publishIdentity(token: alice, endpointID: "a1", identity: bobs)
            }
            // A blob written before the identity (the first device's order), which a reset clears.
            _ = try await domain.putKeyBlob(
                token: alice, endpointID: "a2", name: "profile", data: Data("x".utf8), expectedVersion: nil)
            try await domain.publishIdentity(token: alice, endpointID: "a1", identity: identity)
            try await domain.publishIdentity(token: alice, endpointID: "a1", identity: identity)  // idempotent
            let (replacement, _) = try Self.identity("alice")
            await #expect(throws: DomainError(.conflict, "")) {
                try await domain.publishIdentity(token: alice, endpointID: "a1", identity: replacement)
            }
            var bob = try await Self.token(domain, "bob")
            _ = try await domain.registerEndpoint(token: bob, registration: .init(endpointID: "b1", description: "bob's"))
            #expect(try await domain.identity(token: bob, endpointID: "b1", userID: "alice") == identity)

            // Without the current key the reset waits out the delay, and a request before it
            // changes nothing; after it, the reset completes.
            let started = try await domain.resetIdentity(token: alice, endpointID: "a2", signature: nil)
            guard case .pending(let pending) = started else {
                Issue.record("an unsigned reset completed at once: \(started)")
                return
            }
            #expect(pending.endpointID == "a2" && abs(pending.requestedAt.timeIntervalSince(clock.now)) < 0.001)
            #expect(pending.effectiveAt.timeIntervalSince(pending.requestedAt) == 7 * 86400)
            clock.advance(by: 7 * 86400 - 1)
            alice = try await Self.token(domain, "alice")
            bob = try await Self.token(domain, "bob")
            #expect(try await domain.resetIdentity(token: alice, endpointID: "a2", signature: nil) == started)
            #expect(try await domain.identity(token: bob, endpointID: "b1", userID: "alice") == identity)
            _ = try await domain.checkIn(token: alice, endpointID: "a1")
            clock.advance(by: 1)
            #expect(try await domain.resetIdentity(token: alice, endpointID: "a2", signature: nil) == .completed)
            #expect(try await domain.pendingIdentityReset(token: bob, endpointID: "b1", userID: "alice") == nil)
            #expect(try await domain.identity(token: bob, endpointID: "b1", userID: "alice") == nil)
            #expect(try await domain.fetchKeyBlob(token: alice, endpointID: "a2", name: "profile").blob == nil)
            await #expect(throws: DomainError(.endpointRemoved, "")) { try await domain.checkIn(token: alice, endpointID: "a1") }
            await #expect(throws: DomainError(.conflict, "")) {
                try await domain.publishIdentity(token: alice, endpointID: "a2", identity: replacement)
            }
            let (second, _) = try Self.identity("alice", version: 2)
            try await domain.publishIdentity(token: alice, endpointID: "a2", identity: second)
            #expect(try await domain.identity(token: bob, endpointID: "b1", userID: "alice")?.keyVersion == 2)
        }
    }
}
