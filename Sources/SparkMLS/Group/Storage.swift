public import Foundation
public import SparkCrypto

extension MLSGroup {
    /// The storage format's version: the whole state in one value.
    static let storageVersion: UInt8 = 1
    /// The version of the epoch state stored apart from the ratchets (``serializedEpoch()``).
    static let epochStorageVersion: UInt8 = 2
    /// The version of the ratchets stored apart (``serializedRatchets()``).
    static let ratchetsStorageVersion: UInt8 = 1

    /// The whole group state as opaque bytes for this member's storage. They hold private keys
    /// and the epoch's secrets: keep them encrypted at rest.
    public func serialized() -> SecureBytes { encoded(withRatchets: true) }

    /// The group's epoch state without its ratchets: what changes only at a commit (the tree,
    /// this member's private keys, the epoch's secrets). With ``serializedRatchets()`` it is the
    /// whole state, stored in two parts so that a message, which moves only a ratchet, rewrites
    /// only the ratchets (as openmls's storage provider keeps them apart). Keep both encrypted.
    public func serializedEpoch() -> SecureBytes { encoded(withRatchets: false) }

    /// The secret tree's ratchets: what a message sent or opened changes. Small whatever the
    /// group's size (the secrets along one path, and the ratchets of the members who sent).
    public func serializedRatchets() -> SecureBytes {
        var writer = TLSWriter()
        writer.u8(Self.ratchetsStorageVersion)
        writer.u64(context.epoch)
        secretTree.encode(to: &writer)
        return SecureBytes(writer.bytes)
    }

