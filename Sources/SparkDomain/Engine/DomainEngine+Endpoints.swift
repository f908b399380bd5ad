public import Foundation
import SparkCrypto
import SparkStore

/// Endpoints, the key store and the identity directory. Every call validates its token and
/// touches only the token's user's endpoints, blobs and challenges.
extension DomainEngine {
    static let maximumBlobSize = 64 * 1024
    static let challengeLifetime: TimeInterval = 600

    // MARK: Endpoints

    /// Registers the caller's device, or says why it must wait (device switch, full).
    public func registerEndpoint(token: String, registration: EndpointRegistration) async throws -> RegistrationOutcome {
        let user = try await validate(token: token).userID
        guard Self.isValidIdentifier(registration.endpointID, maximum: 64) else {
            throw DomainError(.invalidRequest, "an endpoint id is 1 to 64 characters of a-z, A-Z, 0-9, '-' or '_'")
        }
        guard registration.description.count <= 128, registration.nickname.count <= 64 else {
            throw DomainError(.invalidRequest, "an endpoint description is at most 128 characters, a nickname 64")
        }
        let policy = try currentPolicy()
        let now = clock.now().timeIntervalSince1970
        return try storage {
            try store.write { db -> RegistrationOutcome in
                if let row = try db.row(
                    "SELECT user_id, removed_reason FROM endpoints WHERE endpoint_id = ?", [registration.endpointID])
                {
                    guard try row.get(0, as: String.self) == user else {
                        throw DomainError(.forbidden, "that endpoint id belongs to another user")
                    }
                    // A removed endpoint learns why; it comes back only under a new endpoint id
                    // (after wiping what it kept), never by reusing the removed one.
                    if let reason = try row.get(1, as: String?.self) { throw DomainError(.endpointRemoved, reason) }
                    try db.execute("UPDATE endpoints SET last_seen = ? WHERE endpoint_id = ?", [now, registration.endpointID])
                    return .registered(try Self.endpoint(db, registration.endpointID))
                }
                var registered = try Self.endpoints(db, user: user)
                if !policy.multipleActiveEndpoints, registered.contains(where: \.isActive) {
                    guard registration.takeOver else { return .deviceSwitchRequired(active: registered.filter(\.isActive)) }
                    try db.execute(
                        "UPDATE endpoints SET removed_reason = ?, active = 0 WHERE user_id = ? AND removed_reason IS NULL AND active = 1",
                        ["superseded: another device took the profile over", user])
                    registered = try Self.endpoints(db, user: user)
                }
                if let replaced = registration.replacing, registered.count >= policy.maximumEndpoints {
                    let changed = try db.execute(
                        "UPDATE endpoints SET removed_reason = ?, active = 0 WHERE endpoint_id = ? AND user_id = ? AND removed_reason IS NULL",
                        ["replaced by a new device of the user", replaced, user])
                    if changed == 0 { throw DomainError(.notFound, "the user has no registered endpoint \(replaced)") }
                    registered = try Self.endpoints(db, user: user)
                }
                guard registered.count < policy.maximumEndpoints else {
                    return .full(endpoints: registered, maximum: policy.maximumEndpoints)
                }
                let next =
                    (try db.scalar("SELECT max(registration_id) FROM endpoints WHERE user_id = ?", [user], as: Int64.self) ?? 0)
                    + 1
                try db.execute(
                    """
                    INSERT INTO endpoints(endpoint_id, user_id, registration_id, description, nickname, active, created_at, last_seen)
                    VALUES (?, ?, ?, ?, ?, 1, ?, ?)
                    """,
                    [registration.endpointID, user, next, registration.description, registration.nickname, now, now])
                return .registered(try Self.endpoint(db, registration.endpointID))
            }
        }
    }

    /// The caller's registered endpoints, oldest first.
    public func endpoints(token: String, endpointID: String) async throws -> [EndpointInfo] {
        let user = try await caller(token: token, endpointID: endpointID)
        return try storage { try store.read { db in try Self.endpoints(db, user: user) } }
    }

