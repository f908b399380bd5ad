package import Foundation
import SparkCrypto
import SparkDomain
import SparkLock
import SparkStore

/// When each discovered issuer's keys are next due to be fetched again, as this process last
/// read them (a fetch is started once when due, then not before a minute has passed).
final class DiscoverySchedule: Sendable {
    private let due = Locked<[String: Date]>([:])

    /// Records when `issuer`'s keys stop being fresh.
    func due(_ issuer: String, at date: Date) { due.withLock { $0[issuer] = date } }

    /// The issuers due at `now`, each pushed a minute on so that it is started once.
    func take(now: Date) -> [String] {
        due.withLock { due in
            let ready = due.filter { $0.value <= now }.map(\.key)
            for issuer in ready { due[issuer] = now.addingTimeInterval(DomainEngine.keyFetchInterval) }
            return ready
        }
    }
}

/// OpenID providers trusted by discovery: the domain fetches the discovery document and the
/// JWKS itself, keeps the keys in its database (every instance reads them there), and fetches
/// them again when they age past what `Cache-Control` allowed (within bounds) or when a token
/// names a key they lack, at most once a minute per issuer across every instance (a row claim
/// in the database decides which instance fetches). A fetch that fails, or returns garbage,
/// changes nothing: the last good keys stay.
extension DomainEngine {
    /// The least time between two fetches of one issuer's keys, across every instance.
    static let keyFetchInterval: TimeInterval = 60
    /// The bounds of how long fetched keys are used before they are fetched again, whatever
    /// `Cache-Control` says (`no-store`: the least).
    static let keyFreshness: ClosedRange<TimeInterval> = 300...86_400
    /// Without `Cache-Control: max-age`: an hour.
    static let defaultKeyFreshness: TimeInterval = 3600

    /// The stored external issuers.
    static func issuerRows(_ db: any DomainStatements) throws -> [IssuerRow] {
        try db.rows(
            """
            SELECT issuer, audience, jwks_path, jwks, user_claim, jwks_uri, keys_fresh_until, last_fetch_error
            FROM external_issuers ORDER BY issuer
            """, []
        ).map {
            IssuerRow(
                issuer: ExternalIssuer(
                    issuer: try $0.get(0), audience: try $0.get(1), jwksPath: try $0.get(2), userClaim: try $0.get(4),
                    jwksURI: try $0.get(5, as: String?.self),
                    keysFreshUntil: try $0.get(6, as: Double?.self).map(Date.init(timeIntervalSince1970:)),
                    lastFetchError: try $0.get(7, as: String?.self)),
                jwks: try $0.get(3, as: Data?.self))
        }
    }

    /// Trusts the OpenID provider at `issuerURL`: its discovery document and keys are fetched
    /// now (an error if either fails) and kept in the database.
    package func discoverIssuer(_ issuerURL: String, audience: String, userClaim: String, caPEM: String?) async throws
        -> ExternalIssuer
    {
        try checkExternal(issuer: issuerURL, audience: audience)
        guard JWTClaims.userClaims.contains(userClaim) else {
            throw DomainError(
                .invalidRequest, "the user claim is one of \(JWTClaims.userClaims.joined(separator: ", ")), not \(userClaim)")
        }
        if let caPEM, !caPEM.hasPrefix("-----BEGIN") || caPEM.utf8.count > 64 * 1024 {
            throw DomainError(.invalidRequest, "the CA must be PEM text of at most 64 KiB")
        }
        let client = try OpenIDClient(trust: caPEM.map { .certificateAuthority(pem: $0) } ?? .systemStore)
        let configuration: OpenIDConfiguration
        let keys: ProviderKeys
        do {
            configuration = try await client.discover(issuer: issuerURL)
            keys = try await client.keys(at: configuration.jwksURI)
        } catch let error as DomainError where error.code == .unavailable {
            // The operator's request is fine; the provider is what failed: say so, not 503.
            throw DomainError(.invalidRequest, "cannot trust \(issuerURL): \(error.reason)")
        }
        let now = clock.now()
        let freshUntil = now.addingTimeInterval(Self.freshness(keys.maxAge))
        // No fetch is claimed yet: a key the provider publishes right after is fetched at once.
        try await storage {
            try await store.write { db in
                try db.execute(
                    """
                    INSERT INTO external_issuers(issuer, audience, jwks_path, jwks, user_claim, jwks_uri, ca_pem, keys_fresh_until, fetch_claimed_at, last_fetch_error)
                    VALUES (?, ?, '', ?, ?, ?, ?, ?, NULL, NULL)
                    ON CONFLICT(issuer) DO UPDATE SET audience = excluded.audience, jwks_path = '', jwks = excluded.jwks,
                        user_claim = excluded.user_claim, jwks_uri = excluded.jwks_uri, ca_pem = excluded.ca_pem,
                        keys_fresh_until = excluded.keys_fresh_until, fetch_claimed_at = excluded.fetch_claimed_at,
                        last_fetch_error = NULL
                    """,
                    [
                        issuerURL, audience, keys.document, userClaim, configuration.jwksURI, caPEM,
                        freshUntil.timeIntervalSince1970,
                    ])
                try db.announceSettingsChange()
            }
        }
        settingsChanged()
        return ExternalIssuer(
            issuer: issuerURL, audience: audience, jwksPath: "", userClaim: userClaim, jwksURI: configuration.jwksURI,
            keysFreshUntil: freshUntil)
    }

