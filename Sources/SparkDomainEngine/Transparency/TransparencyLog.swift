package import Foundation
package import SparkCrypto
package import SparkDomain
import SparkLock
import SparkStore

/// The domain's key-transparency log (draft-ietf-keytrans-protocol's combined tree): every
/// version of every user's published identity, under the label `"identity:" ‖ userID`, each a log
/// entry whose prefix tree holds the VRF outputs of every label-version pair so far.
///
/// **Rows are the log.** `kt_log` holds each update (label, version, VRF output, opening, value)
/// and `kt_heads` the signed head at the end of each epoch, written in the same transaction; a
/// change of identity queues its new value in `kt_pending` in the transaction that makes it.
/// **One writer at a time**: an epoch is one write transaction under the `kt-epoch` lock (SQLite:
/// its single writer; PostgreSQL: a transaction-scoped advisory lock), so several instances take
/// turns and none can write position *n* twice. Each instance keeps the tree in memory as a
/// replica and brings it up to the rows before it writes or proves (an instance catching up
/// appends rows another wrote, without the VRF key's work).
///
/// The VRF and head keys are ``TransparencySecrets``, kept beside the passcode keys, never in the
/// database.
package final class TransparencyLog: Sendable {
    /// The secret keys.
    let secrets: TransparencySecrets
    /// The public keys devices check against.
    package let keys: TransparencyKeys
    /// The tree as far as this instance read or wrote the rows.
    private let replica: Locked<CombinedTree>
    /// The last head signed or checked, kept outside the database.
    let pin: TransparencyHeadPin
    /// The latest head checked against the rows and the pin (not checked again).
    private let checked = Locked<TreeHead?>(nil)
    /// Whether the operator was told of a log that does not match its heads (told once).
    private let told = Locked(false)
    /// The most updates one epoch takes (the rest wait for the next).
    static let epochLimit = 10_000
    /// The lock that makes one writer at a time.
    static let lockName = "kt-epoch"

    /// The log hidden and signed by `secrets`, its last head pinned by `pin`.
    package init(secrets: TransparencySecrets, pin: TransparencyHeadPin = TransparencyHeadPin(path: nil)) {
        self.secrets = secrets
        keys = secrets.publicKeys
        replica = Locked(CombinedTree(vrf: secrets.vrf))
        self.pin = pin
    }

    /// The tree up to the latest signed head, once checked (``check(_:head:)``), and that head.
    func checkedTree(_ db: any DomainStatements) throws -> (tree: CombinedTree, head: TreeHead?) {
        let head = try Self.latestHead(db)
        let tree = try tree(db, size: head?.size ?? 0)
        try check(tree, head: head)
        return (tree, head)
    }

    /// Checks that the rows are the log this domain signed: the tree they make has the root of
    /// the latest head in `kt_heads` (whose signature must be this domain's) and the root of the
    /// head pinned outside the database, which the latest head may not be smaller than. Then
    /// pins the latest head. A log that fails is refused (``DomainError/Code/unavailable``) and
    /// the operator is told on standard error: the domain neither signs nor serves it.
    func check(_ tree: CombinedTree, head: TreeHead?) throws {
        if let head, checked.withLock({ $0 == head }) { return }
        if let head {
            let signed = TreeHead.signedBytes(size: head.size, root: head.root, timestamp: head.timestamp, vrfKey: keys.vrfKey)
            guard tree.root(at: head.size) == head.root, secrets.head.publicKey.isValidSignature(head.signature, for: signed)
            else {
                throw refusal(
                    "the rows of its transparency log do not give the root of its latest signed head (\(head.size) entries): the database was edited"
                )
            }
        }
        if let pinned = try pin.current() {
            guard let head, head.size >= pinned.size else {
                throw refusal(
                    "its transparency log ends at \(head?.size ?? 0) signed entries, but this domain signed a head of \(pinned.size) (\(pin.path ?? "in memory")): the database was rolled back"
                )
            }
            guard tree.root(at: pinned.size) == pinned.root else {
                throw refusal(
                    "the rows of its transparency log do not give the root of the head of \(pinned.size) entries it signed (\(pin.path ?? "in memory")): the log's past was rewritten in the database"
                )
            }
        }
        guard let head else { return }
        try pin.advance(to: .init(size: head.size, root: head.root))
        checked.withLock { $0 = head }
    }

    /// The refusal of a log that is not the one signed, told to the operator once.
    private func refusal(_ reason: String) -> DomainError {
        let first = told.withLock { told in
            defer { told = true }
            return !told
        }
        if first {
            FileHandle.standardError.write(
                Data(
                    "spark-domain: TRANSPARENCY ALARM: \(reason). The domain signs and serves no transparency proof until the database is restored from a backup that holds every head it signed.\n"
                        .utf8))
        }
        return DomainError(
            .unavailable, "the domain's transparency log does not match the heads it signed; the operator was told")
    }

    /// The label of `userID`'s identity.
    static func label(_ userID: String) -> Data { IdentityProof.label(of: userID) }

    /// Queues `user`'s identity document (empty when a reset cleared it) for the next epoch; run
    /// in the transaction that changes it.
    static func queue(_ db: any DomainStatements, user: String, document: Data) throws {
        try db.execute("INSERT INTO kt_pending(label, value) VALUES (?, ?)", [label(user), document])
    }

    /// The latest signed head (nil before the first epoch).
    static func latestHead(_ db: any DomainStatements) throws -> TreeHead? {
        guard let row = try db.row("SELECT size, root, timestamp, signature FROM kt_heads ORDER BY size DESC LIMIT 1") else {
            return nil
        }
        return TreeHead(
            size: UInt64(try row.get(0, as: Int64.self)), root: try row.get(1), timestamp: UInt64(try row.get(2, as: Int64.self)),
            signature: try row.get(3))
    }

    /// The signed head of exactly `size` entries, if an epoch ended there.
    static func head(_ db: any DomainStatements, size: UInt64) throws -> TreeHead? {
        guard let row = try db.row("SELECT root, timestamp, signature FROM kt_heads WHERE size = ?", [Int64(size)]) else {
            return nil
        }
        return TreeHead(
            size: size, root: try row.get(0), timestamp: UInt64(try row.get(1, as: Int64.self)), signature: try row.get(2))
    }

    /// The replica brought up to the first `size` rows (read in the caller's transaction).
    func tree(_ db: any DomainStatements, size: UInt64) throws -> CombinedTree {
        var tree = replica.withLock { $0 }
        guard tree.size < size else { return tree }
        let rows = try db.rows(
            "SELECT position, label, version, vrf_output, opening, value FROM kt_log WHERE position >= ? AND position < ? ORDER BY position",
            [Int64(tree.size), Int64(size)])
        try tree.append(
            logged: rows.map { row in
                CombinedTree.Logged(
                    position: UInt64(try row.get(0, as: Int64.self)), label: try row.get(1),
                    version: UInt32(try row.get(2, as: Int64.self)), vrfOutput: try row.get(3), opening: try row.get(4),
                    value: try row.get(5))
            })
        guard tree.size == size else {
            throw DomainError(.storageFailure, "the transparency log's rows end at \(tree.size), its head says \(size)")
        }
        keep(tree)
        return tree
    }

    /// Keeps `tree` as the replica if it is further along (the rows it holds are committed).
    func keep(_ tree: CombinedTree) {
        replica.withLock { if $0.size < tree.size { $0 = tree } }
    }

    /// Writes one epoch of what is queued (at most ``epochLimit`` updates) in a transaction
    /// under the writer's lock; returns the tree written (nil when nothing was queued), to keep
    /// once the transaction committed.
    func writeEpoch(_ db: any DomainStatements, now: Date) throws -> CombinedTree? {
        let pending = try db.rows("SELECT seq, label, value FROM kt_pending ORDER BY seq LIMIT ?", [Self.epochLimit])
        guard !pending.isEmpty else { return nil }
        var tree = try checkedTree(db).tree
        let logged = try tree.appendLogging(
            epoch: try pending.map { row in (label: try row.get(1, as: Data.self), value: try row.get(2, as: Data.self)) })
        for update in logged {
            try db.execute(
                "INSERT INTO kt_log(position, label, version, vrf_output, opening, value) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    Int64(update.position), update.label, Int64(update.version), update.vrfOutput, update.opening, update.value,
                ])
        }
        guard let root = tree.root else { return nil }
        let timestamp = UInt64(max(0, now.timeIntervalSince1970 * 1000))
        let signature = try secrets.head.signature(
            for: TreeHead.signedBytes(size: tree.size, root: root, timestamp: timestamp, vrfKey: keys.vrfKey))
        try db.execute(
            "INSERT INTO kt_heads(size, root, timestamp, signature) VALUES (?, ?, ?, ?)",
            [Int64(tree.size), root, Int64(timestamp), signature])
        // Exactly the rows logged: under PostgreSQL's READ COMMITTED a range could also take a
        // row committed since they were read (a lower sequence, committed late), unlogged.
        let sequences = try pending.map { try $0.get(0, as: Int64.self) }
        for start in stride(from: 0, to: sequences.count, by: 500) {
            let chunk = Array(sequences[start..<min(start + 500, sequences.count)])
            try db.execute(
                "DELETE FROM kt_pending WHERE seq IN (\(chunk.map { _ in "?" }.joined(separator: ", ")))", chunk)
        }
        return tree
    }

    /// Whether anything waits for an epoch.
    static func hasPending(_ db: any DomainStatements) throws -> Bool {
        try db.scalar("SELECT count(*) FROM (SELECT 1 FROM kt_pending LIMIT 1) AS queued", as: Int.self) ?? 0 > 0
    }

    /// `userID`'s proof at the latest head (or, with `auditor`, the latest head that auditor
    /// co-signed, with its signature), with the consistency proof from `since` (the size of the
    /// head the reader holds; none when nil, 0, or not smaller).
    func proof(_ db: any DomainStatements, userID: String, since: UInt64?, auditor: Data? = nil) throws -> IdentityProof {
        let (tree, latestHead) = try checkedTree(db)
        guard let latest = latestHead else {
            throw DomainError(.notFound, "the transparency log is empty: no user has published an identity yet")
        }
        var head = latest
        var cosignature: Data?
        if let auditor {
            guard let row = try db.row("SELECT size, signature FROM kt_audits WHERE auditor_key = ?", [auditor]),
                let audited = try Self.head(db, size: UInt64(try row.get(0, as: Int64.self)))
            else { throw DomainError(.notFound, "that auditor has not co-signed a tree head of this domain yet") }
            head = audited
            cosignature = try row.get(1, as: Data.self)
        }
        let search = try tree.searchLatest(Self.label(userID), size: head.size, abridged: auditor != nil)
        var consistency: [Data] = []
        if let since, since > 0, since < head.size { consistency = tree.consistencyProof(from: since, to: head.size) ?? [] }
        return IdentityProof(head: head, consistency: consistency, search: search, auditorSignature: cosignature)
    }

    /// The updates after position `after` (at most `limit`), as an auditor sees them, and the
    /// latest head.
    func updates(_ db: any DomainStatements, after: Int64, limit: Int) throws -> (
        updates: [TransparencyAudit.Update], head: TreeHead?
    ) {
        let rows = try db.rows(
            "SELECT position, label, vrf_output, opening, value FROM kt_log WHERE position > ? ORDER BY position LIMIT ?",
            [after, limit])
        let updates = try rows.map { row in
            TransparencyAudit.Update(
                position: UInt64(try row.get(0, as: Int64.self)), vrfOutput: try row.get(2),
                commitment: try TransparencyCommitment.commitment(
                    opening: try row.get(3), label: try row.get(1), value: try row.get(4)))
        }
        return (updates, try Self.latestHead(db))
    }

    /// Keeps `auditorKey`'s co-signature of the head of `size` entries, once checked; an older
    /// size than the one kept changes nothing. Only a registered auditor's: anyone else's is
    /// refused before its signature is checked (one indexed read).
    func recordAudit(_ db: any DomainStatements, size: UInt64, auditorKey: Data, signature: Data) throws {
        guard try Self.isRegisteredAuditor(db, auditorKey) else {
            throw DomainError(
                .forbidden, "that key is not an auditor of this domain (the operator registers auditors)")
        }
        guard let head = try Self.head(db, size: size) else {
            throw DomainError(.notFound, "no epoch of this log ended at \(size) entries")
        }
        guard TransparencyAudit.isCosigned(head, signature: signature, auditorKey: auditorKey, vrfKey: keys.vrfKey) else {
            throw DomainError(.invalidProof, "the co-signature is not that auditor's over the head of \(size) entries")
        }
        if let kept = try db.scalar("SELECT size FROM kt_audits WHERE auditor_key = ?", [auditorKey], as: Int64.self) {
            guard kept < Int64(size) else { return }
        }
        try db.execute(
            """
            INSERT INTO kt_audits(auditor_key, size, signature) VALUES (?, ?, ?)
            ON CONFLICT(auditor_key) DO UPDATE SET size = excluded.size, signature = excluded.signature
            """, [auditorKey, Int64(size), signature])
    }

    /// Whether the operator registered `auditorKey` (``DomainEngine/addTransparencyAuditor(_:name:)``).
    static func isRegisteredAuditor(_ db: any DomainStatements, _ auditorKey: Data) throws -> Bool {
        try db.scalar("SELECT 1 FROM kt_auditors WHERE auditor_key = ?", [auditorKey], as: Int.self) != nil
    }

    /// The latest head with the consistency proof from `since`, and the head of `since` entries
    /// as the domain signed it (what a device compares with a head gossiped to it).
    func heads(_ db: any DomainStatements, since: UInt64?) throws -> (latest: TreeHead, consistency: [Data], at: TreeHead?) {
        let (tree, latest) = try checkedTree(db)
        guard let head = latest else {
            throw DomainError(.notFound, "the transparency log is empty: no user has published an identity yet")
        }
        guard let since, since > 0, since <= head.size else { return (head, [], nil) }
        return (
            head, since < head.size ? tree.consistencyProof(from: since, to: head.size) ?? [] : [], try Self.head(db, size: since)
        )
    }
}

