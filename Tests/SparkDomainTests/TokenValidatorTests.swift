import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkTestSupport
import Testing

/// Every validation rule with real signed tokens, including the classic attacks.
@Suite("Token validation")
struct TokenValidatorTests {
    let clock = TestClock()
    let signer: Ed25519.PrivateKey
    let issuer: TokenIssuer
    let validator: TokenValidator

    init() throws {
        signer = try Ed25519.PrivateKey()
        issuer = TokenIssuer(issuer: "https://idp.example", key: signer, keyID: "k1")
        validator = TokenValidator(
            issuers: [issuer.trusted(audience: "domain-1", kind: .external)], leeway: 30, clock: clock.wallClock)
    }

    /// Signs arbitrary claims (and header) with `key`, for tokens an honest issuer would not make.
    static func token(_ claims: [String: Any], header: [String: Any] = ["alg": "EdDSA", "kid": "k1"], key: Ed25519.PrivateKey)
        throws -> String
    {
        let header = try JSONSerialization.data(withJSONObject: header).base64URLEncodedString()
        let payload = try JSONSerialization.data(withJSONObject: claims).base64URLEncodedString()
        let signature = try key.signature(for: Data("\(header).\(payload)".utf8))
        return "\(header).\(payload).\(signature.base64URLEncodedString())"
    }

    var now: Int { Int(clock.now.timeIntervalSince1970) }

    func claims(_ changes: [String: Any] = [:]) -> [String: Any] {
        var claims: [String: Any] = [
            "iss": "https://idp.example", "sub": "alice", "aud": "domain-1", "exp": now + 600, "iat": now,
        ]
        for (key, value) in changes { claims[key] = value }
        return claims
    }

    @Test func aGoodTokenProvesItsSubject() throws {
        let issued = try issuer.issue(
            subject: "alice", audience: "domain-1", lifetime: 600, now: clock.now, email: "a@example.com")
        let identity = try validator.validate(issued.token)
        #expect(identity.userID == "alice" && identity.issuerKind == .external && identity.email == "a@example.com")
        #expect(identity.expiresAt == clock.now.addingTimeInterval(600))
        // An audience array that includes ours is fine too.
        let multi = try Self.token(claims(["aud": ["other", "domain-1"], "azp": "domain-1"]), key: signer)
        #expect(try validator.validate(multi).userID == "alice")
    }

