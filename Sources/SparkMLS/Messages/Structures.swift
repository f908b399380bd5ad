import Foundation

// The structures of RFC 9420 with their TLS encodings, field for field. Semantics (signatures,
// validation) live with the code that uses them; these only encode and decode, strictly.

/// A leaf's position among the leaves of the tree.
typealias LeafIndex = UInt32

/// The protocol version `mls10`, the only one.
let mls10: UInt16 = 1

/// Extension types (RFC 9420 §17.3).
enum ExtensionType {
    static let applicationID: UInt16 = 1
    static let ratchetTree: UInt16 = 2
    static let requiredCapabilities: UInt16 = 3
    static let externalPub: UInt16 = 4
    static let externalSenders: UInt16 = 5
    /// The types with a meaning here; others are carried and ignored, as §13.4 allows.
    static let known: Set<UInt16> = [1, 2, 3, 4, 5]
}

/// Proposal types (RFC 9420 §17.4).
enum ProposalType {
    static let add: UInt16 = 1
    static let update: UInt16 = 2
    static let remove: UInt16 = 3
    static let preSharedKey: UInt16 = 4
    static let reInit: UInt16 = 5
    static let externalInit: UInt16 = 6
    static let groupContextExtensions: UInt16 = 7
    static let defaults: Set<UInt16> = [1, 2, 3, 4, 5, 6, 7]
}

/// Credential types (RFC 9420 §17.5).
enum CredentialType {
    static let basic: UInt16 = 1
    static let x509: UInt16 = 2
}

/// Wire formats (RFC 9420 §17.2).
enum WireFormat: UInt16 {
    case publicMessage = 1
    case privateMessage = 2
    case welcome = 3
    case groupInfo = 4
    case keyPackage = 5

    init(from reader: inout TLSReader) throws {
        let value = try reader.u16("wire_format")
        guard let format = WireFormat(rawValue: value) else { throw MLSError(.malformed, "unknown wire format \(value)") }
        self = format
    }
}

struct Extension: TLSCodable, Hashable, Sendable {
    var type: UInt16
    var data: Data

    func encode(to writer: inout TLSWriter) {
        writer.u16(type)
        writer.opaque(data)
    }

    init(type: UInt16, data: Data) {
        self.type = type
        self.data = data
    }

    init(from reader: inout TLSReader) throws {
        type = try reader.u16("extension_type")
        data = try reader.opaque("extension_data")
    }
}

extension [Extension] {
    /// The data of the extension of `type`, if there is one.
    func data(of type: UInt16) -> Data? { first { $0.type == type }?.data }

    /// Whether two extensions share a type (forbidden in every list, §13.4).
    var hasDuplicates: Bool { Set(map(\.type)).count != count }
}

struct Credential: TLSCodable, Hashable, Sendable {
    enum Kind: Hashable, Sendable {
        case basic(identity: Data)
        case x509(certificates: [Data])
    }

    var kind: Kind

    var type: UInt16 {
        switch kind {
        case .basic: CredentialType.basic
        case .x509: CredentialType.x509
        }
    }

    init(_ kind: Kind) { self.kind = kind }

    func encode(to writer: inout TLSWriter) {
        writer.u16(type)
        switch kind {
        case .basic(let identity): writer.opaque(identity)
        case .x509(let certificates): writer.vector(certificates.map(Opaque.init))
        }
    }

    init(from reader: inout TLSReader) throws {
        switch try reader.u16("credential_type") {
        case CredentialType.basic: kind = .basic(identity: try reader.opaque("identity"))
        case CredentialType.x509: kind = .x509(certificates: try reader.vector("certificates", of: Opaque.self).map(\.bytes))
        case let other: throw MLSError(.unsupported, "credential type \(other) has no known encoding")
        }
    }
}

struct Capabilities: TLSCodable, Hashable, Sendable {
    var versions: [UInt16]
    var cipherSuites: [UInt16]
    var extensions: [UInt16]
    var proposals: [UInt16]
    var credentials: [UInt16]