extension DomainEngine {
    /// Writes epochs until nothing is queued. Called after a change of identity commits (so that
    /// the change is in the log when the call that made it returns) and before a proof is read
    /// while updates wait; several instances take turns under the writer's lock.
    func flushTransparency() async throws {
        let log = transparency
        let clock = clock
        while true {
            let written = try await storage {
                try await store.write(.locking([TransparencyLog.lockName])) { db in
                    try log.writeEpoch(db, now: clock.now())
                }
            }
            guard let written else { return }
            log.keep(written)
            // Pinned once committed: a pin ahead of the rows would read as a rollback.
            if let root = written.root { try log.pin.advance(to: .init(size: written.size, root: root)) }
        }
    }

    /// The domain's transparency keys (public).
    package func transparencyKeys(as caller: Caller) async throws -> TransparencyKeys {
        try await requireEndpoint(caller, unlocking: true)
        return transparency.keys
    }

    /// `userID`'s identity as the log holds it, with its proof at the latest head and the
    /// consistency proof from the head of `since` entries the caller holds.
    package func identityProof(as caller: Caller, userID: String, since: UInt64?, auditor: Data?) async throws -> IdentityProof {
        try await requireEndpoint(caller, unlocking: true)
        guard !userID.isEmpty, IdentityProof.label(of: userID).count <= 255 else {
            throw DomainError(.invalidRequest, "a user id is 1 to 246 bytes")
        }
        if try await storage({ try await store.read { db in try TransparencyLog.hasPending(db) } }) {
            try await flushTransparency()
        }
        let log = transparency
        return try await storage {
            try await store.read { db in try log.proof(db, userID: userID, since: since, auditor: auditor) }
        }
    }

