package import Foundation
package import SparkCrypto
package import SparkDomain
import SparkLock

/// An issuer whose tokens the domain accepts: its `iss`, the audience its tokens must name, and
/// its public keys (each bound to one algorithm).
package struct TrustedIssuer: Sendable {
    /// What kind of issuer this is.
    package typealias Kind = IssuerKind

    /// The `iss` value.
    package let issuer: String
    /// The audience the token's `aud` must contain.
    package let audience: String
    /// The keys that may sign its tokens.
    package let keys: [JWS.VerificationKey]
    /// What kind of issuer this is.
    package let kind: Kind
    /// The claim that is the user id (`sub`, `email`, `preferred_username`).
    package let userClaim: String
    /// Whether its keys are fetched from the issuer (by discovery): a token naming a key they
    /// lack may be signed by a key published since.
    package let discovered: Bool

    /// An issuer with its keys.
    package init(
        issuer: String, audience: String, keys: [JWS.VerificationKey], kind: Kind, userClaim: String = "sub",
        discovered: Bool = false
    ) {
        self.issuer = issuer
        self.audience = audience
        self.keys = keys
        self.kind = kind
        self.userClaim = userClaim
        self.discovered = discovered
    }

    /// A digest of everything that makes this issuer's tokens acceptable: its name, audience,
    /// and keys with their algorithms and ids.
    package var fingerprint: Data {
        var data = Data("\(issuer)\u{0}\(audience)\u{0}\(userClaim)\u{0}".utf8)
        for key in keys {
            data.append(Data("\(key.algorithm.rawValue)\u{0}\(key.keyID ?? "")\u{0}".utf8))
            data.append(key.publicKeyBytes)
        }
        return SHA256.hash(data)
    }
}

