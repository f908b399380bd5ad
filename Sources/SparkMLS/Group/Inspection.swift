public import Foundation

/// What a KeyPackage says of itself, read before any group uses it: a Delivery Service client
/// files the KeyPackages it claimed, and a device finds the private bundle a Welcome is for.
public struct MLSKeyPackageSummary: Sendable, Equatable {
    /// Its `KeyPackageRef` (what a Welcome names).
    public let reference: Data
    /// The credential of its leaf.
    public let credential: MLSCredential
    /// The leaf's signature key (raw Ed25519).
    public let signatureKey: Data
    /// The end of its lifetime.
    public let notAfter: Date
    /// Its cipher suite.
    public let suite: MLSCipherSuite
    /// The code points of the suites its leaf's capabilities list (its own among them), as its
    /// owner signed them.
    public let capableSuites: [UInt16]

    /// Reads a KeyPackage (an `MLSMessage`) and checks its own two signatures (the KeyPackage's
    /// and its leaf's); everything else of §10.1 is checked by the group that adds it.
    public init(_ message: Data) throws {
        guard case .keyPackage(let package) = try MLSMessageBody(tlsEncoded: message) else {
            throw MLSError(.malformed, "the message is not a KeyPackage")
        }
        let suite = try MLSCipherSuite(rawValue: package.cipherSuite)
        guard case .keyPackage(let lifetime) = package.leafNode.source else {
            throw MLSError(.invalid, "a KeyPackage's leaf is not from a KeyPackage")
        }
        guard package.verifySignature(suite: suite),
            package.leafNode.verifySignature(suite: suite, groupID: Data(), leafIndex: 0)
        else { throw MLSError(.authentication, "the KeyPackage's signatures do not verify") }
        reference = package.reference(suite: suite)
        credential = try MLSCredential(package.leafNode.credential)
        signatureKey = package.leafNode.signatureKey
        notAfter = Date(timeIntervalSince1970: TimeInterval(min(lifetime.notAfter, UInt64(Int64.max / 2))))
        self.suite = suite
        capableSuites = package.leafNode.capabilities.cipherSuites
    }
}

extension MLSGroup {
    /// The KeyPackage references a Welcome holds secrets for: a device with several KeyPackages
    /// out finds which of its bundles a Welcome is for.
    public static func keyPackageReferences(inWelcome welcome: Data) throws -> [Data] {
        guard case .welcome(let message) = try MLSMessageBody(tlsEncoded: welcome) else {
            throw MLSError(.malformed, "the message is not a Welcome")
        }
        return message.secrets.map(\.newMember)
    }
}

/// What a group's message says in the clear, read without processing it: its group, its epoch
/// and what it carries. A Delivery Service client decides with it whether a message is late (an
/// epoch already left), early (a commit it has not seen yet) or for now.
public struct MLSMessageHeader: Sendable, Equatable {
    /// What a message carries.
    public enum ContentType: Sendable, Equatable {
        /// Application data.
        case application
        /// A proposal.
        case proposal
        /// A commit.
        case commit
    }

    /// The group id.
    public let groupID: Data
    /// The epoch it was sent in.
    public let epoch: UInt64
    /// What it carries.
    public let contentType: ContentType

    /// Reads the header of a PublicMessage or PrivateMessage; anything else is `malformed`.
    public init(_ message: Data) throws {
        switch try MLSMessageBody(tlsEncoded: message) {
        case .publicMessage(let message):
            groupID = message.content.groupID
            epoch = message.content.epoch
            contentType =
                switch message.content.content {
                case .application: .application
                case .proposal: .proposal
                case .commit: .commit
                }
        case .privateMessage(let message):
            groupID = message.groupID
            epoch = message.epoch
            contentType =
                switch message.contentType {
                case .application: .application
                case .proposal: .proposal
                case .commit: .commit
                }
        default:
            throw MLSError(.malformed, "the message is not a PublicMessage or PrivateMessage")
        }
    }
}
