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
/// Every secret is sealed with the store's key. This file alone writes `device_signer` and
/// `key_package_bundles`.
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
    static func signer(_ db: Database, sealer: StoreSealer, keys: UnlockedKeys, endpointID: String) throws -> MLSSigner {
        if let row = try db.row(
            "SELECT identity_key_version, signature_key, credential FROM device_signer WHERE user_id = ?", [keys.userID]),
            try row.get(0, as: Int.self) == keys.keyVersion
        {
            let seed = try sealer.open(try row.get(1), Seal.signatureKey(keys.userID))
            let credential = try DeviceCredential(encoded: try row.get(2))
            let key = try Ed25519.PrivateKey(rawRepresentation: seed)
            guard credential.signatureKey == key.publicKey.rawRepresentation, credential.deviceID == endpointID,
                credential.isSigned(by: keys.signing.publicKey)
            else { throw MessagingError(.storageFailure, "this device's MLS credential does not match its keys") }
            return MLSSigner(credential: credential.mlsCredential, key: key)
        }
        let key = try Ed25519.PrivateKey()
        let credential = try DeviceCredential.issue(
            userID: keys.userID, deviceID: endpointID, signatureKey: key.publicKey.rawRepresentation,
            identityKeyVersion: keys.keyVersion, identityKey: keys.signing)
        try db.execute("DELETE FROM device_signer")
        try db.execute("DELETE FROM key_package_bundles")
        try db.execute(
            "INSERT INTO device_signer(user_id, identity_key_version, signature_key, credential) VALUES (?, ?, ?, ?)",
            [
                keys.userID, keys.keyVersion,
                try sealer.seal(key.rawRepresentation.unsafeData(), Seal.signatureKey(keys.userID)), credential.encoded,
            ])
        return MLSSigner(credential: credential.mlsCredential, key: key)
    }

    /// New KeyPackages of `signer`, kept (sealed) in the store; the last-resort one, when asked
    /// for, replaces the previous.
    static func makeBundles(
        _ db: Database, sealer: StoreSealer, signer: MLSSigner, count: Int, lastResort: Bool, now: Date
    ) throws -> (oneTime: [Data], lastResort: Data?) {
        var random = MLSSystemRandom()
        func make(_ isLastResort: Bool) throws -> Data {
            let bundle = try MLSKeyPackageBundle(signer: signer, now: now, lifetime: lifetime, random: &random)
            try db.execute(
                "INSERT INTO key_package_bundles(reference, bundle, last_resort, created_at) VALUES (?, ?, ?, ?)",
                [
                    bundle.reference,
                    try sealer.seal(bundle.serialized().unsafeData(), Seal.bundle(bundle.reference)), isLastResort,
                    now.timeIntervalSince1970,
                ])
            return bundle.keyPackage
        }
        let oneTime = try (0..<count).map { _ in try make(false) }
        var last: Data?
        if lastResort {
            // The previous last-resort one may be in a Welcome on its way: it is kept, as a
            // one-time bundle, until used or expired.
            try db.execute("UPDATE key_package_bundles SET last_resort = 0 WHERE last_resort = 1")
            last = try make(true)
        }
        return (oneTime, last)
    }

    /// When the last-resort KeyPackage kept now was made (nil: none).
    static func lastResortMadeAt(_ db: Database) throws -> Date? {
        try db.scalar("SELECT max(created_at) FROM key_package_bundles WHERE last_resort = 1", as: Double?.self)
            .flatMap { $0 }.map(Date.init(timeIntervalSince1970:))
    }

    /// Forgets the private halves of KeyPackages past their lifetime: nothing can use them.
    static func forgetExpired(_ db: Database, now: Date) throws {
        try db.execute(
            "DELETE FROM key_package_bundles WHERE created_at < ?", [now.timeIntervalSince1970 - lifetime])
    }

    /// The private bundle of a KeyPackage this device published, if it still has it.
    static func bundle(_ db: Database, sealer: StoreSealer, reference: Data) throws -> MLSKeyPackageBundle? {
        try db.scalar("SELECT bundle FROM key_package_bundles WHERE reference = ?", [reference], as: Data.self).map {
            try MLSKeyPackageBundle(serialized: try sealer.open($0, Seal.bundle(reference)))
        }
    }

    /// Forgets a one-time bundle once a Welcome used it (a last-resort one stays).
    static func consume(_ db: Database, reference: Data) throws {
        try db.execute("DELETE FROM key_package_bundles WHERE reference = ? AND last_resort = 0", [reference])
    }
}
