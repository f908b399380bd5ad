public import Foundation
public import SparkCrypto

/// A third-party auditor's view of the transparency log (draft-ietf-keytrans-protocol,
/// "Third-Party Auditing"): it rebuilds the log from each update's VRF output and commitment,
/// so it sees that every prefix tree only adds keys it never held (no label-version pair
/// twice, nothing removed) and that each head the domain signs is the root of the log as
/// rebuilt, which only grows. It learns no label and no value (VRF outputs and commitments hide
/// them). It co-signs each head it checked; devices configured with its key accept only those.
public struct TransparencyAudit: Sendable {
    /// One update as the auditor sees it.
    public struct Update: Sendable, Equatable {
        /// The entry's position.
        public var position: UInt64
        /// The VRF output the entry adds to the prefix tree.
        public var vrfOutput: Data
        /// The commitment to the label's new value.
        public var commitment: Data

        /// An update.
        public init(position: UInt64, vrfOutput: Data, commitment: Data) {
            (self.position, self.vrfOutput, self.commitment) = (position, vrfOutput, commitment)
        }
    }

    private var prefix = PrefixTree()
    private var nodes = LogTree.Nodes()

    /// An auditor that has seen nothing.
    public init() {}

    /// The entries rebuilt so far.
    public var size: UInt64 { UInt64(nodes.count) }

    /// Appends the next updates.
    ///
    /// - Throws: ``CryptoError/Code/invalidSignature`` when one is not the next position or adds
    ///   a key the prefix tree already holds (the log would have changed a label's past).
    public mutating func append(_ updates: [Update]) throws {
        for update in updates {
            guard update.position == size, update.commitment.count == LogTree.valueByteCount else {
                throw CryptoError(.invalidSignature, "update \(update.position) is not the log's next entry (\(size))")
            }
            do {
                try prefix.insert(update.vrfOutput, index: update.position)
            } catch {
                throw CryptoError(
                    .invalidSignature, "update \(update.position) adds a label-version pair the log already holds")
            }
            nodes.append(LogTree.leafValue(commitment: update.commitment, prefixRoot: prefix.root))
        }
    }

    /// Checks that `head` is signed by the domain's key and is the root of the first
    /// `head.size` entries as rebuilt.
    public func check(_ head: TreeHead, keys: TransparencyKeys) throws {
        guard head.isSigned(by: keys) else { throw CryptoError(.invalidSignature, "the head is not the domain's") }
        guard head.size >= 1, head.size <= size else {
            throw CryptoError(.invalidSignature, "the head names \(head.size) entries; \(size) are known")
        }
        guard nodes.root(size: Int(head.size)) == head.root else {
            throw CryptoError(
                .invalidSignature, "the head of \(head.size) entries is not the root of the log's updates (a rewritten log)")
        }
    }

    /// What an auditor signs: `"spark-kt-audit-v1" ‖ 0x00 ‖ vrfKey (33) ‖ size (u64) ‖
    /// timestamp (u64) ‖ root (32)`.
    public static func signedBytes(_ head: TreeHead, vrfKey: Data) -> Data {
        var data = Data("spark-kt-audit-v1".utf8) + [0] + vrfKey
        withUnsafeBytes(of: head.size.bigEndian) { data.append(contentsOf: $0) }
        withUnsafeBytes(of: head.timestamp.bigEndian) { data.append(contentsOf: $0) }
        return data + head.root
    }

    /// Whether `signature` is `auditorKey`'s (P-256 `x ‖ y`) over `head`.
    public static func isCosigned(_ head: TreeHead, signature: Data, auditorKey: Data, vrfKey: Data) -> Bool {
        guard let key = auditorPublicKey(auditorKey) else { return false }
        return key.isValidSignature(signature, for: signedBytes(head, vrfKey: vrfKey))
    }

    /// An auditor's key as the wire and the plist carry it, P-256 `x ‖ y` (64 bytes); nil when
    /// it is not a point of the curve.
    public static func auditorPublicKey(_ data: Data) -> P256.PublicKey? {
        guard data.count == 64 else { return nil }
        return try? P256.PublicKey(x: data.prefix(32), y: data.suffix(32))
    }

    /// Encodes updates: a count (u32), then each position (u64), VRF output and commitment.
    public static func encode(_ updates: [Update]) -> Data {
        var writer = TransparencyCodec.Writer()
        writer.integer(UInt32(updates.count))
        for update in updates {
            writer.integer(update.position)
            writer.node(update.vrfOutput)
            writer.node(update.commitment)
        }
        return writer.data
    }

    /// Decodes updates (at most 10,000).
    public static func decode(_ data: Data) throws -> [Update] {
        var reader = TransparencyCodec.Reader(data)
        let count = Int(try reader.integer(UInt32.self))
        guard count <= 10_000 else { throw reader.malformed("\(count) updates at once") }
        let updates = try (0..<count).map { _ in
            Update(position: try reader.integer(UInt64.self), vrfOutput: try reader.node(), commitment: try reader.node())
        }
        try reader.finish()
        return updates
    }
}