    func encode(to writer: inout TLSWriter) {
        writer.vector(versions)
        writer.vector(cipherSuites)
        writer.vector(extensions)
        writer.vector(proposals)
        writer.vector(credentials)
    }

    init(versions: [UInt16], cipherSuites: [UInt16], extensions: [UInt16], proposals: [UInt16], credentials: [UInt16]) {
        self.versions = versions
        self.cipherSuites = cipherSuites
        self.extensions = extensions
        self.proposals = proposals
        self.credentials = credentials
    }

    init(from reader: inout TLSReader) throws {
        versions = try reader.vector("versions")
        cipherSuites = try reader.vector("cipher_suites")
        extensions = try reader.vector("extensions")
        proposals = try reader.vector("proposals")
        credentials = try reader.vector("credentials")
    }
}

struct Lifetime: TLSCodable, Hashable, Sendable {
    var notBefore: UInt64
    var notAfter: UInt64

    func encode(to writer: inout TLSWriter) {
        writer.u64(notBefore)
        writer.u64(notAfter)
    }

    init(notBefore: UInt64, notAfter: UInt64) {
        self.notBefore = notBefore
        self.notAfter = notAfter
    }

    init(from reader: inout TLSReader) throws {
        notBefore = try reader.u64("not_before")
        notAfter = try reader.u64("not_after")
    }
}

enum LeafNodeSource: Hashable, Sendable {
    case keyPackage(Lifetime)
    case update
    case commit(parentHash: Data)

    var rawValue: UInt8 {
        switch self {
        case .keyPackage: 1
        case .update: 2
        case .commit: 3
        }
    }
}

struct LeafNode: TLSCodable, Hashable, Sendable {
    var encryptionKey: Data { didSet { encoded = nil } }
    var signatureKey: Data { didSet { encoded = nil } }
    var credential: Credential { didSet { encoded = nil } }
    var capabilities: Capabilities { didSet { encoded = nil } }
    var source: LeafNodeSource { didSet { encoded = nil } }
    var extensions: [Extension] { didSet { encoded = nil } }
    var signature: Data { didSet { encoded = nil } }
    /// The bytes this leaf was decoded from, and where its signature starts: a joiner hashes and
    /// checks every leaf of the tree, and re-encoding each is most of that work. Any change clears it.
    private var encoded: (bytes: [UInt8], contentCount: Int)?

    static func == (lhs: LeafNode, rhs: LeafNode) -> Bool {
        lhs.encryptionKey == rhs.encryptionKey && lhs.signatureKey == rhs.signatureKey && lhs.credential == rhs.credential
            && lhs.capabilities == rhs.capabilities && lhs.source == rhs.source && lhs.extensions == rhs.extensions
            && lhs.signature == rhs.signature
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(encryptionKey)
        hasher.combine(signatureKey)
        hasher.combine(signature)
    }

    init(
        encryptionKey: Data, signatureKey: Data, credential: Credential, capabilities: Capabilities,
        source: LeafNodeSource, extensions: [Extension], signature: Data = Data()
    ) {
        self.encryptionKey = encryptionKey
        self.signatureKey = signatureKey
        self.credential = credential
        self.capabilities = capabilities
        self.source = source
        self.extensions = extensions
        self.signature = signature
    }

    private func encodeContent(to writer: inout TLSWriter) {
        writer.opaque(encryptionKey)
        writer.opaque(signatureKey)
        writer.write(credential)
        writer.write(capabilities)
        writer.u8(source.rawValue)
        switch source {
        case .keyPackage(let lifetime): writer.write(lifetime)
        case .update: break
        case .commit(let parentHash): writer.opaque(parentHash)
        }
        writer.vector(extensions)
    }

    /// `LeafNodeTBS`: the content, then the group and leaf for leaves made in a group.
    func signedContent(groupID: Data, leafIndex: LeafIndex) -> [UInt8] {
        var writer = TLSWriter()
        if let encoded {
            writer.raw(encoded.bytes[0..<encoded.contentCount])
        } else {
            encodeContent(to: &writer)
        }
        switch source {
        case .keyPackage: break
        case .update, .commit:
            writer.opaque(groupID)
            writer.u32(leafIndex)
        }
        return writer.bytes
    }