    /// The log's updates after position `after` (at most `limit`, 1 to 10,000) as an auditor
    /// sees them (VRF outputs and commitments: no label, no value), and the latest head. Open to
    /// anyone: it reveals the number of updates and when they came, nothing more.
    package func transparencyUpdates(after: Int64, limit: Int) async throws -> (
        updates: [TransparencyAudit.Update], head: TreeHead?
    ) {
        guard after >= -1, (1...10_000).contains(limit) else {
            throw DomainError(.invalidRequest, "updates are read after position -1 or more, 1 to 10,000 at a time")
        }
        let log = transparency
        return try await storage { try await store.read { db in try log.updates(db, after: after, limit: limit) } }
    }

    /// Keeps an auditor's co-signature of the head of `size` entries (checked against the head
    /// the domain signed). Open to anyone, but only a registered auditor's key is taken
    /// (``addTransparencyAuditor(_:name:)``), and a signature that is not that key's over a head
    /// of this log is refused.
    package func recordAudit(size: UInt64, auditorKey: Data, signature: Data) async throws {
        let log = transparency
        try await storage {
            try await store.write { db in try log.recordAudit(db, size: size, auditorKey: auditorKey, signature: signature) }
        }
    }

    /// The latest signed head, the proof that it extends the head of `since` entries, and that
    /// head as the domain signed it (nil when no epoch ended there).
    package func transparencyHeads(as caller: Caller, since: UInt64?) async throws -> TransparencyHeads {
        try await requireEndpoint(caller, unlocking: true)
        return try await transparencyHeads(since: since)
    }

