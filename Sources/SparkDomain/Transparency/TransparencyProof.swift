public import Foundation
public import SparkCrypto

/// The domain's transparency keys as devices hold them: the VRF key that hides labels and the key
/// that signs tree heads (`docs/FORMATS.md`, "Key transparency").
public struct TransparencyKeys: Sendable, Codable, Equatable {
    /// The VRF public key, a compressed P-256 point (33 bytes).
    public var vrfKey: Data
    /// The tree-head signing key, P-256 `x ‖ y` (64 bytes).
    public var headKey: Data

    /// The keys from their encodings (checked when used: ``vrf()``, ``head()``).
    public init(vrfKey: Data, headKey: Data) {
        self.vrfKey = vrfKey
        self.headKey = headKey
    }

    /// The VRF key.
    public func vrf() throws -> ECVRF.PublicKey { try ECVRF.PublicKey(compressedRepresentation: vrfKey) }

    /// The head-signing key.
    public func head() throws -> P256.PublicKey {
        guard headKey.count == 64 else { throw CryptoError(.invalidKey, "a tree-head key is 64 bytes (x ‖ y)") }
        return try P256.PublicKey(x: headKey.prefix(32), y: headKey.suffix(32))
    }
}

/// A signed tree head: the log's size and root at the end of an epoch, when, signed by the
/// domain's head key.
public struct TreeHead: Sendable, Equatable {
    /// The log's size (entries).
    public var size: UInt64
    /// The log tree's root.
    public var root: Data
    /// When the epoch was written, milliseconds since 1970.
    public var timestamp: UInt64
    /// The head key's P-256 ECDSA signature (raw `r ‖ s`) over ``signedBytes(vrfKey:)``.
    public var signature: Data

    /// A signed head.
    public init(size: UInt64, root: Data, timestamp: UInt64, signature: Data) {
        (self.size, self.root, self.timestamp, self.signature) = (size, root, timestamp, signature)
    }

    /// What the signature covers: `"spark-kt-head-v1" ‖ 0x00 ‖ vrfKey (33) ‖ size (u64) ‖
    /// timestamp (u64) ‖ root (32)`, so a head names the VRF key its labels are hidden under.
    public static func signedBytes(size: UInt64, root: Data, timestamp: UInt64, vrfKey: Data) -> Data {
        var data = Data("spark-kt-head-v1".utf8) + [0] + vrfKey
        withUnsafeBytes(of: size.bigEndian) { data.append(contentsOf: $0) }
        withUnsafeBytes(of: timestamp.bigEndian) { data.append(contentsOf: $0) }
        return data + root
    }

    /// Whether the head is signed by `keys`' head key.
    public func isSigned(by keys: TransparencyKeys) -> Bool {
        guard let key = try? keys.head() else { return false }
        return key.isValidSignature(
            signature, for: Self.signedBytes(size: size, root: root, timestamp: timestamp, vrfKey: keys.vrfKey))
    }
}

/// A user's identity as the domain's log holds it, with the proof: the latest signed head, the
/// proof that it extends the head the reader named (if any), and the search proof of the user's
/// latest logged value at that head. The identity is the value the proof opens (nothing else of
/// the answer names one), so a key outside the log cannot be passed off with a proof.
public struct IdentityProof: Sendable, Equatable {
    /// The head the proof is for.
    public var head: TreeHead
    /// The consistency proof from the reader's head to ``head`` (empty when none was named, or
    /// the sizes are equal).
    public var consistency: [Data]
    /// The search proof of the label's latest value (``CombinedTree/SearchProof``).
    public var search: CombinedTree.SearchProof
    /// The auditor's co-signature of ``head`` (``TransparencyAudit/signedBytes(_:vrfKey:)``),
    /// when the reader named an auditor.
    public var auditorSignature: Data?

    /// A proof.
    public init(head: TreeHead, consistency: [Data], search: CombinedTree.SearchProof, auditorSignature: Data? = nil) {
        (self.head, self.consistency, self.search, self.auditorSignature) = (head, consistency, search, auditorSignature)
    }

    /// The label a user's identity is logged under: `"identity:" ‖ UTF-8(userID)`.
    public static func label(of userID: String) -> Data { Data("identity:\(userID)".utf8) }

