public import Foundation
import SparkCrypto

/// Key transparency's prefix tree (draft-ietf-keytrans-protocol, "Prefix Tree"): a binary trie
/// keyed by VRF outputs (256 bits, the first bit choosing the root's child), whose leaves hold
/// the index of the log entry that committed to the label-version pair:
///
/// ```text
/// leaf value   = SHA-256(0x00 ‖ vrf_output ‖ update_index (u64, big-endian))
/// parent value = SHA-256(0x01 ‖ value(left) ‖ value(right))
/// empty value  = 32 zero bytes
/// ```
///
/// A search proof is the copath of the search's path, left to right, with how the search
/// ended: at the key's leaf (inclusion), at another key's leaf, or at an empty child.
public struct PrefixTree: Sendable {
    /// Bytes of a key (a VRF output) and of a node value.
    public static let keyByteCount = 32

    indirect enum Node: Sendable {
        case empty
        case leaf(key: Data, index: UInt64)
        case parent(left: Node, right: Node, value: Data)

        var value: Data {
            switch self {
            case .empty: Data(count: 32)
            case .leaf(let key, let index): PrefixTree.leafValue(key: key, index: index)
            case .parent(_, _, let value): value
            }
        }
    }

    /// How a search ended.
    public enum Result: Sendable, Equatable {
        /// At the key's own leaf, which names the log entry that committed to it.
        case inclusion(index: UInt64)
        /// At another key's leaf (given, as the verifier cannot infer it).
        case nonInclusionLeaf(key: Data, index: UInt64)
        /// At a parent lacking the child the key leads to.
        case nonInclusionParent
    }

    /// A search's outcome and its proof.
    public struct SearchProof: Sendable, Equatable {
        /// How the search ended.
        public var result: Result
        /// The depth of the node it ended at (the root's is 0).
        public var depth: Int
        /// The copath's values, left to right.
        public var elements: [Data]

        /// A proof.
        public init(result: Result, depth: Int, elements: [Data]) {
            self.result = result
            self.depth = depth
            self.elements = elements
        }
    }

    var rootNode: Node = .empty

    /// An empty tree.
    public init() {}

    /// The root value (32 zero bytes for an empty tree).
    public var root: Data { rootNode.value }

    static func leafValue(key: Data, index: UInt64) -> Data {
        TreeHash.hash(0x00, key, nil, withUnsafeBytes(of: index.bigEndian) { Data($0) })
    }

    static func parentValue(_ left: Data, _ right: Data) -> Data { TreeHash.hash(0x01, left, nil, right) }

    static func bit(_ key: Data, _ depth: Int) -> Bool {
        key[key.startIndex + depth / 8] & (0x80 >> UInt8(depth % 8)) != 0
    }

    static func parent(_ left: Node, _ right: Node) -> Node {
        .parent(left: left, right: right, value: parentValue(left.value, right.value))
    }

    /// Adds `key` (a VRF output) committed to by log entry `index`.
    ///
    /// - Throws: ``CryptoError/Code/invalidParameter`` for a key already present or not 32 bytes.
    public mutating func insert(_ key: Data, index: UInt64) throws {
        guard key.count == Self.keyByteCount else {
            throw CryptoError(.invalidParameter, "a prefix tree key is \(Self.keyByteCount) bytes")
        }
        let key = Data(key)
        func insert(_ node: Node, _ depth: Int) throws -> Node {
            switch node {
            case .empty:
                return .leaf(key: key, index: index)
            case .leaf(let other, let otherIndex):
                guard other != key else { throw CryptoError(.invalidParameter, "the key is already in the prefix tree") }
                return Self.split(.leaf(key: key, index: index), key, .leaf(key: other, index: otherIndex), other, depth)
            case .parent(let left, let right, _):
                return Self.bit(key, depth)
                    ? Self.parent(left, try insert(right, depth + 1)) : Self.parent(try insert(left, depth + 1), right)
            }
        }
        rootNode = try insert(rootNode, 0)
    }

    /// Parents down to the first bit where the two keys differ.
    static func split(_ a: Node, _ aKey: Data, _ b: Node, _ bKey: Data, _ depth: Int) -> Node {
        let (aBit, bBit) = (bit(aKey, depth), bit(bKey, depth))
        if aBit != bBit { return aBit ? parent(b, a) : parent(a, b) }
        let below = split(a, aKey, b, bKey, depth + 1)
        return aBit ? parent(.empty, below) : parent(below, .empty)
    }

    /// Searches for `key` and proves the outcome.
    public func search(_ key: Data) -> SearchProof {
        var left: [Data] = []
        var right: [Data] = []
        var node = rootNode
        var depth = 0
        while true {
            switch node {
            case .empty:
                return SearchProof(result: .nonInclusionParent, depth: depth, elements: left + right.reversed())
            case .leaf(let other, let index):
                let result: Result = other == key ? .inclusion(index: index) : .nonInclusionLeaf(key: other, index: index)
                return SearchProof(result: result, depth: depth, elements: left + right.reversed())
            case .parent(let l, let r, _):
                if Self.bit(key, depth) {
                    left.append(l.value)
                    node = r
                } else {
                    right.append(r.value)
                    node = l
                }
                depth += 1
            }
        }
    }