    /// ``transparencyHeads(as:since:)`` for anyone (`GET /v1/transparency/heads` needs no account:
    /// the heads are public, and an auditor or a verifier written from the docs reads them).
    package func transparencyHeads(since: UInt64?) async throws -> TransparencyHeads {
        let log = transparency
        let heads = try await storage { try await store.read { db in try log.heads(db, since: since) } }
        return TransparencyHeads(latest: heads.latest, consistency: heads.consistency, at: heads.at)
    }
}

extension DomainEngine: TransparencyLogSource {
    /// See ``transparencyUpdates(after:limit:)``: in process, every reader is the operator's.
    package func transparencyUpdates(after: Int64, limit: Int, auditor: P256.SigningKey?) async throws -> (
        updates: [TransparencyAudit.Update], head: TreeHead?
    ) {
        try await transparencyUpdates(after: after, limit: limit)
    }

    /// Checks a registered auditor's signed request for the updates: the key registered, the
    /// time within ``TransparencyAudit/requestSkew`` of the domain's clock, the signature the
    /// key's. Refused with ``DomainError/Code/invalidProof`` otherwise.
    package func checkAuditorRequest(auditorKey: Data, at: Int64, signature: Data, after: Int64, limit: Int) async throws {
        let now = Int64(clock.now().timeIntervalSince1970 * 1000)
        // Any `at` a client sends: the difference computed without overflowing.
        let (difference, overflow) = now.subtractingReportingOverflow(at)
        guard !overflow, difference.magnitude <= UInt64(TransparencyAudit.requestSkew) else {
            throw DomainError(.invalidProof, "the auditor's request was signed too far from the domain's time")
        }
        let registered = try await storage {
            try await store.read { db in try TransparencyLog.isRegisteredAuditor(db, auditorKey) }
        }
        guard registered else {
            throw DomainError(.invalidProof, "that key is not an auditor of this domain (the operator registers auditors)")
        }
        guard let key = TransparencyAudit.auditorPublicKey(auditorKey),
            key.isValidSignature(signature, for: TransparencyAudit.updatesRequestBytes(after: after, limit: limit, at: at))
        else { throw DomainError(.invalidProof, "the auditor's request is not signed by its key") }
    }

