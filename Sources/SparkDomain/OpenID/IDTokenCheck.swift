public import Foundation
public import SparkCrypto

/// The checks a relying party makes on an ID token (OpenID Connect Core §3.1.3.7), as the
/// device makes them before it keeps or sends a token: the signature by one of the provider's
/// keys (its algorithm bound to the key, RFC 8725), `iss` exactly the provider's, `aud`
/// naming this client (and `azp` this client when there are several audiences or it is
/// present), `exp` and `iat` with the leeway, the `nonce` this client sent, and the claim that
/// names the user.
public struct IDTokenCheck: Sendable {
    /// The largest ID token accepted, in bytes.
    public static let maximumTokenSize = 16 * 1024

    /// The provider's issuer identifier.
    public var issuer: String
    /// This client's id at the provider.
    public var clientID: String
    /// The claim that names the user (`sub`, `email`, `preferred_username`).
    public var userClaim: String
    /// Clock skew tolerated on `exp` and `iat`, in seconds.
    public var leeway: TimeInterval

    /// Checks for tokens of `issuer` issued to `clientID`.
    public init(issuer: String, clientID: String, userClaim: String = "sub", leeway: TimeInterval = 60) {
        self.issuer = issuer
        self.clientID = clientID
        self.userClaim = userClaim
        self.leeway = leeway
    }

    /// Whether `token`'s `kid` is one none of `keys` has (the provider may have rotated them:
    /// fetch its JWKS again, once).
    public static func namesUnknownKey(_ token: String, keys: [JWS.VerificationKey]) -> Bool {
        guard let keyID = try? JWS.unverifiedHeader(of: token).keyID else { return false }
        return !keys.contains { $0.keyID == keyID }
    }

    /// The verified claims and the user they name.
    ///
    /// - Parameter nonce: the nonce sent with the authentication request, or nil where none
    ///   was (the device grant, a refresh).
    /// - Throws: ``DomainError`` with ``DomainError/Code/invalidToken`` saying which check failed,
    ///   or ``DomainError/Code/tokenExpired``.
    public func verify(_ token: String, keys: [JWS.VerificationKey], nonce: String?, now: Date) throws -> (
        claims: JWTClaims, user: String
    ) {
        guard token.utf8.count <= Self.maximumTokenSize else {
            throw DomainError(.invalidToken, "the ID token is larger than \(Self.maximumTokenSize) bytes")
        }
        let verified: JWS.Verified
        do {
            verified = try JWS.verify(token, using: keys)
        } catch {
            throw DomainError(.invalidToken, "the ID token's signature does not verify with the provider's keys (\(error))")
        }
        if let type = verified.header.type?.lowercased(), type != "jwt", type != "application/jwt" {
            throw DomainError(.invalidToken, "the ID token's typ is \(type.prefix(40)), not JWT")
        }
        let claims: JWTClaims
        do {
            claims = try JSONDecoder().decode(JWTClaims.self, from: verified.payload)
        } catch {
            throw DomainError(.invalidToken, "the ID token's claims are not a JSON object of the expected types")
        }
        guard claims.issuer == issuer else {
            throw DomainError(.invalidToken, "the ID token is from \(claims.issuer?.prefix(200) ?? "no issuer"), not \(issuer)")
        }
        guard claims.audience.contains(clientID) else {
            throw DomainError(.wrongAudience, "the ID token is not for this client (\(clientID))")
        }
        if claims.audience.count > 1 || claims.authorizedParty != nil, claims.authorizedParty != clientID {
            throw DomainError(.invalidToken, "the ID token's azp is not this client (\(clientID))")
        }
        let seconds = now.timeIntervalSince1970
        guard let expiresAt = claims.expiresAt else { throw DomainError(.invalidToken, "the ID token has no exp") }
        guard seconds < TimeInterval(expiresAt) + leeway else { throw DomainError(.tokenExpired, "the ID token has expired") }
        guard let issuedAt = claims.issuedAt else { throw DomainError(.invalidToken, "the ID token has no iat") }
        guard TimeInterval(issuedAt) <= seconds + leeway else {
            throw DomainError(.invalidToken, "the ID token claims to be issued in the future")
        }
        if let nonce {
            // Core §3.1.3.7 (11): the nonce binds the token to this sign-in (no replay of another).
            guard let sent = claims.nonce, Self.constantTimeEqual(sent, nonce) else {
                throw DomainError(.invalidToken, "the ID token's nonce is not the one this sign-in sent")
            }
        }
        guard let user = claims.user(by: userClaim), user.count <= 255,
            !user.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else {
            throw DomainError(.invalidToken, "the ID token has no usable \(userClaim) claim to name the user")
        }
        return (claims, user)
    }

    /// Whether two short secrets (a nonce, a `state`) are equal, in time that does not depend on
    /// where they differ.
    public static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        SecureBytes(Data(a.utf8)) == SecureBytes(Data(b.utf8))
    }
}
