public import Foundation
public import SparkCrypto

/// A member's credential. SparkMLS carries basic credentials (an identity string of bytes); what
/// an identity means, and whether a key may speak for it, is the ``MLSCredentialValidator``'s call.
public struct MLSCredential: Hashable, Sendable {
    /// The identity of a basic credential.
    public let identity: Data

    /// A basic credential for `identity`.
    public init(identity: Data) { self.identity = identity }

    init(_ credential: Credential) throws {
        guard case .basic(let identity) = credential.kind else {
            throw MLSError(.unsupported, "only basic credentials are supported")
        }
        self.identity = identity
    }

    var wire: Credential { Credential(.basic(identity: identity)) }
}

/// A group context extension of the application's own: a type in RFC 9420's private-use range
/// (0xF000 to 0xFFFF) and its bytes. Every member holds the same ones in an epoch, and a commit
/// changes them with a GroupContextExtensions proposal (`commit(…, extensions:, …)`).
public struct MLSGroupExtension: Hashable, Sendable {
    /// The private-use range of extension types.
    public static let range: ClosedRange<UInt16> = 0xF000...0xFFFF
    /// The type.
    public let type: UInt16
    /// The bytes.
    public let data: Data

    /// An extension; its type is checked when a group is made or a commit changes them.
    public init(type: UInt16, data: Data) {
        self.type = type
        self.data = data
    }

    /// The wire extensions, after checking the types are private-use and not repeated.
    static func wire(_ extensions: [MLSGroupExtension]) throws -> [Extension] {
        guard extensions.allSatisfy({ range.contains($0.type) }), Set(extensions.map(\.type)).count == extensions.count else {
            throw MLSError(.invalid, "application extensions have private-use types (0xF000 to 0xFFFF), each once")
        }
        return extensions.map { Extension(type: $0.type, data: $0.data) }
    }
}

/// Decides whether a credential may be used with a signature key: asked for every leaf a group
/// learns of (KeyPackages, Updates, commits, the tree of a Welcome). The next layer binds
/// credentials to users and devices; the default accepts any basic credential.
public protocol MLSCredentialValidator: Sendable {
    /// Whether `credential` is valid with `signatureKey` (raw Ed25519 public key).
    func isValid(_ credential: MLSCredential, signatureKey: Data) -> Bool
}

/// Accepts every basic credential.
public struct MLSAcceptAnyCredential: MLSCredentialValidator {
    /// The permissive validator.
    public init() {}
    /// Always true.
    public func isValid(_ credential: MLSCredential, signatureKey: Data) -> Bool { true }
}

/// A client's signing identity: its credential and Ed25519 signature key.
public struct MLSSigner: Sendable {
    /// The credential every leaf of this client carries.
    public let credential: MLSCredential
    let key: Ed25519.PrivateKey

    /// A signer for `credential` with `key`.
    public init(credential: MLSCredential, key: Ed25519.PrivateKey) {
        self.credential = credential
        self.key = key
    }

    /// The raw signature public key.
    public var signatureKey: Data { key.publicKey.rawRepresentation }

    /// Signs a statement of this client's own outside MLS (an approval of another device, say).
    /// The statement must start with an ASCII label of its own: what MLS signs is a
    /// `SignContent`, whose first bytes are the length of a short "MLS 1.0 " label, so the two
    /// cannot be taken for each other.
    public func signature(forStatement statement: Data) throws -> Data { try key.signature(for: statement) }
}

/// A KeyPackage (RFC 9420 §10) with the private keys its owner needs to join with it. The
/// ``keyPackage`` bytes are what others use to add this client; the rest stays here.
public struct MLSKeyPackageBundle: Sendable {
    /// The `MLSMessage` carrying the KeyPackage, to publish.
    public let keyPackage: Data
    /// `KeyPackageRef`, which a Welcome names.
    public let reference: Data
    let package: KeyPackage
    let initKey: SecureBytes
    let encryptionKey: SecureBytes
    let signer: MLSSigner

