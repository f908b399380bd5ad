import Foundation
import SparkCrypto
import SparkMLS
import SparkStore

/// This device's MLS identity and its KeyPackages, as the endpoint store keeps them.
///
/// The device has an Ed25519 signature key of its own (never shared with the user's other
/// devices), and a ``DeviceCredential`` for it signed by the user's identity key; a new identity
/// (a reset) gets a new device key and credential. The device keeps the private halves of the
/// KeyPackages it published (one-time ones, and one last-resort one) until a Welcome uses them.
/// Every secret is sealed with the store's key (``SQLiteMessagingStore``'s identity statements).
struct DeviceKeys {
    /// How many one-time KeyPackages the domain should hold for this device.
    static let oneTimeTarget = 20
    /// Below this many, the device publishes more.
    static let lowWater = 10
    /// How long a KeyPackage is valid (the domain hands out the oldest first).
    static let lifetime: TimeInterval = 30 * 86400
    /// The last-resort KeyPackage is replaced this often (and the one-time ones are topped up
    /// as the domain stops handing out old ones), so a device idle for weeks stays invitable.
    static let lastResortRotation: TimeInterval = 7 * 86400

    enum Seal {
        static func signatureKey(_ user: String) -> String { "device_signer.signature_key/\(user)" }
        static func bundle(_ reference: Data) -> String { "key_package_bundles.bundle/\(reference.base64URLEncodedString())" }
    }

    /// The device's signer for `keys`' identity: the stored one, or a new device key and a
    /// credential signed by the identity key (the old ones and their KeyPackages go, since they
    /// belong to a previous identity).
    static func signer(_ store: some MessagingStore, keys: UnlockedKeys, endpointID: String) throws -> MLSSigner {
        if let stored = try store.deviceSigner(user: keys.userID), stored.identityKeyVersion == keys.keyVersion {
            let credential = try DeviceCredential(encoded: stored.credential)
            let key = try Ed25519.PrivateKey(rawRepresentation: stored.seed)
            guard credential.signatureKey == key.publicKey.rawRepresentation, credential.deviceID == endpointID,
                credential.isSigned(by: keys.signing.publicKey)
            else { throw MessagingError(.storageFailure, "this device's MLS credential does not match its keys") }
            return MLSSigner(credential: credential.mlsCredential, key: key)
        }
        let key = try Ed25519.PrivateKey()
        let credential = try DeviceCredential.issue(
            userID: keys.userID, deviceID: endpointID, signatureKey: key.publicKey.rawRepresentation,
            identityKeyVersion: keys.keyVersion, identityKey: keys.signing)
        try store.replaceDeviceSigner(
            StoredSigner(
                user: keys.userID, identityKeyVersion: keys.keyVersion, seed: key.rawRepresentation.unsafeData(),
                credential: credential.encoded))
        return MLSSigner(credential: credential.mlsCredential, key: key)
    }

    /// New KeyPackages of `signer` of MLS cipher suite `suite`, kept (sealed) in the store; the
    /// last-resort one, when asked for, replaces the previous one of the suite. Each lists
    /// `alsoSupported` in its leaf's capabilities: the other suites this device has KeyPackages
    /// of, signed, so that a domain handing out this suite's instead of another's is caught.
    static func makeBundles(
        _ store: some MessagingStore, signer: MLSSigner, suite: MLSCipherSuite = .x25519AES128GCMSHA256Ed25519,
        alsoSupported: [MLSCipherSuite] = [], count: Int, lastResort: Bool, now: Date
    ) throws -> (oneTime: [Data], lastResort: Data?) {
        var random = MLSSystemRandom()
        func make(_ isLastResort: Bool) throws -> Data {
            let bundle = try MLSKeyPackageBundle(
                signer: signer, suite: suite, alsoSupported: alsoSupported, now: now, lifetime: lifetime, random: &random)
            try store.addKeyPackageBundle(
                reference: bundle.reference, bundle: bundle.serialized().unsafeData(), suite: suite.rawValue,
                lastResort: isLastResort, createdAt: now)
            return bundle.keyPackage
        }
        let oneTime = try (0..<count).map { _ in try make(false) }
        var last: Data?
        if lastResort {
            // The previous last-resort one may be in a Welcome on its way: it is kept, as a
            // one-time bundle, until used or expired.
            try store.demoteLastResortBundle(suite: suite.rawValue)
            last = try make(true)
        }
        return (oneTime, last)
    }

    /// Forgets the private halves of KeyPackages past their lifetime: nothing can use them.
    static func forgetExpired(_ store: some MessagingStore, now: Date) throws {
        try store.forgetKeyPackageBundles(madeBefore: now - lifetime)
    }

    /// The private bundle of a KeyPackage this device published, if it still has it.
    static func bundle(_ store: some MessagingStore, reference: Data) throws -> MLSKeyPackageBundle? {
        try store.keyPackageBundle(reference: reference).map { try MLSKeyPackageBundle(serialized: $0) }
    }
}
