package import Foundation
import SparkCrypto
package import SparkDomain
import SparkStore

/// Endpoints, the key store and the identity directory. Every call validates its token and
/// touches only the token's user's endpoints, blobs and challenges.
extension DomainEngine {
    static let maximumBlobSize = 64 * 1024
    static let challengeLifetime: TimeInterval = 600
    /// The largest credential or approval a device may publish.
    static let maximumDeviceStatement = 1024

    // MARK: Endpoints

    /// Registers the caller's device, or says why it must wait (device switch, full).
    package func registerEndpoint(as identity: VerifiedIdentity, registration: EndpointRegistration) async throws
        -> RegistrationOutcome
    {
        let user = identity.userID
        guard Self.isValidIdentifier(registration.endpointID, maximum: 64) else {
            throw DomainError(.invalidRequest, "an endpoint id is 1 to 64 characters of a-z, A-Z, 0-9, '-' or '_'")
        }
        guard registration.description.count <= 128, registration.nickname.count <= 64 else {
            throw DomainError(.invalidRequest, "an endpoint description is at most 128 characters, a nickname 64")
        }
        let policy = try currentPolicy()
        let now = clock.now().timeIntervalSince1970
        return try await storage {
            try await store.write { db -> RegistrationOutcome in
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
                var pendingTakeover = false
                if !policy.multipleActiveEndpoints, registered.contains(where: \.isActive) {
                    guard registration.takeOver else { return .deviceSwitchRequired(active: registered.filter(\.isActive)) }
                    if try Self.hasIdentity(db, user: user) {
                        // The profile has keys: the takeover completes when this endpoint proves
                        // it unlocked them (proveUnlock), so a stolen token cannot evict the
                        // user's device. Until then this endpoint is registered but inactive.
                        pendingTakeover = true
                    } else {
                        try db.execute(
                            "UPDATE endpoints SET removed_reason = ?, active = 0 WHERE user_id = ? AND removed_reason IS NULL AND active = 1",
                            ["superseded: another device took the profile over", user])
                        registered = try Self.endpoints(db, user: user)
                    }
                }
                if let replaced = registration.replacing, registered.count >= policy.maximumEndpoints {
                    // A device that is not registered yet proves nothing: it may make room only
                    // by replacing a device none of the user's approved devices approved.
                    if let identity = try Self.identity(db, user: user),
                        let identityKey = try? Ed25519.PublicKey(rawRepresentation: identity.signingKey)
                    {
                        let graph = DeviceApprovalGraph(registered, user: user, identityKey: identityKey)
                        if graph.approvedFromOldest.contains(where: { $0.endpointID == replaced }) {
                            throw DomainError(
                                .conflict,
                                "\(replaced) is an approved device: remove it from another approved device, or ask the operator")
                        }
                    }
                    let changed = try db.execute(
                        "UPDATE endpoints SET removed_reason = ?, active = 0 WHERE endpoint_id = ? AND user_id = ? AND removed_reason IS NULL",
                        ["replaced by a new device of the user", replaced, user])
                    if changed == 0 { throw DomainError(.notFound, "the user has no registered endpoint \(replaced)") }
                    try Self.tellDevicesChanged(db, user: user, now: now)
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
                    INSERT INTO endpoints(
                        endpoint_id, user_id, registration_id, description, nickname, active, created_at, last_seen, takeover_pending)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                    [
                        registration.endpointID, user, next, registration.description, registration.nickname,
                        pendingTakeover ? 0 : 1, now, now, pendingTakeover ? 1 : 0,
                    ])
                return .registered(try Self.endpoint(db, registration.endpointID))
            }
        }
    }

    /// The caller's registered endpoints, oldest first.
    package func endpoints(as caller: Caller) async throws -> [EndpointInfo] {
        let user = try await requireEndpoint(caller)
        return try await storage { try await store.read { db in try Self.endpoints(db, user: user) } }
    }