    var parentHash: Data? {
        if case .commit(let hash) = source { return hash }
        return nil
    }

    func encode(to writer: inout TLSWriter) {
        if let encoded {
            writer.raw(encoded.bytes)
            return
        }
        encodeContent(to: &writer)
        writer.opaque(signature)
    }

    init(from reader: inout TLSReader) throws {
        let start = reader.position
        encryptionKey = try reader.opaque("encryption_key")
        signatureKey = try reader.opaque("signature_key")
        credential = try reader.read()
        capabilities = try reader.read()
        switch try reader.u8("leaf_node_source") {
        case 1: source = .keyPackage(try reader.read())
        case 2: source = .update
        case 3: source = .commit(parentHash: try reader.opaque("parent_hash"))
        case let other: throw MLSError(.malformed, "unknown leaf node source \(other)")
        }
        extensions = try reader.vector("extensions")
        let contentEnd = reader.position
        signature = try reader.opaque("signature")
        encoded = (reader.bytes(from: start), contentEnd - start)
    }
}

struct KeyPackage: TLSCodable, Hashable, Sendable {
    var version: UInt16
    var cipherSuite: UInt16
    var initKey: Data
    var leafNode: LeafNode
    var extensions: [Extension]
    var signature: Data

    init(
        version: UInt16, cipherSuite: UInt16, initKey: Data, leafNode: LeafNode, extensions: [Extension],
        signature: Data = Data()
    ) {
        self.version = version
        self.cipherSuite = cipherSuite
        self.initKey = initKey
        self.leafNode = leafNode
        self.extensions = extensions
        self.signature = signature
    }

    /// `KeyPackageTBS`.
    var signedContent: [UInt8] {
        var writer = TLSWriter()
        writer.u16(version)
        writer.u16(cipherSuite)
        writer.opaque(initKey)
        writer.write(leafNode)
        writer.vector(extensions)
        return writer.bytes
    }

    func encode(to writer: inout TLSWriter) {
        writer.raw(signedContent)
        writer.opaque(signature)
    }

    init(from reader: inout TLSReader) throws {
        version = try reader.u16("version")
        cipherSuite = try reader.u16("cipher_suite")
        initKey = try reader.opaque("init_key")
        leafNode = try reader.read()
        extensions = try reader.vector("extensions")
        signature = try reader.opaque("signature")
    }
}

struct ParentNode: TLSCodable, Hashable, Sendable {
    var encryptionKey: Data
    var parentHash: Data
    var unmergedLeaves: [LeafIndex]

    init(encryptionKey: Data, parentHash: Data, unmergedLeaves: [LeafIndex]) {
        self.encryptionKey = encryptionKey
        self.parentHash = parentHash
        self.unmergedLeaves = unmergedLeaves
    }

    func encode(to writer: inout TLSWriter) {
        writer.opaque(encryptionKey)
        writer.opaque(parentHash)
        writer.vector(unmergedLeaves)
    }

    init(from reader: inout TLSReader) throws {
        encryptionKey = try reader.opaque("encryption_key")
        parentHash = try reader.opaque("parent_hash")
        unmergedLeaves = try reader.vector("unmerged_leaves")
    }
}

enum Node: TLSCodable, Hashable, Sendable {
    case leaf(LeafNode)
    case parent(ParentNode)

    var encryptionKey: Data {
        switch self {
        case .leaf(let leaf): leaf.encryptionKey
        case .parent(let parent): parent.encryptionKey
        }
    }

    func encode(to writer: inout TLSWriter) {
        switch self {
        case .leaf(let leaf):
            writer.u8(1)
            writer.write(leaf)
        case .parent(let parent):
            writer.u8(2)
            writer.write(parent)
        }
    }

