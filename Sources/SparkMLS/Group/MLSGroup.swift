public import Foundation
public import SparkCrypto

/// One member's view of an MLS group (RFC 9420): the public tree, this member's private keys,
/// the epoch's secrets and the secret tree.
///
/// A value type with pure transitions, as `openmls` and `matrix-sdk-crypto` are sans-I/O: every
/// operation takes its randomness and time as arguments and returns the messages to send;
/// nothing is sent or stored here. A refused message throws ``MLSError`` and leaves the group as
/// it was (each operation works on a copy and keeps it only on success). ``serialized()`` gives
/// opaque bytes to store; ``init(serialized:signer:validator:)`` restores them.
public struct MLSGroup: Sendable {
    let suite: MLSCipherSuite
    var context: GroupContext
    var tree: RatchetTree
    /// This member's leaf.
    public internal(set) var ownLeaf: UInt32
    var signer: MLSSigner
    /// HPKE private keys this member holds, by node index, with the public key each belongs to.
    var nodeKeys: [UInt32: NodeKey]
    var secrets: EpochSecrets
    var secretTree: SecretTree
    var interimTranscriptHash: Data
    var confirmationTag: Data
    /// Proposals received in this epoch, by reference, in arrival order.
    var proposals: [CachedProposal] = []
    /// Encryption keys of this member's Update proposals not yet committed, by proposal reference.
    var pendingUpdateKeys: [Data: SecureBytes] = [:]
    /// Resumption PSKs of past epochs, for PreSharedKey proposals of this group.
    var resumptionPSKs: [UInt64: SecureBytes] = [:]
    /// External pre-shared keys this member knows, by PSK id.
    var externalPSKs: [Data: SecureBytes] = [:]
    /// Whether this member is still in the group (false once a commit removed it).
    public internal(set) var isActive = true
    let validator: any MLSCredentialValidator
    /// Handshake messages this member sends go out as PrivateMessages unless this is false.
    public var encryptsHandshake = true
    /// Application and handshake plaintexts are padded to a multiple of this many bytes.
    public var paddingBlock = 32

    /// How many past epochs' resumption PSKs are kept.
    static let resumptionWindow = 64

    struct NodeKey: Sendable {
        let publicKey: Data
        let privateKey: SecureBytes
    }

    struct CachedProposal: Sendable {
        let reference: Data
        let proposal: Proposal
        let sender: Sender
    }

    // MARK: - What callers see

    /// The group's id.
    public var groupID: Data { context.groupID }
    /// The current epoch.
    public var epoch: UInt64 { context.epoch }
    /// The cipher suite.
    public var cipherSuite: MLSCipherSuite { suite }
    /// The epoch authenticator (§8.7): equal at every member exactly when they agree on the epoch.
    public var epochAuthenticator: Data { secrets.authenticator.unsafeData() }

    /// A member of the group as this member sees it.
    public struct Member: Hashable, Sendable {
        /// The member's leaf index.
        public let leafIndex: UInt32
        /// The member's credential.
        public let credential: MLSCredential
        /// The member's Ed25519 signature public key.
        public let signatureKey: Data
    }

    /// The members, in leaf order.
    public var members: [Member] {
        tree.memberLeaves.compactMap { index in
            guard let leaf = tree.leaf(index), let credential = try? MLSCredential(leaf.credential) else { return nil }
            return Member(leafIndex: index, credential: credential, signatureKey: leaf.signatureKey)
        }
    }

    /// The validator that judges the credentials of leaves entering the tree.
    public var credentialValidator: any MLSCredentialValidator { validator }

    /// The number of members.
    public var memberCount: Int { tree.index.count }

    /// The member at `leaf`, if there is one.
    public func member(at leaf: UInt32) -> Member? {
        guard let node = tree.leaf(leaf), let credential = try? MLSCredential(node.credential) else { return nil }
        return Member(leafIndex: leaf, credential: credential, signatureKey: node.signatureKey)
    }

    /// `MLS-Exporter(label, context, length)` of the current epoch (§8.5).
    public func export(label: String, context exportContext: Data, length: Int) throws -> SecureBytes {
        guard length >= 0, length <= 255 * suite.hashLength else {
            throw MLSError(.invalid, "an export is at most \(255 * suite.hashLength) bytes")
        }
        return KeySchedule.export(
            suite: suite, exporterSecret: secrets.exporter, label: label, context: exportContext, length: length)
    }

    /// Adds an external pre-shared key that PreSharedKey proposals may name.
    public mutating func addExternalPSK(id: Data, secret: SecureBytes) { externalPSKs[id] = secret }