    /// Renames the calling endpoint. An endpoint names only itself: a stolen token cannot label
    /// its own device "Alice's phone" and the real one something else while an approval is asked.
    package func setEndpointNickname(as caller: Caller, target: String, nickname: String) async throws {
        let user = try await requireEndpoint(caller)
        let endpointID = caller.endpointID
        guard nickname.count <= 64, !nickname.contains(where: \.isNewline) else {
            throw DomainError(.invalidRequest, "a nickname is at most 64 characters on one line")
        }
        guard target == endpointID else {
            throw DomainError(.forbidden, "an endpoint renames only itself; \(target) is another endpoint")
        }
        try await storage {
            try await store.write { db in
                let changed = try db.execute(
                    "UPDATE endpoints SET nickname = ? WHERE endpoint_id = ? AND user_id = ? AND removed_reason IS NULL",
                    [nickname, target, user])
                if changed == 0 { throw DomainError(.notFound, "the user has no registered endpoint \(target)") }
            }
        }
    }

    /// Removes one of the caller's endpoints: itself, or another for a device approved from the
    /// user's oldest that signed the removal (a stolen token alone evicts no device).
    package func deregisterEndpoint(as caller: Caller, target: String, signature: Data?) async throws {
        let user = try await requireEndpoint(caller)
        let endpointID = caller.endpointID
        try await storage {
            try await store.write { db in
                try Self.requireRegistered(db, endpoint: target, of: user)
                if target != endpointID {
                    try Self.requireApprovedRemover(db, user: user, remover: endpointID, target: target, signature: signature)
                }
                let changed = try db.execute(
                    "UPDATE endpoints SET removed_reason = ?, active = 0 WHERE endpoint_id = ? AND user_id = ? AND removed_reason IS NULL",
                    ["deregistered by the user", target, user])
                if changed == 0 { throw DomainError(.notFound, "the user has no registered endpoint \(target)") }
                // The user's other devices remove it from every chat.
                try Self.tellDevicesChanged(db, user: user, now: self.clock.now().timeIntervalSince1970)
            }
        }
        announceEntries(to: [user])
    }

    /// Keeps the calling endpoint's credential (its MLS signature key signed by the user's
    /// identity key; opaque here), replacing the one it published before, and tells the user's
    /// devices: they show it as awaiting approval.
    package func publishEndpointCredential(as caller: Caller, credential: Data) async throws {
        let user = try await requireEndpoint(caller)
        let endpointID = caller.endpointID
        guard (1...Self.maximumDeviceStatement).contains(credential.count) else {
            throw DomainError(.invalidRequest, "a credential is 1 to \(Self.maximumDeviceStatement) bytes")
        }
        let now = clock.now().timeIntervalSince1970
        let changed = try await storage {
            try await store.write { db -> Bool in
                let current = try db.scalar(
                    "SELECT credential FROM endpoints WHERE endpoint_id = ?", [endpointID], as: Data?.self)
                guard current != credential else { return false }
                try db.execute("UPDATE endpoints SET credential = ? WHERE endpoint_id = ?", [credential, endpointID])
                try Self.tellDevicesChanged(db, user: user, now: now)
                return true
            }
        }
        if changed { announceEntries(to: [user]) }
    }

    /// Keeps `approval` of the user's endpoint `target`, signed by the calling endpoint (opaque
    /// here: each device checks the signature), replacing one this endpoint gave before, and tells
    /// the user's devices, which add the approved device to their chats.
    package func approveEndpoint(as caller: Caller, target: String, approval: Data) async throws {
        let user = try await requireEndpoint(caller)
        let endpointID = caller.endpointID
        guard (1...Self.maximumDeviceStatement).contains(approval.count) else {
            throw DomainError(.invalidRequest, "an approval is 1 to \(Self.maximumDeviceStatement) bytes")
        }
        guard target != endpointID else { throw DomainError(.invalidRequest, "an endpoint does not approve itself") }
        let now = clock.now().timeIntervalSince1970
        try await storage {
            try await store.write { db in
                try Self.requireRegistered(db, endpoint: target, of: user)
                try db.execute(
                    """
                    INSERT INTO endpoint_approvals(approved_id, approver_id, approval) VALUES (?, ?, ?)
                    ON CONFLICT(approved_id, approver_id) DO UPDATE SET approval = excluded.approval
                    """, [target, endpointID, approval])
                try Self.tellDevicesChanged(db, user: user, now: now)
            }
        }
        announceEntries(to: [user])
    }