/// Validates JWTs as RFC 8725 asks: size cap, a trusted issuer chosen by `iss`, a signature by
/// one of that issuer's keys with the algorithm bound to the key (never `none`, never a MAC),
/// `exp` required and `nbf`/`iat` checked with a small leeway, `aud` naming the domain, and a
/// non-empty `sub`.
package struct TokenValidator: Sendable {
    /// The largest token accepted, in bytes.
    package static let maximumTokenSize = 8 * 1024
    /// The longest user id accepted.
    package static let maximumSubjectLength = 255
    /// Why a token of an issuer the domain does not trust is refused.
    package static let untrustedIssuer = "the token's issuer is not trusted by this domain"
    /// Why a token of a discovered issuer that names a key not among its keys is refused (the
    /// keys are then fetched again, at most once a minute).
    package static let unknownKey = "the token names a key its issuer has not published (yet)"

    /// The issuers whose tokens are accepted.
    package var issuers: [TrustedIssuer]
    /// Clock skew tolerated on `exp`, `nbf` and `iat`, in seconds.
    package var leeway: Int
    /// The time source.
    package var clock: WallClock
    /// An issuer whose tokens are refused with ``DomainError/Code/userAuthenticationRequired``
    /// (the test issuer, when the domain requires user authentication).
    package var refusedIssuer: String?
    /// Issuers whose keys could not be loaded, with the reason: their tokens are refused with
    /// ``DomainError/Code/unavailable`` naming the issuer; every other issuer's are unaffected.
    package var unavailableIssuers: [String: String] = [:]

    /// A validator for the given issuers.
    package init(
        issuers: [TrustedIssuer], leeway: Int = 30, clock: WallClock = .system, refuseTestTokens refusedIssuer: String? = nil
    ) {
        self.issuers = issuers
        self.leeway = leeway
        self.clock = clock
        self.refusedIssuer = refusedIssuer
    }

    /// Validates `token`, reusing an earlier full validation from `cache` when the same token
    /// was verified before by an issuer that is still trusted with the same keys. The time
    /// claims are checked again on every call; the signature and the claims' shape are not.
    package func validate(_ token: String, cache: ValidatedTokenCache) throws -> VerifiedIdentity {
        let key = SHA256.hash(Data(token.utf8))
        if let cached = cache.lookup(key), refusedIssuer != cached.identity.issuer,
            let issuer = issuers.first(where: { $0.issuer == cached.identity.issuer }), issuer.fingerprint == cached.fingerprint
        {
            let now = clock.now()
            guard now.timeIntervalSince(cached.identity.expiresAt) <= TimeInterval(leeway) else {
                throw DomainError(.tokenExpired, "the token has expired")
            }
            return cached.identity
        }
        let identity = try validate(token)
        if let issuer = issuers.first(where: { $0.issuer == identity.issuer }) {
            cache.store(key, identity: identity, fingerprint: issuer.fingerprint)
        }
        return identity
    }

    /// Validates `token` and returns the identity it proves.
    ///
    /// - Throws: ``DomainError`` with ``DomainError/Code/invalidToken`` (malformed, oversize,
    ///   untrusted issuer, refused algorithm, bad signature, bad `sub`),
    ///   ``DomainError/Code/tokenExpired`` (past `exp`, or before `nbf`) or
    ///   ``DomainError/Code/wrongAudience``.
    package func validate(_ token: String) throws -> VerifiedIdentity {
        guard token.utf8.count <= Self.maximumTokenSize else {
            throw DomainError(.invalidToken, "the token is larger than \(Self.maximumTokenSize) bytes")
        }
        // Parsed once: the claims are read to pick the issuer, and trusted only after the
        // signature over exactly these bytes verifies.
        let jws: JWS.Unverified
        let claims: JWTClaims
        do {
            jws = try JWS.Unverified(token)
            claims = try JSONDecoder().decode(JWTClaims.self, from: jws.payload)
        } catch {
            throw DomainError(.invalidToken, "the token is not a JWT")
        }
        guard Self.isAcceptedType(jws.header.type) else {
            throw DomainError(.invalidToken, "the token's typ is not a JWT or an access token (RFC 8725 §3.11)")
        }
        if let refusedIssuer, claims.issuer == refusedIssuer {
            throw DomainError(.userAuthenticationRequired, "this domain requires user authentication; test tokens are refused")
        }
        if let issuerName = claims.issuer, let reason = unavailableIssuers[issuerName] {
            throw DomainError(.unavailable, "the keys of issuer \(issuerName) cannot be loaded: \(reason)")
        }
        guard let issuerName = claims.issuer, let issuer = issuers.first(where: { $0.issuer == issuerName }) else {
            throw DomainError(.invalidToken, Self.untrustedIssuer)
        }
        if issuer.discovered, let keyID = jws.header.keyID, !issuer.keys.contains(where: { $0.keyID == keyID }) {
            throw DomainError(.invalidToken, Self.unknownKey)
        }
        do {
            _ = try jws.verify(using: issuer.keys)
        } catch let error as CryptoError where error.code == .unsupportedAlgorithm {
            throw DomainError(.invalidToken, "the token's signature algorithm is refused: \(error.reason)")
        } catch {
            throw DomainError(.invalidToken, "the token's signature does not verify with \(issuer.issuer)'s keys")
        }
        let now = Int(clock.now().timeIntervalSince1970)
        guard let expiresAt = claims.expiresAt else { throw DomainError(.invalidToken, "the token has no exp claim") }
        guard now <= expiresAt + leeway else { throw DomainError(.tokenExpired, "the token has expired") }
        if let notBefore = claims.notBefore, now + leeway < notBefore {
            throw DomainError(.tokenExpired, "the token is not valid yet (nbf is in the future)")
        }
        if let issuedAt = claims.issuedAt, now + leeway < issuedAt {
            throw DomainError(.invalidToken, "the token claims to be issued in the future")
        }
        guard claims.audience.contains(issuer.audience) else {
            throw DomainError(.wrongAudience, "the token is for another audience, not \(issuer.audience)")
        }
        // OpenID Connect: with several audiences (or any azp) the authorized party must be this
        // domain's client, as the device checks an ID token.
        if claims.audience.count > 1 || claims.authorizedParty != nil, claims.authorizedParty != issuer.audience {
            throw DomainError(.wrongAudience, "the token's azp is not \(issuer.audience), the client this domain accepts")
        }
        guard let subject = claims.user(by: issuer.userClaim) else {
            throw DomainError(.invalidToken, "the token's \(issuer.userClaim) (user id) is missing or malformed")
        }
        if let problem = UserIDs.problem(subject, maximumLength: Self.maximumSubjectLength) {
            throw DomainError(.invalidToken, "the token's \(issuer.userClaim) (user id) is not acceptable: \(problem)")
        }
        return VerifiedIdentity(
            userID: subject, issuer: issuer.issuer, issuerKind: issuer.kind,
            expiresAt: Date(timeIntervalSince1970: TimeInterval(expiresAt)), name: claims.name, email: claims.email)
    }
}

