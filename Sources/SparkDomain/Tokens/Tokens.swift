public import Foundation

/// What kind of issuer vouched for a token.
public enum IssuerKind: String, Sendable, Codable {
    /// The domain's own sandbox issuer (Spark's test auth).
    case test
    /// The domain's sign-up and login assistant.
    case accounts
    /// An app's identity provider, configured with a JWKS.
    case external
}

/// Who a valid token says the caller is.
public struct VerifiedIdentity: Sendable, Equatable, Codable {
    /// The user id (`sub`).
    public let userID: String
    /// The issuer (`iss`).
    public let issuer: String
    /// The kind of issuer.
    public let issuerKind: IssuerKind
    /// When the token expires.
    public let expiresAt: Date
    /// The `name` claim, if any.
    public let name: String?
    /// The `email` claim, if any.
    public let email: String?

    /// An identity as a validator found it.
    public init(userID: String, issuer: String, issuerKind: IssuerKind, expiresAt: Date, name: String?, email: String?) {
        self.userID = userID
        self.issuer = issuer
        self.issuerKind = issuerKind
        self.expiresAt = expiresAt
        self.name = name
        self.email = email
    }
}

/// A token the domain issued, with its expiry.
public struct IssuedToken: Sendable, Equatable, Codable, CustomStringConvertible {
    /// The compact JWS.
    public let token: String
    /// When it expires.
    public let expiresAt: Date
    /// A secret that buys the next token without the password (accounts only), if any.
    public let refreshToken: String?

    /// A token with its expiry.
    public init(token: String, expiresAt: Date, refreshToken: String? = nil) {
        self.token = token
        self.expiresAt = expiresAt
        self.refreshToken = refreshToken
    }

    /// Shows the expiry only, never the token.
    public var description: String { "IssuedToken(expires: \(expiresAt))" }
}
