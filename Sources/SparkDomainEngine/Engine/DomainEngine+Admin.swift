package import Foundation
package import SparkCrypto
package import SparkDomain
import SparkStore

/// What the domain's operator does (`spark-admin`): policy, external issuers, accounts, outbox.
/// These are ``DomainAdministration``, not ``DomainService``: endpoints never call them.
extension DomainEngine: DomainAdministration {
    /// An external identity provider whose tokens the domain accepts.
    package typealias ExternalIssuer = SparkDomain.ExternalIssuer
    /// An account as the operator sees it.
    package typealias AccountSummary = SparkDomain.AccountSummary

    /// Replaces the domain's policy. A password-hash cost below OWASP's needs the unsafe
    /// opening option, unless it is the domain's current cost left unchanged.
    package func setPolicy(_ policy: DomainPolicy) throws {
        let unchangedCost = (try? storedPolicy().passwordIterations) == policy.passwordIterations
        try policy.validate(allowUnsafePasswordHashing: allowUnsafePasswordHashing || unchangedCost)
        let json = String(decoding: try JSONEncoder().encode(policy), as: UTF8.self)
        try blockingStorage {
            try store.blockingWrite { db in
                try db.execute("UPDATE domain SET policy = ?", [json])
                try db.announceSettingsChange()
            }
        }
        settingsChanged()
    }

    /// Trusts an external issuer; its JWKS file must hold at least one signature key now.
    package func addExternalIssuer(_ external: ExternalIssuer) throws {
        try checkExternal(issuer: external.issuer, audience: external.audience)
        _ = try jwksCache.keys(at: external.jwksPath)
        try blockingStorage {
            try store.blockingWrite { db in
                try db.execute(
                    """
                    INSERT INTO external_issuers(issuer, audience, jwks_path) VALUES (?, ?, ?)
                    ON CONFLICT(issuer) DO UPDATE SET audience = excluded.audience, jwks_path = excluded.jwks_path, jwks = NULL
                    """, [external.issuer, external.audience, external.jwksPath])
                try db.announceSettingsChange()
            }
        }
        settingsChanged()
    }

    func checkExternal(issuer: String, audience: String) throws {
        guard !issuer.isEmpty, !audience.isEmpty else {
            throw DomainError(.invalidRequest, "an external issuer needs an issuer id and an audience")
        }
        guard issuer != testIssuerName, issuer != accountsIssuerName else {
            throw DomainError(.conflict, "\(issuer) is one of the domain's own issuers")
        }
    }

    /// Stops trusting an external issuer.
    package func removeExternalIssuer(_ issuer: String) throws {
        let removed = try blockingStorage {
            try store.blockingWrite { db in
                let removed = try db.execute("DELETE FROM external_issuers WHERE issuer = ?", [issuer])
                try db.announceSettingsChange()
                return removed
            }
        }
        settingsChanged()
        if removed == 0 { throw DomainError(.notFound, "no external issuer \(issuer)") }
    }

    /// The configured external issuers.
    package func externalIssuers() throws -> [ExternalIssuer] {
        try blockingStorage { try store.blockingRead { db in try Self.issuerRows(db).map(\.issuer) } }
    }

    /// The accounts of the sign-up assistant.
    package func accounts() throws -> [AccountSummary] {
        try blockingStorage {
            try store.blockingRead { db in
                try db.rows("SELECT user_name, email, country, age, activated FROM accounts ORDER BY user_name").map {
                    AccountSummary(
                        userName: try $0.get(0), email: try $0.get(1), country: try $0.get(2), age: try $0.get(3),
                        activated: try $0.get(4))
                }
            }
        }
    }

    /// A user's registered endpoints (the operator's view).
    package func endpoints(of user: String) throws -> [EndpointInfo] {
        try blockingStorage { try store.blockingRead { db in try Self.endpoints(db, user: user) } }
    }

    /// A user's published identity (the operator's view).
    package func publishedIdentity(of user: String) throws -> PublishedIdentity? {
        try blockingStorage { try store.blockingRead { db in try Self.identity(db, user: user) } }
    }

    /// Every user that has registered an endpoint, with their endpoint counts.
    package func endpointUsers() throws -> [EndpointUser] {
        try blockingStorage {
            try store.blockingRead { db in
                try db.rows(
                    "SELECT user_id, count(*) FROM endpoints WHERE removed_reason IS NULL GROUP BY user_id ORDER BY user_id"
                ).map { EndpointUser(userID: try $0.get(0, as: String.self), endpoints: try $0.get(1, as: Int.self)) }
            }
        }
    }

    /// Trusts an external issuer with these keys, kept in the domain's database (so every
    /// instance serving the domain has them); its ``ExternalIssuer/jwksPath`` is then empty.
    package func trustIssuer(_ issuer: String, audience: String, jwks: Data) throws {
        guard jwks.count <= JWKSet.maximumEncodedSize else {
            throw DomainError(.invalidRequest, "the JWKS for \(issuer) is larger than \(JWKSet.maximumEncodedSize) bytes")
        }
        _ = try JWKSCache.parse(jwks, source: "the JWKS for \(issuer)")
        try checkExternal(issuer: issuer, audience: audience)
        try blockingStorage {
            try store.blockingWrite { db in
                try db.execute(
                    """
                    INSERT INTO external_issuers(issuer, audience, jwks_path, jwks) VALUES (?, ?, '', ?)
                    ON CONFLICT(issuer) DO UPDATE SET audience = excluded.audience, jwks_path = '', jwks = excluded.jwks
                    """, [issuer, audience, jwks])
                try db.announceSettingsChange()
            }
        }
        settingsChanged()
    }

    /// The public keys of the domain's own test or accounts issuer.
    package func issuerKeys(_ kind: String) throws -> JWKSet {
        switch kind {
        case "test": testIssuerJWKS
        case "accounts": accountsIssuerJWKS
        default: throw DomainError(.invalidRequest, "the domain's issuers are test and accounts, not '\(kind)'")
        }
    }

    /// Removes an endpoint (the operator's action); it learns on its next call.
    package func deregisterEndpoint(_ endpointID: String) throws {
        let changed = try blockingStorage {
            try store.blockingWrite { db in
                try db.execute(
                    "UPDATE endpoints SET removed_reason = ?, active = 0 WHERE endpoint_id = ? AND removed_reason IS NULL",
                    ["removed by the domain's operator", endpointID])
            }
        }
        if changed == 0 { throw DomainError(.notFound, "no registered endpoint \(endpointID)") }
    }

    /// The outbox, newest last; only mail for `recipient` when given.
    package func outbox(recipient: String? = nil, limit: Int = 50) throws -> [Mail] {
        try blockingStorage {
            try store.blockingRead { db in
                let rows =
                    if let recipient {
                        try db.rows(
                            "SELECT recipient, subject, body, sent_at FROM outbox WHERE recipient = ? ORDER BY id DESC LIMIT ?",
                            [recipient.lowercased(), limit])
                    } else {
                        try db.rows("SELECT recipient, subject, body, sent_at FROM outbox ORDER BY id DESC LIMIT ?", [limit])
                    }
                return try rows.reversed().map {
                    Mail(
                        to: try $0.get(0), subject: try $0.get(1), body: try $0.get(2),
                        sentAt: Date(timeIntervalSince1970: try $0.get(3)))
                }
            }
        }
    }
}