    /// Marks the endpoint seen, or tells it that it was removed and why.
    ///
    /// When it was last seen is kept to ``lastSeenResolution``: a check-in within that of the
    /// time recorded only reads (a device checks in at every start and reconnection, and a write
    /// transaction is most of a check-in's cost).
    package func checkIn(as caller: Caller) async throws -> EndpointInfo {
        let (user, endpointID) = (caller.userID, caller.endpointID)
        let now = clock.now().timeIntervalSince1970
        let recorded = try await storage {
            try await store.read { db in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID, unlocking: true)
                return try Self.endpoint(db, endpointID)
            }
        }
        let age = now - recorded.lastSeen.timeIntervalSince1970
        if age >= 0, age < Self.lastSeenResolution { return recorded }
        return try await storage {
            try await store.write { db in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID, unlocking: true)
                try db.execute("UPDATE endpoints SET last_seen = ? WHERE endpoint_id = ?", [now, endpointID])
                return try Self.endpoint(db, endpointID)
            }
        }
    }

    /// How stale ``EndpointInfo/lastSeen`` may be: a minute.
    static let lastSeenResolution: TimeInterval = 60

    // MARK: Identity directory

    /// Publishes the caller's identity; it must be self-signed, and a new version must be higher
    /// than any before (keys are never silently replaced).
    package func publishIdentity(as caller: Caller, identity: PublishedIdentity) async throws {
        let (user, endpointID) = (caller.userID, caller.endpointID)
        guard identity.userID == user else { throw DomainError(.forbidden, "an identity can only be published by its own user") }
        guard identity.isSelfSigned else {
            throw DomainError(.invalidRequest, "the identity is malformed or not signed by its own key")
        }
        let document = try JSONEncoder().encode(identity)
        let now = clock.now().timeIntervalSince1970
        let told = try await storage {
            try await store.write { db -> [String] in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID)
                var replacing = false
                if let row = try db.row("SELECT document, key_version FROM identities WHERE user_id = ?", [user]) {
                    let version = try row.get(1, as: Int.self)
                    let current = try row.get(0, as: Data.self)
                    if let existing = try? JSONDecoder().decode(PublishedIdentity.self, from: current), existing == identity {
                        return []
                    }
                    // A token alone never replaces keys: a new identity goes over an empty one,
                    // which only a reset (signed by the current key, or after the delay) leaves.
                    guard current.isEmpty else {
                        throw DomainError(
                            .conflict,
                            "the user already has an identity; it is replaced only after a reset (signed by the current key, or after the reset delay)"
                        )
                    }
                    guard identity.keyVersion > version else {
                        throw DomainError(
                            .conflict, "identity key version \(identity.keyVersion) is not above the current \(version)")
                    }
                    replacing = version > 0
                }
                try db.execute(
                    """
                    INSERT INTO identities(user_id, document, key_version) VALUES (?, ?, ?)
                    ON CONFLICT(user_id) DO UPDATE SET document = excluded.document, key_version = excluded.key_version
                    """, [user, document, identity.keyVersion])
                try TransparencyLog.queue(db, user: user, document: document)
                // After a reset, the user's contacts hear that a new identity is published.
                guard replacing else { return [] }
                return try Self.tell(db, about: user, IdentityResetNotice(state: .replaced, pending: nil), now: now)
            }
        }
        announceEntries(to: told)
        try await flushTransparency()
    }

    /// A user's published identity, if they have one.
    package func identity(as caller: Caller, userID: String) async throws -> PublishedIdentity? {
        try await requireEndpoint(caller, unlocking: true)
        return try await storage { try await store.read { db in try Self.identity(db, user: userID) } }
    }

    /// The highest identity key version the user ever published (0 if none).
    package func identityKeyVersion(as caller: Caller) async throws -> Int {
        let user = try await requireEndpoint(caller, unlocking: true)
        return try await storage {
            try await store.read { db in
                try db.scalar("SELECT key_version FROM identities WHERE user_id = ?", [user], as: Int.self) ?? 0
            }
        }
    }

    // MARK: Helpers

    /// Refuses `target` unless it is one of `user`'s registered endpoints.
    static func requireRegistered(_ db: any DomainStatements, endpoint target: String, of user: String) throws {
        guard
            try db.scalar(
                "SELECT count(*) FROM endpoints WHERE endpoint_id = ? AND user_id = ? AND removed_reason IS NULL",
                [target, user], as: Int.self) == 1
        else { throw DomainError(.notFound, "the user has no registered endpoint \(target)") }
    }

    /// Refuses the removal of `target` unless `remover` is one of the user's devices approved from
    /// their oldest (by the credentials and approvals the devices published) and `signature` is
    /// its MLS key's over the removal.
    static func requireApprovedRemover(
        _ db: any DomainStatements, user: String, remover: String, target: String, signature: Data?
    ) throws {
        let refusal = DomainError(
            .forbidden,
            "removing another device takes a signature by one of the user's approved devices (or the operator)")
        guard let signature, let identity = try identity(db, user: user),
            let identityKey = try? Ed25519.PublicKey(rawRepresentation: identity.signingKey)
        else { throw refusal }
        let graph = DeviceApprovalGraph(try endpoints(db, user: user), user: user, identityKey: identityKey)
        guard let key = graph.keys[remover],
            graph.approvedFromOldest.contains(DeviceApprovalGraph.Device(endpointID: remover, key: key)),
            let publicKey = try? Ed25519.PublicKey(rawRepresentation: key),
            publicKey.isValidSignature(signature, for: EndpointRemoval.signedBytes(user: user, remover: remover, target: target))
        else { throw refusal }
    }

    /// Refuses `caller` unless its endpoint is one of its user's registered endpoints (for reads:
    /// a change checks it again inside its own transaction); `unlocking` admits an endpoint that
    /// is still taking the profile over. The caller's user.
    @discardableResult
    func requireEndpoint(_ caller: Caller, unlocking: Bool = false) async throws -> String {
        try await storage {
            try await store.read { db in
                try Self.requireEndpoint(db, user: caller.userID, endpointID: caller.endpointID, unlocking: unlocking)
            }
        }
        return caller.userID
    }

    static func isValidIdentifier(_ text: String, maximum: Int) -> Bool {
        !text.isEmpty && text.count <= maximum
            && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }
    }

    /// Whether the user has a published identity that no reset has cleared.
    static func hasIdentity(_ db: any DomainStatements, user: String) throws -> Bool {
        guard let document = try db.scalar("SELECT document FROM identities WHERE user_id = ?", [user], as: Data.self) else {
            return false
        }
        return !document.isEmpty
    }

    /// Refuses a call from an endpoint that is not the user's, was removed, or has not finished
    /// taking the profile over: an endpoint registered with a token alone (a thief's, say) waits
    /// for proof that it unlocked the user's keys, and until then it may only make the calls that
    /// unlock them (`unlocking`: the passcode's evaluation, the key blobs, the proof, an identity
    /// reset, reading identities, checking in). It posts nothing, reads no mailbox and changes no
    /// other endpoint.
    static func requireEndpoint(_ db: any DomainStatements, user: String, endpointID: String, unlocking: Bool = false) throws {
        guard
            let row = try db.row(
                "SELECT user_id, removed_reason, takeover_pending FROM endpoints WHERE endpoint_id = ?", [endpointID]),
            try row.get(0, as: String.self) == user
        else { throw DomainError(.endpointRemoved, "this endpoint is not registered for the user") }
        if let reason = try row.get(1, as: String?.self) { throw DomainError(.endpointRemoved, reason) }
        if !unlocking, try row.get(2, as: Int.self) != 0 {
            throw DomainError(
                .forbidden, "this endpoint is taking the profile over: it must prove it unlocked the user's keys first")
        }
    }

    static func endpoints(_ db: any DomainStatements, user: String) throws -> [EndpointInfo] {
        let listed = try db.rows(
            """
            SELECT endpoint_id, registration_id, description, nickname, active, created_at, last_seen, credential FROM endpoints
            WHERE user_id = ? AND removed_reason IS NULL ORDER BY registration_id
            """, [user]
        ).map(endpointInfo)
        return try withApprovals(db, listed, user: user)
    }

    static func endpoint(_ db: any DomainStatements, _ endpointID: String) throws -> EndpointInfo {
        guard
            let row = try db.row(
                """
                SELECT endpoint_id, registration_id, description, nickname, active, created_at, last_seen, credential, user_id
                FROM endpoints WHERE endpoint_id = ?
                """, [endpointID])
        else { throw DomainError(.notFound, "no endpoint \(endpointID)") }
        return try withApprovals(db, [try endpointInfo(row)], user: try row.get(8))[0]
    }

    /// The endpoints with the approvals given them by endpoints of the user still registered (an
    /// approval by a removed endpoint is not listed).
    private static func withApprovals(_ db: any DomainStatements, _ endpoints: [EndpointInfo], user: String) throws
        -> [EndpointInfo]
    {
        let rows = try db.rows(
            """
            SELECT a.approved_id, a.approval FROM endpoint_approvals a
            JOIN endpoints approver ON approver.endpoint_id = a.approver_id
            WHERE approver.user_id = ? AND approver.removed_reason IS NULL ORDER BY approver.registration_id
            """, [user])
        var approvals: [String: [Data]] = [:]
        for row in rows { approvals[try row.get(0), default: []].append(try row.get(1)) }
        return endpoints.map { endpoint in
            var endpoint = endpoint
            endpoint.approvals = approvals[endpoint.endpointID] ?? []
            return endpoint
        }
    }

    static func endpointInfo(_ row: Row) throws -> EndpointInfo {
        EndpointInfo(
            endpointID: try row.get(0), registrationID: try row.get(1), description: try row.get(2), nickname: try row.get(3),
            isActive: try row.get(4), createdAt: Date(timeIntervalSince1970: try row.get(5)),
            lastSeen: Date(timeIntervalSince1970: try row.get(6)), credential: try row.get(7))
    }

    static func identity(_ db: any DomainStatements, user: String) throws -> PublishedIdentity? {
        guard let document = try db.scalar("SELECT document FROM identities WHERE user_id = ?", [user], as: Data.self),
            !document.isEmpty
        else { return nil }
        return try? JSONDecoder().decode(PublishedIdentity.self, from: document)
    }
}