    /// Whether `proof` shows its outcome for `key` in the tree whose root is `root`.
    public static func verify(_ proof: SearchProof, key: Data, root: Data) -> Bool {
        guard key.count == keyByteCount, proof.depth >= 0, proof.depth <= keyByteCount * 8,
            proof.elements.count == proof.depth, proof.elements.allSatisfy({ $0.count == 32 })
        else { return false }
        let terminal: Data
        switch proof.result {
        case .inclusion(let index):
            terminal = leafValue(key: key, index: index)
        case .nonInclusionLeaf(let other, let index):
            // Another key on the same path so far: it shares the first `depth` bits.
            guard other.count == keyByteCount, other != key, (0..<proof.depth).allSatisfy({ bit(other, $0) == bit(key, $0) })
            else { return false }
            terminal = leafValue(key: other, index: index)
        case .nonInclusionParent:
            // An empty child ends a search only below a parent (an empty tree has depth 0).
            terminal = Data(count: 32)
        }
        var remaining = proof.elements[...]
        func rebuild(_ depth: Int) -> Data? {
            if depth == proof.depth { return terminal }
            if bit(key, depth) {
                guard let sibling = remaining.popFirst(), let child = rebuild(depth + 1) else { return nil }
                return parentValue(sibling, child)
            }
            guard let sibling = remaining.popLast(), let child = rebuild(depth + 1) else { return nil }
            return parentValue(child, sibling)
        }
        guard let rebuilt = rebuild(0), remaining.isEmpty else { return false }
        return rebuilt == root
    }
}

/// Key transparency's commitments (draft-ietf-keytrans-protocol, "Commitment"):
/// `HMAC-SHA-256(Kc, opening ‖ label<0..2^8-1> ‖ value<0..2^32-1>)` with a 16-byte random opening
/// and the suite's fixed key `Kc`, so the log publishes a commitment to a user's identity without
/// the identity, and opens it only to whoever may read it.
public enum TransparencyCommitment {
    /// The fixed HMAC key (`d821f8790d97709796b4d7903357c3f5`).
    static let fixedKey = Data([
        0xd8, 0x21, 0xf8, 0x79, 0x0d, 0x97, 0x70, 0x97, 0x96, 0xb4, 0xd7, 0x90, 0x33, 0x57, 0xc3, 0xf5,
    ])
    /// Bytes of an opening.
    public static let openingByteCount = 16

    /// A fresh random opening.
    public static func opening() -> Data { SystemRandom.bytes(count: openingByteCount) }

    /// The commitment to `value` as `label`'s new value under `opening`.
    ///
    /// - Throws: ``CryptoError/Code/invalidParameter`` for an opening of another size or a label
    ///   over 255 bytes.
    public static func commitment(opening: Data, label: Data, value: Data) throws -> Data {
        guard opening.count == openingByteCount, label.count <= 255, value.count <= Int(UInt32.max) else {
            throw CryptoError(.invalidParameter, "a commitment takes a 16-byte opening and a label of at most 255 bytes")
        }
        var input = Data(opening)
        input.append(UInt8(label.count))
        input.append(label)
        withUnsafeBytes(of: UInt32(value.count).bigEndian) { input.append(contentsOf: $0) }
        input.append(value)
        return HMAC.authenticationCode(for: input, using: fixedKey, hash: .sha256)
    }

    /// The VRF input for `label` at `version` (`VrfInput`: `label<0..2^8-1> ‖ u32 version`).
    public static func vrfInput(label: Data, version: UInt32) throws -> Data {
        guard label.count <= 255 else { throw CryptoError(.invalidParameter, "a label is at most 255 bytes") }
        var input = Data([UInt8(label.count)])
        input.append(label)
        withUnsafeBytes(of: version.bigEndian) { input.append(contentsOf: $0) }
        return input
    }
}

/// SHA-256 over `tag? ‖ a ‖ tag2? ‖ b`, assembled in one buffer on the stack: the trees hash a
/// few hundred nodes per proof, and building each input as `Data` cost more than the hash.
enum TreeHash {
    static func hash(_ tag: UInt8?, _ a: Data, _ tag2: UInt8?, _ b: Data) -> Data {
        let count = (tag == nil ? 0 : 1) + a.count + (tag2 == nil ? 0 : 1) + b.count
        return withUnsafeTemporaryAllocation(byteCount: count, alignment: 1) { buffer in
            var offset = 0
            func put(_ byte: UInt8?) {
                guard let byte else { return }
                buffer[offset] = byte
                offset += 1
            }
            func put(_ data: Data) {
                data.withUnsafeBytes { bytes in
                    buffer.baseAddress!.advanced(by: offset).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
                }
                offset += data.count
            }
            put(tag)
            put(a)
            put(tag2)
            put(b)
            return SHA256.hash(UnsafeRawBufferPointer(buffer))
        }
    }
}
