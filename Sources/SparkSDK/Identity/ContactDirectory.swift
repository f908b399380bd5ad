import Foundation
import SparkCrypto
import SparkDomain
import SparkStore

/// How far this device trusts a contact's identity key.
public enum ContactVerification: String, Sendable, Codable, CustomStringConvertible {
    /// Trusted as first seen (or accepted after a change), not compared in person.
    case unverified
    /// The users compared their safety number for this key (``BBMAccess/confirmSafetyNumber(_:of:)``).
    case verified
    /// The domain now publishes another key than the one trusted (a reset, or an attack): nothing
    /// is sealed to the new key and sending into the contact's chats is held until the user
    /// accepts it (``BBMAccess/acceptIdentityChange(of:)``) or confirms the new safety number.
    case changed
    /// First met under ``IdentityTrustPolicy/confirmFirstContact``: held as a change is, until
    /// the user accepts the key.
    case unconfirmed

    /// Whether keys in this state may encrypt anything.
    public var isTrusted: Bool { self == .unverified || self == .verified }

    /// The raw value.
    public var description: String { rawValue }
}

/// Whether a contact met for the first time is trusted at once.
public enum IdentityTrustPolicy: String, Sendable, Codable, CaseIterable {
    /// Trusted on first use and shown as ``ContactVerification/unverified`` (the default, as
    /// Signal and WhatsApp do); a later change is held.
    case trustOnFirstUse
    /// Held as ``ContactVerification/unconfirmed`` until the user accepts the key.
    case confirmFirstContact
}

/// A contact as this device knows them.
public struct Contact: Sendable, Equatable, Identifiable {
    /// The user id.
    public var userID: String
    /// How far their identity key is trusted.
    public var verification: ContactVerification
    /// The safety number of this user and the contact, for the key the domain publishes now
    /// (the new one, when ``verification`` is ``ContactVerification/changed``).
    public var safetyNumber: SafetyNumber
    /// The version of that key (it rises with each reset of their identity).
    public var keyVersion: Int
    /// The user id.
    public var id: String { userID }
}

/// The contact directory: each contact's trusted identity key, the key the domain publishes when
/// it differs, and the verification state. Pure decisions (``observe(_:stored:policy:)``) beside
/// the statements of the `contacts` table, which this file alone writes.
///
/// The trusted key is the only one anything is sealed to. A published key that differs is kept
/// beside it (`seen_*`) and the contact becomes ``ContactVerification/changed``; it replaces
/// the trusted key only when the user accepts it or confirms its safety number.
struct ContactDirectory {
    /// One stored contact.
    struct Record: Equatable {
        var trusted: PublishedIdentity
        var state: ContactVerification
        /// The key the domain publishes when it is not the trusted one.
        var seen: PublishedIdentity?

        /// What the domain publishes now, as far as this device knows.
        var current: PublishedIdentity { seen ?? trusted }
    }

    /// What meeting a published identity does to the stored record: the record to store and
    /// whether the contact's key just changed (an event for the app).
    static func observe(_ published: PublishedIdentity, stored: Record?, policy: IdentityTrustPolicy) -> (
        record: Record, changed: Bool
    ) {
        guard var record = stored else {
            let state: ContactVerification = policy == .trustOnFirstUse ? .unverified : .unconfirmed
            return (Record(trusted: published, state: state, seen: nil), false)
        }
        if sameKeys(published, record.trusted) {
            // Back to the trusted key (a substitution withdrawn): the change is over, and the
            // contact is unverified again (a verification is never restored by the domain).
            if record.state == .changed { record.state = .unverified }
            record.seen = nil
            return (record, false)
        }
        if record.state == .unconfirmed {
            // Not trusted yet: the newest key is the one to confirm.
            return (Record(trusted: published, state: .unconfirmed, seen: nil), false)
        }
        let already = record.seen.map { sameKeys($0, published) } ?? false
        record.seen = published
        record.state = .changed
        return (record, !already)
    }

    static func sameKeys(_ a: PublishedIdentity, _ b: PublishedIdentity) -> Bool {
        a.signingKey == b.signingKey && a.encryptionKey == b.encryptionKey
    }

    // MARK: Statements