// MARK: What the other areas ask of endpoints

extension DomainEngine {
    /// A condition for another area's statement (the mailbox read, one statement when it has
    /// entries): the endpoint (the first argument) of the user (the second) is registered and not
    /// taking the user's profile over, as ``requireEndpoint(_:user:endpointID:unlocking:)`` checks.
    static let endpointMayReadCondition =
        "EXISTS (SELECT 1 FROM endpoints WHERE endpoint_id = ? AND user_id = ? AND removed_reason IS NULL AND takeover_pending = 0)"

    /// An expression for another area's statement: the mailbox position every registered
    /// endpoint of the user (the one argument) has read up to, as last recorded (0 for none).
    static let mailboxReadByAllExpression =
        "(SELECT COALESCE(min(mailbox_cursor), 0) FROM endpoints WHERE user_id = ? AND removed_reason IS NULL)"

    /// The position every registered endpoint of `user` has read its mailbox up to (0 for none).
    static func mailboxReadByAll(_ db: any DomainStatements, user: String) throws -> Int64 {
        try db.scalar("SELECT \(mailboxReadByAllExpression)", [user], as: Int64.self) ?? 0
    }

    /// Records that `endpointID` read its mailbox up to `cursor` (a cursor never moves back).
    static func recordMailboxCursor(_ db: any DomainStatements, endpointID: String, _ cursor: Int64) throws {
        try db.execute(
            "UPDATE endpoints SET mailbox_cursor = ? WHERE endpoint_id = ? AND mailbox_cursor < ?", [cursor, endpointID, cursor])
    }

