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

    enum CodingKeys: String, CodingKey {
        case issuer = "iss", subject = "sub", audience = "aud", expiresAt = "exp", notBefore = "nbf", issuedAt = "iat"
        case tokenID = "jti", name, email
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
    }

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
    }
}