    init(from reader: inout TLSReader) throws {
        switch try reader.u8("node_type") {
        case 1: self = .leaf(try reader.read())
        case 2: self = .parent(try reader.read())
        case let other: throw MLSError(.malformed, "unknown node type \(other)")
        }
    }
}

struct HPKECiphertext: TLSCodable, Hashable, Sendable {
    var kemOutput: Data
    var ciphertext: Data

    init(kemOutput: Data, ciphertext: Data) {
        self.kemOutput = kemOutput
        self.ciphertext = ciphertext
    }

    func encode(to writer: inout TLSWriter) {
        writer.opaque(kemOutput)
        writer.opaque(ciphertext)
    }

    init(from reader: inout TLSReader) throws {
        kemOutput = try reader.opaque("kem_output")
        ciphertext = try reader.opaque("ciphertext")
    }
}

struct UpdatePathNode: TLSCodable, Hashable, Sendable {
    var encryptionKey: Data
    var encryptedPathSecret: [HPKECiphertext]

    func encode(to writer: inout TLSWriter) {
        writer.opaque(encryptionKey)
        writer.vector(encryptedPathSecret)
    }

    init(encryptionKey: Data, encryptedPathSecret: [HPKECiphertext]) {
        self.encryptionKey = encryptionKey
        self.encryptedPathSecret = encryptedPathSecret
    }

    init(from reader: inout TLSReader) throws {
        encryptionKey = try reader.opaque("encryption_key")
        encryptedPathSecret = try reader.vector("encrypted_path_secret")
    }
}

struct UpdatePath: TLSCodable, Hashable, Sendable {
    var leafNode: LeafNode
    var nodes: [UpdatePathNode]

    func encode(to writer: inout TLSWriter) {
        writer.write(leafNode)
        writer.vector(nodes)
    }

    init(leafNode: LeafNode, nodes: [UpdatePathNode]) {
        self.leafNode = leafNode
        self.nodes = nodes
    }

    init(from reader: inout TLSReader) throws {
        leafNode = try reader.read()
        nodes = try reader.vector("nodes")
    }
}

struct PreSharedKeyID: TLSCodable, Hashable, Sendable {
    enum Kind: Hashable, Sendable {
        case external(id: Data)
        /// `usage` 1 application, 2 reinit, 3 branch.
        case resumption(usage: UInt8, groupID: Data, epoch: UInt64)
    }

    var kind: Kind
    var nonce: Data

    init(kind: Kind, nonce: Data) {
        self.kind = kind
        self.nonce = nonce
    }

    func encode(to writer: inout TLSWriter) {
        switch kind {
        case .external(let id):
            writer.u8(1)
            writer.opaque(id)
        case .resumption(let usage, let groupID, let epoch):
            writer.u8(2)
            writer.u8(usage)
            writer.opaque(groupID)
            writer.u64(epoch)
        }
        writer.opaque(nonce)
    }

    init(from reader: inout TLSReader) throws {
        switch try reader.u8("psktype") {
        case 1: kind = .external(id: try reader.opaque("psk_id"))
        case 2:
            let usage = try reader.u8("usage")
            guard (1...3).contains(usage) else { throw MLSError(.malformed, "unknown resumption PSK usage \(usage)") }
            kind = .resumption(usage: usage, groupID: try reader.opaque("psk_group_id"), epoch: try reader.u64("psk_epoch"))
        case let other: throw MLSError(.malformed, "unknown PSK type \(other)")
        }
        nonce = try reader.opaque("psk_nonce")
    }
}

enum Proposal: TLSCodable, Hashable, Sendable {
    case add(KeyPackage)
    case update(LeafNode)
    case remove(LeafIndex)
    case preSharedKey(PreSharedKeyID)
    case reInit(groupID: Data, version: UInt16, cipherSuite: UInt16, extensions: [Extension])
    case externalInit(kemOutput: Data)
    case groupContextExtensions([Extension])