    /// See ``recordAudit(size:auditorKey:signature:)``.
    package func postAudit(size: UInt64, auditorKey: Data, signature: Data) async throws {
        try await recordAudit(size: size, auditorKey: auditorKey, signature: signature)
    }
}

extension DomainEngine {
    /// The attack key transparency is for, as an operator holding the database (not any user's
    /// keys) plays it: `identity` replaces its user's row in the directory and is logged as the
    /// user's next version, in an epoch the domain signs like any other. No route reaches it: the
    /// demo and the hostile-domain tests use it to show the user's own devices catching it.
    package func logAsOperator(_ identity: PublishedIdentity) async throws {
        let document = try JSONEncoder().encode(identity)
        try await storage {
            try await store.write { db in
                try Self.replaceIdentity(db, with: identity, document: document)
                try TransparencyLog.queue(db, user: identity.userID, document: document)
            }
        }
        try await flushTransparency()
    }
}

extension DomainEngine {
    /// The registered auditors, oldest first, with the size each co-signed last.
    package func transparencyAuditors() throws -> [RegisteredAuditor] {
        try blockingStorage {
            try store.blockingRead { db in
                try db.rows(
                    """
                    SELECT a.auditor_key, a.name, a.added_at, s.size FROM kt_auditors a
                    LEFT JOIN kt_audits s ON s.auditor_key = a.auditor_key ORDER BY a.added_at, a.auditor_key
                    """
                ).map { row in
                    RegisteredAuditor(
                        auditorKey: try row.get(0), name: try row.get(1),
                        addedAt: Date(timeIntervalSince1970: try row.get(2)),
                        cosignedSize: try row.get(3, as: Int64?.self).map { UInt64(max(0, $0)) })
                }
            }
        }
    }