/// Where an auditor reads a domain's log and leaves its co-signatures: `spark-domaind` over
/// HTTPS (``RemoteDomain``), or an embedded domain.
public protocol TransparencyLogSource: Sendable {
    /// The updates after position `after` (at most `limit`) and the latest signed head, asked
    /// as the registered auditor whose key `auditor` is (a served domain pages freely for one;
    /// anonymous readers get at most 1,000 updates a request, rate-limited by address).
    func transparencyUpdates(after: Int64, limit: Int, auditor: P256.SigningKey?) async throws -> (
        updates: [TransparencyAudit.Update], head: TreeHead?
    )
    /// Leaves the auditor's co-signature of the head of `size` entries.
    func postAudit(size: UInt64, auditorKey: Data, signature: Data) async throws
}

extension RemoteDomain: TransparencyLogSource {}

/// A third-party auditor following one domain's log: each ``step()`` reads the updates since
/// the last, rebuilds the log (``TransparencyAudit``), checks the latest head against it, and
/// co-signs that head. A log that rewrote an entry, removed a key, repeated a label-version
/// pair, or signed a head that is not its root is refused, and nothing is signed again.
public actor TransparencyAuditor {
    let source: any TransparencyLogSource
    let keys: TransparencyKeys
    let signer: P256.SigningKey
    private var audit = TransparencyAudit()
    /// The last head this auditor co-signed (kept by the caller across runs).
    public private(set) var lastSigned: TreeHead?
    /// Updates read per request.
    static let pageSize = 5_000

    /// An auditor of the domain whose keys are `keys`, signing with `signer`, that co-signed
    /// `lastSigned` before (every later head must extend it).
    public init(source: any TransparencyLogSource, keys: TransparencyKeys, signer: P256.SigningKey, lastSigned: TreeHead?) {
        self.source = source
        self.keys = keys
        self.signer = signer
        self.lastSigned = lastSigned
    }

    /// The auditor's public key, P-256 `x ‖ y`: what a device's plist names.
    public nonisolated var publicKey: Data { signer.publicKey.x + signer.publicKey.y }

    /// Reads what is new, checks, and co-signs the latest head; returns it (nil when there was
    /// nothing new to sign).
    ///
    /// - Throws: ``CryptoError/Code/invalidSignature`` naming what the log did wrong.
    @discardableResult
    public func step() async throws -> TreeHead? {
        var head: TreeHead?
        while true {
            let page = try await source.transparencyUpdates(
                after: Int64(audit.size) - 1, limit: Self.pageSize, auditor: signer)
            try audit.append(page.updates)
            head = page.head
            if page.updates.count < Self.pageSize, (head?.size ?? 0) <= audit.size { break }
            if page.updates.isEmpty { break }
        }
        guard let head else { return nil }
        try audit.check(head, keys: keys)
        if let last = lastSigned {
            guard head.size >= last.size else {
                throw CryptoError(.invalidSignature, "the log shrank from \(last.size) entries to \(head.size)")
            }
            // The log as rebuilt now must still be the one co-signed before.
            guard head.size > last.size else {
                guard head.root == last.root else {
                    throw CryptoError(.invalidSignature, "the domain signed two logs of \(head.size) entries")
                }
                return nil
            }
            do {
                try audit.check(last, keys: keys)
            } catch {
                throw CryptoError(
                    .invalidSignature, "the log no longer holds the \(last.size) entries co-signed before (a rewritten past)")
            }
        }
        let signature = try signer.signature(for: TransparencyAudit.signedBytes(head, vrfKey: keys.vrfKey))
        try await source.postAudit(size: head.size, auditorKey: publicKey, signature: signature)
        lastSigned = head
        return head
    }
}

extension TransparencyAudit {
    /// The most updates an anonymous request of `GET /v1/transparency/updates` returns.
    public static let anonymousPageLimit = 1_000
    /// How far a registered auditor's signed request may be from the domain's clock, in ms.
    public static let requestSkew: Int64 = 300_000

    /// What a registered auditor signs (P-256, the key it co-signs with) to read the updates
    /// without the anonymous limits (`docs/FORMATS.md`): `"spark-kt-updates-v1" ‖ 0x00 ‖ after
    /// (i64 big-endian) ‖ limit (u32 big-endian) ‖ at (u64 big-endian, ms since 1970)`.
    public static func updatesRequestBytes(after: Int64, limit: Int, at: Int64) -> Data {
        var data = Data("spark-kt-updates-v1".utf8)
        data.append(0)
        withUnsafeBytes(of: after.bigEndian) { data.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt32(clamping: limit).bigEndian) { data.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt64(clamping: at).bigEndian) { data.append(contentsOf: $0) }
        return data
    }
}

/// An auditor the domain's operator registered: only registered auditors' co-signatures are
/// taken (`POST /v1/transparency/audits`), so no stranger can fill the domain's list.
public struct RegisteredAuditor: Sendable, Codable, Equatable {
    /// The auditor's P-256 public key, 64 bytes (x ‖ y), as `spark-kt-auditor init` prints it.
    public var auditorKey: Data
    /// The operator's name for it (who runs it).
    public var name: String
    /// When it was registered.
    public var addedAt: Date
    /// The size of the latest head it co-signed, if any.
    public var cosignedSize: UInt64?

    /// A registered auditor.
    public init(auditorKey: Data, name: String, addedAt: Date, cosignedSize: UInt64?) {
        self.auditorKey = auditorKey
        self.name = name
        self.addedAt = addedAt
        self.cosignedSize = cosignedSize
    }
}