    /// Renames one of the caller's endpoints.
    public func setEndpointNickname(token: String, endpointID: String, target: String, nickname: String) async throws {
        let user = try await caller(token: token, endpointID: endpointID)
        guard nickname.count <= 64, !nickname.contains(where: \.isNewline) else {
            throw DomainError(.invalidRequest, "a nickname is at most 64 characters on one line")
        }
        try storage {
            try store.write { db in
                let changed = try db.execute(
                    "UPDATE endpoints SET nickname = ? WHERE endpoint_id = ? AND user_id = ? AND removed_reason IS NULL",
                    [nickname, target, user])
                if changed == 0 { throw DomainError(.notFound, "the user has no registered endpoint \(target)") }
            }
        }
    }

    /// Removes one of the caller's endpoints.
    public func deregisterEndpoint(token: String, endpointID: String, target: String) async throws {
        let user = try await caller(token: token, endpointID: endpointID)
        try storage {
            try store.write { db in
                let changed = try db.execute(
                    "UPDATE endpoints SET removed_reason = ?, active = 0 WHERE endpoint_id = ? AND user_id = ? AND removed_reason IS NULL",
                    ["deregistered by the user", target, user])
                if changed == 0 { throw DomainError(.notFound, "the user has no registered endpoint \(target)") }
            }
        }
    }