    /// The value an identity is logged as: its JSON with sorted keys; an identity cleared by a
    /// reset is logged as the empty value.
    public static func value(of identity: PublishedIdentity?) throws -> Data {
        guard let identity else { return Data() }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(identity)
    }

    /// What a verified proof says of a user.
    public struct Verified: Sendable, Equatable {
        /// The head it was verified against (to keep, and to name next time).
        public var head: TreeHead
        /// The user's identity as logged; nil when the user has none (never published, or reset).
        public var identity: PublishedIdentity?
        /// The logged version of it (nil when the label is absent).
        public var version: UInt32?
    }

    /// Verifies the proof for `userID` under `keys`, requiring its head to extend `previous`
    /// (the last head this reader accepted) and, with `auditor` (a P-256 key, `x ‖ y`), to be
    /// co-signed by it.
    ///
    /// - Throws: ``CryptoError/Code/invalidSignature`` naming what failed: the head's signature,
    ///   its consistency with `previous`, the search proof, or an identity that is not
    ///   self-signed by its own user.
    public func verify(userID: String, keys: TransparencyKeys, previous: TreeHead?, auditor: Data? = nil) throws -> Verified {
        try Self.checkHead(head, keys: keys, previous: previous, consistency: consistency)
        if let auditor {
            guard let auditorSignature,
                TransparencyAudit.isCosigned(head, signature: auditorSignature, auditorKey: auditor, vrfKey: keys.vrfKey)
            else { throw CryptoError(.invalidSignature, "the tree head is not co-signed by the auditor this device requires") }
        }
        // With an auditor's co-signature the proof walks the last entry only (the auditor saw
        // every prefix tree only add keys); without one, the whole frontier.
        let verified = try CombinedTree.verifyLatest(
            search, label: Self.label(of: userID), size: head.size, root: head.root, vrfKey: try keys.vrf(),
            abridged: auditor != nil)
        guard let value = verified.value, !value.isEmpty else {
            return Verified(head: head, identity: nil, version: verified.version)
        }
        guard let identity = try? JSONDecoder().decode(PublishedIdentity.self, from: value), identity.userID == userID,
            identity.isSelfSigned
        else {
            throw CryptoError(.invalidSignature, "the log holds an identity for \(userID) that is not theirs or not self-signed")
        }
        return Verified(head: head, identity: identity, version: verified.version)
    }

    /// Checks that `head` is signed by `keys` and extends `previous` by `consistency` (the same
    /// size must be the same root; a smaller one is a log going back).
    public static func checkHead(_ head: TreeHead, keys: TransparencyKeys, previous: TreeHead?, consistency: [Data]) throws {
        guard head.size > 0, head.root.count == 32, head.isSigned(by: keys) else {
            throw CryptoError(.invalidSignature, "the tree head is not signed by the domain's transparency key")
        }
        guard let previous else { return }
        if head.size == previous.size {
            guard head.root == previous.root else {
                throw CryptoError(
                    .invalidSignature,
                    "the domain signed two different logs of \(head.size) entries (a fork, or a rewritten past)")
            }
            return
        }
        guard head.size > previous.size else {
            throw CryptoError(
                .invalidSignature, "the tree head (\(head.size) entries) goes back from the one already seen (\(previous.size))")
        }
        guard
            LogTree.verifyConsistency(
                oldSize: Int(previous.size), oldRoot: previous.root, newSize: Int(head.size), newRoot: head.root,
                proof: consistency)
        else {
            throw CryptoError(
                .invalidSignature,
                "the log of \(head.size) entries does not extend the one of \(previous.size) already seen (a fork, or a rewritten past)"
            )
        }
    }
}

// MARK: - The binary encoding

/// The binary encodings of heads and proofs (`docs/FORMATS.md`): big-endian integers, a proof
/// refused whole when any length is out of bounds or bytes are left over.
public enum TransparencyCodec {
    /// The most nodes any list of a proof may hold (a log of 2^64 entries needs fewer).
    static let maximumNodes = 1024

    /// Encodes a head.
    public static func encode(_ head: TreeHead) -> Data {
        var writer = Writer()
        writer.head(head)
        return writer.data
    }