    var type: UInt16 {
        switch self {
        case .add: ProposalType.add
        case .update: ProposalType.update
        case .remove: ProposalType.remove
        case .preSharedKey: ProposalType.preSharedKey
        case .reInit: ProposalType.reInit
        case .externalInit: ProposalType.externalInit
        case .groupContextExtensions: ProposalType.groupContextExtensions
        }
    }

    func encode(to writer: inout TLSWriter) {
        writer.u16(type)
        switch self {
        case .add(let keyPackage): writer.write(keyPackage)
        case .update(let leaf): writer.write(leaf)
        case .remove(let removed): writer.u32(removed)
        case .preSharedKey(let id): writer.write(id)
        case .reInit(let groupID, let version, let cipherSuite, let extensions):
            writer.opaque(groupID)
            writer.u16(version)
            writer.u16(cipherSuite)
            writer.vector(extensions)
        case .externalInit(let kemOutput): writer.opaque(kemOutput)
        case .groupContextExtensions(let extensions): writer.vector(extensions)
        }
    }

    init(from reader: inout TLSReader) throws {
        switch try reader.u16("proposal_type") {
        case ProposalType.add: self = .add(try reader.read())
        case ProposalType.update: self = .update(try reader.read())
        case ProposalType.remove: self = .remove(try reader.u32("removed"))
        case ProposalType.preSharedKey: self = .preSharedKey(try reader.read())
        case ProposalType.reInit:
            self = .reInit(
                groupID: try reader.opaque("group_id"), version: try reader.u16("version"),
                cipherSuite: try reader.u16("cipher_suite"), extensions: try reader.vector("extensions"))
        case ProposalType.externalInit: self = .externalInit(kemOutput: try reader.opaque("kem_output"))
        case ProposalType.groupContextExtensions: self = .groupContextExtensions(try reader.vector("extensions"))
        case let other: throw MLSError(.unsupported, "proposal type \(other) is not known")
        }
    }
}

enum ProposalOrRef: TLSCodable, Hashable, Sendable {
    case proposal(Proposal)
    case reference(Data)

    func encode(to writer: inout TLSWriter) {
        switch self {
        case .proposal(let proposal):
            writer.u8(1)
            writer.write(proposal)
        case .reference(let reference):
            writer.u8(2)
            writer.opaque(reference)
        }
    }

    init(from reader: inout TLSReader) throws {
        switch try reader.u8("ProposalOrRefType") {
        case 1: self = .proposal(try reader.read())
        case 2: self = .reference(try reader.opaque("reference"))
        case let other: throw MLSError(.malformed, "unknown ProposalOrRefType \(other)")
        }
    }
}

struct Commit: TLSCodable, Hashable, Sendable {
    var proposals: [ProposalOrRef]
    var path: UpdatePath?

    init(proposals: [ProposalOrRef], path: UpdatePath?) {
        self.proposals = proposals
        self.path = path
    }

    func encode(to writer: inout TLSWriter) {
        writer.vector(proposals)
        writer.optional(path)
    }

    init(from reader: inout TLSReader) throws {
        proposals = try reader.vector("proposals")
        path = try reader.optional("path")
    }
}

enum Sender: TLSCodable, Hashable, Sendable {
    case member(LeafIndex)
    case external(UInt32)
    case newMemberProposal
    case newMemberCommit

    func encode(to writer: inout TLSWriter) {
        switch self {
        case .member(let leaf):
            writer.u8(1)
            writer.u32(leaf)
        case .external(let index):
            writer.u8(2)
            writer.u32(index)
        case .newMemberProposal: writer.u8(3)
        case .newMemberCommit: writer.u8(4)
        }
    }

    init(from reader: inout TLSReader) throws {
        switch try reader.u8("sender_type") {
        case 1: self = .member(try reader.u32("leaf_index"))
        case 2: self = .external(try reader.u32("sender_index"))
        case 3: self = .newMemberProposal
        case 4: self = .newMemberCommit
        case let other: throw MLSError(.malformed, "unknown sender type \(other)")
        }
    }
}

enum ContentType: UInt8, Sendable {
    case application = 1
    case proposal = 2
    case commit = 3