    /// Marks the endpoint seen, or tells it that it was removed and why.
    public func checkIn(token: String, endpointID: String) async throws -> EndpointInfo {
        let user = try await validate(token: token).userID
        let now = clock.now().timeIntervalSince1970
        return try storage {
            try store.write { db in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID)
                try db.execute("UPDATE endpoints SET last_seen = ? WHERE endpoint_id = ?", [now, endpointID])
                return try Self.endpoint(db, endpointID)
            }
        }
    }

    // MARK: Key store

    /// Reads a key blob; the management blob comes with an unlock challenge and is rate-limited.
    public func fetchKeyBlob(token: String, endpointID: String, name: String) async throws -> BlobFetch {
        let user = try await validate(token: token).userID
        let policy = try currentPolicy()
        let now = clock.now().timeIntervalSince1970
        return try storage {
            try store.write { db -> BlobFetch in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID)
                guard
                    let row = try db.row("SELECT data, version FROM key_blobs WHERE user_id = ? AND name = ?", [user, name])
                else { return BlobFetch(blob: nil) }
                let blob = KeyBlob(name: name, data: try row.get(0), version: try row.get(1))
                guard name == KeyBlob.managementName else { return BlobFetch(blob: blob) }
                let recent = try db.rows(
                    "SELECT issued_at FROM unlock_challenges WHERE user_id = ? AND proven = 0 AND issued_at > ? ORDER BY issued_at",
                    [user, now - 3600])
                if recent.count >= policy.unlockAttemptsPerHour {
                    let oldest = try recent[0].get(0, as: Double.self)
                    throw DomainError(
                        .tooManyAttempts,
                        "too many passcode attempts for this user in the last hour (\(policy.unlockAttemptsPerHour) allowed)",
                        retryAfter: max(1, Int((oldest + 3600 - now).rounded(.up))))
                }
                let challenge = SystemRandom.bytes(count: 32)
                try db.execute(
                    "INSERT INTO unlock_challenges(challenge, user_id, endpoint_id, issued_at) VALUES (?, ?, ?, ?)",
                    [challenge, user, endpointID, now])
                return BlobFetch(blob: blob, challenge: challenge, attemptsLeft: policy.unlockAttemptsPerHour - recent.count - 1)
            }
        }
    }

    /// Writes a key blob with compare-and-swap on its version.
    public func putKeyBlob(token: String, endpointID: String, name: String, data: Data, expectedVersion: Int?) async throws -> Int
    {
        let user = try await validate(token: token).userID
        guard Self.isValidIdentifier(name, maximum: 64) else {
            throw DomainError(.invalidRequest, "a blob name is 1 to 64 of a-z, 0-9, '-', '_'")
        }
        guard !data.isEmpty, data.count <= Self.maximumBlobSize else {
            throw DomainError(.invalidRequest, "a key blob is 1 to \(Self.maximumBlobSize) bytes")
        }
        return try storage {
            try store.write { db -> Int in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID)
                let row = try db.row("SELECT version, data FROM key_blobs WHERE user_id = ? AND name = ?", [user, name])
                let current = try row?.get(0, as: Int.self)
                // A retry after a lost answer finds its own write: the same bytes, one version on.
                if let current, current == (expectedVersion ?? 0) + 1, try row?.get(1, as: Data.self) == data {
                    return current
                }
                guard current == expectedVersion else {
                    throw DomainError(
                        .conflict,
                        "the \(name) blob is at version \(current.map(String.init) ?? "none"), not \(expectedVersion.map(String.init) ?? "none")"
                    )
                }
                let next = (current ?? 0) + 1
                try db.execute(
                    """
                    INSERT INTO key_blobs(user_id, name, data, version) VALUES (?, ?, ?, ?)
                    ON CONFLICT(user_id, name) DO UPDATE SET data = excluded.data, version = excluded.version
                    """, [user, name, data, next])
                return next
            }
        }
    }

    /// Accepts a proof of unlock: a signature by the published identity over a fresh challenge.
    public func proveUnlock(token: String, endpointID: String, challenge: Data, signature: Data) async throws {
        let user = try await validate(token: token).userID
        let now = clock.now().timeIntervalSince1970
        try storage {
            try store.write { db in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID)
                guard
                    let issuedAt = try db.scalar(
                        "SELECT issued_at FROM unlock_challenges WHERE challenge = ? AND user_id = ? AND endpoint_id = ? AND proven = 0",
                        [challenge, user, endpointID], as: Double.self), issuedAt > now - Self.challengeLifetime
                else { throw DomainError(.invalidProof, "the unlock challenge is unknown, already used or expired") }
                guard let identity = try Self.identity(db, user: user),
                    let key = try? Ed25519.PublicKey(rawRepresentation: identity.signingKey),
                    key.isValidSignature(
                        signature, for: unlockProofMessage(userID: user, endpointID: endpointID, challenge: challenge))
                else { throw DomainError(.invalidProof, "the unlock proof does not verify with the user's identity key") }
                try db.execute("UPDATE unlock_challenges SET proven = 1 WHERE challenge = ?", [challenge])
            }
        }
    }

    // MARK: Identity directory

    /// Publishes the caller's identity; it must be self-signed, and a new version must be higher
    /// than any before (keys are never silently replaced).
    public func publishIdentity(token: String, endpointID: String, identity: PublishedIdentity) async throws {
        let user = try await validate(token: token).userID
        guard identity.userID == user else { throw DomainError(.forbidden, "an identity can only be published by its own user") }
        guard identity.isSelfSigned else {
            throw DomainError(.invalidRequest, "the identity is malformed or not signed by its own key")
        }
        let document = try JSONEncoder().encode(identity)
        try storage {
            try store.write { db in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID)
                if let row = try db.row("SELECT document, key_version FROM identities WHERE user_id = ?", [user]) {
                    let version = try row.get(1, as: Int.self)
                    let current = try row.get(0, as: Data.self)
                    if let existing = try? JSONDecoder().decode(PublishedIdentity.self, from: current), existing == identity {
                        return
                    }
                    guard identity.keyVersion > version else {
                        throw DomainError(
                            .conflict, "identity key version \(identity.keyVersion) is not above the current \(version)")
                    }
                }
                try db.execute(
                    """
                    INSERT INTO identities(user_id, document, key_version) VALUES (?, ?, ?)
                    ON CONFLICT(user_id) DO UPDATE SET document = excluded.document, key_version = excluded.key_version
                    """, [user, document, identity.keyVersion])
            }
        }
    }

    /// A user's published identity, if they have one.
    public func identity(token: String, endpointID: String, userID: String) async throws -> PublishedIdentity? {
        _ = try await caller(token: token, endpointID: endpointID)
        return try storage { try store.read { db in try Self.identity(db, user: userID) } }
    }

    /// Forgets the caller's keys and identity and removes their other endpoints.
    public func resetIdentity(token: String, endpointID: String) async throws {
        let user = try await validate(token: token).userID
        try storage {
            try store.write { db in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID)
                try db.execute("DELETE FROM key_blobs WHERE user_id = ?", [user])
                try db.execute("DELETE FROM unlock_challenges WHERE user_id = ?", [user])
                // The version is kept so the next identity must be newer.
                try db.execute("UPDATE identities SET document = ? WHERE user_id = ?", [Data(), user])
                try db.execute(
                    "UPDATE endpoints SET removed_reason = ?, active = 0 WHERE user_id = ? AND endpoint_id != ? AND removed_reason IS NULL",
                    ["the user reset their keys (forgotten passcode) on another device", user, endpointID])
            }
        }
    }

    /// The highest identity key version the user ever published (0 if none).
    public func identityKeyVersion(token: String, endpointID: String) async throws -> Int {
        let user = try await caller(token: token, endpointID: endpointID)
        return try storage {
            try store.read { db in
                try db.scalar("SELECT key_version FROM identities WHERE user_id = ?", [user], as: Int.self) ?? 0
            }
        }
    }

    // MARK: Helpers

    /// Validates `token` into its user and checks that `endpointID` is one of that user's
    /// registered endpoints (every call after registration carries both).
    func caller(token: String, endpointID: String) async throws -> String {
        let user = try await validate(token: token).userID
        try storage { try store.read { db in try Self.requireEndpoint(db, user: user, endpointID: endpointID) } }
        return user
    }

    static func isValidIdentifier(_ text: String, maximum: Int) -> Bool {
        !text.isEmpty && text.count <= maximum
            && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }
    }

    static func requireEndpoint(_ db: any DomainStatements, user: String, endpointID: String) throws {
        guard let row = try db.row("SELECT user_id, removed_reason FROM endpoints WHERE endpoint_id = ?", [endpointID]),
            try row.get(0, as: String.self) == user
        else { throw DomainError(.endpointRemoved, "this endpoint is not registered for the user") }
        if let reason = try row.get(1, as: String?.self) { throw DomainError(.endpointRemoved, reason) }
    }

    static func endpoints(_ db: any DomainStatements, user: String) throws -> [EndpointInfo] {
        try db.rows(
            """
            SELECT endpoint_id, registration_id, description, nickname, active, created_at, last_seen FROM endpoints
            WHERE user_id = ? AND removed_reason IS NULL ORDER BY registration_id
            """, [user]
        ).map(endpointInfo)
    }

    static func endpoint(_ db: any DomainStatements, _ endpointID: String) throws -> EndpointInfo {
        guard
            let row = try db.row(
                "SELECT endpoint_id, registration_id, description, nickname, active, created_at, last_seen FROM endpoints WHERE endpoint_id = ?",
                [endpointID])
        else { throw DomainError(.notFound, "no endpoint \(endpointID)") }
        return try endpointInfo(row)
    }

    static func endpointInfo(_ row: Row) throws -> EndpointInfo {
        EndpointInfo(
            endpointID: try row.get(0), registrationID: try row.get(1), description: try row.get(2), nickname: try row.get(3),
            isActive: try row.get(4), createdAt: Date(timeIntervalSince1970: try row.get(5)),
            lastSeen: Date(timeIntervalSince1970: try row.get(6)))
    }

    static func identity(_ db: any DomainStatements, user: String) throws -> PublishedIdentity? {
        guard let document = try db.scalar("SELECT document FROM identities WHERE user_id = ?", [user], as: Data.self),
            !document.isEmpty
        else { return nil }
        return try? JSONDecoder().decode(PublishedIdentity.self, from: document)
    }
}
