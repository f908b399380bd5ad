import Foundation
import SparkCrypto
import SparkDomain
import SparkLock
import SparkMLS
import SparkStore

/// The contact directory and this device's identity: looking identities up, flagging a change,
/// the user's decisions (accept, confirm, block), this device's signer and KeyPackages, and the
/// user's own devices (which of them this device trusts, the approvals it signs, the news of one
/// awaiting approval). It calls no other part: what a decision changes in the chats (held
/// messages released, devices added) the messenger does after it.
actor Identities: MessagingPart {
    nonisolated let context: MessagingContext
    /// When the KeyPackages were last looked at (``ensureKeyPackages()``).
    private(set) var lastKeyPackageCheck: ContinuousClock.Instant?
    /// How often a running device looks at its KeyPackages.
    static let keyPackageCheckInterval: Duration = .seconds(3600)
    /// When the transparency log was last checked for this user and the contacts
    /// (``monitorTransparency()``).
    private(set) var lastTransparencyCheck: ContinuousClock.Instant?
    /// Roots of heads other members gossiped that the domain confirmed as its own, this run.
    var confirmedHeads: Set<Data> = []
    /// How often a running device checks its own and its contacts' labels in the log.
    static let transparencyCheckInterval: Duration = .seconds(3600)
    /// The devices of the user already announced as awaiting approval, this run.
    private var announcedDevices: Set<String> = []

    init(context: MessagingContext) { self.context = context }

    /// Whether the KeyPackages are due a look (see ``keyPackageCheckInterval``).
    var keyPackagesDue: Bool {
        lastKeyPackageCheck.map { ContinuousClock.now - $0 >= Self.keyPackageCheckInterval } ?? true
    }

    /// Whether the log is due a look (see ``transparencyCheckInterval``).
    var transparencyDue: Bool {
        lastTransparencyCheck.map { ContinuousClock.now - $0 >= Self.transparencyCheckInterval } ?? true
    }

    /// Owner and contact monitoring, now: this user's label, then each contact's.
    @discardableResult
    func monitorTransparency() async throws -> String? {
        lastTransparencyCheck = ContinuousClock.now
        let alarm = try await monitorOwnIdentity()
        try await monitorContacts()
        return alarm
    }

    // MARK: Blocking

    /// Refuses to start a chat with, or invite, a user this user blocked.
    func requireNotBlocked(_ users: [String]) throws {
        let refused = users.filter(blocked.contains)
        guard refused.isEmpty else {
            throw MessagingError(.invalidArgument, "\(refused.joined(separator: ", ")) is blocked: unblock them first")
        }
    }

    /// Blocks (or unblocks) a user: in the domain, which tells this user's other devices, and here.
    func setBlocked(_ user: String, _ isBlocked: Bool) async throws {
        guard user != me, !user.isEmpty else { throw MessagingError(.invalidArgument, "a user blocks another user") }
        try await domainCall {
            try await domain.setBlocked(token: try await token(), endpointID: endpointID, userID: user, blocked: isBlocked)
        }
        var users = blocked
        if isBlocked { users.insert(user) } else { users.remove(user) }
        try await keepBlocked(users)
    }

    /// Reads the block list from the domain again.
    func refreshBlocked() async throws {
        let users = try await domainCall { try await domain.blockedUsers(token: try await token(), endpointID: endpointID) }
        try await keepBlocked(Set(users))
    }

    private func keepBlocked(_ users: Set<String>) async throws {
        guard users != blocked else { return }
        try await write { store in try store.replaceBlockedUsers(users.sorted()) }
        context.blockedList.withLock { $0 = users }
    }

    /// The users this user blocked, sorted.
    nonisolated func blockedUsers() -> [String] { blocked.sorted() }

    // MARK: Identities

    /// A contact as the directory holds it; with `refresh`, after asking the domain what it
    /// publishes now (a differing key is kept beside the trusted one and flagged, never trusted).
    func contactRecord(of user: String, refresh: Bool) async throws -> ContactDirectory.Record {
        let stored = try await read { store in try store.contact(user) }
        if let stored, !refresh { return stored }
        // The key is the one the transparency log holds, proved; when the proof fails, the key
        // the domain claims is kept as changed, with the reason, and nothing is sealed to it.
        let proven = try await provenIdentity(of: user)
        // A failure that names no key (a log said to be empty) still marks the stored contact.
        guard let published = proven.identity ?? (proven.failure == nil ? nil : stored?.current), published.userID == user,
            published.isSelfSigned || proven.identity == nil
        else {
            if let stored { return stored }
            throw MessagingError(.unknownUser, "\(user) has no published identity (they have not set up a device)")
        }
        let (record, changed) = try await write { store in
            // Decided inside the write, on the row as it is now (another refresh may have run).
            let outcome = ContactDirectory.observe(
                published, stored: try store.contact(user), policy: try store.identityPolicy(), failure: proven.failure)
            try store.saveContact(outcome.record)
            return outcome
        }
        if changed { eventSinks.yield(.identityChanged(userID: user)) }
        if let failure = proven.failure, stored?.transparencyFailure != failure {
            eventSinks.yield(.transparencyFailure(userID: user, reason: failure))
        }
        // Chats show each participant's state (unverified when no contact is stored yet): only a
        // different state is news, and reloading mid-batch would show a half-applied step.
        if record.state != (stored?.state ?? .unverified) { await flows.reloadChats() }
        if record.state.isTrusted, let stored, !stored.state.isTrusted {
            // Trusted again (the domain publishes the trusted key once more): what was held goes.
            // Not awaited here, since this may run inside a send's own key check.
            context.trustRestoredSink.yield(())
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
    /// policy held); the messenger then sends what was held for it.
    func acceptIdentity(of user: String) async throws {
        try requireRunning()
        guard try await write({ store in try ContactDirectory.accept(store, user, verified: false) }) else {
            throw MessagingError(.unknownUser, "no contact \(user)")
        }
        await flows.reloadChats()
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
        await flows.reloadChats()
    }

    /// A contact as shown to the app.
    func contact(_ user: String) async throws -> Contact {
        let record = try await contactRecord(of: user, refresh: true)
        return Contact(
            userID: user, verification: record.state, safetyNumber: safetyNumber(for: record.current),
            keyVersion: record.current.keyVersion, transparencyFailure: record.transparencyFailure)
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
    /// ``Identities/keyPackageCheckInterval`` after.
    func ensureKeyPackages() async throws {
        try requireRunning()
        let now = clock.now()
        lastKeyPackageCheck = ContinuousClock.now
        let token = try await token()
        // Under the domain's requirePostQuantum, classic KeyPackages would be refused.
        let requirePostQuantum = try await domainCall { try await domain.policy().requirePostQuantum }
        let publishing = suites.filter { $0.isPostQuantum || !requirePostQuantum }
        let lastResortDue = try await write { store -> [MLSCipherSuite] in
            try DeviceKeys.forgetExpired(store, now: now)
            return try publishing.filter { suite in
                guard let made = try store.lastResortMadeAt(suite: suite.rawValue) else { return true }
                return now.timeIntervalSince(made) >= DeviceKeys.lastResortRotation
            }
        }
        var signerRead: MLSSigner?  // read once, and only when something is published
        // The post-quantum suite first: a classic KeyPackage that lists it in its capabilities
        // is never out while this device has no post-quantum one out.
        for suite in publishing {
            let left = try await domainCall {
                try await domain.keyPackageCount(token: token, endpointID: endpointID, suite: suite.rawValue)
            }
            let needsLastResort = lastResortDue.contains(suite)
            guard left < DeviceKeys.lowWater || needsLastResort else { continue }
            let signer: MLSSigner
            if let signerRead { signer = signerRead } else { signer = try await deviceSigner() }
            signerRead = signer
            let count = left < DeviceKeys.lowWater ? DeviceKeys.oneTimeTarget - left : 0
            let others = suites.filter { $0 != suite }
            let bundles = try await write { store in
                try DeviceKeys.makeBundles(
                    store, signer: signer, suite: suite, alsoSupported: others, count: count, lastResort: needsLastResort,
                    now: now)
            }
            _ = try await domainCall {
                try await domain.publishKeyPackages(
                    token: token, endpointID: endpointID, keyPackages: bundles.oneTime, lastResort: bundles.lastResort)
            }
        }
    }

    /// The private bundle of one of this device's KeyPackages.
    func keyPackageBundle(reference: Data) async throws -> MLSKeyPackageBundle? {
        return try await read { store in try DeviceKeys.bundle(store, reference: reference) }
    }

    // MARK: The user's own devices

    /// Publishes this device's credential, for the user's other devices to approve it by.
    func publishCredential() async throws {
        let credential = try await deviceSigner().credential.identity
        _ = try await domainCall {
            try await domain.publishEndpointCredential(token: try await token(), endpointID: endpointID, credential: credential)
        }
    }

    /// The user's devices as the domain lists them now, and which of them this device trusts
    /// (kept for the next look). A device newer than this one and awaiting approval is announced
    /// once a run; this device's own credential is published again when the listing lacks it.
    func ownDeviceView() async throws -> OwnDevices.View {
        let endpoints = try await domainCall { try await domain.endpoints(token: try await token(), endpointID: endpointID) }
        let signer = try await deviceSigner()
        let (ownDevices, myKey) = (self.ownDevices, signer.signatureKey)
        let view = try await write { store -> OwnDevices.View in
            let remembered = try store.trustedOwnDevices()
            let view = ownDevices.evaluate(endpoints, myKey: myKey, remembered: remembered)
            if view.trusted != remembered { try store.setTrustedOwnDevices(view.trusted) }
            return view
        }
        let mine = endpoints.first { $0.endpointID == endpointID }
        if mine?.credential != signer.credential.identity { try? await publishCredential() }
        let registered = mine?.registrationID ?? .max
        for device in view.listed where device.endpoint.registrationID > registered {
            guard case .awaitingApproval(let code) = OwnDevices.View.approval(of: device, in: view, user: me, me: endpointID),
                announcedDevices.insert(device.endpoint.endpointID).inserted
            else { continue }
            eventSinks.yield(.deviceAwaitingApproval(endpointID: device.endpoint.endpointID, code: code))
        }
        return view
    }

    /// The user's devices, each with its approval as this device sees it.
    func devices() async throws -> [EndpointInfo] {
        try requireRunning()
        return try await ownDeviceView().annotated(user: me, me: endpointID)
    }

    /// This device's signature of the removal of the user's device `target`, which the domain
    /// asks of a device removing another (see `EndpointRemoval`).
    func removalSignature(of target: String) async throws -> Data {
        try await deviceSigner().signature(
            forStatement: EndpointRemoval.signedBytes(user: me, remover: endpointID, target: target))
    }

    /// The code this device and the user's device `target` both show (see `DeviceApproval.code`).
    func approvalCode(with target: String) async throws -> String {
        try requireRunning()
        let view = try await ownDeviceView()
        guard let device = view.listed.first(where: { $0.endpoint.endpointID == target }), let key = device.key else {
            throw MessagingError(.unknownUser, "the user has no set-up device \(target)")
        }
        return DeviceApproval.code(user: me, view.myKey, key)
    }

    /// Approves the user's device `target` once the user saw `code` on both screens: signs the
    /// approval, has the domain list it (the user's other devices follow it), and trusts the
    /// device; the messenger then adds it to every chat. A code that is not the two devices' refuses and signs nothing.
    func approveDevice(_ target: String, code: String) async throws {
        try requireRunning()
        guard target != endpointID else { throw MessagingError(.refused, "a device does not approve itself") }
        let view = try await ownDeviceView()
        guard let device = view.listed.first(where: { $0.endpoint.endpointID == target }) else {
            throw MessagingError(.unknownUser, "the user has no registered device \(target)")
        }
        guard let key = device.key, let bytes = device.endpoint.credential else {
            throw MessagingError(
                .forged, "device \(target) has no credential signed by the user's identity key: it cannot be approved")
        }
        let expected = DeviceApproval.code(user: me, view.myKey, key)
        guard code.filter(\.isNumber) == expected.filter(\.isNumber) else {
            throw MessagingError(
                .deviceCodeMismatch, "that is not the code of this device and \(target): compare the two screens again")
        }
        let approval = try DeviceApproval.sign(
            approving: try DeviceCredential(encoded: bytes), by: try await deviceSigner(), approverID: endpointID)
        _ = try await domainCall {
            try await domain.approveEndpoint(
                token: try await token(), endpointID: endpointID, target: target, approval: approval.encoded)
        }
        try await write { store in try store.trustOwnDevice(OwnDevices.Trusted(endpointID: target, key: key)) }
    }
}