    static func record(_ db: Database, _ user: String) throws -> Record? {
        try db.row(
            """
            SELECT signing_key, encryption_key, key_version, state, seen_signing_key, seen_encryption_key, seen_key_version
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
            return Record(
                trusted: PublishedIdentity(
                    userID: user, signingKey: try row.get(0), encryptionKey: try row.get(1), keyVersion: try row.get(2),
                    signature: Data()),
                state: ContactVerification(rawValue: try row.get(3)) ?? .changed, seen: seen)
        }
    }

    /// The contacts' version: a fresh random value at every change of a contact, so that what
    /// is built from the contacts (the validators, a chat's untrusted users) is built again when
    /// they change, here or in another process. Nil on a store without the table's row.
    static func version(_ db: Database) throws -> Data? {
        try db.scalar("SELECT version FROM contacts_version WHERE singleton = 1", as: Data.self)
    }

    /// The table of ``version(_:)``, added by the endpoint store's migration `v9-chat-sessions`.
    static let versionSchema = """
        CREATE TABLE contacts_version (singleton INTEGER PRIMARY KEY CHECK (singleton = 1), version BLOB NOT NULL);
        INSERT INTO contacts_version(singleton, version) VALUES (1, randomblob(16));
        """

    static func save(_ db: Database, _ record: Record) throws {
        try db.execute(
            "UPDATE contacts_version SET version = ? WHERE singleton = 1", [SystemRandom.bytes(count: 16)])
        try db.execute(
            """
            INSERT INTO contacts(user_id, signing_key, encryption_key, key_version, state, seen_signing_key,
                seen_encryption_key, seen_key_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(user_id) DO UPDATE SET signing_key = excluded.signing_key, encryption_key = excluded.encryption_key,
                key_version = excluded.key_version, state = excluded.state, seen_signing_key = excluded.seen_signing_key,
                seen_encryption_key = excluded.seen_encryption_key, seen_key_version = excluded.seen_key_version
            """,
            [
                record.trusted.userID, record.trusted.signingKey, record.trusted.encryptionKey, record.trusted.keyVersion,
                record.state.rawValue, record.seen?.signingKey, record.seen?.encryptionKey, record.seen?.keyVersion,
            ])
    }

    /// Trusts what the domain publishes now for `user`; returns false when there is no contact.
    static func accept(_ db: Database, _ user: String, verified: Bool) throws -> Bool {
        guard var record = try record(db, user) else { return false }
        // Accepting a contact that is already trusted changes nothing (a verified one stays so).
        if !verified, record.state.isTrusted, record.seen == nil { return true }
        record.trusted = record.current
        record.seen = nil
        record.state = verified ? .verified : .unverified
        try save(db, record)
        return true
    }

    /// Each contact's identity keys a group's leaves may be signed by: the trusted key, and the
    /// changed one the domain publishes while the user has not decided (see
    /// ``DeviceCredentialValidator/init(identityKeySets:)``).
    static func groupKeys(_ db: Database) throws -> [String: [Data]] {
        var keys: [String: [Data]] = [:]
        for row in try db.rows("SELECT user_id, signing_key, seen_signing_key FROM contacts") {
            keys[try row.get(0, as: String.self)] =
                [try row.get(1, as: Data.self)] + [try row.get(2, as: Data?.self)].compactMap { $0 }
        }
        return keys
    }

    /// Each trusted contact's identity key: the only ones a device this one sends to may be
    /// signed by.
    static func trustedKeys(_ db: Database) throws -> [String: Data] {
        var keys: [String: Data] = [:]
        for row in try db.rows("SELECT user_id, signing_key FROM contacts WHERE state IN ('unverified', 'verified')") {
            keys[try row.get(0, as: String.self)] = try row.get(1, as: Data.self)
        }
        return keys
    }

    /// How far each of `users` is trusted, for those met (a user never met is shown
    /// `unverified`; a state this code did not write, `changed`).
    static func verifications(_ db: Database, of users: Set<String>) throws -> [String: ContactVerification] {
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

    /// The stored policy, or the default.
    static func policy(_ db: Database) throws -> IdentityTrustPolicy {
        try db.scalar("SELECT identity_policy FROM messaging_settings WHERE singleton = 1", as: String.self)
            .flatMap(IdentityTrustPolicy.init(rawValue:)) ?? .trustOnFirstUse
    }

    static func setPolicy(_ db: Database, _ policy: IdentityTrustPolicy) throws {
        try db.execute(
            """
            INSERT INTO messaging_settings(singleton, identity_policy) VALUES (1, ?)
            ON CONFLICT(singleton) DO UPDATE SET identity_policy = excluded.identity_policy
            """, [policy.rawValue])
    }
}
