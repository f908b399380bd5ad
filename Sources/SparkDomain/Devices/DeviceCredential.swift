public import Foundation
public import SparkCrypto
import SparkLock
public import SparkMLS

/// A device's MLS credential: the user, the device (the endpoint id) and the device's own MLS
/// signature key, signed by the user's identity key, as Matrix cross-signs a device with the
/// user's self-signing key. A leaf of a chat's group is a device; its credential is valid only
/// with that signature by the identity key its members trust for the user, and only with the
/// signature key the leaf carries (``DeviceCredentialValidator``).
///
/// It travels as the `identity` of an MLS basic credential; its bytes are in `docs/FORMATS.md`:
///
/// ```text
/// struct {
///     opaque user_id<V>;              // 1 to 255 bytes of UTF-8
///     opaque device_id<V>;            // 1 to 64 bytes
///     opaque signature_key<V>;        // 32 bytes, raw Ed25519
///     uint32 identity_key_version;
///     opaque signature<V>;            // 64 bytes: Ed25519 by the identity key over
/// } DeviceCredential;                 //   "Spark DeviceCredential v1" ‖ the fields above
/// ```
public struct DeviceCredential: Sendable, Hashable {
    /// The user the device belongs to.
    public let userID: String
    /// The device (its endpoint id in the domain).
    public let deviceID: String
    /// The device's MLS signature key (raw Ed25519 public key).
    public let signatureKey: Data
    /// The version of the identity key that signed it (rises with each identity reset).
    public let identityKeyVersion: Int
    /// The identity key's signature over ``signedBytes``.
    public let signature: Data

    /// What the identity key signs; the label keeps it apart from everything else that key signs.
    public var signedBytes: Data {
        var writer = TLSWriter()
        writer.raw(Data(Self.label.utf8))
        writeFields(to: &writer)
        return writer.data
    }

    static let label = "Spark DeviceCredential v1"

    /// A credential for the device's `signatureKey`, signed by the user's identity key.
    public static func issue(
        userID: String, deviceID: String, signatureKey: Data, identityKeyVersion: Int, identityKey: Ed25519.PrivateKey
    ) throws -> DeviceCredential {
        let unsigned = try DeviceCredential(
            userID: userID, deviceID: deviceID, signatureKey: signatureKey, identityKeyVersion: identityKeyVersion,
            signature: Data(repeating: 0, count: 64))
        return try DeviceCredential(
            userID: userID, deviceID: deviceID, signatureKey: signatureKey, identityKeyVersion: identityKeyVersion,
            signature: try identityKey.signature(for: unsigned.signedBytes))
    }

    private init(userID: String, deviceID: String, signatureKey: Data, identityKeyVersion: Int, signature: Data) throws {
        guard (1...255).contains(userID.utf8.count), (1...64).contains(deviceID.utf8.count) else {
            throw MLSError(.malformed, "a device credential names a user of 1 to 255 bytes and a device of 1 to 64")
        }
        guard signatureKey.count == 32, signature.count == 64 else {
            throw MLSError(.malformed, "a device credential holds a 32-byte Ed25519 key and a 64-byte signature")
        }
        guard (0...Int(UInt32.max)).contains(identityKeyVersion) else {
            throw MLSError(.malformed, "an identity key version is a uint32")
        }
        self.userID = userID
        self.deviceID = deviceID
        self.signatureKey = signatureKey
        self.identityKeyVersion = identityKeyVersion
        self.signature = signature
    }

    /// Decodes a credential strictly (no trailing bytes, every length in range); its signature
    /// is checked by ``isSigned(by:)``, not here.
    public init(encoded: Data) throws {
        var reader = TLSReader(encoded)
        let user = try reader.opaque("device credential user id")
        let device = try reader.opaque("device credential device id")
        let key = try reader.opaque("device credential signature key")
        let version = try reader.u32("device credential identity key version")
        let signature = try reader.opaque("device credential signature")
        try reader.finish("device credential")
        guard let userID = String(data: user, encoding: .utf8), let deviceID = String(data: device, encoding: .utf8) else {
            throw MLSError(.malformed, "a device credential's user and device ids are UTF-8")
        }
        try self.init(
            userID: userID, deviceID: deviceID, signatureKey: key, identityKeyVersion: Int(version), signature: signature)
    }

    /// The bytes: the identity of the device's MLS basic credential.
    public var encoded: Data {
        var writer = TLSWriter()
        writeFields(to: &writer)
        writer.opaque(signature)
        return writer.data
    }

    /// The MLS credential that carries it.
    public var mlsCredential: MLSCredential { MLSCredential(identity: encoded) }

    /// Whether `identityKey` signed this credential. A credential that verified once under a key
    /// is remembered (by the SHA-256 of key, signed bytes and signature; a hit is exactly as good
    /// as verifying again): a device checks the same leaves at every send and every commit.
    public func isSigned(by identityKey: Ed25519.PublicKey) -> Bool {
        let digest = SHA256.hash(identityKey.rawRepresentation + signedBytes + signature)
        if Self.verified.withLock({ $0.contains(digest) }) { return true }
        guard identityKey.isValidSignature(signature, for: signedBytes) else { return false }
        Self.verified.withLock { set in
            if set.count >= 1 << 16 { set.removeAll(keepingCapacity: true) }
            set.insert(digest)
        }
        return true
    }

    private static let verified = Locked<Set<Data>>([])

    private func writeFields(to writer: inout TLSWriter) {
        writer.opaque(Data(userID.utf8))
        writer.opaque(Data(deviceID.utf8))
        writer.opaque(signatureKey)
        writer.u32(UInt32(identityKeyVersion))
    }
}

/// The credential check of a chat's group: a leaf is valid only when its basic credential is a
/// ``DeviceCredential`` for the leaf's own signature key, signed by the identity key this device
/// trusts for that user (verified, or accepted: see ``ContactVerification``). A user with no
/// trusted key has no valid device, so a domain that substitutes an identity key or injects a
/// device signed by any other key gets no leaf accepted.
public struct DeviceCredentialValidator: MLSCredentialValidator {
    private let trusted: [String: [Ed25519.PublicKey]]

    /// A validator trusting `identityKeys` (user id to raw Ed25519 identity key); keys that do
    /// not parse are left out, so their users have no valid device.
    public init(identityKeys: [String: Data]) {
        self.init(identityKeySets: identityKeys.mapValues { [$0] })
    }

    /// A validator trusting any of each user's `identityKeySets` (a contact's trusted key and the
    /// changed one the domain publishes, while the user has not decided: the group must follow
    /// what the other members commit, even as this device holds its own sends).
    public init(identityKeySets: [String: [Data]]) {
        trusted = identityKeySets.mapValues { keys in keys.compactMap { try? Ed25519.PublicKey(rawRepresentation: $0) } }
    }

    /// Whether `credential` is a device credential for `signatureKey` signed by its user's
    /// trusted identity key.
    public func isValid(_ credential: MLSCredential, signatureKey: Data) -> Bool {
        guard let device = try? DeviceCredential(encoded: credential.identity), device.signatureKey == signatureKey,
            let identityKeys = trusted[device.userID]
        else { return false }
        return identityKeys.contains { device.isSigned(by: $0) }
    }
}