extension TokenValidator {
    /// The `typ` headers of tokens this domain accepts (RFC 8725 §3.11, explicit typing): none,
    /// `JWT`, or an OAuth access token (`at+jwt`, RFC 9068), with or without `application/` and
    /// in any case (RFC 7515 §4.1.9). Every other type (`secevent+jwt`, `logout+jwt`,
    /// `dpop+jwt`, …) is another kind of JWT its issuer signs for another purpose, and is
    /// refused, so such a token cannot be replayed as a sign-in.
    static func isAcceptedType(_ type: String?) -> Bool {
        guard var type = type?.lowercased() else { return true }
        if type.hasPrefix("application/") { type.removeFirst("application/".count) }
        return type == "jwt" || type == "at+jwt"
    }
}

/// Signs JWTs with an Ed25519 key (`EdDSA`), for the domain's own issuers.
package struct TokenIssuer: Sendable {
    /// The `iss` value.
    package let issuer: String
    /// The signing key.
    let key: Ed25519.PrivateKey
    /// The `kid` written into the header.
    package let keyID: String

    /// An issuer signing with `key`.
    package init(issuer: String, key: Ed25519.PrivateKey, keyID: String) {
        self.issuer = issuer
        self.key = key
        self.keyID = keyID
    }

    /// The public side, for a ``TokenValidator``.
    package func trusted(audience: String, kind: TrustedIssuer.Kind) -> TrustedIssuer {
        TrustedIssuer(issuer: issuer, audience: audience, keys: [JWS.VerificationKey(key.publicKey, keyID: keyID)], kind: kind)
    }

    /// The public key as a JWK Set, for relying parties that verify these tokens themselves.
    package var jwks: JWKSet {
        var jwk = JWK(key.publicKey, keyID: keyID)
        jwk.algorithm = JWS.Algorithm.edDSA.rawValue
        jwk.use = "sig"
        return JWKSet(keys: [jwk])
    }

    /// Issues a token for `subject`.
    package func issue(
        subject: String, audience: String, lifetime: TimeInterval, now: Date, name: String? = nil, email: String? = nil
    ) throws -> IssuedToken {
        let issuedAt = Int(now.timeIntervalSince1970)
        let expiresAt = issuedAt + Int(lifetime)
        let claims = JWTClaims(
            issuer: issuer, subject: subject, audience: [audience], expiresAt: expiresAt, notBefore: issuedAt,
            issuedAt: issuedAt, tokenID: SystemRandom.bytes(count: 12).base64URLEncodedString(), name: name, email: email)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let token = try JWS.sign(payload: encoder.encode(claims), using: key, keyID: keyID, type: "JWT")
        return IssuedToken(token: token, expiresAt: Date(timeIntervalSince1970: TimeInterval(expiresAt)))
    }
}

/// Tokens that passed a full validation, by their SHA-256 (never the token itself), with the
/// fingerprint of the issuer that vouched for them. Bounded; entries go when full.
package final class ValidatedTokenCache: Sendable {
    struct Entry: Sendable {
        let identity: VerifiedIdentity
        let fingerprint: Data
    }

    private let entries = Locked<[Data: Entry]>([:])
    private let capacity: Int

    /// A cache holding at most `capacity` tokens.
    package init(capacity: Int = 4096) { self.capacity = capacity }

    func lookup(_ key: Data) -> Entry? { entries.withLock { $0[key] } }

    func store(_ key: Data, identity: VerifiedIdentity, fingerprint: Data) {
        entries.withLock { entries in
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[key] = Entry(identity: identity, fingerprint: fingerprint)
        }
    }

    /// Forgets every token (for example when the trust configuration changed).
    package func removeAll() { entries.withLock { $0.removeAll() } }
}
