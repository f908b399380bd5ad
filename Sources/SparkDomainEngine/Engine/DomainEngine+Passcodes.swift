package import Foundation
import SparkCrypto
package import SparkDomain
import SparkStore

/// Passcode attempts and identity resets: the OPRF evaluation that makes every passcode guess
/// an online, counted request; the proof that marks an attempt right (and completes a pending
/// takeover); the key store's reads; and resets, which without the current identity key wait
/// out the policy's delay. Every call touches only the token's user.
extension DomainEngine {
    // MARK: Passcode attempts

    /// Evaluates the device's blinded passcode under the user's OPRF key named `keyID` (the
    /// current one when nil), and under the current key too when that is another. Counts one
    /// attempt; at most ``DomainPolicy/unlockAttemptsPerHour`` unproven ones per user per hour.
    ///
    /// - Throws: ``DomainError/Code/tooManyAttempts`` (with `retryAfter`) past the limit,
    ///   ``DomainError/Code/invalidRequest`` for an element that is not a P-256 point,
    ///   ``DomainError/Code/notFound`` for a key the domain no longer holds.
    package func evaluatePasscode(as caller: Caller, blindedElement: Data, keyID: String?) async throws
        -> PasscodeEvaluation
    {
        let (user, endpointID) = (caller.userID, caller.endpointID)
        guard (keyID?.count ?? 0) <= 64 else { throw DomainError(.invalidRequest, "a passcode key id is at most 64 characters") }
        let requestedKey = try keyID.map { text -> PasscodeKeyID in
            guard let id = PasscodeKeyID(text) else { throw DomainError(.invalidRequest, "'\(text)' is no passcode key id") }
            return id
        }
        func evaluation(_ id: String) throws -> PasscodeEvaluation.Evaluation {
            let key = try passcodeKeys.userKey(id, userID: user)
            do {
                let result = try OPRF.passcodeHardening.blindEvaluate([blindedElement], key: key)
                return .init(keyID: id, publicKey: key.publicKey, element: result.elements[0], proof: result.proof ?? Data())
            } catch let error as CryptoError {
                throw DomainError(.invalidRequest, "the blinded passcode is not a P-256 point: \(error.reason)")
            }
        }
        let policy = try currentPolicy()
        let now = clock.now().timeIntervalSince1970
        // The attempt is counted (or refused past the limit) before any OPRF work: a caller past
        // the limit costs the domain one transaction, not a scalar multiplication and a proof.
        let (challenge, attemptsLeft, version) = try await storage {
            // Serializable: two parallel attempts cannot both read the count below the limit.
            try await store.write { db -> (Data, Int, Int) in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID, unlocking: true)
                let version = try Self.passcodeKeyVersion(db, user: user)
                if let requestedKey {
                    // A backup made before the passcode changed names an older version: retired,
                    // so the old blobs with the old passcode open nothing (and nothing is counted).
                    guard requestedKey.version >= version else {
                        throw DomainError(
                            .notFound,
                            "this backup was made under passcode key version \(requestedKey.version), retired when the passcode changed (now version \(version)): it opens nothing"
                        )
                    }
                    guard requestedKey.version <= version + 1 else {
                        throw DomainError(
                            .invalidRequest,
                            "passcode key version \(requestedKey.version) does not exist (the user's is \(version))")
                    }
                }
                let recent = try db.row(
                    "SELECT count(*), min(issued_at) FROM unlock_challenges WHERE user_id = ? AND proven = 0 AND issued_at > ?",
                    [user, now - 3600])
                let count = try recent?.get(0, as: Int.self) ?? 0
                if count >= policy.unlockAttemptsPerHour {
                    let oldest = try recent?.get(1, as: Double.self) ?? now
                    throw DomainError(
                        .tooManyAttempts,
                        "too many passcode attempts for this user in the last hour (\(policy.unlockAttemptsPerHour) allowed)",
                        retryAfter: max(1, Int((oldest + 3600 - now).rounded(.up))))
                }
                // The user's attempts past the hour counted and the challenge's lifetime are
                // of no more use: each attempt clears them, so a user's rows stay what an hour
                // allows.
                try db.execute(
                    "DELETE FROM unlock_challenges WHERE user_id = ? AND issued_at <= ?",
                    [user, now - max(3600, Self.challengeLifetime)])
                let challenge = SystemRandom.bytes(count: 32)
                try db.execute(
                    "INSERT INTO unlock_challenges(challenge, user_id, endpoint_id, issued_at) VALUES (?, ?, ?, ?)",
                    [challenge, user, endpointID, now])
                return (challenge, policy.unlockAttemptsPerHour - count - 1, version)
            }
        }
        let currentID = PasscodeKeyID(seed: passcodeKeys.currentKeyID, version: version).description
        let requestedID = requestedKey?.description ?? currentID
        let requested = try evaluation(requestedID)
        let current = requestedID == currentID ? nil : try evaluation(currentID)
        return PasscodeEvaluation(requested: requested, current: current, challenge: challenge, attemptsLeft: attemptsLeft)
    }

    /// The user's passcode key version (1 until their first passcode change).
    static func passcodeKeyVersion(_ db: any DomainStatements, user: String) throws -> Int {
        try db.scalar("SELECT version FROM passcode_key_versions WHERE user_id = ?", [user], as: Int.self) ?? 1
    }

    /// Accepts a proof of unlock: a signature by the published identity over the challenge of
    /// one of this endpoint's passcode attempts, which stops counting against the limit. An
    /// endpoint waiting to take the profile over becomes the active one.
    package func proveUnlock(as caller: Caller, challenge: Data, signature: Data) async throws {
        let (user, endpointID) = (caller.userID, caller.endpointID)
        let now = clock.now().timeIntervalSince1970
        try await storage {
            try await store.write { db in
                try Self.acceptUnlockProof(
                    db, user: user, endpointID: endpointID, challenge: challenge, now: now, signature: signature,
                    message: unlockProofMessage(userID: user, endpointID: endpointID, challenge: challenge))
            }
        }
    }

    /// A proof of unlock (as ``proveUnlock(token:endpointID:challenge:signature:)``) that makes
    /// `version` the user's passcode key version: the current one or the next, never a jump and
    /// never back. From then on no older version is evaluated. Only the identity key signs it, so
    /// a stolen token cannot retire the backup the user's devices rely on.
    package func retirePasscodeKeys(as caller: Caller, challenge: Data, signature: Data, version: Int)
        async throws
    {
        let (user, endpointID) = (caller.userID, caller.endpointID)
        let now = clock.now().timeIntervalSince1970
        try await storage {
            try await store.write { db in
                let current = try Self.passcodeKeyVersion(db, user: user)
                guard version == current || version == current + 1 else {
                    throw DomainError(
                        .conflict, "the user's passcode key version is \(current); \(version) is neither it nor the next")
                }
                try Self.acceptUnlockProof(
                    db, user: user, endpointID: endpointID, challenge: challenge, now: now, signature: signature,
                    message: passcodeRetireMessage(userID: user, endpointID: endpointID, challenge: challenge, version: version))
                try db.execute(
                    """
                    INSERT INTO passcode_key_versions(user_id, version) VALUES (?, ?)
                    ON CONFLICT(user_id) DO UPDATE SET version = excluded.version
                    """, [user, version])
            }
        }
    }

    /// Checks a proof of unlock (a fresh challenge of this endpoint, signed by the published
    /// identity over `message`), marks the challenge used and completes a pending take-over.
    private static func acceptUnlockProof(
        _ db: any DomainStatements, user: String, endpointID: String, challenge: Data, now: Double, signature: Data,
        message: Data
    ) throws {
        try requireEndpoint(db, user: user, endpointID: endpointID, unlocking: true)
        guard
            let issuedAt = try db.scalar(
                "SELECT issued_at FROM unlock_challenges WHERE challenge = ? AND user_id = ? AND endpoint_id = ? AND proven = 0",
                [challenge, user, endpointID], as: Double.self), issuedAt > now - challengeLifetime
        else { throw DomainError(.invalidProof, "the unlock challenge is unknown, already used or expired") }
        guard let identity = try identity(db, user: user),
            let key = try? Ed25519.PublicKey(rawRepresentation: identity.signingKey),
            key.isValidSignature(signature, for: message)
        else { throw DomainError(.invalidProof, "the unlock proof does not verify with the user's identity key") }
        try db.execute("UPDATE unlock_challenges SET proven = 1 WHERE challenge = ?", [challenge])
        if try Self.isTakingOver(db, endpointID: endpointID) {
            try Self.makeSoleEndpoint(
                db, endpointID, of: user, removing: "superseded: another device took the profile over", activeOnly: true)
        }
    }

    /// Reads a key blob. The blobs are useless without the passcode and the domain's OPRF
    /// evaluation, so reading one is not an attempt; ``evaluatePasscode(token:endpointID:blindedElement:keyID:)`` is.
    package func fetchKeyBlob(as caller: Caller, name: String) async throws -> BlobFetch {
        let (user, endpointID) = (caller.userID, caller.endpointID)
        return try await storage {
            try await store.read { db -> BlobFetch in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID, unlocking: true)
                guard let row = try db.row("SELECT data, version FROM key_blobs WHERE user_id = ? AND name = ?", [user, name])
                else { return BlobFetch(blob: nil) }
                return BlobFetch(blob: KeyBlob(name: name, data: try row.get(0), version: try row.get(1)))
            }
        }
    }

    // MARK: Key store

    /// Writes a key blob with compare-and-swap on its version (see ``putKeyBlobs(as:writes:proof:)``).
    package func putKeyBlob(as caller: Caller, name: String, data: Data, expectedVersion: Int?, proof: KeyBlobProof?)
        async throws -> Int
    {
        try await putKeyBlobs(
            as: caller, writes: [KeyBlobWrite(name: name, data: data, expectedVersion: expectedVersion)], proof: proof
        )[0]
    }

    /// Writes several key blobs in one transaction, each with compare-and-swap: all or none.
    ///
    /// Once the user has published an identity, the write needs `proof`: the identity key's
    /// signature over exactly these writes (``keyBlobWriteMessage(userID:endpointID:challenge:writes:)``)
    /// with the challenge of one of this endpoint's passcode attempts of the last ten minutes.
    /// A token alone (a thief's newly registered endpoint) cannot replace the passcode backup.
    package func putKeyBlobs(as caller: Caller, writes: [KeyBlobWrite], proof: KeyBlobProof?) async throws -> [Int] {
        let (user, endpointID) = (caller.userID, caller.endpointID)
        guard !writes.isEmpty, writes.count <= 8, Set(writes.map(\.name)).count == writes.count else {
            throw DomainError(.invalidRequest, "a write names 1 to 8 different blobs")
        }
        for write in writes {
            guard Self.isValidIdentifier(write.name, maximum: 64) else {
                throw DomainError(.invalidRequest, "a blob name is 1 to 64 of a-z, 0-9, '-', '_'")
            }
            guard !write.data.isEmpty, write.data.count <= Self.maximumBlobSize else {
                throw DomainError(.invalidRequest, "a key blob is 1 to \(Self.maximumBlobSize) bytes")
            }
        }
        let now = clock.now().timeIntervalSince1970
        return try await storage {
            try await store.write { db -> [Int] in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID)
                let rows = try writes.map { write in
                    (write, try db.row("SELECT version, data FROM key_blobs WHERE user_id = ? AND name = ?", [user, write.name]))
                }
                // A retry after a lost answer finds its own writes: the same bytes, one version on.
                let repeated = try rows.allSatisfy { write, row in
                    let current = try row?.get(0, as: Int.self)
                    guard let current, current == (write.expectedVersion ?? 0) + 1 else { return false }
                    return try row?.get(1, as: Data.self) == write.data
                }
                if repeated { return try rows.map { try $0.1?.get(0, as: Int.self) ?? 0 } }
                for (write, row) in rows {
                    let current = try row?.get(0, as: Int.self)
                    guard current == write.expectedVersion else {
                        throw DomainError(
                            .conflict,
                            "the \(write.name) blob is at version \(current.map(String.init) ?? "none"), not \(write.expectedVersion.map(String.init) ?? "none")"
                        )
                    }
                }
                // A stale write is told so (another device wrote first) before its proof is looked at.
                try Self.requireKeyBlobConsent(db, user: user, endpointID: endpointID, writes: writes, proof: proof, now: now)
                var versions: [Int] = []
                for write in writes {
                    let next = (write.expectedVersion ?? 0) + 1
                    try db.execute(
                        """
                        INSERT INTO key_blobs(user_id, name, data, version) VALUES (?, ?, ?, ?)
                        ON CONFLICT(user_id, name) DO UPDATE SET data = excluded.data, version = excluded.version
                        """, [user, write.name, write.data, next])
                    versions.append(next)
                }
                return versions
            }
        }
    }

    /// Refuses a key-blob write the identity key did not sign, once the user has one: the
    /// proof's challenge must be one of this endpoint's passcode attempts, recent, and the
    /// signature the published identity key's over these writes.
    static func requireKeyBlobConsent(
        _ db: any DomainStatements, user: String, endpointID: String, writes: [KeyBlobWrite], proof: KeyBlobProof?,
        now: Double
    ) throws {
        guard let identity = try identity(db, user: user) else { return }
        guard let proof else {
            throw DomainError(
                .invalidProof,
                "\(user) has published an identity: a key blob is written only with a proof by the identity key")
        }
        guard
            let issuedAt = try db.scalar(
                "SELECT issued_at FROM unlock_challenges WHERE challenge = ? AND user_id = ? AND endpoint_id = ?",
                [proof.challenge, user, endpointID], as: Double.self), issuedAt > now - challengeLifetime
        else { throw DomainError(.invalidProof, "the key blob proof's challenge is unknown or expired") }
        guard let key = try? Ed25519.PublicKey(rawRepresentation: identity.signingKey),
            key.isValidSignature(
                proof.signature,
                for: keyBlobWriteMessage(userID: user, endpointID: endpointID, challenge: proof.challenge, writes: writes))
        else { throw DomainError(.invalidProof, "the key blob proof does not verify with the user's identity key") }
    }

    // MARK: Identity resets

    /// Resets the caller's identity (a forgotten passcode, or new keys). With `signature`, an
    /// Ed25519 signature by the current identity key over ``identityResetMessage(userID:endpointID:keyVersion:)``,
    /// it happens at once; without, the first request starts ``DomainPolicy/identityResetDelay``
    /// and a request after it completes the reset, unless one of the user's devices cancelled it.
    ///
    /// Completing forgets the identity and the key backup and removes the user's other endpoints;
    /// the version is kept, so the next identity must be newer. Passcode attempts stay counted.
    package func resetIdentity(as caller: Caller, signature: Data?) async throws -> IdentityResetOutcome {
        let (user, endpointID) = (caller.userID, caller.endpointID)
        let policy = try currentPolicy()
        let now = clock.now().timeIntervalSince1970
        // The outcome, and whose mailboxes got an entry (announced once it committed).
        let (outcome, notified) = try await storage {
            try await store.write { db -> (IdentityResetOutcome, [String]) in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID, unlocking: true)
                let identity = try Self.identity(db, user: user)
                if let signature {
                    let version = try Self.identityKeyVersion(db, user: user)
                    guard let identity, let key = try? Ed25519.PublicKey(rawRepresentation: identity.signingKey),
                        key.isValidSignature(
                            signature, for: identityResetMessage(userID: user, endpointID: endpointID, keyVersion: version))
                    else { throw DomainError(.invalidProof, "the reset is not signed by the user's current identity key") }
                } else if identity != nil {
                    if let row = try db.row(
                        "SELECT endpoint_id, requested_at, effective_at FROM identity_resets WHERE user_id = ?", [user])
                    {
                        let pending = try Self.pendingReset(row)
                        guard now >= pending.effectiveAt.timeIntervalSince1970 else { return (.pending(pending), []) }
                    } else {
                        try db.execute(
                            "INSERT INTO identity_resets(user_id, endpoint_id, requested_at, effective_at) VALUES (?, ?, ?, ?)",
                            [user, endpointID, now, now + Double(policy.identityResetDelay)])
                        if policy.identityResetDelay > 0 {
                            let pending = PendingIdentityReset(
                                endpointID: endpointID, requestedAt: Date(timeIntervalSince1970: now),
                                effectiveAt: Date(timeIntervalSince1970: now + Double(policy.identityResetDelay)))
                            let notified = try Self.tell(db, about: user, .init(state: .pending, pending: pending), now: now)
                            return (.pending(pending), notified)
                        }
                    }
                }
                try db.execute("DELETE FROM identity_resets WHERE user_id = ?", [user])
                try db.execute("DELETE FROM key_blobs WHERE user_id = ?", [user])
                try Self.forgetIdentity(db, user: user)
                // The log records that the user has no identity now (the empty value).
                if identity != nil { try TransparencyLog.queue(db, user: user, document: Data()) }
                try Self.makeSoleEndpoint(
                    db, endpointID, of: user, removing: "the user reset their keys (forgotten passcode) on another device",
                    activeOnly: false)
                return (.completed, [])
            }
        }
        announceEntries(to: notified)
        if case .completed = outcome { try await flushTransparency() }
        return outcome
    }

    /// Cancels the user's pending identity reset, from any of their endpoints.
    ///
    /// - Throws: ``DomainError/Code/notFound`` when none is pending.
    package func cancelIdentityReset(as caller: Caller) async throws {
        let (user, endpointID) = (caller.userID, caller.endpointID)
        let now = clock.now().timeIntervalSince1970
        let notified = try await storage {
            try await store.write { db -> [String] in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID, unlocking: true)
                guard try db.execute("DELETE FROM identity_resets WHERE user_id = ?", [user]) > 0 else {
                    throw DomainError(.notFound, "no identity reset is pending for this user")
                }
                return try Self.tell(db, about: user, .init(state: .cancelled, pending: nil), now: now)
            }
        }
        announceEntries(to: notified)
    }

    /// Puts a reset notice in the mailboxes of `user` (every endpoint of theirs) and of everyone
    /// who shares a chat with them; returns who was told, to wake.
    static func tell(_ db: any DomainStatements, about user: String, _ notice: IdentityResetNotice, now: TimeInterval) throws
        -> [String]
    {
        let contacts = try chatPeers(db, of: user)
        let audience = Array(Set(contacts + [user])).sorted()
        try append(
            db, to: audience, chatID: "", sender: user, kind: .identityReset, messageNumber: nil,
            payload: try JSONEncoder().encode(notice), members: nil, now: now)
        try db.announce(audience)
        return audience
    }

    /// The pending identity reset of `userID`, if any: the user's devices and their contacts
    /// look before trusting a new identity.
    package func pendingIdentityReset(as caller: Caller, userID: String) async throws -> PendingIdentityReset? {
        try await requireEndpoint(caller, unlocking: true)
        return try await storage {
            try await store.read { db in
                try db.row("SELECT endpoint_id, requested_at, effective_at FROM identity_resets WHERE user_id = ?", [userID])
                    .map(Self.pendingReset)
            }
        }
    }

    static func pendingReset(_ row: Row) throws -> PendingIdentityReset {
        PendingIdentityReset(
            endpointID: try row.get(0), requestedAt: Date(timeIntervalSince1970: try row.get(1)),
            effectiveAt: Date(timeIntervalSince1970: try row.get(2)))
    }
}
