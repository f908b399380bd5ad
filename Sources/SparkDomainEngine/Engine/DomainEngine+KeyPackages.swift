package import Foundation
import SparkCrypto
package import SparkDomain
import SparkStore

/// MLS KeyPackages: the domain as MLS's Delivery Service keeps each device's KeyPackages so that
/// others can add the device to a chat while it is offline. The bytes are opaque here (the
/// devices that use them check them: signature, credential, lifetime); the domain bounds their
/// size and number, hands each one-time KeyPackage out once, and the last-resort one when no
/// one-time one is left. It counts no one-time KeyPackage older than ``keyPackageMaximumAge``
/// (devices make them for 30 days), so a device tops up before they expire, and its next
/// publication replaces them. Past
/// ``oneTimeClaimsPerHour`` (or ``oneTimeClaimsPerUserPerHour`` of one user's) a claimer gets the
/// last-resort ones: no one drains another's one-time KeyPackages.
extension DomainEngine {
    /// The most one-time KeyPackages kept per endpoint (and published in one call).
    package static let maximumKeyPackages = 100
    /// The largest KeyPackage accepted, in bytes (one with a device credential is about 400).
    package static let maximumKeyPackageSize = 4096
    /// One-time KeyPackages older than this are not counted, and the endpoint's next publication
    /// replaces them: devices make them for 30 days and top up below 10, so a device idle for
    /// weeks stays invitable with fresh ones.
    package static let keyPackageMaximumAge: TimeInterval = 14 * 86400
    /// The one-time KeyPackages one user may claim an hour, of all users'…
    package static let oneTimeClaimsPerHour = 200
    /// …and of one user's devices; past either, the claimer gets the last-resort ones.
    package static let oneTimeClaimsPerUserPerHour = 10

