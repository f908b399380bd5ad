import Foundation
import SparkCrypto
import SparkDomain
import SparkStore

/// The identity statements of the SQLite messaging store: this file alone reads and writes
/// `contacts`, `contacts_version`, `messaging_settings`, `transparency_state`, `device_signer`,
/// `key_package_bundles` and `own_devices`. The device's signature key and its KeyPackages' private halves are sealed
/// (`DeviceKeys.Seal`); contacts hold public keys only.
extension SQLiteMessagingStore {
    // MARK: Contacts

    func contact(_ user: String) throws -> ContactDirectory.Record? {
        try db.row(
            """
            SELECT signing_key, encryption_key, key_version, state, seen_signing_key, seen_encryption_key, seen_key_version,
                transparency_failure
            FROM contacts WHERE user_id = ?
            """, [user]
        ).map { row in
            let seen: PublishedIdentity? =
                if let signing = try row.get(4, as: Data?.self), let encryption = try row.get(5, as: Data?.self) {
                    PublishedIdentity(
                        userID: user, signingKey: signing, encryptionKey: encryption,
                        keyVersion: try row.get(6, as: Int?.self) ?? 0, signature: Data())
                } else {
                    nil
                }
            return ContactDirectory.Record(
                trusted: PublishedIdentity(
                    userID: user, signingKey: try row.get(0), encryptionKey: try row.get(1), keyVersion: try row.get(2),
                    signature: Data()),
                state: ContactVerification(rawValue: try row.get(3)) ?? .changed, seen: seen,
                transparencyFailure: try row.get(7))
        }
    }

    func contactUsers() throws -> [String] {
        try db.rows("SELECT user_id FROM contacts ORDER BY user_id").map { try $0.get(0) }
    }

    func contactsVersion() throws -> Data? {
        try db.scalar("SELECT version FROM contacts_version WHERE singleton = 1", as: Data.self)
    }

    func saveContact(_ record: ContactDirectory.Record) throws {
        try db.execute("UPDATE contacts_version SET version = ? WHERE singleton = 1", [SystemRandom.bytes(count: 16)])
        try db.execute(
            """
            INSERT INTO contacts(user_id, signing_key, encryption_key, key_version, state, seen_signing_key,
                seen_encryption_key, seen_key_version, transparency_failure) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(user_id) DO UPDATE SET signing_key = excluded.signing_key, encryption_key = excluded.encryption_key,
                key_version = excluded.key_version, state = excluded.state, seen_signing_key = excluded.seen_signing_key,
                seen_encryption_key = excluded.seen_encryption_key, seen_key_version = excluded.seen_key_version,
                transparency_failure = excluded.transparency_failure
            """,
            [
                record.trusted.userID, record.trusted.signingKey, record.trusted.encryptionKey, record.trusted.keyVersion,
                record.state.rawValue, record.seen?.signingKey, record.seen?.encryptionKey, record.seen?.keyVersion,
                record.transparencyFailure,
            ])
    }

    func contactGroupKeys() throws -> [String: [Data]] {
        var keys: [String: [Data]] = [:]
        for row in try db.rows("SELECT user_id, signing_key, seen_signing_key FROM contacts") {
            keys[try row.get(0, as: String.self)] =
                [try row.get(1, as: Data.self)] + [try row.get(2, as: Data?.self)].compactMap { $0 }
        }
        return keys
    }

    func trustedContactKeys() throws -> [String: Data] {
        var keys: [String: Data] = [:]
        for row in try db.rows("SELECT user_id, signing_key FROM contacts WHERE state IN ('unverified', 'verified')") {
            keys[try row.get(0, as: String.self)] = try row.get(1, as: Data.self)
        }
        return keys
    }

    func verifications(of users: Set<String>) throws -> [String: ContactVerification] {
        guard !users.isEmpty else { return [:] }
        // A few users by the key; a whole chat list's in one pass over the table.
        let rows =
            if users.count <= 200 {
                try db.rows(
                    "SELECT user_id, state FROM contacts WHERE user_id IN (\(users.map { _ in "?" }.joined(separator: ", ")))",
                    users.sorted())
            } else {
                try db.rows("SELECT user_id, state FROM contacts")
            }
        var states: [String: ContactVerification] = [:]
        for row in rows {
            let user = try row.get(0, as: String.self)
            guard users.contains(user) else { continue }
            states[user] = ContactVerification(rawValue: try row.get(1, as: String.self)) ?? .changed
        }
        return states
    }

    func transparencyState() throws -> TransparencyState {
        guard let row = try db.row("SELECT keys, head, alarm, fork FROM transparency_state WHERE singleton = 1") else {
            return TransparencyState()
        }
        return TransparencyState(
            keys: try row.get(0, as: Data?.self).flatMap { try? JSONDecoder().decode(TransparencyKeys.self, from: $0) },
            head: try row.get(1, as: Data?.self).flatMap { try? TransparencyCodec.decodeHead($0) }, alarm: try row.get(2),
            fork: try row.get(3))
    }