    /// Whether `endpointID` registered to take its user's profile over and has not proven it yet.
    static func isTakingOver(_ db: any DomainStatements, endpointID: String) throws -> Bool {
        try db.scalar("SELECT takeover_pending FROM endpoints WHERE endpoint_id = ?", [endpointID], as: Int.self) == 1
    }

    /// Makes `endpointID` its user's one active endpoint: the others registered are removed
    /// with `reason` (only the active ones when `activeOnly`), and it is active and done taking
    /// the profile over.
    static func makeSoleEndpoint(
        _ db: any DomainStatements, _ endpointID: String, of user: String, removing reason: String, activeOnly: Bool
    ) throws {
        try db.execute(
            "UPDATE endpoints SET removed_reason = ?, active = 0 WHERE user_id = ? AND endpoint_id != ? AND removed_reason IS NULL"
                + (activeOnly ? " AND active = 1" : ""), [reason, user, endpointID])
        try db.execute("UPDATE endpoints SET active = 1, takeover_pending = 0 WHERE endpoint_id = ?", [endpointID])
    }

    /// The highest identity key version `user` published (0 for none).
    static func identityKeyVersion(_ db: any DomainStatements, user: String) throws -> Int {
        try db.scalar("SELECT key_version FROM identities WHERE user_id = ?", [user], as: Int.self) ?? 0
    }