    /// Makes a KeyPackage of `suite` for `signer`, valid from `now` for `lifetime` seconds. Its
    /// leaf's capabilities list `suite` and `alsoSupported` (the other suites this client has
    /// KeyPackages of): signed, so a group creator can tell a client that has them from one that
    /// has not, whatever a Delivery Service hands out.
    public init(
        signer: MLSSigner, suite: MLSCipherSuite = .x25519AES128GCMSHA256Ed25519, alsoSupported: [MLSCipherSuite] = [],
        now: Date, lifetime: TimeInterval = 90 * 86400, random: inout some MLSRandomSource
    ) throws {
        var capabilities = Capabilities.spark(suite)
        for other in alsoSupported where !capabilities.cipherSuites.contains(other.rawValue) {
            capabilities.cipherSuites.append(other.rawValue)
        }
        let initPrivate = suite.deriveKeyPair(random.secret(count: 32))
        let encryptionPrivate = suite.deriveKeyPair(random.secret(count: 32))
        let start = UInt64(max(0, now.timeIntervalSince1970 - 3600))
        var leaf = LeafNode(
            encryptionKey: encryptionPrivate.publicKey.rawRepresentation, signatureKey: signer.signatureKey,
            credential: signer.credential.wire, capabilities: capabilities,
            source: .keyPackage(Lifetime(notBefore: start, notAfter: start + 3600 + UInt64(max(0, lifetime)))), extensions: [])
        try leaf.sign(suite: suite, key: signer.key, groupID: Data(), leafIndex: 0)
        var package = KeyPackage(
            version: mls10, cipherSuite: suite.rawValue, initKey: initPrivate.publicKey.rawRepresentation, leafNode: leaf,
            extensions: [])
        package.signature = try suite.signWithLabel(signer.key, "KeyPackageTBS", package.signedContent)
        self.package = package
        keyPackage = MLSMessageBody.keyPackage(package).tlsEncoded
        reference = package.reference(suite: suite)
        initKey = initPrivate.rawRepresentation
        encryptionKey = encryptionPrivate.rawRepresentation
        self.signer = signer
    }

    /// A bundle from parts (the vectors' keys); the keys must match the package.
    init(package: KeyPackage, initKey: SecureBytes, encryptionKey: SecureBytes, signer: MLSSigner, suite: MLSCipherSuite) {
        self.package = package
        keyPackage = MLSMessageBody.keyPackage(package).tlsEncoded
        reference = package.reference(suite: suite)
        self.initKey = initKey
        self.encryptionKey = encryptionKey
        self.signer = signer
    }

    /// The bundle as bytes, for the owner's storage only: it holds private keys.
    public func serialized() -> SecureBytes {
        var writer = TLSWriter()
        writer.write(package)
        writer.opaque(initKey)
        writer.opaque(encryptionKey)
        writer.opaque(signer.key.rawRepresentation)
        writer.write(signer.credential.wire)
        return SecureBytes(writer.bytes)
    }

    /// A bundle from ``serialized()``.
    public init(serialized: some ContiguousBytes) throws {
        var reader = TLSReader(serialized)
        package = try reader.read()
        initKey = SecureBytes(try reader.opaque("init key"))
        encryptionKey = SecureBytes(try reader.opaque("encryption key"))
        let key = try MLSCipherSuite.x25519AES128GCMSHA256Ed25519.signaturePrivateKey(try reader.opaque("signature key"))
        signer = MLSSigner(credential: try MLSCredential(try reader.read(Credential.self)), key: key)
        try reader.finish("key package bundle")
        let suite = try MLSCipherSuite(rawValue: package.cipherSuite)
        keyPackage = MLSMessageBody.keyPackage(package).tlsEncoded
        reference = package.reference(suite: suite)
    }
}

extension Capabilities {
    /// What SparkMLS supports: mls10, the suite, basic credentials; the default extensions and
    /// proposals are implied (RFC 9420 §7.2) and not listed.
    static func spark(_ suite: MLSCipherSuite) -> Capabilities {
        Capabilities(
            versions: [mls10], cipherSuites: [suite.rawValue], extensions: [], proposals: [],
            credentials: [CredentialType.basic])
    }
}