    /// Several audiences need `azp` naming this domain's client, as the device checks an ID
    /// token: a token issued to another client that lists ours too is refused, as is any azp
    /// that is not ours.
    @Test func anAuthorizedPartyThatIsNotOursIsRefused() throws {
        for changes: [String: Any] in [
            ["aud": ["client-2", "domain-1"], "azp": "client-2"], ["aud": ["client-2", "domain-1"]],
            ["aud": "domain-1", "azp": "client-2"],
        ] {
            #expect(throws: DomainError(.wrongAudience, ""), "\(changes)") {
                try validator.validate(Self.token(claims(changes), key: signer))
            }
        }
        #expect(try validator.validate(Self.token(claims(["azp": "domain-1"]), key: signer)).userID == "alice")
    }

    /// A user claim with characters that show nothing or reorder the text is refused, so two
    /// ids that look the same are the same id; an ordinary one with a space and accents is not.
    @Test func invisibleAndBidirectionalUserIDsAreRefused() throws {
        for subject in [
            "ali\u{200B}ce", "\u{202E}ecila", "alice\u{2066}", "a\u{FEFF}lice", "alice\u{3164}", "alice\u{00A0}x", " alice",
            "ali\u{E000}ce",
        ] {
            #expect(throws: DomainError(.invalidToken, ""), "\(subject.unicodeScalars.map { $0.value })") {
                try validator.validate(Self.token(claims(["sub": subject]), key: signer))
            }
        }
        #expect(try validator.validate(Self.token(claims(["sub": "Zoë Ödegaard"]), key: signer)).userID == "Zoë Ödegaard")
    }

    @Test func onlyJWTsAndAccessTokensAreAcceptedByTheirTyp() throws {
        for type in ["JWT", "jwt", "application/jwt", "at+jwt", "application/at+JWT"] {
            let token = try Self.token(claims(), header: ["alg": "EdDSA", "kid": "k1", "typ": type], key: signer)
            #expect(try validator.validate(token).userID == "alice", "typ \(type)")
        }
        #expect(try validator.validate(try Self.token(claims(), key: signer)).userID == "alice", "no typ at all")
        // Other JWTs the same issuer signs for other purposes are not sign-ins.
        for type in ["secevent+jwt", "logout+jwt", "dpop+jwt", "JOSE", "JWS", ""] {
            let token = try Self.token(claims(), header: ["alg": "EdDSA", "kid": "k1", "typ": type], key: signer)
            #expect(throws: DomainError(.invalidToken, ""), "typ \(type)") { try validator.validate(token) }
        }
    }

    @Test func algNoneIsRefused() throws {
        let header = Data(#"{"alg":"none"}"#.utf8).base64URLEncodedString()
        let payload = try JSONSerialization.data(withJSONObject: claims()).base64URLEncodedString()
        #expect(throws: DomainError(.invalidToken, "")) { try validator.validate("\(header).\(payload).") }
    }

    @Test func hs256SignedWithThePublicKeyIsRefused() throws {
        // The confusion attack: an HMAC keyed with the issuer's public key bytes.
        let header = Data(#"{"alg":"HS256","kid":"k1"}"#.utf8).base64URLEncodedString()
        let payload = try JSONSerialization.data(withJSONObject: claims()).base64URLEncodedString()
        let mac = HMAC.authenticationCode(
            for: Data("\(header).\(payload)".utf8), using: signer.publicKey.rawRepresentation, hash: .sha256)
        #expect(throws: DomainError(.invalidToken, "")) {
            try validator.validate("\(header).\(payload).\(mac.base64URLEncodedString())")
        }
    }

    @Test func anotherAudienceIsRefused() throws {
        let token = try issuer.issue(subject: "alice", audience: "domain-2", lifetime: 600, now: clock.now).token
        #expect(throws: DomainError(.wrongAudience, "")) { try validator.validate(token) }
        #expect(throws: DomainError(.wrongAudience, "")) { try validator.validate(Self.token(claims(["aud": []]), key: signer)) }
    }

    @Test func expiryAndNotBeforeHonourTheLeeway() throws {
        let token = try issuer.issue(subject: "alice", audience: "domain-1", lifetime: 60, now: clock.now).token
        clock.advance(by: 60 + 30)
        #expect(try validator.validate(token).userID == "alice", "within the leeway")
        clock.advance(by: 1)
        #expect(throws: DomainError(.tokenExpired, "")) { try validator.validate(token) }
        let future = try Self.token(claims(["nbf": now + 31]), key: signer)
        #expect(throws: DomainError(.tokenExpired, "")) { try validator.validate(future) }
        let soon = try Self.token(claims(["nbf": now + 29]), key: signer)
        #expect(try validator.validate(soon).userID == "alice")
        let noExpiry = try Self.token(claims().filter { $0.key != "exp" }, key: signer)
        #expect(throws: DomainError(.invalidToken, "")) { try validator.validate(noExpiry) }
        let issuedLater = try Self.token(claims(["iat": now + 3600]), key: signer)
        #expect(throws: DomainError(.invalidToken, "")) { try validator.validate(issuedLater) }
    }

    @Test func aForgedSignatureIsRefused() throws {
        let forger = try Ed25519.PrivateKey()
        #expect(throws: DomainError(.invalidToken, "")) { try validator.validate(Self.token(claims(), key: forger)) }
        // A real token whose payload was swapped for another user's.
        let real = try issuer.issue(subject: "alice", audience: "domain-1", lifetime: 600, now: clock.now).token
        let parts = real.split(separator: ".")
        let mallory = try JSONSerialization.data(withJSONObject: claims(["sub": "mallory"])).base64URLEncodedString()
        #expect(throws: DomainError(.invalidToken, "")) { try validator.validate("\(parts[0]).\(mallory).\(parts[2])") }
    }

    @Test func untrustedIssuerAndKidAreRefused() throws {
        #expect(throws: DomainError(.invalidToken, "")) {
            try validator.validate(Self.token(claims(["iss": "https://evil"]), key: signer))
        }
        let unknownKid = try Self.token(claims(), header: ["alg": "EdDSA", "kid": "k9"], key: signer)
        #expect(throws: DomainError(.invalidToken, "")) { try validator.validate(unknownKid) }
    }

    @Test func subjectIsRequiredAndSane() throws {
        for sub: Any in ["", String(repeating: "a", count: 256), "bad\u{7}id", 42] {
            #expect(throws: DomainError(.invalidToken, ""), "\(sub)") {
                try validator.validate(Self.token(claims(["sub": sub]), key: signer))
            }
        }
        #expect(throws: DomainError(.invalidToken, "")) {
            try validator.validate(Self.token(claims().filter { $0.key != "sub" }, key: signer))
        }
    }

    @Test func oversizeAndMalformedTokensAreRefused() throws {
        let huge = try Self.token(claims(["pad": String(repeating: "x", count: 9000)]), key: signer)
        #expect(throws: DomainError(.invalidToken, "")) { try validator.validate(huge) }
        for junk in ["", "abc", "a.b.c", "....", "eyJ9.eyJ9.AA"] {
            #expect(throws: DomainError(.invalidToken, ""), "\(junk)") { try validator.validate(junk) }
        }
    }
}