    /// Forgets `user`'s published identity (a reset), keeping its version: the next must be newer.
    static func forgetIdentity(_ db: any DomainStatements, user: String) throws {
        try db.execute("UPDATE identities SET document = ? WHERE user_id = ?", [Data(), user])
    }

    /// Replaces `identity`'s user's row in the directory with it (the operator's substitution
    /// of the demo and the hostile-domain tests; see ``logAsOperator(_:)``).
    static func replaceIdentity(_ db: any DomainStatements, with identity: PublishedIdentity, document: Data) throws {
        try db.execute(
            "UPDATE identities SET document = ?, key_version = ? WHERE user_id = ?",
            [document, identity.keyVersion, identity.userID])
    }

    /// A subquery for another area's statement: the ids of the removed endpoints of the user (the
    /// one argument).
    static let removedEndpointsOfUser = "(SELECT endpoint_id FROM endpoints WHERE user_id = ? AND removed_reason IS NOT NULL)"

    /// The ids of `user`'s registered, active endpoints, in order.
    static func activeEndpointIDs(_ db: any DomainStatements, user: String) throws -> [String] {
        try db.rows(
            "SELECT endpoint_id FROM endpoints WHERE user_id = ? AND removed_reason IS NULL AND active = 1 ORDER BY endpoint_id",
            [user]
        ).map { try $0.get(0, as: String.self) }
    }

    /// Whether `user` ever registered an endpoint here (removed ones count).
    static func everRegistered(_ db: any DomainStatements, user: String) throws -> Bool {
        try db.scalar("SELECT 1 FROM endpoints WHERE user_id = ? LIMIT 1", [user], as: Int.self) != nil
    }

    /// Those of `waiting` that may read their user's mailbox now.
    static func usable(_ waiting: [MailboxWaiters.Endpoint], _ db: any DomainStatements) throws -> Set<MailboxWaiters.Endpoint> {
        guard !waiting.isEmpty else { return [] }
        let wanted = Set(waiting)
        var usable: Set<MailboxWaiters.Endpoint> = []
        try Self.inBatches(waiting.map(\.endpointID)) { batch in
            let rows = try db.rows(
                """
                SELECT endpoint_id, user_id FROM endpoints WHERE endpoint_id IN (\(Array(repeating: "?", count: batch.count).joined(separator: ", ")))
                AND removed_reason IS NULL AND takeover_pending = 0
                """, Array(batch))
            for row in rows {
                let endpoint = MailboxWaiters.Endpoint(user: try row.get(1), endpointID: try row.get(0))
                if wanted.contains(endpoint) { usable.insert(endpoint) }
            }
        }
        return usable
    }
}

// MARK: The operator's calls (DomainAdministration)

extension DomainEngine {
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
}