    func setTransparencyState(_ state: TransparencyState) throws {
        try db.execute(
            """
            INSERT INTO transparency_state(singleton, keys, head, alarm, fork) VALUES (1, ?, ?, ?, ?)
            ON CONFLICT(singleton) DO UPDATE SET keys = excluded.keys, head = excluded.head, alarm = excluded.alarm,
                fork = excluded.fork
            """,
            [
                try state.keys.map { try JSONEncoder().encode($0) }, state.head.map(TransparencyCodec.encode), state.alarm,
                state.fork,
            ])
    }

    func identityPolicy() throws -> IdentityTrustPolicy {
        try db.scalar("SELECT identity_policy FROM messaging_settings WHERE singleton = 1", as: String.self)
            .flatMap(IdentityTrustPolicy.init(rawValue:)) ?? .trustOnFirstUse
    }

    func setIdentityPolicy(_ policy: IdentityTrustPolicy) throws {
        try db.execute(
            """
            INSERT INTO messaging_settings(singleton, identity_policy) VALUES (1, ?)
            ON CONFLICT(singleton) DO UPDATE SET identity_policy = excluded.identity_policy
            """, [policy.rawValue])
    }

    // MARK: This device's MLS keys

    func deviceSigner(user: String) throws -> StoredSigner? {
        try db.row("SELECT identity_key_version, signature_key, credential FROM device_signer WHERE user_id = ?", [user]).map {
            row in
            StoredSigner(
                user: user, identityKeyVersion: try row.get(0),
                seed: try sealer.open(try row.get(1), DeviceKeys.Seal.signatureKey(user)), credential: try row.get(2))
        }
    }

    func replaceDeviceSigner(_ signer: StoredSigner) throws {
        try db.execute("DELETE FROM device_signer")
        try db.execute("DELETE FROM key_package_bundles")
        try db.execute(
            "INSERT INTO device_signer(user_id, identity_key_version, signature_key, credential) VALUES (?, ?, ?, ?)",
            [
                signer.user, signer.identityKeyVersion,
                try sealer.seal(signer.seed, DeviceKeys.Seal.signatureKey(signer.user)), signer.credential,
            ])
    }

    func addKeyPackageBundle(reference: Data, bundle: Data, suite: UInt16, lastResort: Bool, createdAt: Date) throws {
        try db.execute(
            "INSERT INTO key_package_bundles(reference, bundle, last_resort, created_at, suite) VALUES (?, ?, ?, ?, ?)",
            [
                reference, try sealer.seal(bundle, DeviceKeys.Seal.bundle(reference)), lastResort,
                createdAt.timeIntervalSince1970, Int64(suite),
            ])
    }

    func demoteLastResortBundle(suite: UInt16) throws {
        try db.execute("UPDATE key_package_bundles SET last_resort = 0 WHERE last_resort = 1 AND suite = ?", [Int64(suite)])
    }

    func lastResortMadeAt(suite: UInt16) throws -> Date? {
        try db.scalar(
            "SELECT max(created_at) FROM key_package_bundles WHERE last_resort = 1 AND suite = ?", [Int64(suite)],
            as: Double?.self
        )
        .flatMap { $0 }.map(Date.init(timeIntervalSince1970:))
    }

    func forgetKeyPackageBundles(madeBefore date: Date) throws {
        try db.execute("DELETE FROM key_package_bundles WHERE created_at < ?", [date.timeIntervalSince1970])
    }

    func keyPackageBundle(reference: Data) throws -> Data? {
        try db.scalar("SELECT bundle FROM key_package_bundles WHERE reference = ?", [reference], as: Data.self).map {
            try sealer.open($0, DeviceKeys.Seal.bundle(reference))
        }
    }

    func consumeKeyPackageBundle(reference: Data) throws {
        try db.execute("DELETE FROM key_package_bundles WHERE reference = ? AND last_resort = 0", [reference])
    }

    // MARK: The user's devices this one trusts

    func trustedOwnDevices() throws -> Set<OwnDevices.Trusted> {
        Set(
            try db.rows("SELECT endpoint_id, signature_key FROM own_devices").map {
                OwnDevices.Trusted(endpointID: try $0.get(0), key: try $0.get(1))
            })
    }

    func setTrustedOwnDevices(_ devices: Set<OwnDevices.Trusted>) throws {
        try db.execute("DELETE FROM own_devices")
        for device in devices {
            try db.execute("INSERT INTO own_devices(endpoint_id, signature_key) VALUES (?, ?)", [device.endpointID, device.key])
        }
    }

    func trustOwnDevice(_ device: OwnDevices.Trusted) throws {
        try db.execute(
            """
            INSERT INTO own_devices(endpoint_id, signature_key) VALUES (?, ?)
            ON CONFLICT(endpoint_id) DO UPDATE SET signature_key = excluded.signature_key
            """, [device.endpointID, device.key])
    }
}
