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
    /// Why the domain's transparency log did not prove that key (a key outside the log, a log
    /// that forked or rewrote its past); nil when it did. While set, the contact is
    /// ``ContactVerification/changed`` and only a safety number compared in person trusts the key.
    public var transparencyFailure: String?
    /// The user id.
    public var id: String { userID }
}

/// The contact directory: each contact's trusted identity key, the key the domain publishes when
/// it differs, and the verification state. Pure decisions (``observe(_:stored:policy:)``) beside
/// the statements of the `contacts` table (``MessagingStore``).
///
/// The trusted key is the only one anything is sealed to. A published key that differs is kept
/// beside it (`seen_*`) and the contact becomes ``ContactVerification/changed``; it replaces
/// the trusted key only when the user accepts it or confirms its safety number.
struct ContactDirectory {
    /// One stored contact.
    struct Record: Sendable, Equatable {
        var trusted: PublishedIdentity
        var state: ContactVerification
        /// The key the domain publishes when it is not the trusted one.
        var seen: PublishedIdentity?
        /// Why the transparency log's proof for the key the domain publishes failed (nil: it
        /// verified). While set the contact is ``ContactVerification/changed`` and cannot be
        /// accepted.
        var transparencyFailure: String? = nil

        /// What the domain publishes now, as far as this device knows.
        var current: PublishedIdentity { seen ?? trusted }
    }

    /// What meeting a published identity does to the stored record: the record to store and
    /// whether the contact's key just changed (an event for the app).
    static func observe(
        _ published: PublishedIdentity, stored: Record?, policy: IdentityTrustPolicy, failure: String? = nil
    ) -> (record: Record, changed: Bool) {
        if let failure {
            // The log did not prove this key: it is kept as changed, beside the trusted one if
            // there is one, and nothing is sealed to it.
            guard var record = stored else {
                // A first contact with an unproved key: the key is both the "trusted" and the
                // seen one, which marks a record no proof ever backed (see below).
                return (Record(trusted: published, state: .changed, seen: published, transparencyFailure: failure), true)
            }
            let already = record.state == .changed && record.transparencyFailure != nil
            if !sameKeys(published, record.trusted) { record.seen = published }
            record.state = .changed
            record.transparencyFailure = failure
            return (record, !already)
        }
        guard var record = stored else {
            let state: ContactVerification = policy == .trustOnFirstUse ? .unverified : .unconfirmed
            return (Record(trusted: published, state: state, seen: nil), false)
        }
        if record.transparencyFailure != nil, let seen = record.seen, sameKeys(seen, record.trusted) {
            // Met first with a key the log did not prove: now that it proves one, this is the
            // first contact.
            return observe(published, stored: nil, policy: policy)
        }
        let failedBefore = record.transparencyFailure != nil
        record.transparencyFailure = nil
        if sameKeys(published, record.trusted) {
            // Back to the trusted key (a substitution withdrawn, or the log proves it now): the
            // change is over, and the contact is unverified again (a verification is never
            // restored by the domain).
            if record.state == .changed {
                record.state = failedBefore && policy == .confirmFirstContact ? .unconfirmed : .unverified
            }
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

    // MARK: Decisions on the stored contacts

    /// The table of ``MessagingStore/contactsVersion()``, added by the endpoint store's migration
    /// `v24-chat-sessions`.
    static let versionSchema = """
        CREATE TABLE contacts_version (singleton INTEGER PRIMARY KEY CHECK (singleton = 1), version BLOB NOT NULL);
        INSERT INTO contacts_version(singleton, version) VALUES (1, randomblob(16));
        """

    /// Trusts what the domain publishes now for `user`; returns false when there is no contact.
    static func accept(_ store: some MessagingStore, _ user: String, verified: Bool) throws -> Bool {
        guard var record = try store.contact(user) else { return false }
        // A key the log did not prove is trusted only after a comparison in person.
        if let failure = record.transparencyFailure, !verified {
            throw MessagingError(
                .identityUnconfirmed,
                "the domain's transparency log does not prove \(user)'s key (\(failure)): compare safety numbers in person to trust it"
            )
        }
        record.transparencyFailure = nil
        // Accepting a contact that is already trusted changes nothing (a verified one stays so).
        if !verified, record.state.isTrusted, record.seen == nil { return true }
        record.trusted = record.current
        record.seen = nil
        record.state = verified ? .verified : .unverified
        try store.saveContact(record)
        return true
    }
}