    /// The application's own group context extensions (types 0xF000 to 0xFFFF, RFC 9420 §17.3's
    /// private-use range), in order: what every member agrees on in each epoch.
    public var applicationExtensions: [MLSGroupExtension] {
        context.extensions.filter { MLSGroupExtension.range.contains($0.type) }.map {
            MLSGroupExtension(type: $0.type, data: $0.data)
        }
    }

    // MARK: - Creation

    /// A new group of one: this member at leaf 0, epoch 0 (§11), with `extensions` of the
    /// application's own in its group context.
    public static func create(
        groupID: Data, signer: MLSSigner, suite: MLSCipherSuite = .x25519AES128GCMSHA256Ed25519,
        validator: any MLSCredentialValidator = MLSAcceptAnyCredential(), extensions: [MLSGroupExtension] = [],
        random: inout some MLSRandomSource
    ) throws -> MLSGroup {
        guard !groupID.isEmpty, groupID.count <= 255 else { throw MLSError(.invalid, "a group id is 1 to 255 bytes") }
        let contextExtensions = try MLSGroupExtension.wire(extensions)
        let encryption = suite.deriveKeyPair(random.secret(count: 32))
        var leaf = LeafNode(
            encryptionKey: encryption.publicKey.rawRepresentation, signatureKey: signer.signatureKey,
            credential: signer.credential.wire, capabilities: .spark(suite), source: .commit(parentHash: Data()),
            extensions: [])
        try leaf.sign(suite: suite, key: signer.key, groupID: groupID, leafIndex: 0)
        var tree = RatchetTree(suite: suite, firstLeaf: leaf)
        let context = GroupContext(
            cipherSuite: suite.rawValue, groupID: groupID, epoch: 0, treeHash: tree.rootHash(), confirmedTranscriptHash: Data(),
            extensions: contextExtensions)
        let (_, secrets) = KeySchedule.epoch(
            suite: suite,
            joinerSecret: KeySchedule.joinerSecret(
                suite: suite, initSecret: random.secret(count: suite.hashLength),
                commitSecret: SecureBytes(zeroes: suite.hashLength), groupContext: context),
            pskSecret: nil, groupContext: context)
        let tag = suite.mac(key: secrets.confirmation, Data())
        return MLSGroup(
            suite: suite, context: context, tree: tree, ownLeaf: 0, signer: signer,
            nodeKeys: [0: NodeKey(publicKey: leaf.encryptionKey, privateKey: encryption.rawRepresentation)], secrets: secrets,
            secretTree: SecretTree(suite: suite, encryptionSecret: secrets.encryption, leafCount: tree.leafCount),
            interimTranscriptHash: TranscriptHash.interim(suite: suite, confirmed: Data(), confirmationTag: tag),
            confirmationTag: tag, validator: validator)
    }

    init(
        suite: MLSCipherSuite, context: GroupContext, tree: RatchetTree, ownLeaf: UInt32, signer: MLSSigner,
        nodeKeys: [UInt32: NodeKey], secrets: EpochSecrets, secretTree: SecretTree, interimTranscriptHash: Data,
        confirmationTag: Data, validator: any MLSCredentialValidator
    ) {
        self.suite = suite
        self.context = context
        self.tree = tree
        self.ownLeaf = ownLeaf
        self.signer = signer
        self.nodeKeys = nodeKeys
        self.secrets = secrets
        self.secretTree = secretTree
        self.interimTranscriptHash = interimTranscriptHash
        self.confirmationTag = confirmationTag
        self.validator = validator
    }

    /// This group with another credential validator: the same state, judged from now on by
    /// `validator` (the application's trust in identities changes while a group lives).
    public func withValidator(_ validator: any MLSCredentialValidator) -> MLSGroup {
        var copy = MLSGroup(
            suite: suite, context: context, tree: tree, ownLeaf: ownLeaf, signer: signer, nodeKeys: nodeKeys, secrets: secrets,
            secretTree: secretTree, interimTranscriptHash: interimTranscriptHash, confirmationTag: confirmationTag,
            validator: validator)
        copy.proposals = proposals
        copy.pendingUpdateKeys = pendingUpdateKeys
        copy.resumptionPSKs = resumptionPSKs
        copy.externalPSKs = externalPSKs
        copy.isActive = isActive
        copy.encryptsHandshake = encryptsHandshake
        copy.paddingBlock = paddingBlock
        return copy
    }

    // MARK: - Sending application messages

    /// Encrypts `plaintext` as a PrivateMessage of this epoch, with `authenticatedData` in the
    /// clear but authenticated. Each call uses, then deletes, the next key of this member's ratchet.
    public mutating func protect(
        _ plaintext: some ContiguousBytes, authenticatedData: Data = Data(), random: inout some MLSRandomSource
    ) throws -> Data {
        try requireActive()
        let data = plaintext.withUnsafeBytes { Data($0) }
        return try send(.application(data), authenticatedData: authenticatedData, encrypted: true, random: &random)
    }

