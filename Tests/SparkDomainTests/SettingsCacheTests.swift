import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkDomainServer
import SparkTestSupport
import Testing

/// An engine that owns its store keeps the policy and the trusted issuers between requests
/// instead of reading them on each. What it keeps never outlives a change: its own changes end
/// it at once, another instance's as soon as PostgreSQL's `NOTIFY` reaches it, and a writer it
/// cannot hear from within the store's ``DomainStore/settingsLifetime``. A refusal is always
/// checked against the rows as stored.
@Suite("Settings kept between requests")
struct SettingsCacheTests {
    static let idp = TokenIssuer(issuer: "https://idp.example", key: try! Ed25519.PrivateKey(), keyID: "k1")

    static func external(_ subject: String, audience: String) throws -> String {
        try idp.issue(subject: subject, audience: audience, lifetime: 600, now: Date()).token
    }

    /// A change through the engine that keeps the settings counts at its very next request.
    @Test func aChangeMadeHereCountsAtTheNextRequest() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let path = try makeDomain(directory).path
            let domain = try EmbeddedDomain.open(at: path, allowUnsafePasswordHashing: true, sharedWithOtherProcesses: false)
            let token = try await domain.testToken(userID: "alice").token
            #expect(try await domain.validate(token: token).userID == "alice")

            try domain.trustIssuer(Self.idp.issuer, audience: "app", jwks: try Self.idp.jwks.jsonData())
            let carol = try Self.external("carol", audience: "app")
            #expect(try await domain.validate(token: carol).userID == "carol")
            try domain.removeExternalIssuer(Self.idp.issuer)
            await #expect(throws: DomainError(.invalidToken, "")) { try await domain.validate(token: carol) }

            var policy = try await domain.policy()
            policy.userAuthenticationEnabled = true
            try domain.setPolicy(policy)
            await #expect(throws: DomainError(.userAuthenticationRequired, "")) { try await domain.validate(token: token) }
        }
    }

    /// Another process writing the file (`spark-admin` on a served domain's file) is not heard:
    /// its change counts once the kept settings are a second old, or at once where it lets a
    /// token in.
    @Test func aChangeNobodyAnnouncedCountsWithinTheStoresLifetime() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let path = try makeDomain(directory).path
            let domain = try EmbeddedDomain.open(at: path, allowUnsafePasswordHashing: true, sharedWithOtherProcesses: false)
            let token = try await domain.testToken(userID: "alice").token
            #expect(try await domain.validate(token: token).userID == "alice")

            let elsewhere = try EmbeddedDomain.open(at: path, allowUnsafePasswordHashing: true)
            try elsewhere.trustIssuer(Self.idp.issuer, audience: "app", jwks: try Self.idp.jwks.jsonData())
            #expect(try await domain.validate(token: try Self.external("carol", audience: "app")).userID == "carol")
            var policy = try await elsewhere.policy()
            policy.userAuthenticationEnabled = true
            try elsewhere.setPolicy(policy)
            #expect(
                await eventuallyAwaiting(seconds: 30) {
                    (try? await domain.validate(token: token)) == nil
                }, "test tokens are refused once the kept policy is older than a second")
        }
    }

    /// Two instances on one PostgreSQL database whose kept settings would last an hour: only the
    /// announcement can end them.
    @Test func anotherInstancesChangeCountsWhenItsAnnouncementArrives() async throws {
        let conninfo = try await PostgresCluster.newDatabase()
        let (first, second) = try await Fixtures.blocking { () -> (PostgreSQLDomainStore, PostgreSQLDomainStore) in
            let first = try PostgreSQLDomainStore(conninfo: conninfo, connections: 2, settingsLifetime: .seconds(3600))
            try DomainEngine.create(in: first, domainID: "kept", policy: DomainPolicy())
            return (first, try PostgreSQLDomainStore(conninfo: conninfo, connections: 2, settingsLifetime: .seconds(3600)))
        }
        defer {
            first.stopListening()
            second.stopListening()
        }
        let keys = PasscodeKeys.generate()
        let a = try DomainEngine(store: first, location: "a", passcodeKeys: keys)
        let b = try DomainEngine(store: second, location: "b", passcodeKeys: keys)
        let token = try await b.testToken(userID: "alice").token
        #expect(try await b.validate(token: token).userID == "alice")

        // A refusal is checked against the stored rows: B takes an issuer A trusted a moment ago.
        try a.trustIssuer(Self.idp.issuer, audience: "kept", jwks: try Self.idp.jwks.jsonData())
        let carol = try Self.external("carol", audience: "kept")
        #expect(try await b.validate(token: carol).userID == "carol")

        // A removal or a stricter policy lets nothing in: B must hear of it.
        try a.removeExternalIssuer(Self.idp.issuer)
        #expect(
            await eventuallyAwaiting(seconds: 30) { (try? await b.validate(token: carol)) == nil },
            "B refuses the removed issuer's tokens once A's announcement arrives")
        var policy = try await a.policy()
        policy.userAuthenticationEnabled = true
        try a.setPolicy(policy)
        #expect(
            await eventuallyAwaiting(seconds: 30) { (try? await b.validate(token: token)) == nil },
            "B refuses test tokens once A's announcement arrives")
        #expect(try await b.policy().userAuthenticationEnabled)
    }
}