    /// Stores KeyPackages of the caller's endpoint; see ``DomainService/publishKeyPackages(token:endpointID:keyPackages:lastResort:)``.
    package func publishKeyPackages(as caller: Caller, keyPackages: [Data], lastResort: Data?) async throws
        -> Int
    {
        let (user, endpointID) = (caller.userID, caller.endpointID)
        guard keyPackages.count <= Self.maximumKeyPackages else {
            throw DomainError(.invalidRequest, "at most \(Self.maximumKeyPackages) KeyPackages are published at once")
        }
        for package in keyPackages + (lastResort.map { [$0] } ?? []) {
            guard (1...Self.maximumKeyPackageSize).contains(package.count) else {
                throw DomainError(.invalidRequest, "a KeyPackage is 1 to \(Self.maximumKeyPackageSize) bytes")
            }
        }
        let now = clock.now().timeIntervalSince1970
        let (left, told): (Int, Bool) = try await storage {
            try await store.write(Self.keyPackageScope(endpointID)) { db -> (Int, Bool) in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID)
                // One-time KeyPackages too old to hand out make room for the new ones.
                try db.execute(
                    "DELETE FROM key_packages WHERE endpoint_id = ? AND last_resort = 0 AND published_at < ?",
                    [endpointID, now - Self.keyPackageMaximumAge])
                let had = try Self.oneTimeCount(db, endpointID)
                let new =
                    try db.scalar("SELECT count(*) FROM key_packages WHERE endpoint_id = ?", [endpointID], as: Int.self) == 0
                for package in keyPackages {
                    try db.execute(
                        """
                        INSERT INTO key_packages(endpoint_id, digest, package, last_resort, published_at) VALUES (?, ?, ?, 0, ?)
                        ON CONFLICT DO NOTHING
                        """, [endpointID, SHA256.hash(package), package, now])
                }
                let count = try Self.oneTimeCount(db, endpointID)
                guard count <= Self.maximumKeyPackages else {
                    throw DomainError(
                        .invalidRequest,
                        "an endpoint keeps at most \(Self.maximumKeyPackages) KeyPackages; it has \(had)")
                }
                if let lastResort {
                    try db.execute("DELETE FROM key_packages WHERE endpoint_id = ? AND last_resort = 1", [endpointID])
                    try db.execute(
                        """
                        INSERT INTO key_packages(endpoint_id, digest, package, last_resort, published_at) VALUES (?, ?, ?, 1, ?)
                        ON CONFLICT(endpoint_id, digest) DO UPDATE SET last_resort = 1
                        """, [endpointID, SHA256.hash(lastResort), lastResort, now])
                }
                // A device that can be added now: the user's other devices are told, so that one
                // of them adds it to the user's chats at once.
                if new, !keyPackages.isEmpty || lastResort != nil { try Self.tellDevicesChanged(db, user: user, now: now) }
                return (try Self.oneTimeCount(db, endpointID, now: now), new)
            }
        }
        if told { announceEntries(to: [user]) }
        return left
    }

    /// Puts a ``MailboxKind/devices`` notice in the mailbox of `user` (every endpoint of theirs).
    static func tellDevicesChanged(_ db: any DomainStatements, user: String, now: TimeInterval) throws {
        try append(
            db, to: [user], chatID: "", sender: user, kind: .devices, messageNumber: nil, payload: Data(), members: nil, now: now)
        try db.announce([user])
    }

    /// One KeyPackage per registered endpoint of `userID`; see ``DomainService/claimKeyPackages(token:endpointID:userID:)``.
    package func claimKeyPackages(as caller: Caller, userID: String) async throws -> [ClaimedKeyPackage] {
        let claimer = caller.userID
        guard !userID.isEmpty, userID.utf8.count <= 255 else {
            throw DomainError(.invalidRequest, "a user id is 1 to 255 bytes")
        }
        let now = clock.now().timeIntervalSince1970
        return try await storage {
            try await store.write { db -> [ClaimedKeyPackage] in
                try Self.requireEndpoint(db, user: claimer, endpointID: caller.endpointID)
                // The KeyPackages of removed endpoints are of no use to anyone: they go.
                try db.execute(
                    """
                    DELETE FROM key_packages WHERE endpoint_id IN
                        (SELECT endpoint_id FROM endpoints WHERE user_id = ? AND removed_reason IS NOT NULL)
                    """, [userID])
                // What this claimer took in the last hour decides whether it gets one-time ones.
                try db.execute("DELETE FROM key_package_claims WHERE claimed_at < ?", [now - 3600])
                var byClaimer =
                    try db.scalar("SELECT count(*) FROM key_package_claims WHERE claimer = ?", [claimer], as: Int.self) ?? 0
                var ofUser =
                    try db.scalar(
                        "SELECT count(*) FROM key_package_claims WHERE claimer = ? AND target = ?", [claimer, userID],
                        as: Int.self
                    )
                    ?? 0
                let endpoints = try db.rows(
                    "SELECT endpoint_id FROM endpoints WHERE user_id = ? AND removed_reason IS NULL AND active = 1 ORDER BY endpoint_id",
                    [userID]
                ).map { try $0.get(0, as: String.self) }
                var claimed: [ClaimedKeyPackage] = []
                for device in endpoints {
                    let oneTime = byClaimer < Self.oneTimeClaimsPerHour && ofUser < Self.oneTimeClaimsPerUserPerHour
                    if oneTime,
                        let package = try db.scalar(
                            """
                            DELETE FROM key_packages WHERE endpoint_id = ? AND digest = (
                                SELECT digest FROM key_packages WHERE endpoint_id = ? AND last_resort = 0
                                ORDER BY published_at, digest LIMIT 1)
                            RETURNING package
                            """, [device, device], as: Data.self)
                    {
                        claimed.append(ClaimedKeyPackage(endpointID: device, keyPackage: package, lastResort: false))
                        try db.execute(
                            "INSERT INTO key_package_claims(claimer, target, claimed_at) VALUES (?, ?, ?)",
                            [claimer, userID, now])
                        byClaimer += 1
                        ofUser += 1
                    } else if let package = try db.scalar(
                        "SELECT package FROM key_packages WHERE endpoint_id = ? AND last_resort = 1", [device], as: Data.self)
                    {
                        claimed.append(ClaimedKeyPackage(endpointID: device, keyPackage: package, lastResort: true))
                    }
                }
                return claimed
            }
        }
    }

    /// How many one-time KeyPackages the caller's endpoint has left (young enough to hand out).
    package func keyPackageCount(as caller: Caller) async throws -> Int {
        let user = try await requireEndpoint(caller)
        let endpointID = caller.endpointID
        let now = clock.now().timeIntervalSince1970
        return try await storage {
            try await store.read { db in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID)
                return try Self.oneTimeCount(db, endpointID, now: now)
            }
        }
    }

    /// The endpoint's one-time KeyPackages; at `now`, only those young enough to hand out.
    static func oneTimeCount(_ db: any DomainStatements, _ endpointID: String, now: TimeInterval? = nil) throws -> Int {
        try db.scalar(
            "SELECT count(*) FROM key_packages WHERE endpoint_id = ? AND last_resort = 0 AND published_at >= ?",
            [endpointID, now.map { $0 - keyPackageMaximumAge } ?? 0], as: Int.self) ?? 0
    }

    /// An endpoint's publications run one at a time (the count is checked after the inserts).
    static func keyPackageScope(_ endpointID: String) -> WriteScope { .locking(["key-packages:" + endpointID]) }
}
