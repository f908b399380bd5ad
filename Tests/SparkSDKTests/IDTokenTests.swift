import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkTestSupport
import Testing

/// What a device and a domain accept of an OpenID provider's tokens, each check tried by an
/// attacker: tokens for another client, from another issuer, replayed into another sign-in,
/// signed under a key confused for another algorithm.
@Suite("ID tokens: the device's and the domain's checks")
struct IDTokenTests {
    static let issuer = "https://id.example.com"
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let key = try! Ed25519.PrivateKey()
    static let keys = [JWS.VerificationKey(key.publicKey, keyID: "k1")]

    /// A token with the usual claims, changed by `edit`, signed by `key` (the provider's unless
    /// said otherwise).
    static func token(
        key: Ed25519.PrivateKey = IDTokenTests.key, keyID: String = "k1", type: String? = "JWT",
        _ edit: (inout [String: Any]) -> Void = { _ in }
    ) throws -> String {
        var claims: [String: Any] = [
            "iss": issuer, "sub": "248289761001", "aud": "spark-app", "exp": Int(now.timeIntervalSince1970) + 600,
            "iat": Int(now.timeIntervalSince1970) - 5, "nonce": "n-0S6_WzA2Mj", "email": "alice@example.org",
            "email_verified": true, "name": "Alice",
        ]
        edit(&claims)
        return try JWS.sign(
            payload: try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys]), using: key, keyID: keyID,
            type: type)
    }

    static let check = IDTokenCheck(issuer: issuer, clientID: "spark-app", userClaim: "sub", leeway: 60)

    static func verify(_ token: String, nonce: String? = "n-0S6_WzA2Mj", check: IDTokenCheck = check) throws -> String {
        try check.verify(token, keys: keys, nonce: nonce, now: now).user
    }

    static func refused(_ token: String, nonce: String? = "n-0S6_WzA2Mj", check: IDTokenCheck = check) -> DomainError? {
        do {
            _ = try verify(token, nonce: nonce, check: check)
            return nil
        } catch let error as DomainError {
            return error
        } catch {
            Issue.record("not a DomainError: \(error)")
            return nil
        }
    }

    @Test func aGoodTokenNamesItsUser() throws {
        #expect(try Self.verify(try Self.token()) == "248289761001")
        var byEmail = Self.check
        byEmail.userClaim = "email"
        #expect(try Self.verify(try Self.token(), check: byEmail) == "alice@example.org")
        // Several audiences are fine when azp names this client.
        #expect(
            try Self.verify(
                try Self.token {
                    $0["aud"] = ["spark-app", "other"]
                    $0["azp"] = "spark-app"
                }) != "")
    }

    @Test func anotherIssuerOrClientIsRefused() throws {
        #expect(Self.refused(try Self.token { $0["iss"] = "https://evil.example.com" })?.code == .invalidToken)
        #expect(Self.refused(try Self.token { $0["aud"] = "another-app" })?.code == .wrongAudience)
        // A token obtained by another client that also lists us: azp must be ours.
        #expect(Self.refused(try Self.token { $0["aud"] = ["spark-app", "other"] })?.code == .invalidToken)
        #expect(Self.refused(try Self.token { $0["azp"] = "other" })?.code == .invalidToken)
    }

    @Test func itsTimeAndNonceAreChecked() throws {
        let seconds = Int(Self.now.timeIntervalSince1970)
        #expect(Self.refused(try Self.token { $0["exp"] = seconds - 61 })?.code == .tokenExpired)
        #expect(try Self.verify(try Self.token { $0["exp"] = seconds - 30 }) != "")
        #expect(Self.refused(try Self.token { $0["iat"] = seconds + 120 })?.code == .invalidToken)
        #expect(Self.refused(try Self.token { $0["iat"] = nil })?.code == .invalidToken)
        #expect(Self.refused(try Self.token { $0["exp"] = nil })?.code == .invalidToken)
        // Another sign-in's token (a replay) carries another nonce, or none.
        #expect(Self.refused(try Self.token { $0["nonce"] = "another" })?.reason.contains("nonce") == true)
        #expect(Self.refused(try Self.token { $0["nonce"] = nil })?.reason.contains("nonce") == true)
        // Where no nonce was sent (the device grant, a refresh) none is required.
        #expect(try Self.verify(try Self.token { $0["nonce"] = nil }, nonce: nil) != "")
    }

    @Test func onlyTheProvidersKeysAndAlgorithmsVerify() throws {
        #expect(Self.refused(try Self.token(key: try Ed25519.PrivateKey()))?.code == .invalidToken)
        // A token of the right shape under a kid the provider never published.
        let unknown = try Self.token(key: try Ed25519.PrivateKey(), keyID: "k9")
        #expect(IDTokenCheck.namesUnknownKey(unknown, keys: Self.keys))
        #expect(!IDTokenCheck.namesUnknownKey(try Self.token(), keys: Self.keys))
        #expect(Self.refused(unknown)?.code == .invalidToken)
        // alg none, and an access token (at+jwt) passed off as an ID token.
        let parts = try Self.token().split(separator: ".")
        let none = Data(#"{"alg":"none","kid":"k1"}"#.utf8).base64URLEncodedString() + "." + parts[1] + "."
        #expect(Self.refused(none)?.code == .invalidToken)
        #expect(Self.refused(try Self.token(type: "at+jwt"))?.code == .invalidToken)
    }

    @Test func anEmailTheProviderDidNotVerifyNamesNobody() throws {
        var byEmail = Self.check
        byEmail.userClaim = "email"
        #expect(Self.refused(try Self.token { $0["email_verified"] = false }, check: byEmail)?.code == .invalidToken)
        #expect(Self.refused(try Self.token { $0["email"] = nil }, check: byEmail)?.code == .invalidToken)
        #expect(Self.refused(try Self.token { $0["sub"] = "" })?.code == .invalidToken)
    }

    /// RSA keys as providers publish them, signed by jwcrypto: RS256 and PS256 each verify
    /// under a key published for it, never under the other; an HS256 token whose secret is the
    /// public key (algorithm confusion) verifies under neither.
    @Test func eachRSAKeyVerifiesItsOwnAlgorithmOnly() async throws {
        let claims = #"{"iss":"https://id.example.com","sub":"bob","aud":"spark-app","exp":4000000000,"iat":1800000000}"#
        let answer = try await Fixtures.python("Tests/SparkSDKTests/Python/rsa_tokens.py", [claims])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(answer.utf8)) as? [String: Any])
        func key(_ name: String) throws -> JWS.VerificationKey {
            let json = try JSONSerialization.data(withJSONObject: try #require(object[name]))
            return try JWS.VerificationKey(jwk: try JSONDecoder().decode(JWK.self, from: json))
        }
        let (rs, ps) = (try key("rs_jwk"), try key("ps_jwk"))
        #expect(rs.algorithm == .rs256 && ps.algorithm == .ps256)
        let (rs256, ps256, hs256) = (
            try #require(object["rs256"] as? String), try #require(object["ps256"] as? String),
            try #require(object["hs256"] as? String)
        )
        #expect(try JWS.verify(rs256, using: [rs, ps]).algorithm == .rs256)
        #expect(try JWS.verify(ps256, using: [rs, ps]).algorithm == .ps256)
        // The same key under the other algorithm's kid: refused.
        #expect(throws: CryptoError.self) { try JWS.verify(rs256, using: [ps]) }
        #expect(throws: CryptoError.self) { try JWS.verify(ps256, using: [rs]) }
        #expect(throws: CryptoError.self) { try JWS.verify(hs256, using: [rs, ps]) }
        // The domain's validator, with the provider trusted by its keys, says the same.
        let validator = TokenValidator(
            issuers: [
                TrustedIssuer(
                    issuer: "https://id.example.com", audience: "spark-app", keys: [rs, ps], kind: .external,
                    discovered: true)
            ], clock: WallClock { Self.now })
        #expect(try validator.validate(ps256).userID == "bob")
        #expect(try validator.validate(rs256).userID == "bob")
        #expect(throws: DomainError.self) { try validator.validate(hs256) }
    }

    /// The domain names the user by the issuer's claim, and a discovered issuer's token under a
    /// key it lacks is told apart (so the keys are fetched again) from a bad signature.
    @Test func theDomainReadsTheIssuersClaimAndTellsAnUnknownKeyApart() throws {
        func validator(userClaim: String, discovered: Bool) -> TokenValidator {
            TokenValidator(
                issuers: [
                    TrustedIssuer(
                        issuer: Self.issuer, audience: "spark-app", keys: Self.keys, kind: .external, userClaim: userClaim,
                        discovered: discovered)
                ], clock: WallClock { Self.now })
        }
        #expect(try validator(userClaim: "email", discovered: true).validate(try Self.token()).userID == "alice@example.org")
        #expect(throws: DomainError.self) {
            try validator(userClaim: "email", discovered: true).validate(try Self.token { $0["email_verified"] = false })
        }
        let rotated = try Self.token(key: try Ed25519.PrivateKey(), keyID: "k2")
        let error = try #require(throws: DomainError.self) { try validator(userClaim: "sub", discovered: true).validate(rotated) }
        #expect(error.reason == TokenValidator.unknownKey)
        // A bad signature under a known kid is not an unknown key: nothing is fetched for it.
        let forged = try Self.token(key: try Ed25519.PrivateKey(), keyID: "k1")
        let bad = try #require(throws: DomainError.self) { try validator(userClaim: "sub", discovered: true).validate(forged) }
        #expect(bad.reason != TokenValidator.unknownKey)
    }
}

@Suite("OpenID: how long a provider's keys are kept")
struct ProviderKeyFreshnessTests {
    @Test func cacheControlIsReadAndBounded() {
        #expect(OpenIDClient.maxAge("public, max-age=3600, must-revalidate") == 3600)
        #expect(OpenIDClient.maxAge("no-store") == 0)
        #expect(OpenIDClient.maxAge("max-age=\"60\", no-cache") == 0)
        #expect(OpenIDClient.maxAge("private") == nil)
        #expect(OpenIDClient.maxAge("max-age=-5") == nil)
        // Within 5 minutes and a day whatever the provider says; an hour when it says nothing.
        #expect(DomainEngine.freshness(0) == 300)
        #expect(DomainEngine.freshness(10 * 86_400) == 86_400)
        #expect(DomainEngine.freshness(nil) == 3600)
        #expect(DomainEngine.freshness(7200) == 7200)
    }
}