    /// Registers an auditor: a P-256 key (64 bytes, x ‖ y) and a name of 1 to 200 characters.
    package func addTransparencyAuditor(_ auditorKey: Data, name: String) throws {
        guard TransparencyAudit.auditorPublicKey(auditorKey) != nil else {
            throw DomainError(.invalidRequest, "an auditor key is a P-256 public key, 64 bytes (x ‖ y)")
        }
        let name = name.trimmingCharacters(in: .whitespacesAndNewlines)
        guard (1...200).contains(name.count), !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else { throw DomainError(.invalidRequest, "an auditor's name is 1 to 200 characters, none a control") }
        let now = clock.now().timeIntervalSince1970
        try blockingStorage {
            try store.blockingWrite { db in
                try db.execute(
                    """
                    INSERT INTO kt_auditors(auditor_key, name, added_at) VALUES (?, ?, ?)
                    ON CONFLICT(auditor_key) DO UPDATE SET name = excluded.name
                    """, [auditorKey, name, now])
            }
        }
    }

    /// Removes a registered auditor and its co-signature.
    ///
    /// - Throws: ``DomainError/Code/notFound`` when the key is not registered.
    package func removeTransparencyAuditor(_ auditorKey: Data) throws {
        let removed = try blockingStorage {
            try store.blockingWrite { db in
                try db.execute("DELETE FROM kt_audits WHERE auditor_key = ?", [auditorKey])
                return try db.execute("DELETE FROM kt_auditors WHERE auditor_key = ?", [auditorKey])
            }
        }
        guard removed > 0 else { throw DomainError(.notFound, "no auditor with that key is registered") }
    }
}
