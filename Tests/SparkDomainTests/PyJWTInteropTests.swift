import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkTestSupport
import Testing

/// Tokens from PyJWT are accepted through an external issuer configured with a JWKS that Python
/// wrote, and tokens from our test issuer verify in PyJWT. `.ci/run` installs PyJWT.
@Suite("Interop with PyJWT")
struct PyJWTInteropTests {
    static func python(_ arguments: [String], input: String = "") async throws -> String {
        try await Fixtures.python("Tests/SparkDomainTests/Python/jwt_peer.py", arguments, input: input)
    }

    @Test(arguments: ["RS256", "ES256", "EdDSA"])
    func pyJWTTokensAreAcceptedByAnExternalIssuer(algorithm: String) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try makeDomain(directory)
            let jwksPath = directory.appendingPathComponent("jwks-\(algorithm).json").path
            let token = try await Self.python(["make", algorithm, "https://py.example", "py-app", "frank", jwksPath])
            try domain.addExternalIssuer(.init(issuer: "https://py.example", audience: "py-app", jwksPath: jwksPath))
            let identity = try await domain.validate(token: token)
            #expect(identity.userID == "frank" && identity.issuerKind == .external)
            #expect(try JWS.unverifiedHeader(of: token).algorithm == algorithm)
        }
    }

    @Test func ourTestIssuerTokensVerifyInPyJWT() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try makeDomain(directory)
            let jwksPath = directory.appendingPathComponent("ours.json").path
            try domain.testIssuerJWKS.jsonData().write(to: URL(fileURLWithPath: jwksPath))
            let token = try await domain.testToken(userID: "grace").token
            #expect(try await Self.python(["verify", jwksPath, domain.testIssuerName, domain.domainID], input: token) == "grace")
            await #expect(throws: PythonPeerError.self) {
                try await Self.python(["verify", jwksPath, domain.testIssuerName, "other-audience"], input: token)
            }
        }
    }
}
