import Foundation
import SparkCrypto
import SparkDomain
import SparkLock
import SparkMLS
import SparkStore

/// The messenger's contact directory and this device's MLS identity: looking identities up,
/// flagging a change, the user's decisions (accept, confirm), and the device's signer and
/// KeyPackages.
extension Messenger {
    // MARK: Identities

    /// A contact as the directory holds it; with `refresh`, after asking the domain what it
    /// publishes now (a differing key is kept beside the trusted one and flagged, never trusted).
    func contactRecord(of user: String, refresh: Bool) async throws -> ContactDirectory.Record {
        let stored = try await read { store in try store.contact(user) }
        if let stored, !refresh { return stored }
        guard
            let published = try await domainCall({
                try await domain.identity(token: try await token(), endpointID: endpointID, userID: user)
            }),
            published.userID == user, published.isSelfSigned
        else {
            if let stored { return stored }
            throw MessagingError(.unknownUser, "\(user) has no published identity (they have not set up a device)")
        }
        let (record, changed) = try await write { store in
            // Decided inside the write, on the row as it is now (another refresh may have run).
            let outcome = ContactDirectory.observe(
                published, stored: try store.contact(user), policy: try store.identityPolicy())
            try store.saveContact(outcome.record)
            return outcome
        }
        if changed { eventSinks.yield(.identityChanged(userID: user)) }
        // Chats show each participant's state (unverified when no contact is stored yet): only a
        // different state is news, and reloading mid-batch would show a half-applied step.
        if record.state != (stored?.state ?? .unverified) { await reloadChats() }
        if record.state.isTrusted, let stored, !stored.state.isTrusted {
            // Trusted again (the domain publishes the trusted key once more): what was held goes.
            // Not awaited here, since this may run inside a send's own key check.
            Task { await self.trustChanged() }
        }
        return record
    }

    /// The key a message from `user` is checked with: the trusted one, or with `refresh` what
    /// the domain publishes now (a changed contact's messages are shown, flagged by the change).
    func identity(of user: String, refresh: Bool) async throws -> PublishedIdentity {
        let record = try await contactRecord(of: user, refresh: refresh)
        return refresh ? record.current : record.trusted
    }

    /// Trusts the key the domain publishes now for `user` (after a change, or a first contact the
    /// policy held), then sends what was held for it.
    func acceptIdentity(of user: String) async throws {
        try requireRunning()
        guard try await write({ store in try ContactDirectory.accept(store, user, verified: false) }) else {
            throw MessagingError(.unknownUser, "no contact \(user)")
        }
        await reloadChats()
        await trustChanged()
    }

    /// The safety number of this user and `user`, for the key the domain publishes now.
    func safetyNumber(with user: String) async throws -> SafetyNumber {
        let record = try await contactRecord(of: user, refresh: true)
        return safetyNumber(for: record.current)
    }

    func safetyNumber(for identity: PublishedIdentity) -> SafetyNumber {
        SafetyNumber(
            localUser: me, localKey: keys.signing.publicKey.rawRepresentation, remoteUser: identity.userID,
            remoteKey: identity.signingKey)
    }

    /// Marks `user` verified when `number` is the safety number of their current key (trusting
    /// that key, if it had changed); anything else is refused and marks nothing.
    func confirmSafetyNumber(_ number: SafetyNumber, of user: String) async throws {
        try requireRunning()
        let record = try await contactRecord(of: user, refresh: true)
        guard safetyNumber(for: record.current) == number else {
            throw MessagingError(
                .safetyNumberMismatch, "that is not the safety number of \(user)'s current key: compare again")
        }
        let current = record.current
        let marked = try await write { store -> Bool in
            // The key may have changed again since it was read: only the compared key is marked.
            guard let now = try store.contact(user), ContactDirectory.sameKeys(now.current, current) else {
                return false
            }
            return try ContactDirectory.accept(store, user, verified: true)
        }
        guard marked else {
            throw MessagingError(.safetyNumberMismatch, "\(user)'s key changed while comparing: compare again")
        }
        await reloadChats()
        await trustChanged()
    }

    /// A contact as shown to the app.
    func contact(_ user: String) async throws -> Contact {
        let record = try await contactRecord(of: user, refresh: true)
        return Contact(
            userID: user, verification: record.state, safetyNumber: safetyNumber(for: record.current),
            keyVersion: record.current.keyVersion)
    }

    func identityTrustPolicy() async throws -> IdentityTrustPolicy { try await read { store in try store.identityPolicy() } }

    func setIdentityTrustPolicy(_ policy: IdentityTrustPolicy) async throws {
        try await write { store in try store.setIdentityPolicy(policy) }
    }

    // MARK: This device's MLS identity

    /// This device's MLS signer: its own key, with the credential the identity key signed.
    func deviceSigner() async throws -> MLSSigner {
        let (keys, endpointID) = (self.keys, self.endpointID)
        return try await write { store in try DeviceKeys.signer(store, keys: keys, endpointID: endpointID) }
    }

    /// Tops this device's one-time KeyPackages in the domain up to ``DeviceKeys/oneTimeTarget``
    /// when fewer than ``DeviceKeys/lowWater`` are left (the domain counts only those young
    /// enough to hand out), and publishes a new last-resort one the first time and every
    /// ``DeviceKeys/lastResortRotation``. The private halves are stored before the public ones
    /// leave; those past their lifetime are forgotten. Runs at start and every
    /// ``keyPackageCheckInterval`` after.
    func ensureKeyPackages() async throws {
        try requireRunning()
        let now = clock.now()
        lastKeyPackageCheck = ContinuousClock.now
        let token = try await token()
        let left = try await domainCall { try await domain.keyPackageCount(token: token, endpointID: endpointID) }
        let needsLastResort = try await write { store -> Bool in
            try DeviceKeys.forgetExpired(store, now: now)
            guard let made = try store.lastResortMadeAt() else { return true }
            return now.timeIntervalSince(made) >= DeviceKeys.lastResortRotation
        }
        guard left < DeviceKeys.lowWater || needsLastResort else { return }
        let signer = try await deviceSigner()
        let count = left < DeviceKeys.lowWater ? DeviceKeys.oneTimeTarget - left : 0
        let made = try await write { store in
            try DeviceKeys.makeBundles(store, signer: signer, count: count, lastResort: needsLastResort, now: now)
        }
        _ = try await domainCall {
            try await domain.publishKeyPackages(
                token: token, endpointID: endpointID, keyPackages: made.oneTime, lastResort: made.lastResort)
        }
    }

    /// The private bundle of one of this device's KeyPackages.
    func keyPackageBundle(reference: Data) async throws -> MLSKeyPackageBundle? {
        return try await read { store in try DeviceKeys.bundle(store, reference: reference) }
    }
}