    /// Decodes a head.
    public static func decodeHead(_ data: Data) throws -> TreeHead {
        var reader = Reader(data)
        let head = try reader.head()
        try reader.finish()
        return head
    }

    /// Encodes a proof.
    public static func encode(_ proof: IdentityProof) -> Data {
        var writer = Writer()
        writer.head(proof.head)
        writer.nodes(proof.consistency)
        writer.search(proof.search)
        if let signature = proof.auditorSignature {
            writer.integer(UInt16(signature.count))
            writer.data.append(signature)
        }
        return writer.data
    }

    /// Decodes a proof.
    ///
    /// - Throws: ``CryptoError/Code/invalidParameter`` for a malformed encoding.
    public static func decodeProof(_ data: Data) throws -> IdentityProof {
        var reader = Reader(data)
        var proof = IdentityProof(head: try reader.head(), consistency: try reader.nodes(), search: try reader.search())
        if !reader.isAtEnd {
            let length = Int(try reader.integer(UInt16.self))
            guard length <= 128 else { throw reader.malformed("an auditor signature of \(length) bytes") }
            proof.auditorSignature = try reader.bytes(length)
        }
        try reader.finish()
        return proof
    }

    /// Encodes a list of nodes (a consistency proof alone).
    public static func encode(nodes: [Data]) -> Data {
        var writer = Writer()
        writer.nodes(nodes)
        return writer.data
    }

    /// Decodes a list of nodes.
    public static func decodeNodes(_ data: Data) throws -> [Data] {
        var reader = Reader(data)
        let nodes = try reader.nodes()
        try reader.finish()
        return nodes
    }

    struct Writer {
        var data = Data()

        mutating func integer<T: FixedWidthInteger>(_ value: T) {
            withUnsafeBytes(of: value.bigEndian) { data.append(contentsOf: $0) }
        }

        mutating func node(_ value: Data) { data.append(value) }

        mutating func nodes(_ values: [Data]) {
            integer(UInt16(values.count))
            for value in values { node(value) }
        }

        mutating func head(_ head: TreeHead) {
            integer(head.size)
            integer(head.timestamp)
            node(head.root)
            integer(UInt16(head.signature.count))
            data.append(head.signature)
        }

        mutating func search(_ proof: CombinedTree.SearchProof) {
            integer(proof.size)
            integer(UInt8(proof.vrfProofs.count))
            for (version, vrfProof) in proof.vrfProofs.sorted(by: { $0.key < $1.key }) {
                integer(version)
                data.append(vrfProof)
            }
            integer(UInt8(proof.frontier.count))
            for entry in proof.frontier {
                integer(entry.position)
                node(entry.commitment)
                node(entry.prefixRoot)
                integer(UInt8(entry.lookups.count))
                for lookup in entry.lookups {
                    integer(lookup.version)
                    prefix(lookup.proof)
                }
            }
            if let opened = proof.opened {
                integer(UInt8(1))
                integer(opened.position)
                data.append(opened.opening)
                integer(UInt32(opened.value.count))
                data.append(opened.value)
                node(opened.prefixRoot)
            } else {
                integer(UInt8(0))
            }
            nodes(proof.inclusion)
        }

        mutating func prefix(_ proof: PrefixTree.SearchProof) {
            switch proof.result {
            case .inclusion(let index):
                integer(UInt8(0))
                integer(index)
            case .nonInclusionLeaf(let key, let index):
                integer(UInt8(1))
                node(key)
                integer(index)
            case .nonInclusionParent:
                integer(UInt8(2))
            }
            integer(UInt16(proof.depth))
            nodes(proof.elements)
        }
    }

    struct Reader {
        let data: Data
        var offset: Int

        init(_ data: Data) {
            self.data = data
            offset = data.startIndex
        }

        func malformed(_ what: String) -> CryptoError {
            CryptoError(.invalidParameter, "the transparency proof is malformed: \(what)")
        }

        mutating func bytes(_ count: Int) throws -> Data {
            guard count >= 0, data.endIndex - offset >= count else { throw malformed("it ends early") }
            defer { offset += count }
            return Data(data[offset..<(offset + count)])
        }