    init(from reader: inout TLSReader) throws {
        let value = try reader.u8("content_type")
        guard let type = ContentType(rawValue: value) else { throw MLSError(.malformed, "unknown content type \(value)") }
        self = type
    }
}

enum Content: Hashable, Sendable {
    case application(Data)
    case proposal(Proposal)
    case commit(Commit)

    var type: ContentType {
        switch self {
        case .application: .application
        case .proposal: .proposal
        case .commit: .commit
        }
    }

    func encodeBody(to writer: inout TLSWriter) {
        switch self {
        case .application(let data): writer.opaque(data)
        case .proposal(let proposal): writer.write(proposal)
        case .commit(let commit): writer.write(commit)
        }
    }

    init(type: ContentType, from reader: inout TLSReader) throws {
        switch type {
        case .application: self = .application(try reader.opaque("application_data"))
        case .proposal: self = .proposal(try reader.read())
        case .commit: self = .commit(try reader.read())
        }
    }
}

struct FramedContent: TLSCodable, Hashable, Sendable {
    var groupID: Data
    var epoch: UInt64
    var sender: Sender
    var authenticatedData: Data
    var content: Content

    init(groupID: Data, epoch: UInt64, sender: Sender, authenticatedData: Data, content: Content) {
        self.groupID = groupID
        self.epoch = epoch
        self.sender = sender
        self.authenticatedData = authenticatedData
        self.content = content
    }

    func encode(to writer: inout TLSWriter) {
        writer.opaque(groupID)
        writer.u64(epoch)
        writer.write(sender)
        writer.opaque(authenticatedData)
        writer.u8(content.type.rawValue)
        content.encodeBody(to: &writer)
    }

    init(from reader: inout TLSReader) throws {
        groupID = try reader.opaque("group_id")
        epoch = try reader.u64("epoch")
        sender = try reader.read()
        authenticatedData = try reader.opaque("authenticated_data")
        content = try Content(type: try ContentType(from: &reader), from: &reader)
    }
}

struct FramedContentAuthData: Hashable, Sendable {
    var signature: Data
    /// Present exactly when the content is a commit.
    var confirmationTag: Data?

    func encode(to writer: inout TLSWriter) {
        writer.opaque(signature)
        if let confirmationTag { writer.opaque(confirmationTag) }
    }

    init(signature: Data, confirmationTag: Data?) {
        self.signature = signature
        self.confirmationTag = confirmationTag
    }

    init(contentType: ContentType, from reader: inout TLSReader) throws {
        signature = try reader.opaque("signature")
        confirmationTag = contentType == .commit ? try reader.opaque("confirmation_tag") : nil
    }
}

struct PublicMessage: TLSCodable, Hashable, Sendable {
    var content: FramedContent
    var auth: FramedContentAuthData
    /// Present exactly when the sender is a member.
    var membershipTag: Data?

    init(content: FramedContent, auth: FramedContentAuthData, membershipTag: Data?) {
        self.content = content
        self.auth = auth
        self.membershipTag = membershipTag
    }

    func encode(to writer: inout TLSWriter) {
        writer.write(content)
        auth.encode(to: &writer)
        if let membershipTag { writer.opaque(membershipTag) }
    }

    init(from reader: inout TLSReader) throws {
        content = try reader.read()
        auth = try FramedContentAuthData(contentType: content.content.type, from: &reader)
        if case .member = content.sender {
            membershipTag = try reader.opaque("membership_tag")
        } else {
            membershipTag = nil
        }
    }
}

struct PrivateMessage: TLSCodable, Hashable, Sendable {
    var groupID: Data
    var epoch: UInt64
    var contentType: ContentType
    var authenticatedData: Data
    var encryptedSenderData: Data
    var ciphertext: Data

    init(
        groupID: Data, epoch: UInt64, contentType: ContentType, authenticatedData: Data, encryptedSenderData: Data,
        ciphertext: Data
    ) {
        self.groupID = groupID
        self.epoch = epoch
        self.contentType = contentType
        self.authenticatedData = authenticatedData
        self.encryptedSenderData = encryptedSenderData
        self.ciphertext = ciphertext
    }

