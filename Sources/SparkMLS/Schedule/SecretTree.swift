import Foundation
import SparkCrypto

/// The secret tree of one epoch (RFC 9420 §9) with its per-leaf handshake and application
/// ratchets, and the deletion schedule of §9.2: a node's secret is deleted once its children are
/// derived, a ratchet secret once the next one is, and a key and nonce once used. Keys skipped
/// by a message that arrived early are kept for later ones, at most ``skippedLimit`` per ratchet
/// and never more than ``forwardLimit`` generations ahead.
struct SecretTree: Sendable {
    enum RatchetKind: Sendable { case handshake, application }

    struct KeyAndNonce: Sendable {
        let key: SecureBytes
        let nonce: SecureBytes
    }

    struct Ratchet: Sendable {
        var secret: SecureBytes
        var generation: UInt32
        var skipped: [UInt32: KeyAndNonce] = [:]
    }

    /// How many generations ahead a message may be.
    static let forwardLimit: UInt32 = 1024
    /// How many skipped keys a ratchet keeps for messages that arrive out of order.
    static let skippedLimit = 256

    let suite: MLSCipherSuite
    let leafCount: UInt32
    private var nodeSecrets: [UInt32: SecureBytes]
    private var handshake: [LeafIndex: Ratchet] = [:]
    private var application: [LeafIndex: Ratchet] = [:]

    init(suite: MLSCipherSuite, encryptionSecret: SecureBytes, leafCount: UInt32) {
        self.suite = suite
        self.leafCount = leafCount
        nodeSecrets = [TreeMath.root(leafCount): encryptionSecret]
    }

    /// The leaf's secret, deriving down from the lowest stored ancestor and deleting each parent's
    /// secret once both children have theirs.
    private mutating func leafSecret(_ leaf: LeafIndex) throws -> SecureBytes {
        let target = leaf * 2
        if let secret = nodeSecrets.removeValue(forKey: target) { return secret }
        let path = TreeMath.directPath(target, leaves: leafCount)
        guard let start = path.firstIndex(where: { nodeSecrets[$0] != nil }) else {
            throw MLSError(.keyUnavailable, "the secrets of leaf \(leaf) were already derived and deleted")
        }
        var node = path[start]
        while node != target {
            let secret = nodeSecrets.removeValue(forKey: node)!
            let left = TreeMath.left(node)
            let right = TreeMath.right(node)
            nodeSecrets[left] = suite.expandWithLabel(secret, "tree", Array("left".utf8), suite.hashLength)
            nodeSecrets[right] = suite.expandWithLabel(secret, "tree", Array("right".utf8), suite.hashLength)
            node = TreeMath.isInSubtree(target, of: left) ? left : right
        }
        return nodeSecrets.removeValue(forKey: target)!
    }

    private mutating func withRatchet<Result>(
        _ kind: RatchetKind, _ leaf: LeafIndex, _ body: (inout Ratchet) throws -> Result
    ) throws -> Result {
        guard leaf < leafCount else { throw MLSError(.wrongGroup, "leaf \(leaf) is outside the tree") }
        var ratchet: Ratchet
        if let existing = kind == .handshake ? handshake[leaf] : application[leaf] {
            ratchet = existing
        } else {
            let secret = try leafSecret(leaf)
            handshake[leaf] = Ratchet(
                secret: suite.expandWithLabel(secret, "handshake", [UInt8](), suite.hashLength), generation: 0)
            application[leaf] = Ratchet(
                secret: suite.expandWithLabel(secret, "application", [UInt8](), suite.hashLength), generation: 0)
            ratchet = kind == .handshake ? handshake[leaf]! : application[leaf]!
        }
        let result = try body(&ratchet)
        if kind == .handshake { handshake[leaf] = ratchet } else { application[leaf] = ratchet }
        return result
    }

    private static func keyAndNonce(_ suite: MLSCipherSuite, _ secret: SecureBytes, _ generation: UInt32) -> KeyAndNonce {
        KeyAndNonce(
            key: suite.deriveTreeSecret(secret, "key", generation, suite.keyLength),
            nonce: suite.deriveTreeSecret(secret, "nonce", generation, suite.nonceLength))
    }

    private static func advance(_ suite: MLSCipherSuite, _ ratchet: inout Ratchet) -> KeyAndNonce {
        let current = keyAndNonce(suite, ratchet.secret, ratchet.generation)
        ratchet.secret = suite.deriveTreeSecret(ratchet.secret, "secret", ratchet.generation, suite.hashLength)
        ratchet.generation += 1
        return current
    }

