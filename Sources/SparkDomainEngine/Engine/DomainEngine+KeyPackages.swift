package import Foundation
import SparkCrypto
package import SparkDomain
import SparkMLS
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
///
/// Each KeyPackage is of one MLS cipher suite, read from its bytes (``keyPackageSuite(_:)``): a
/// device keeps its one-time ones and one last-resort one per suite, and a claim asks for a
/// suite, getting each device's KeyPackage of it or, from a device that has none, of suite 1.
/// Under ``DomainPolicy/requirePostQuantum`` only post-quantum KeyPackages are taken.
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

    /// The MLS cipher suites whose KeyPackages the domain keeps: suite 1 and the post-quantum
    /// suite (X-Wing, private-use code point 0xF768).
    package static let keyPackageSuites: Set<UInt16> = [classicSuite, postQuantumSuite]
    /// `MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519`.
    package static let classicSuite = MLSCipherSuite.x25519AES128GCMSHA256Ed25519.rawValue
    /// `MLS_128_MLKEM768X25519_AES128GCM_SHA256_Ed25519` at its private-use code point.
    package static let postQuantumSuite = MLSCipherSuite.xWingPrivateUseCodePoint

    /// The cipher suite a published KeyPackage names in the clear: an `MLSMessage` (`version`
    /// 1, `wire_format` 5, key_package) whose KeyPackage starts with `version` 1 and the
    /// `cipher_suite`. Nil for bytes that are not one.
    package static func keyPackageSuite(_ package: Data) -> UInt16? {
        let bytes = [UInt8](package.prefix(8))
        guard bytes.count == 8, bytes[0] == 0, bytes[1] == 1, bytes[2] == 0, bytes[3] == 5, bytes[4] == 0, bytes[5] == 1
        else { return nil }
        return UInt16(bytes[6]) << 8 | UInt16(bytes[7])
    }

    /// The cipher suite a Welcome (an `MLSMessage` of `wire_format` 3) names in the clear.
    package static func welcomeSuite(_ welcome: Data) -> UInt16? {
        let bytes = [UInt8](welcome.prefix(6))
        guard bytes.count == 6, bytes[0] == 0, bytes[1] == 1, bytes[2] == 0, bytes[3] == 3 else { return nil }
        return UInt16(bytes[4]) << 8 | UInt16(bytes[5])
    }

    /// Stores KeyPackages of the caller's endpoint; see ``DomainService/publishKeyPackages(token:endpointID:keyPackages:lastResort:)``.
    package func publishKeyPackages(as caller: Caller, keyPackages: [Data], lastResort: Data?) async throws
        -> Int
    {
        let (user, endpointID) = (caller.userID, caller.endpointID)
        let policy = try requestPolicy()
        guard keyPackages.count <= Self.maximumKeyPackages else {
            throw DomainError(.invalidRequest, "at most \(Self.maximumKeyPackages) KeyPackages are published at once")
        }
        var suites: Set<UInt16> = []
        for package in keyPackages + (lastResort.map { [$0] } ?? []) {
            guard (1...Self.maximumKeyPackageSize).contains(package.count) else {
                throw DomainError(.invalidRequest, "a KeyPackage is 1 to \(Self.maximumKeyPackageSize) bytes")
            }
            guard let suite = Self.keyPackageSuite(package), Self.keyPackageSuites.contains(suite) else {
                throw DomainError(.invalidRequest, "a KeyPackage is an MLS KeyPackage of suite 1 or 0xF768")
            }
            guard suite == Self.postQuantumSuite || !policy.requirePostQuantum else {
                throw DomainError(.forbidden, "this domain takes post-quantum KeyPackages only (suite 0xF768)")
            }
            suites.insert(suite)
        }
        guard suites.count <= 1 else {
            throw DomainError(.invalidRequest, "the KeyPackages of one publication are of one suite")
        }
        let suite = Int64(suites.first ?? Self.classicSuite)
        let now = clock.now().timeIntervalSince1970
        let (left, told): (Int, Bool) = try await storage {
            try await store.write(Self.keyPackageScope(endpointID)) { db -> (Int, Bool) in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID)
                // One-time KeyPackages too old to hand out make room for the new ones.
                try db.execute(
                    "DELETE FROM key_packages WHERE endpoint_id = ? AND last_resort = 0 AND published_at < ? AND suite = ?",
                    [endpointID, now - Self.keyPackageMaximumAge, suite])
                let had = try Self.oneTimeCount(db, endpointID, suite: suite)
                let new =
                    try db.scalar("SELECT count(*) FROM key_packages WHERE endpoint_id = ?", [endpointID], as: Int.self) == 0
                for package in keyPackages {
                    try db.execute(
                        """
                        INSERT INTO key_packages(endpoint_id, digest, package, last_resort, published_at, suite)
                        VALUES (?, ?, ?, 0, ?, ?) ON CONFLICT DO NOTHING
                        """, [endpointID, SHA256.hash(package), package, now, suite])
                }
                let count = try Self.oneTimeCount(db, endpointID, suite: suite)
                guard count <= Self.maximumKeyPackages else {
                    throw DomainError(
                        .invalidRequest,
                        "an endpoint keeps at most \(Self.maximumKeyPackages) KeyPackages; it has \(had)")
                }
                if let lastResort {
                    try db.execute(
                        "DELETE FROM key_packages WHERE endpoint_id = ? AND last_resort = 1 AND suite = ?", [endpointID, suite])
                    try db.execute(
                        """
                        INSERT INTO key_packages(endpoint_id, digest, package, last_resort, published_at, suite)
                        VALUES (?, ?, ?, 1, ?, ?) ON CONFLICT(endpoint_id, digest) DO UPDATE SET last_resort = 1
                        """, [endpointID, SHA256.hash(lastResort), lastResort, now, suite])
                }
                // A device that can be added now: the user's other devices are told, so that one
                // of them adds it to the user's chats at once.
                if new, !keyPackages.isEmpty || lastResort != nil { try Self.tellDevicesChanged(db, user: user, now: now) }
                return (try Self.oneTimeCount(db, endpointID, suite: suite, now: now), new)
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

    /// One KeyPackage per registered endpoint of `userID`, of `suite` where the endpoint has one
    /// and of suite 1 where not; see ``DomainService/claimKeyPackages(token:endpointID:userID:suite:)``.
    package func claimKeyPackages(as caller: Caller, userID: String, suite requested: UInt16 = classicSuite) async throws
        -> [ClaimedKeyPackage]
    {
        let claimer = caller.userID
        guard !userID.isEmpty, userID.utf8.count <= 255 else {
            throw DomainError(.invalidRequest, "a user id is 1 to 255 bytes")
        }
        guard Self.keyPackageSuites.contains(requested) else {
            throw DomainError(.invalidRequest, "KeyPackages are of suite 1 or 0xF768")
        }
        // The suites handed out, in order: the one asked for, else suite 1. Under
        // requirePostQuantum no classic KeyPackage is handed out (those published before the
        // policy was set stay unused).
        let requirePostQuantum = try requestPolicy().requirePostQuantum
        let candidates = (requested == Self.classicSuite ? [requested] : [requested, Self.classicSuite])
            .filter { !(requirePostQuantum && $0 == Self.classicSuite) }.map { Int64($0) }
        let now = clock.now().timeIntervalSince1970
        return try await storage {
            try await store.write { db -> [ClaimedKeyPackage] in
                try Self.requireEndpoint(db, user: claimer, endpointID: caller.endpointID)
                // The KeyPackages of removed endpoints are of no use to anyone: they go.
                try db.execute(
                    """
                    DELETE FROM key_packages WHERE endpoint_id IN \(Self.removedEndpointsOfUser)
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
                let endpoints = try Self.activeEndpointIDs(db, user: userID)
                var claimed: [ClaimedKeyPackage] = []
                for device in endpoints {
                    // The suite asked for, if the device has a KeyPackage of it; else suite 1.
                    var chosen: Int64?
                    for candidate in candidates where chosen == nil {
                        chosen = try db.scalar(
                            "SELECT suite FROM key_packages WHERE endpoint_id = ? AND suite = ? LIMIT 1", [device, candidate],
                            as: Int64.self)
                    }
                    guard let suite = chosen else { continue }
                    let oneTime = byClaimer < Self.oneTimeClaimsPerHour && ofUser < Self.oneTimeClaimsPerUserPerHour
                    if oneTime,
                        let package = try db.scalar(
                            """
                            DELETE FROM key_packages WHERE endpoint_id = ? AND digest = (
                                SELECT digest FROM key_packages WHERE endpoint_id = ? AND last_resort = 0 AND suite = ?
                                ORDER BY published_at, digest LIMIT 1)
                            RETURNING package
                            """, [device, device, suite], as: Data.self)
                    {
                        claimed.append(ClaimedKeyPackage(endpointID: device, keyPackage: package, lastResort: false))
                        try db.execute(
                            "INSERT INTO key_package_claims(claimer, target, claimed_at) VALUES (?, ?, ?)",
                            [claimer, userID, now])
                        byClaimer += 1
                        ofUser += 1
                    } else if let package = try db.scalar(
                        "SELECT package FROM key_packages WHERE endpoint_id = ? AND last_resort = 1 AND suite = ?",
                        [device, suite],
                        as: Data.self)
                    {
                        claimed.append(ClaimedKeyPackage(endpointID: device, keyPackage: package, lastResort: true))
                    }
                }
                return claimed
            }
        }
    }

    /// How many one-time KeyPackages of `suite` the caller's endpoint has left (young enough to
    /// hand out).
    package func keyPackageCount(as caller: Caller, suite: UInt16 = classicSuite) async throws -> Int {
        let user = try await requireEndpoint(caller)
        let endpointID = caller.endpointID
        let now = clock.now().timeIntervalSince1970
        return try await storage {
            try await store.read { db in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID)
                return try Self.oneTimeCount(db, endpointID, suite: Int64(suite), now: now)
            }
        }
    }

    /// The endpoint's one-time KeyPackages of `suite`; at `now`, only those young enough to hand out.
    static func oneTimeCount(_ db: any DomainStatements, _ endpointID: String, suite: Int64, now: TimeInterval? = nil) throws
        -> Int
    {
        try db.scalar(
            "SELECT count(*) FROM key_packages WHERE endpoint_id = ? AND last_resort = 0 AND suite = ? AND published_at >= ?",
            [endpointID, suite, now.map { $0 - keyPackageMaximumAge } ?? 0], as: Int.self) ?? 0
    }

    /// An endpoint's publications run one at a time (the count is checked after the inserts).
    static func keyPackageScope(_ endpointID: String) -> WriteScope { .locking(["key-packages:" + endpointID]) }
}