    func encode(to writer: inout TLSWriter) {
        writer.opaque(groupID)
        writer.u64(epoch)
        writer.u8(contentType.rawValue)
        writer.opaque(authenticatedData)
        writer.opaque(encryptedSenderData)
        writer.opaque(ciphertext)
    }

    init(from reader: inout TLSReader) throws {
        groupID = try reader.opaque("group_id")
        epoch = try reader.u64("epoch")
        contentType = try ContentType(from: &reader)
        authenticatedData = try reader.opaque("authenticated_data")
        encryptedSenderData = try reader.opaque("encrypted_sender_data")
        ciphertext = try reader.opaque("ciphertext")
    }
}

struct GroupContext: TLSCodable, Hashable, Sendable {
    var version: UInt16 = mls10
    var cipherSuite: UInt16
    var groupID: Data
    var epoch: UInt64
    var treeHash: Data
    var confirmedTranscriptHash: Data
    var extensions: [Extension]

    init(
        cipherSuite: UInt16, groupID: Data, epoch: UInt64, treeHash: Data, confirmedTranscriptHash: Data,
        extensions: [Extension]
    ) {
        self.cipherSuite = cipherSuite
        self.groupID = groupID
        self.epoch = epoch
        self.treeHash = treeHash
        self.confirmedTranscriptHash = confirmedTranscriptHash
        self.extensions = extensions
    }

    func encode(to writer: inout TLSWriter) {
        writer.u16(version)
        writer.u16(cipherSuite)
        writer.opaque(groupID)
        writer.u64(epoch)
        writer.opaque(treeHash)
        writer.opaque(confirmedTranscriptHash)
        writer.vector(extensions)
    }

    init(from reader: inout TLSReader) throws {
        version = try reader.u16("version")
        cipherSuite = try reader.u16("cipher_suite")
        groupID = try reader.opaque("group_id")
        epoch = try reader.u64("epoch")
        treeHash = try reader.opaque("tree_hash")
        confirmedTranscriptHash = try reader.opaque("confirmed_transcript_hash")
        extensions = try reader.vector("extensions")
    }
}

struct GroupInfo: TLSCodable, Hashable, Sendable {
    var groupContext: GroupContext
    var extensions: [Extension]
    var confirmationTag: Data
    var signer: LeafIndex
    var signature: Data

    init(groupContext: GroupContext, extensions: [Extension], confirmationTag: Data, signer: LeafIndex, signature: Data = Data())
    {
        self.groupContext = groupContext
        self.extensions = extensions
        self.confirmationTag = confirmationTag
        self.signer = signer
        self.signature = signature
    }

    /// `GroupInfoTBS`.
    var signedContent: [UInt8] {
        var writer = TLSWriter()
        writer.write(groupContext)
        writer.vector(extensions)
        writer.opaque(confirmationTag)
        writer.u32(signer)
        return writer.bytes
    }

    func encode(to writer: inout TLSWriter) {
        writer.raw(signedContent)
        writer.opaque(signature)
    }

    init(from reader: inout TLSReader) throws {
        groupContext = try reader.read()
        extensions = try reader.vector("extensions")
        confirmationTag = try reader.opaque("confirmation_tag")
        signer = try reader.u32("signer")
        signature = try reader.opaque("signature")
    }
}

struct GroupSecrets: TLSCodable, Hashable, Sendable {
    var joinerSecret: Data
    var pathSecret: Data?
    var psks: [PreSharedKeyID]

    init(joinerSecret: Data, pathSecret: Data?, psks: [PreSharedKeyID]) {
        self.joinerSecret = joinerSecret
        self.pathSecret = pathSecret
        self.psks = psks
    }

    func encode(to writer: inout TLSWriter) {
        writer.opaque(joinerSecret)
        writer.optional(pathSecret.map(Opaque.init))
        writer.vector(psks)
    }