    /// How long keys fetched with this `max-age` are used, within ``keyFreshness``.
    package static func freshness(_ maxAge: TimeInterval?) -> TimeInterval {
        min(max(maxAge ?? defaultKeyFreshness, keyFreshness.lowerBound), keyFreshness.upperBound)
    }

    /// Fetches `issuer`'s keys again if no instance did in the last minute (the row's claim
    /// decides): true when new keys were stored. A failure keeps the last good keys and is
    /// recorded on the row (`spark-admin issuer list` shows it).
    @discardableResult
    package func refreshDiscoveredKeys(_ issuer: String) async -> Bool {
        let now = clock.now()
        let claimed: (jwksURI: String, caPEM: String?)? = try? await storage {
            try await store.write { db -> (String, String?)? in
                let changed = try db.execute(
                    """
                    UPDATE external_issuers SET fetch_claimed_at = ?
                    WHERE issuer = ? AND jwks_uri IS NOT NULL AND (fetch_claimed_at IS NULL OR fetch_claimed_at <= ?)
                    """,
                    [now.timeIntervalSince1970, issuer, now.timeIntervalSince1970 - Self.keyFetchInterval])
                guard changed == 1,
                    let row = try db.row("SELECT jwks_uri, ca_pem FROM external_issuers WHERE issuer = ?", [issuer])
                else { return nil }
                return (try row.get(0, as: String.self), try row.get(1, as: String?.self))
            }
        }
        guard let claimed else { return false }
        let fetched: Result<ProviderKeys, DomainError>
        do {
            let client = try OpenIDClient(
                trust: claimed.caPEM.map { .certificateAuthority(pem: $0) } ?? .systemStore, timeout: .seconds(5))
            // The discovery document again (it may name another JWKS URI); if it fails, the one known.
            let jwksURI = (try? await client.discover(issuer: issuer))?.jwksURI ?? claimed.jwksURI
            fetched = .success(try await client.keys(at: jwksURI))
        } catch let error as DomainError {
            fetched = .failure(error)
        } catch {
            fetched = .failure(DomainError(.unavailable, "\(error)"))
        }
        let stored: Bool? = try? await storage {
            try await store.write { db -> Bool in
                switch fetched {
                case .success(let keys):
                    try db.execute(
                        """
                        UPDATE external_issuers SET jwks = ?, keys_fresh_until = ?, last_fetch_error = NULL
                        WHERE issuer = ? AND jwks_uri IS NOT NULL
                        """,
                        [
                            keys.document, now.addingTimeInterval(Self.freshness(keys.maxAge)).timeIntervalSince1970,
                            issuer,
                        ])
                    try db.announceSettingsChange()
                    return true
                case .failure(let error):
                    // The last good keys stay; they are tried again a minute from now at the earliest.
                    try db.execute(
                        "UPDATE external_issuers SET last_fetch_error = ? WHERE issuer = ?",
                        [String(error.reason.prefix(500)), issuer])
                    return false
                }
            }
        }
        settingsChanged()
        return stored ?? false
    }

    /// Starts, in the background, a fetch of the keys of every discovered issuer whose keys
    /// aged past their freshness (each at most once a minute in this process).
    func refreshDueKeys() {
        for issuer in discovery.take(now: clock.now()) {
            Task { await self.refreshDiscoveredKeys(issuer) }
        }
    }
}

// MARK: The operator's calls (DomainAdministration)

extension DomainEngine {
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
}
