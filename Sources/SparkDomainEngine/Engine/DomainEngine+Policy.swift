import Foundation
package import SparkCrypto
package import SparkDomain
import SparkStore

/// The domain's own settings and what the operator reads of them (`spark-admin`): the policy,
/// the keys of the domain's own issuers, and the outbox of the mail it sent. The operator's
/// other calls are in the area they act on (issuers, accounts, endpoints, moderation); together
/// they are ``DomainAdministration``, which endpoints never call.
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

    /// The public keys of the domain's own test or accounts issuer.
    package func issuerKeys(_ kind: String) throws -> JWKSet {
        switch kind {
        case "test": testIssuerJWKS
        case "accounts": accountsIssuerJWKS
        default: throw DomainError(.invalidRequest, "the domain's issuers are test and accounts, not '\(kind)'")
        }
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