    func requireActive() throws {
        guard isActive else { throw MLSError(.state, "this member was removed from the group") }
    }

    /// Frames, signs and protects content from this member; returns the MLSMessage.
    mutating func send(_ content: Content, authenticatedData: Data, encrypted: Bool, random: inout some MLSRandomSource)
        throws -> Data
    {
        let framed = FramedContent(
            groupID: context.groupID, epoch: context.epoch, sender: .member(ownLeaf), authenticatedData: authenticatedData,
            content: content)
        let wireFormat: WireFormat = encrypted ? .privateMessage : .publicMessage
        let signature = try Framing.sign(suite: suite, wireFormat: wireFormat, content: framed, context: context, key: signer.key)
        let authenticated = AuthenticatedContent(
            wireFormat: wireFormat, content: framed, auth: FramedContentAuthData(signature: signature, confirmationTag: nil))
        return try wrap(authenticated, random: &random)
    }

    mutating func wrap(_ authenticated: AuthenticatedContent, random: inout some MLSRandomSource) throws -> Data {
        switch authenticated.wireFormat {
        case .privateMessage:
            let message = try Framing.protectPrivate(
                suite: suite, authenticated, secretTree: &secretTree, senderDataSecret: secrets.senderData,
                paddingBlock: paddingBlock, random: &random)
            return MLSMessageBody.privateMessage(message).tlsEncoded
        default:
            if case .application = authenticated.content.content {
                throw MLSError(.invalid, "application data is only sent as a PrivateMessage")
            }
            let message = Framing.publicMessage(suite: suite, authenticated, membershipKey: secrets.membership, context: context)
            return MLSMessageBody.publicMessage(message).tlsEncoded
        }
    }

    // MARK: - Proposals

    /// Proposes replacing this member's leaf with a fresh encryption key (an Update, §12.1.2).
    public mutating func proposeUpdate(random: inout some MLSRandomSource) throws -> Data {
        try requireActive()
        var next = self
        let encryption = suite.deriveKeyPair(random.secret(count: 32))
        guard var leaf = tree.leaf(ownLeaf) else { throw MLSError(.state, "this member has no leaf") }
        leaf.encryptionKey = encryption.publicKey.rawRepresentation
        leaf.source = .update
        try leaf.sign(suite: suite, key: signer.key, groupID: context.groupID, leafIndex: ownLeaf)
        let message = try next.propose(.update(leaf), random: &random)
        next.pendingUpdateKeys[next.proposals.last!.reference] = encryption.rawRepresentation
        self = next
        return message
    }

    /// Proposes adding the client of `keyPackage` (an `MLSMessage` carrying a KeyPackage).
    public mutating func proposeAdd(keyPackage: Data, now: Date, random: inout some MLSRandomSource) throws -> Data {
        try requireActive()
        let package = try Self.decodeKeyPackage(keyPackage)
        try validateKeyPackage(package, now: now)
        var next = self
        let message = try next.propose(.add(package), random: &random)
        self = next
        return message
    }

    /// Proposes removing the member at `leaf`.
    public mutating func proposeRemove(leaf: UInt32, random: inout some MLSRandomSource) throws -> Data {
        try requireActive()
        guard tree.leaf(leaf) != nil else { throw MLSError(.invalid, "leaf \(leaf) holds no member") }
        var next = self
        let message = try next.propose(.remove(leaf), random: &random)
        self = next
        return message
    }

    private mutating func propose(_ proposal: Proposal, random: inout some MLSRandomSource) throws -> Data {
        let framed = FramedContent(
            groupID: context.groupID, epoch: context.epoch, sender: .member(ownLeaf), authenticatedData: Data(),
            content: .proposal(proposal))
        let wireFormat: WireFormat = encryptsHandshake ? .privateMessage : .publicMessage
        let signature = try Framing.sign(suite: suite, wireFormat: wireFormat, content: framed, context: context, key: signer.key)
        let authenticated = AuthenticatedContent(
            wireFormat: wireFormat, content: framed, auth: FramedContentAuthData(signature: signature, confirmationTag: nil))
        let reference = suite.refHash("MLS 1.0 Proposal Reference", authenticated.tlsBytes)
        proposals.append(CachedProposal(reference: reference, proposal: proposal, sender: .member(ownLeaf)))
        return try wrap(authenticated, random: &random)
    }

    static func decodeKeyPackage(_ message: Data) throws -> KeyPackage {
        guard case .keyPackage(let package) = try MLSMessageBody(tlsEncoded: message) else {
            throw MLSError(.malformed, "the message is not a KeyPackage")
        }
        return package
    }
}