        mutating func integer<T: FixedWidthInteger>(_: T.Type = T.self) throws -> T {
            let raw = try bytes(MemoryLayout<T>.size)
            return raw.reduce(T(0)) { ($0 << 8) | T($1) }
        }

        mutating func node() throws -> Data { try bytes(LogTree.valueByteCount) }

        mutating func nodes() throws -> [Data] {
            let count = Int(try integer(UInt16.self))
            guard count <= TransparencyCodec.maximumNodes else { throw malformed("a list of \(count) nodes") }
            return try (0..<count).map { _ in try node() }
        }

        mutating func head() throws -> TreeHead {
            let size = try integer(UInt64.self)
            let timestamp = try integer(UInt64.self)
            let root = try node()
            let length = Int(try integer(UInt16.self))
            guard length <= 128 else { throw malformed("a signature of \(length) bytes") }
            return TreeHead(size: size, root: root, timestamp: timestamp, signature: try bytes(length))
        }

        mutating func search() throws -> CombinedTree.SearchProof {
            let size = try integer(UInt64.self)
            var vrfProofs: [UInt32: Data] = [:]
            for _ in 0..<Int(try integer(UInt8.self)) {
                let version = try integer(UInt32.self)
                guard vrfProofs[version] == nil else { throw malformed("version \(version) proved twice") }
                vrfProofs[version] = try bytes(ECVRF.proofByteCount)
            }
            var frontier: [CombinedTree.FrontierEntry] = []
            for _ in 0..<Int(try integer(UInt8.self)) {
                let position = try integer(UInt64.self)
                let commitment = try node()
                let prefixRoot = try node()
                var lookups: [CombinedTree.Lookup] = []
                for _ in 0..<Int(try integer(UInt8.self)) {
                    lookups.append(CombinedTree.Lookup(version: try integer(UInt32.self), proof: try prefix()))
                }
                frontier.append(
                    CombinedTree.FrontierEntry(
                        position: position, commitment: commitment, prefixRoot: prefixRoot, lookups: lookups))
            }
            var opened: CombinedTree.Opened?
            switch try integer(UInt8.self) {
            case 0: break
            case 1:
                let position = try integer(UInt64.self)
                let opening = try bytes(TransparencyCommitment.openingByteCount)
                let length = Int(try integer(UInt32.self))
                guard length <= 65_536 else { throw malformed("a value of \(length) bytes") }
                opened = CombinedTree.Opened(
                    position: position, opening: opening, value: try bytes(length), prefixRoot: try node())
            default: throw malformed("an opened entry's flag")
            }
            return CombinedTree.SearchProof(
                size: size, vrfProofs: vrfProofs, frontier: frontier, opened: opened, inclusion: try nodes())
        }

        mutating func prefix() throws -> PrefixTree.SearchProof {
            let result: PrefixTree.Result
            switch try integer(UInt8.self) {
            case 0: result = .inclusion(index: try integer(UInt64.self))
            case 1: result = .nonInclusionLeaf(key: try node(), index: try integer(UInt64.self))
            case 2: result = .nonInclusionParent
            default: throw malformed("a prefix search's result")
            }
            let depth = Int(try integer(UInt16.self))
            guard depth <= 256 else { throw malformed("a prefix search of depth \(depth)") }
            return PrefixTree.SearchProof(result: result, depth: depth, elements: try nodes())
        }

        var isAtEnd: Bool { offset == data.endIndex }

        func finish() throws {
            guard offset == data.endIndex else { throw malformed("\(data.endIndex - offset) bytes left over") }
        }
    }
}

/// The domain's latest signed head, the consistency proof from a head the reader holds, and the
/// head the domain signed at the reader's size (to compare with one another member gossiped).
public struct TransparencyHeads: Sendable, Equatable {
    /// The latest head.
    public var latest: TreeHead
    /// The proof that ``latest`` extends the reader's head (empty when it is the same size).
    public var consistency: [Data]
    /// The head the domain signed at the size the reader named (nil when no epoch ended there).
    public var at: TreeHead?

    /// The heads.
    public init(latest: TreeHead, consistency: [Data], at: TreeHead?) {
        (self.latest, self.consistency, self.at) = (latest, consistency, at)
    }
}
