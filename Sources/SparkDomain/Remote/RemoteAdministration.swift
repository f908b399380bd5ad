public import Foundation
public import SparkCrypto

/// The operator's side of a domain served by `spark-domaind`, authenticated with the operator
/// credential `spark-domaind init` wrote to `DIR/operator.credential`. `spark-admin
/// --config PLIST --operator FILE` uses it.
public final class RemoteAdministration: DomainAdministration {
    /// The domain's id.
    public let domainID: String
    let client: WireClient

    /// An operator client of the domain at `url`.
    public convenience init(url: URL, domainID: String, trust: DomainTrust, credential: String) throws {
        try self.init(urls: [url], domainID: domainID, trust: trust, credential: credential)
    }

    /// An operator client of a domain several instances serve, moving on as ``RemoteDomain`` does.
    public init(urls: [URL], domainID: String, trust: DomainTrust, credential: String) throws {
        self.domainID = domainID
        let credential = credential.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !credential.isEmpty, !credential.contains(where: { $0.isWhitespace || $0.isNewline }) else {
            throw DomainError(.invalidRequest, "the operator credential is empty or malformed")
        }
        client = try WireClient(urls: urls, trust: trust, credential: credential)
    }

    /// `GET /v1/admin/policy`.
    public func policy() async throws -> DomainPolicy { try await client.call(.adminPolicy, Wire.Empty()) }

    /// `POST /v1/admin/policy/set`.
    public func setPolicy(_ policy: DomainPolicy) async throws {
        let _: Wire.Empty = try await client.call(.adminSetPolicy, policy)
    }

    /// `GET /v1/admin/accounts`.
    public func accounts() async throws -> [AccountSummary] {
        let list: Wire.Accounts = try await client.call(.adminAccounts, Wire.Empty())
        return list.accounts
    }

    /// `GET /v1/admin/endpoints`.
    public func endpoints(of user: String) async throws -> [EndpointInfo] {
        let list: Wire.Endpoints = try await client.call(.adminEndpoints, Wire.UserID(userID: user))
        return list.endpoints
    }

    /// `GET /v1/admin/endpoint-users`.
    public func endpointUsers() async throws -> [EndpointUser] {
        let list: Wire.EndpointUsers = try await client.call(.adminEndpointUsers, Wire.Empty())
        return list.users
    }

    /// `GET /v1/admin/identities`.
    public func publishedIdentity(of user: String) async throws -> PublishedIdentity? {
        let found: Wire.Identity = try await client.call(.adminIdentity, Wire.UserID(userID: user))
        return found.identity
    }

    /// `POST /v1/admin/endpoints/deregister`.
    public func deregisterEndpoint(_ endpointID: String) async throws {
        let _: Wire.Empty = try await client.call(.adminDeregister, Wire.EndpointID(endpointID: endpointID))
    }

    /// `GET /v1/admin/moderation`.
    public func moderationStatus(of user: String) async throws -> UserStatus {
        try await client.call(.adminModeration, Wire.UserID(userID: user))
    }

    /// `POST /v1/admin/moderation/infraction`.
    public func issueInfraction(to user: String, reason: String) async throws -> Infraction {
        try await client.call(.adminInfraction, Wire.Sanction(userID: user, reason: reason))
    }

    /// `POST /v1/admin/moderation/timeout`.
    public func timeOut(_ user: String, for seconds: Int, reason: String) async throws {
        let _: Wire.Empty = try await client.call(.adminTimeOut, Wire.TimeOut(userID: user, seconds: seconds, reason: reason))
    }

    /// `POST /v1/admin/moderation/ban`.
    public func ban(_ user: String, reason: String) async throws {
        let _: Wire.Empty = try await client.call(.adminBan, Wire.Sanction(userID: user, reason: reason))
    }

    /// `POST /v1/admin/moderation/unban`.
    public func unban(_ user: String) async throws {
        let _: Wire.Empty = try await client.call(.adminUnban, Wire.UserID(userID: user))
    }

    /// `GET /v1/admin/outbox`.
    public func outbox(recipient: String?, limit: Int) async throws -> [Mail] {
        let list: Wire.Mails = try await client.call(.adminOutbox, Wire.OutboxQuery(recipient: recipient, limit: limit))
        return list.mails
    }

    /// `GET /v1/admin/reports`.
    public func reports(limit: Int) async throws -> [Report] {
        let list: Wire.Reports = try await client.call(.adminReports, Wire.ReportsQuery(limit: limit))
        return list.reports
    }

    /// `GET /v1/admin/issuers`.
    public func externalIssuers() async throws -> [ExternalIssuer] {
        let list: Wire.Issuers = try await client.call(.adminIssuers, Wire.Empty())
        return list.issuers
    }

    /// `POST /v1/admin/issuers/trust`.
    public func trustIssuer(_ issuer: String, audience: String, jwks: Data) async throws {
        let _: Wire.Empty = try await client.call(
            .adminTrustIssuer, Wire.AddIssuer(issuer: issuer, audience: audience, jwks: String(decoding: jwks, as: UTF8.self)))
    }

    /// `POST /v1/admin/issuers/remove`.
    public func discoverIssuer(_ issuerURL: String, audience: String, userClaim: String, caPEM: String?) async throws
        -> ExternalIssuer
    {
        try await client.call(
            .adminDiscoverIssuer, Wire.DiscoverIssuer(issuer: issuerURL, audience: audience, userClaim: userClaim, caPEM: caPEM))
    }

    /// Stops trusting an external issuer.
    public func removeExternalIssuer(_ issuer: String) async throws {
        let _: Wire.Empty = try await client.call(.adminRemoveIssuer, Wire.IssuerName(issuer: issuer))
    }

    /// `GET /v1/admin/transparency/auditors`.
    public func transparencyAuditors() async throws -> [RegisteredAuditor] {
        let list: Wire.Auditors = try await client.call(.adminAuditors, Wire.Empty())
        return list.auditors
    }

    /// `POST /v1/admin/transparency/auditors/add`.
    public func addTransparencyAuditor(_ auditorKey: Data, name: String) async throws {
        let _: Wire.Empty = try await client.call(.adminAddAuditor, Wire.AddAuditor(auditorKey: auditorKey, name: name))
    }

    /// `POST /v1/admin/transparency/auditors/remove`.
    public func removeTransparencyAuditor(_ auditorKey: Data) async throws {
        let _: Wire.Empty = try await client.call(.adminRemoveAuditor, Wire.AuditorKey(auditorKey: auditorKey))
    }

    /// `GET /v1/admin/issuer-keys`.
    public func issuerKeys(_ kind: String) async throws -> JWKSet {
        try await client.call(.adminIssuerKeys, Wire.IssuerKind(kind: kind))
    }

    /// `POST /v1/admin/test-tokens`.
    public func testToken(userID: String) async throws -> IssuedToken {
        try await client.call(.adminTestToken, Wire.UserID(userID: userID))
    }
}
