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