    init(from reader: inout TLSReader) throws {
        joinerSecret = try reader.opaque("joiner_secret")
        pathSecret = try reader.optional("path_secret", of: Opaque.self)?.bytes
        psks = try reader.vector("psks")
    }
}

struct EncryptedGroupSecrets: TLSCodable, Hashable, Sendable {
    var newMember: Data
    var encryptedGroupSecrets: HPKECiphertext

    init(newMember: Data, encryptedGroupSecrets: HPKECiphertext) {
        self.newMember = newMember
        self.encryptedGroupSecrets = encryptedGroupSecrets
    }

    func encode(to writer: inout TLSWriter) {
        writer.opaque(newMember)
        writer.write(encryptedGroupSecrets)
    }

    init(from reader: inout TLSReader) throws {
        newMember = try reader.opaque("new_member")
        encryptedGroupSecrets = try reader.read()
    }
}

struct Welcome: TLSCodable, Hashable, Sendable {
    var cipherSuite: UInt16
    var secrets: [EncryptedGroupSecrets]
    var encryptedGroupInfo: Data

    init(cipherSuite: UInt16, secrets: [EncryptedGroupSecrets], encryptedGroupInfo: Data) {
        self.cipherSuite = cipherSuite
        self.secrets = secrets
        self.encryptedGroupInfo = encryptedGroupInfo
    }

    func encode(to writer: inout TLSWriter) {
        writer.u16(cipherSuite)
        writer.vector(secrets)
        writer.opaque(encryptedGroupInfo)
    }

    init(from reader: inout TLSReader) throws {
        cipherSuite = try reader.u16("cipher_suite")
        secrets = try reader.vector("secrets")
        encryptedGroupInfo = try reader.opaque("encrypted_group_info")
    }
}

/// `MLSMessage`: what travels between clients, tagged with its wire format.
enum MLSMessageBody: TLSCodable, Hashable, Sendable {
    case publicMessage(PublicMessage)
    case privateMessage(PrivateMessage)
    case welcome(Welcome)
    case groupInfo(GroupInfo)
    case keyPackage(KeyPackage)

    var wireFormat: WireFormat {
        switch self {
        case .publicMessage: .publicMessage
        case .privateMessage: .privateMessage
        case .welcome: .welcome
        case .groupInfo: .groupInfo
        case .keyPackage: .keyPackage
        }
    }

    func encode(to writer: inout TLSWriter) {
        writer.u16(mls10)
        writer.u16(wireFormat.rawValue)
        switch self {
        case .publicMessage(let message): writer.write(message)
        case .privateMessage(let message): writer.write(message)
        case .welcome(let welcome): writer.write(welcome)
        case .groupInfo(let groupInfo): writer.write(groupInfo)
        case .keyPackage(let keyPackage): writer.write(keyPackage)
        }
    }

    init(from reader: inout TLSReader) throws {
        let version = try reader.u16("version")
        guard version == mls10 else { throw MLSError(.unsupported, "protocol version \(version) is not mls10") }
        switch try WireFormat(from: &reader) {
        case .publicMessage: self = .publicMessage(try reader.read())
        case .privateMessage: self = .privateMessage(try reader.read())
        case .welcome: self = .welcome(try reader.read())
        case .groupInfo: self = .groupInfo(try reader.read())
        case .keyPackage: self = .keyPackage(try reader.read())
        }
    }
}

/// The `ratchet_tree` extension's value: `optional<Node> ratchet_tree<V>`.
struct RatchetTreeEncoding: TLSCodable, Sendable {
    var nodes: [Node?]

    init(nodes: [Node?]) { self.nodes = nodes }

    func encode(to writer: inout TLSWriter) {
        writer.vector { inner in for node in nodes { inner.optional(node) } }
    }

    init(from reader: inout TLSReader) throws {
        nodes = try reader.vector("ratchet_tree") { inner in
            var nodes: [Node?] = []
            while !inner.isAtEnd { nodes.append(try inner.optional("node", of: Node.self)) }
            return nodes
        }
    }
}
