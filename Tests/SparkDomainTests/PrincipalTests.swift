import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkTestSupport
import Testing

/// A user is an issuer's subject: the same name from another issuer is another user, and is
/// refused rather than let in as the first one.
@Suite("Embedded domain: a user is issuer and subject")
struct PrincipalTests {
    /// An accounts user `alice` with an endpoint, and an external issuer whose tokens also say
    /// `alice`.
    static func world(_ directory: URL, sandbox: Bool = false) async throws -> (EmbeddedDomain, String, TokenIssuer) {
        let domain = try makeDomain(
            directory, policy: DomainPolicy(userAuthenticationEnabled: !sandbox, passwordIterations: 1000))
        try await domain.signUp(
            SignUpRequest(userName: "alice", password: "Maple-Leaf-2024", email: "a@example.com", country: "CA", age: 30))
        try await domain.activate(userName: "alice", code: try latestCode(domain, "a@example.com"))
        let token = try await domain.logIn(userName: "alice", password: "Maple-Leaf-2024").token
        _ = try await domain.registerEndpoint(token: token, registration: .init(endpointID: "alice-1", description: "laptop"))
        let external = TokenIssuer(issuer: "https://idp.example", key: try Ed25519.PrivateKey(), keyID: "e")
        let path = directory.appendingPathComponent("idp.json").path
        try external.jwks.jsonData().write(to: URL(fileURLWithPath: path))
        try domain.addExternalIssuer(.init(issuer: external.issuer, audience: "app", jwksPath: path))
        return (domain, token, external)
    }

    @Test func anotherIssuersAliceIsRefusedEverywhere() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let (domain, aliceToken, external) = try await Self.world(directory)
            let impostor = try external.issue(subject: "alice", audience: "app", lifetime: 600, now: Date()).token
            do {
                _ = try await domain.validate(token: impostor)
                Issue.record("another issuer's alice was let in")
            } catch let error as DomainError {
                #expect(error.code == .forbidden && error.reason.contains("belongs to another issuer"), "\(error)")
            }
            // Nothing of the accounts alice's is reachable with it.
            await #expect(throws: DomainError(.forbidden, "")) {
                try await domain.endpoints(token: impostor, endpointID: "alice-1")
            }
            await #expect(throws: DomainError(.forbidden, "")) {
                try await domain.readMailbox(token: impostor, endpointID: "alice-1", after: 0, limit: 10)
            }
            await #expect(throws: DomainError(.forbidden, "")) {
                try await domain.fetchKeyBlob(token: impostor, endpointID: "alice-1", name: KeyBlob.managementName)
            }
            // The real alice is unaffected, and the external issuer's other users come in.
            #expect(try await domain.endpoints(token: aliceToken, endpointID: "alice-1").map(\.endpointID) == ["alice-1"])
            let carol = try external.issue(subject: "carol", audience: "app", lifetime: 600, now: Date()).token
            #expect(try await domain.validate(token: carol).userID == "carol")
            // And carol is now the external issuer's: no account can take the name.
            await #expect(throws: DomainError(.nameTaken, "")) {
                try await domain.signUp(
                    SignUpRequest(userName: "carol", password: "Maple-Leaf-2024", email: "c@example.com", country: "CA", age: 30))
            }
        }
    }

    @Test func aSandboxMintsNoTokenForAnAccountsName() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let (domain, _, _) = try await Self.world(directory, sandbox: true)
            await #expect(throws: DomainError(.forbidden, "")) { try await domain.testToken(userID: "alice") }
            let dave = try await domain.testToken(userID: "dave").token
            #expect(try await domain.validate(token: dave).userID == "dave")
            await #expect(throws: DomainError(.nameTaken, ""), "the sandbox's dave is not an account's") {
                try await domain.signUp(
                    SignUpRequest(userName: "dave", password: "Maple-Leaf-2024", email: "d@example.com", country: "CA", age: 30))
            }
        }
    }

    @Test func theBindingHoldsAcrossProcesses() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let (domain, _, external) = try await Self.world(directory)
            // Another process opens the same file: it knows nothing in memory, the file decides.
            let other = try EmbeddedDomain.open(at: domain.path, allowUnsafePasswordHashing: true)
            let impostor = try external.issue(subject: "alice", audience: "app", lifetime: 600, now: Date()).token
            await #expect(throws: DomainError(.forbidden, "")) { try await other.validate(token: impostor) }
        }
    }
}
