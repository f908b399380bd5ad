import Foundation

/// The registered claims of a JWT (RFC 7519 §4.1) that SparkSDK reads and writes, plus the
/// profile claims the accounts assistant adds.
public struct JWTClaims: Sendable, Equatable, Codable {
    /// `iss`: who issued the token.
    public var issuer: String?
    /// `sub`: the user id.
    public var subject: String?
    /// `aud`: the audiences, a string or an array in JSON.
    public var audience: [String]
    /// `exp`: expiry, seconds since 1970.
    public var expiresAt: Int?
    /// `nbf`: not valid before, seconds since 1970.
    public var notBefore: Int?
    /// `iat`: issued at, seconds since 1970.
    public var issuedAt: Int?
    /// `jti`: a unique id.
    public var tokenID: String?
    /// `name`: a display name.
    public var name: String?
    /// `email`: an email address.
    public var email: String?
    /// `email_verified` (OpenID Connect): whether the provider checked the address.
    public var emailVerified: Bool?
    /// `preferred_username` (OpenID Connect).
    public var preferredUsername: String?
    /// `picture` (OpenID Connect): the URL of a profile picture.
    public var picture: String?
    /// `azp` (OpenID Connect): the client the ID token was issued to.
    public var authorizedParty: String?
    /// `nonce` (OpenID Connect): the value the client sent in its authentication request.
    public var nonce: String?

    enum CodingKeys: String, CodingKey {
        case issuer = "iss", subject = "sub", audience = "aud", expiresAt = "exp", notBefore = "nbf", issuedAt = "iat"
        case tokenID = "jti", name, email, emailVerified = "email_verified", preferredUsername = "preferred_username"
        case picture, authorizedParty = "azp", nonce
    }

    /// Claims with the given values.
    public init(
        issuer: String?, subject: String?, audience: [String], expiresAt: Int?, notBefore: Int? = nil, issuedAt: Int? = nil,
        tokenID: String? = nil, name: String? = nil, email: String? = nil
    ) {
        self.issuer = issuer
        self.subject = subject
        self.audience = audience
        self.expiresAt = expiresAt
        self.notBefore = notBefore
        self.issuedAt = issuedAt
        self.tokenID = tokenID
        self.name = name
        self.email = email
    }

    /// Decodes claims; `aud` may be a string or an array of strings; numeric dates may be
    /// integers or (as some libraries write them) fractional numbers, which are truncated.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        issuer = try container.decodeIfPresent(String.self, forKey: .issuer)
        subject = try container.decodeIfPresent(String.self, forKey: .subject)
        if let single = try? container.decode(String.self, forKey: .audience) {
            audience = [single]
        } else {
            audience = try container.decodeIfPresent([String].self, forKey: .audience) ?? []
        }
        func date(_ key: CodingKeys) throws -> Int? {
            guard container.contains(key) else { return nil }
            let seconds = try container.decode(Double.self, forKey: key)
            guard seconds.isFinite, abs(seconds) < 1e13 else {
                throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: "date out of range")
            }
            return Int(seconds)
        }
        expiresAt = try date(.expiresAt)
        notBefore = try date(.notBefore)
        issuedAt = try date(.issuedAt)
        tokenID = try container.decodeIfPresent(String.self, forKey: .tokenID)
        name = try container.decodeIfPresent(String.self, forKey: .name)
        email = try container.decodeIfPresent(String.self, forKey: .email)
        // Optional profile claims: one of an unexpected type is absent, not an error.
        emailVerified =
            (try? container.decodeIfPresent(Bool.self, forKey: .emailVerified))
            ?? (try? container.decodeIfPresent(String.self, forKey: .emailVerified)).flatMap { $0.map { $0 == "true" } }
        preferredUsername = try? container.decodeIfPresent(String.self, forKey: .preferredUsername)
        picture = try? container.decodeIfPresent(String.self, forKey: .picture)
        authorizedParty = try container.decodeIfPresent(String.self, forKey: .authorizedParty)
        nonce = try container.decodeIfPresent(String.self, forKey: .nonce)
    }

    /// The value of the claim that names the user: `sub`, `email` (only when `email_verified`
    /// is not false) or `preferred_username`; nil when absent or empty.
    public func user(by claim: String) -> String? {
        let value: String? =
            switch claim {
            case "sub": subject
            case "email": emailVerified == false ? nil : email
            case "preferred_username": preferredUsername
            default: nil
            }
        guard let value, !value.isEmpty else { return nil }
        return value
    }

    /// The claims that may name a user (`oidc.userClaim`, `spark-admin issuer add --user-claim`).
    public static let userClaims = ["sub", "email", "preferred_username"]

    /// Encodes claims; a single audience is written as a string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(issuer, forKey: .issuer)
        try container.encodeIfPresent(subject, forKey: .subject)
        if audience.count == 1 {
            try container.encode(audience[0], forKey: .audience)
        } else if !audience.isEmpty {
            try container.encode(audience, forKey: .audience)
        }
        try container.encodeIfPresent(expiresAt, forKey: .expiresAt)
        try container.encodeIfPresent(notBefore, forKey: .notBefore)
        try container.encodeIfPresent(issuedAt, forKey: .issuedAt)
        try container.encodeIfPresent(tokenID, forKey: .tokenID)
        try container.encodeIfPresent(name, forKey: .name)
        try container.encodeIfPresent(email, forKey: .email)
        try container.encodeIfPresent(emailVerified, forKey: .emailVerified)
        try container.encodeIfPresent(preferredUsername, forKey: .preferredUsername)
        try container.encodeIfPresent(picture, forKey: .picture)
        try container.encodeIfPresent(authorizedParty, forKey: .authorizedParty)
        try container.encodeIfPresent(nonce, forKey: .nonce)
    }
}
