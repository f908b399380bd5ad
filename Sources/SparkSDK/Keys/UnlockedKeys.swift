import Foundation
public import SparkCrypto
public import SparkDomain

/// The user's identity keys, unlocked on this endpoint: Ed25519 for signing, X25519 for
/// encryption. Their bytes live in wiped memory and are never printed.
public struct UnlockedKeys: Sendable, CustomStringConvertible {
    /// The user these keys belong to.
    public let userID: String
    /// The signing key.
    public let signing: Ed25519.PrivateKey
    /// The encryption key.
    public let encryption: X25519.PrivateKey
    /// The identity's key version (rises with each reset).
    public let keyVersion: Int

    /// Keys for `userID`.
    public init(userID: String, signing: Ed25519.PrivateKey, encryption: X25519.PrivateKey, keyVersion: Int) {
        self.userID = userID
        self.signing = signing
        self.encryption = encryption
        self.keyVersion = keyVersion
    }

    /// Fresh random keys.
    public static func generate(userID: String, keyVersion: Int) throws -> UnlockedKeys {
        UnlockedKeys(
            userID: userID, signing: try Ed25519.PrivateKey(), encryption: try X25519.PrivateKey(), keyVersion: keyVersion)
    }

    /// The public identity document, signed by these keys.
    public func publishedIdentity() throws -> PublishedIdentity {
        var identity = PublishedIdentity(
            userID: userID, signingKey: signing.publicKey.rawRepresentation,
            encryptionKey: encryption.publicKey.rawRepresentation,
            keyVersion: keyVersion, signature: Data())
        identity.signature = try signing.signature(for: identity.signedBytes)
        return identity
    }

    /// Whether these keys are the ones `identity` publishes.
    public func matches(_ identity: PublishedIdentity) -> Bool {
        identity.userID == userID && identity.signingKey == signing.publicKey.rawRepresentation
            && identity.encryptionKey == encryption.publicKey.rawRepresentation && identity.keyVersion == keyVersion
    }

    /// Shows the user and version only.
    public var description: String { "UnlockedKeys(\(userID), version \(keyVersion))" }

    /// The profile keys as a JWK Set: the Ed25519 key (`kid` "sig") and the X25519 key (`kid`
    /// "enc"), both with their private parts (RFC 8037).
    func profileJWKSet() -> JWKSet {
        var signingJWK = JWK(signing, keyID: "sig")
        signingJWK.use = "sig"
        var encryptionJWK = JWK(encryption, keyID: "enc")
        encryptionJWK.use = "enc"
        return JWKSet(keys: [signingJWK, encryptionJWK])
    }

    /// Keys from a profile JWK Set.
    init(profile set: JWKSet, userID: String, keyVersion: Int) throws {
        guard let signingJWK = set.keys(withID: "sig").first, let encryptionJWK = set.keys(withID: "enc").first else {
            throw KeyManagementError(.corruptKeys, "the profile keys are incomplete")
        }
        do {
            self.init(
                userID: userID, signing: try signingJWK.ed25519PrivateKey(), encryption: try encryptionJWK.x25519PrivateKey(),
                keyVersion: keyVersion)
        } catch {
            throw KeyManagementError(.corruptKeys, "the profile keys are malformed")
        }
    }
}