    private func encoded(withRatchets: Bool) -> SecureBytes {
        var writer = TLSWriter()
        writer.u8(withRatchets ? Self.storageVersion : Self.epochStorageVersion)
        writer.u16(suite.rawValue)
        writer.write(context)
        writer.write(tree.encoding)
        writer.u32(ownLeaf)
        writer.write(signer.credential.wire)
        writer.opaque(signer.key.rawRepresentation)
        writer.vector { inner in
            for (node, key) in nodeKeys.sorted(by: { $0.key < $1.key }) {
                inner.u32(node)
                inner.opaque(key.publicKey)
                inner.opaque(key.privateKey)
            }
        }
        for secret in [
            secrets.senderData, secrets.encryption, secrets.exporter, secrets.external, secrets.confirmation,
            secrets.membership, secrets.resumption, secrets.authenticator, secrets.initSecret,
        ] {
            writer.opaque(secret)
        }
        if withRatchets { secretTree.encode(to: &writer) }
        writer.opaque(interimTranscriptHash)
        writer.opaque(confirmationTag)
        writer.vector { inner in
            for cached in proposals {
                inner.opaque(cached.reference)
                inner.write(cached.proposal)
                inner.write(cached.sender)
            }
        }
        writer.vector { inner in
            for (reference, key) in pendingUpdateKeys.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
                inner.opaque(reference)
                inner.opaque(key)
            }
        }
        writer.vector { inner in
            for (epoch, secret) in resumptionPSKs.sorted(by: { $0.key < $1.key }) {
                inner.u64(epoch)
                inner.opaque(secret)
            }
        }
        writer.vector { inner in
            for (id, secret) in externalPSKs.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
                inner.opaque(id)
                inner.opaque(secret)
            }
        }
        writer.u8(isActive ? 1 : 0)
        writer.u8(encryptsHandshake ? 1 : 0)
        writer.u32(UInt32(paddingBlock))
        return SecureBytes(writer.bytes)
    }

    /// A group from ``serialized()``, with the credential validator to use from now on. Bytes
    /// that are not such a state are refused as `malformed`.
    public init(serialized: some ContiguousBytes, validator: any MLSCredentialValidator = MLSAcceptAnyCredential()) throws {
        var reader = TLSReader(serialized)
        guard try reader.u8("storage version") == Self.storageVersion else {
            throw MLSError(.unsupported, "a group state of another storage version")
        }
        try self.init(reading: &reader, ratchets: nil, validator: validator)
    }

    /// A group from ``serializedEpoch()`` and ``serializedRatchets()`` of the same epoch; parts
    /// of different epochs, or that are not such parts, are refused as `malformed`.
    public init(
        epoch: some ContiguousBytes, ratchets: some ContiguousBytes,
        validator: any MLSCredentialValidator = MLSAcceptAnyCredential()
    ) throws {
        var reader = TLSReader(epoch)
        guard try reader.u8("storage version") == Self.epochStorageVersion else {
            throw MLSError(.unsupported, "an epoch state of another storage version")
        }
        var ratchetReader = TLSReader(ratchets)
        guard try ratchetReader.u8("ratchets storage version") == Self.ratchetsStorageVersion else {
            throw MLSError(.unsupported, "ratchets of another storage version")
        }
        let ratchetsEpoch = try ratchetReader.u64("ratchets epoch")
        try self.init(reading: &reader, ratchets: (ratchetsEpoch, ratchetReader), validator: validator)
    }

    /// Reads the state after its version byte; the secret tree inline when `ratchets` is nil,
    /// else from `ratchets` (whose epoch must be the state's).
    private init(
        reading reader: inout TLSReader, ratchets: (epoch: UInt64, reader: TLSReader)?, validator: any MLSCredentialValidator
    ) throws {
        let suite = try MLSCipherSuite(rawValue: try reader.u16("cipher suite"))
        let context = try reader.read(GroupContext.self)
        let tree = try RatchetTree(suite: suite, encoded: try reader.read(RatchetTreeEncoding.self))
        let ownLeaf = try reader.u32("own leaf")
        let credential = try MLSCredential(try reader.read(Credential.self))
        let signer = MLSSigner(credential: credential, key: try suite.signaturePrivateKey(try reader.opaque("signature key")))
        let nodeKeys = try reader.vector("node keys") { inner in
            var keys: [UInt32: NodeKey] = [:]
            while !inner.isAtEnd {
                keys[try inner.u32("node")] = NodeKey(
                    publicKey: try inner.opaque("public key"), privateKey: SecureBytes(try inner.opaque("private key")))
            }
            return keys
        }
        var values: [SecureBytes] = []
        for _ in 0..<9 { values.append(SecureBytes(try reader.opaque("epoch secret"))) }
        var secrets = EpochSecrets(suite: suite, epochSecret: SecureBytes(zeroes: suite.hashLength))
        secrets.senderData = values[0]
        secrets.encryption = values[1]
        secrets.exporter = values[2]
        secrets.external = values[3]
        secrets.confirmation = values[4]
        secrets.membership = values[5]
        secrets.resumption = values[6]
        secrets.authenticator = values[7]
        secrets.initSecret = values[8]
        let secretTree: SecretTree
        if var ratchets {
            guard ratchets.epoch == context.epoch else {
                throw MLSError(.malformed, "ratchets of epoch \(ratchets.epoch) with the state of epoch \(context.epoch)")
            }
            secretTree = try SecretTree(suite: suite, from: &ratchets.reader)
            try ratchets.reader.finish("ratchets")
        } else {
            secretTree = try SecretTree(suite: suite, from: &reader)
        }
        guard secretTree.leafCount == tree.leafCount, tree.leaf(ownLeaf) != nil else {
            throw MLSError(.malformed, "a group state whose parts disagree")
        }
        self.init(
            suite: suite, context: context, tree: tree, ownLeaf: ownLeaf, signer: signer, nodeKeys: nodeKeys, secrets: secrets,
            secretTree: secretTree, interimTranscriptHash: try reader.opaque("interim transcript hash"),
            confirmationTag: try reader.opaque("confirmation tag"), validator: validator)
        proposals = try reader.vector("proposals") { inner in
            var list: [CachedProposal] = []
            while !inner.isAtEnd {
                list.append(
                    CachedProposal(
                        reference: try inner.opaque("reference"), proposal: try inner.read(), sender: try inner.read()))
            }
            return list
        }
        pendingUpdateKeys = try Self.readSecrets(&reader, "pending update keys") { try $0.opaque("reference") }
        resumptionPSKs = try Self.readSecrets(&reader, "resumption PSKs") { try $0.u64("epoch") }
        externalPSKs = try Self.readSecrets(&reader, "external PSKs") { try $0.opaque("PSK id") }
        isActive = try reader.u8("active") == 1
        encryptsHandshake = try reader.u8("encrypts handshake") == 1
        paddingBlock = Int(try reader.u32("padding block"))
        try reader.finish("group state")
    }

    private static func readSecrets<Key: Hashable>(
        _ reader: inout TLSReader, _ what: String, key: (inout TLSReader) throws -> Key
    ) throws -> [Key: SecureBytes] {
        try reader.vector(what) { inner in
            var values: [Key: SecureBytes] = [:]
            while !inner.isAtEnd { values[try key(&inner)] = SecureBytes(try inner.opaque(what)) }
            return values
        }
    }
}
