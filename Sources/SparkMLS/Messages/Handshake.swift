import Foundation

// The structures of RFC 9420 that make up the handshake and the framing (proposals, commits,
// framed content, Welcome), with their TLS encodings, field for field; the tree's and the
// KeyPackage's are in Structures.swift.

/// A pre-shared key's id (RFC 9420 §8.4).
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