    /// The next key and nonce to send with, and its generation; both are then deleted.
    mutating func next(_ kind: RatchetKind, for leaf: LeafIndex) throws -> (generation: UInt32, keys: KeyAndNonce) {
        let suite = suite
        return try withRatchet(kind, leaf) { ratchet in
            guard ratchet.generation < UInt32.max else { throw MLSError(.keyUnavailable, "the ratchet is spent") }
            let generation = ratchet.generation
            return (generation, Self.advance(suite, &ratchet))
        }
    }

    /// The key and nonce of `generation` for a received message; deleted as they are returned, so a
    /// second message of the same generation finds nothing.
    mutating func take(_ kind: RatchetKind, for leaf: LeafIndex, generation: UInt32) throws -> KeyAndNonce {
        let suite = suite
        return try withRatchet(kind, leaf) { ratchet in
            if generation < ratchet.generation {
                guard let keys = ratchet.skipped.removeValue(forKey: generation) else {
                    throw MLSError(.keyUnavailable, "generation \(generation) of leaf \(leaf) was used or deleted")
                }
                return keys
            }
            guard generation - ratchet.generation <= Self.forwardLimit else {
                throw MLSError(.keyUnavailable, "generation \(generation) is more than \(Self.forwardLimit) ahead")
            }
            while ratchet.generation < generation {
                let skippedGeneration = ratchet.generation
                ratchet.skipped[skippedGeneration] = Self.advance(suite, &ratchet)
                if ratchet.skipped.count > Self.skippedLimit, let oldest = ratchet.skipped.keys.min() {
                    ratchet.skipped.removeValue(forKey: oldest)
                }
            }
            return Self.advance(suite, &ratchet)
        }
    }

    /// The key and nonce that protect sender data (§6.3.2), from the ciphertext's first bytes.
    static func senderDataKeys(suite: MLSCipherSuite, senderDataSecret: SecureBytes, ciphertext: Data) -> KeyAndNonce {
        let sample = ciphertext.prefix(suite.hashLength)
        return KeyAndNonce(
            key: suite.expandWithLabel(senderDataSecret, "key", sample, suite.keyLength),
            nonce: suite.expandWithLabel(senderDataSecret, "nonce", sample, suite.nonceLength))
    }
}

extension SecretTree {
    /// The tree's remaining secrets, for the group's storage.
    func encode(to writer: inout TLSWriter) {
        writer.u32(leafCount)
        writer.vector { inner in
            for (node, secret) in nodeSecrets.sorted(by: { $0.key < $1.key }) {
                inner.u32(node)
                inner.opaque(secret)
            }
        }
        for ratchets in [handshake, application] {
            writer.vector { inner in
                for (leaf, ratchet) in ratchets.sorted(by: { $0.key < $1.key }) {
                    inner.u32(leaf)
                    inner.opaque(ratchet.secret)
                    inner.u32(ratchet.generation)
                    inner.vector { skipped in
                        for (generation, keys) in ratchet.skipped.sorted(by: { $0.key < $1.key }) {
                            skipped.u32(generation)
                            skipped.opaque(keys.key)
                            skipped.opaque(keys.nonce)
                        }
                    }
                }
            }
        }
    }

    init(suite: MLSCipherSuite, from reader: inout TLSReader) throws {
        self.suite = suite
        leafCount = try reader.u32("leaf count")
        guard leafCount > 0, leafCount.nonzeroBitCount == 1 else {
            throw MLSError(.malformed, "a secret tree of \(leafCount) leaves")
        }
        nodeSecrets = try reader.vector("node secrets") { inner in
            var secrets: [UInt32: SecureBytes] = [:]
            while !inner.isAtEnd { secrets[try inner.u32("node")] = SecureBytes(try inner.opaque("secret")) }
            return secrets
        }
        var both: [[LeafIndex: Ratchet]] = []
        for name in ["handshake ratchets", "application ratchets"] {
            both.append(
                try reader.vector(name) { inner in
                    var ratchets: [LeafIndex: Ratchet] = [:]
                    while !inner.isAtEnd {
                        let leaf = try inner.u32("leaf")
                        var ratchet = Ratchet(
                            secret: SecureBytes(try inner.opaque("secret")), generation: try inner.u32("generation"))
                        ratchet.skipped = try inner.vector("skipped keys") { skipped in
                            var keys: [UInt32: KeyAndNonce] = [:]
                            while !skipped.isAtEnd {
                                keys[try skipped.u32("generation")] = KeyAndNonce(
                                    key: SecureBytes(try skipped.opaque("key")), nonce: SecureBytes(try skipped.opaque("nonce")))
                            }
                            return keys
                        }
                        ratchets[leaf] = ratchet
                    }
                    return ratchets
                })
        }
        handshake = both[0]
        application = both[1]
    }
}
