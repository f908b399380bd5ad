public import Foundation
public import SparkCrypto

/// What a domain's operator does: policy, accounts, endpoints, moderation, the outbox, trusted
/// issuers and (on sandbox domains) test tokens. No user token can call any of it: in process it
/// is whoever opens the embedded file; over the network (``RemoteAdministration``) it takes the
/// operator credential `spark-domaind init` made.
public protocol DomainAdministration: Sendable {
    /// The domain's id.
    var domainID: String { get }
    /// The domain's policy.
    func policy() async throws -> DomainPolicy
    /// Replaces the policy.
    func setPolicy(_ policy: DomainPolicy) async throws
    /// The accounts of the sign-up assistant.
    func accounts() async throws -> [AccountSummary]
    /// A user's registered endpoints.
    func endpoints(of user: String) async throws -> [EndpointInfo]
    /// Every user with a registered endpoint.
    func endpointUsers() async throws -> [EndpointUser]
    /// A user's published identity, if any.
    func publishedIdentity(of user: String) async throws -> PublishedIdentity?
    /// Removes an endpoint; it learns on its next call.
    func deregisterEndpoint(_ endpointID: String) async throws
    /// A user's moderation status.
    func moderationStatus(of user: String) async throws -> UserStatus
    /// Issues an infraction (a warning the user sees).
    func issueInfraction(to user: String, reason: String) async throws -> Infraction
    /// Times a user out: their messages are refused meanwhile.
    func timeOut(_ user: String, for seconds: Int, reason: String) async throws
    /// Bans a user.
    func ban(_ user: String, reason: String) async throws
    /// Lifts a ban and any timeout.
    func unban(_ user: String) async throws
    /// The mail the domain sent, oldest first; only to `recipient` when given.
    func outbox(recipient: String?, limit: Int) async throws -> [Mail]
    /// The reports users made, newest first.
    func reports(limit: Int) async throws -> [Report]
    /// The trusted external issuers.
    func externalIssuers() async throws -> [ExternalIssuer]
    /// The key-transparency auditors whose co-signatures the domain takes.
    func transparencyAuditors() async throws -> [RegisteredAuditor]
    /// Registers an auditor (its 64-byte P-256 key) under `name`; again for a registered key
    /// renames it.
    func addTransparencyAuditor(_ auditorKey: Data, name: String) async throws
    /// Removes an auditor and its co-signature: devices that require it find no audited head
    /// until it is registered and co-signs again.
    func removeTransparencyAuditor(_ auditorKey: Data) async throws
    /// Trusts an external issuer's tokens, verified with the keys of `jwks` (a JWKS document).
    func trustIssuer(_ issuer: String, audience: String, jwks: Data) async throws
    /// Trusts an OpenID provider by discovery: the domain fetches `issuerURL`'s discovery
    /// document and its JWKS itself (over HTTPS), keeps them in its database, and fetches the
    /// keys again as they age or when a token names a key they lack.
    ///
    /// - Parameters:
    ///   - audience: the client id the provider's ID tokens name in `aud`.
    ///   - userClaim: the claim that is the user id (`sub`, `email`, `preferred_username`).
    ///   - caPEM: the provider's CA (PEM text), when it is not in the machine's store.
    func discoverIssuer(_ issuerURL: String, audience: String, userClaim: String, caPEM: String?) async throws
        -> ExternalIssuer
    /// Stops trusting an external issuer.
    func removeExternalIssuer(_ issuer: String) async throws
    /// The public keys of the domain's own `test` or `accounts` issuer.
    func issuerKeys(_ kind: String) async throws -> JWKSet
    /// A test token for any user id (sandbox domains only).
    func testToken(userID: String) async throws -> IssuedToken
}

/// An external identity provider whose tokens the domain accepts.
public struct ExternalIssuer: Sendable, Codable, Equatable {
    /// The `iss` value its tokens carry.
    public var issuer: String
    /// The audience its tokens must name.
    public var audience: String
    /// The JWKS file with its public keys (on the domain's machine), or empty when the keys are
    /// kept in the domain's database (``DomainAdministration/trustIssuer(_:audience:jwks:)``).
    public var jwksPath: String
    /// The claim that is the user id (`sub` unless the issuer was added with another).
    public var userClaim: String
    /// For an issuer trusted by discovery: where its keys are fetched from.
    public var jwksURI: String?
    /// For an issuer trusted by discovery: until when the keys in hand are fresh.
    public var keysFreshUntil: Date?
    /// For an issuer trusted by discovery: why the last fetch of its keys failed, if it did
    /// (the last good keys stay in use).
    public var lastFetchError: String?

    /// An issuer configuration.
    public init(
        issuer: String, audience: String, jwksPath: String, userClaim: String = "sub", jwksURI: String? = nil,
        keysFreshUntil: Date? = nil, lastFetchError: String? = nil
    ) {
        self.issuer = issuer
        self.audience = audience
        self.jwksPath = jwksPath
        self.userClaim = userClaim
        self.jwksURI = jwksURI
        self.keysFreshUntil = keysFreshUntil
        self.lastFetchError = lastFetchError
    }

    enum CodingKeys: String, CodingKey {
        case issuer, audience, jwksPath, userClaim, jwksURI, keysFreshUntil, lastFetchError
    }

    /// Decodes an issuer; what older domains did not send takes its default.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        issuer = try container.decode(String.self, forKey: .issuer)
        audience = try container.decode(String.self, forKey: .audience)
        jwksPath = try container.decode(String.self, forKey: .jwksPath)
        userClaim = try container.decodeIfPresent(String.self, forKey: .userClaim) ?? "sub"
        jwksURI = try container.decodeIfPresent(String.self, forKey: .jwksURI)
        keysFreshUntil = try container.decodeIfPresent(Date.self, forKey: .keysFreshUntil)
        lastFetchError = try container.decodeIfPresent(String.self, forKey: .lastFetchError)
    }
}

/// An account as the operator sees it (no password hash).
public struct AccountSummary: Sendable, Codable, Equatable {
    /// The user name.
    public var userName: String
    /// The email address.
    public var email: String
    /// The country code.
    public var country: String
    /// The age given at sign-up.
    public var age: Int
    /// Whether the account is activated.
    public var activated: Bool

    /// An account.
    public init(userName: String, email: String, country: String, age: Int, activated: Bool) {
        self.userName = userName
        self.email = email
        self.country = country
        self.age = age
        self.activated = activated
    }
}

/// A user with registered endpoints.
public struct EndpointUser: Sendable, Codable, Equatable {
    /// The user id.
    public var userID: String
    /// How many endpoints are registered.
    public var endpoints: Int

    /// A user's count.
    public init(userID: String, endpoints: Int) {
        self.userID = userID
        self.endpoints = endpoints
    }
}

/// An email the domain sends (activation and password-reset codes).
public struct Mail: Sendable, Codable, Equatable {
    /// The recipient's address.
    public var to: String
    /// The subject line.
    public var subject: String
    /// The plain-text body.
    public var body: String
    /// When it was sent.
    public var sentAt: Date

    /// A message.
    public init(to: String, subject: String, body: String, sentAt: Date) {
        self.to = to
        self.subject = subject
        self.body = body
        self.sentAt = sentAt
    }
}
