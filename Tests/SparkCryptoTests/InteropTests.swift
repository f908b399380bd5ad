import Foundation
import SparkCrypto
import SparkTestSupport
import Testing

/// Interoperability with Python's jwcrypto: each side opens the other's JWE with the passcode
/// and verifies the other's JWS. `.ci/run` installs jwcrypto; without it these tests fail with
/// a message saying so rather than passing.
@Suite("Interop with jwcrypto")
struct InteropTests {
    static func python(_ arguments: [String], input: String = "") async throws -> String {
        try await Fixtures.python("Tests/SparkCryptoTests/Python/jose_peer.py", arguments, input: input)
    }

    static let passcode = "tr0ub4dor&3-interop"

    @Test func ourPasscodeJWEOpensInJWCrypto() async throws {
        let secret = Data((0..<32).map { UInt8($0) })
        // jwcrypto caps p2c at 16384 by default (its own DoS guard), so this blob uses a low count.
        let blob = try JWE.encrypt(secret, password: Data(Self.passcode.utf8), unsafeUncheckedIterations: 1000)
        #expect(
            try await Self.python(["decrypt-password", Self.passcode], input: String(decoding: blob, as: UTF8.self)) == secret.hex
        )
        await #expect(throws: PythonPeerError.self) {
            try await Self.python(["decrypt-password", "not the passcode"], input: String(decoding: blob, as: UTF8.self))
        }
    }

    @Test func jwcryptoPasscodeJWEOpensHere() async throws {
        let secret = Data("management key from python".utf8)
        let blob = try await Self.python(["encrypt-password", Self.passcode, secret.hex])
        #expect(try JWE.decrypt(Data(blob.utf8), password: Data(Self.passcode.utf8)).unsafeData() == secret)
        #expect(throws: CryptoError(.authenticationFailure, "")) { try JWE.decrypt(Data(blob.utf8), password: Data("nope".utf8)) }
    }

    @Test func ourEdDSATokenVerifiesInJWCrypto() async throws {
        let key = try Ed25519.PrivateKey()
        let payload = Data(#"{"sub":"alice","aud":"spark"}"#.utf8)
        let token = try JWS.sign(payload: payload, using: key, keyID: "ours")
        let jwk = String(decoding: try JWK(key.publicKey, keyID: "ours").jsonData(), as: UTF8.self)
        #expect(try await Self.python(["verify", jwk], input: token) == payload.hex)
        let otherKey = String(decoding: try JWK(try Ed25519.PrivateKey().publicKey).jsonData(), as: UTF8.self)
        await #expect(throws: PythonPeerError.self) { try await Self.python(["verify", otherKey], input: token) }
    }

    @Test(arguments: ["EdDSA", "ES256", "RS256"])
    func jwcryptoTokenVerifiesHere(algorithm: String) async throws {
        let payload = #"{"sub":"bob"}"#
        let output = try await Self.python(["sign", algorithm], input: payload)
        let object = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any] ?? [:]
        let token = try #require(object["token"] as? String)
        let jwk = try JWK(json: JSONSerialization.data(withJSONObject: object["jwk"] as? [String: Any] ?? [:]))
        let verified = try JWS.verify(token, using: [JWS.VerificationKey(jwk: jwk)])
        #expect(verified.algorithm.rawValue == algorithm)
        #expect(String(decoding: verified.payload, as: UTF8.self) == payload)
        let tampered = String(token.dropLast(2)) + (token.hasSuffix("AA") ? "BA" : "AA")
        #expect(throws: CryptoError(.invalidSignature, "")) { try JWS.verify(tampered, using: [JWS.VerificationKey(jwk: jwk)]) }
    }
}
