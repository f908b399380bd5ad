import Foundation
import SparkCrypto
import SparkDomain
import SparkLock
import SparkMLS

/// What every part of one endpoint's messaging shares: the domain, the store (awaited on its own
/// thread), this device's keys, the chats' groups, the rules, the flows and the app's event
/// streams. It holds no decision and no task of its own; the parts (`MailboxSync`, `Outbox`,
/// `GroupChanges`, `Identities`, `AttachmentTransfers`) hold those, each over this context.
final class MessagingContext: Sendable {
    let domain: any DomainService
    /// The messaging store, awaited on a thread of its own (see `MessagingStorage`).
    let storage: MessagingStorage
    /// The chats' groups, stored and kept live (`GroupStore`, `GroupCache`).
    let groups: GroupStore
    /// The messaging rules for opened payloads (pure: see `MessagingCore`).
    let core: MessagingCore
    /// The credential validators, built once per version of the contacts.
    let validators: CredentialValidators
    /// Which of the user's devices this one trusts (see `OwnDevices`).
    let ownDevices: OwnDevices
    /// The wall clock messages are stamped and KeyPackages made by.
    let clock: WallClock
    let keys: UnlockedKeys
    let endpointID: String
    let token: @Sendable () async throws -> String
    /// The chat list's and the chats' flows.
    let flows: MessageFlows
    /// The disappearing messages' countdown.
    let expiry: Expiry
    /// Chats whose group may need a change (a member left, a device of this user came or went,
    /// a key update is due): looked at after the next mailbox read. Noted from inside
    /// transactions too, so it is a lock.
    let needsReconcile = Locked<Set<String>>([])
    /// The user's devices may have changed (at start, and on the domain's notice): the next
    /// reconcile pass looks at them even when no chat needs it, to announce a new one.
    let devicesChanged = Locked(true)
    /// The users this user blocked (the store's list, kept here for every arrival to check,
    /// inside its transaction).
    let blockedList = Locked<Set<String>>([])
    /// The transparency log's head this device accepted last, encoded: what its messages carry
    /// for the other members to compare (empty before the first).
    let gossipHead = Locked(Data())
    /// The auditor whose co-signature every tree head must carry (P-256 `x ‖ y`, from the
    /// plist's `transparencyAuditorKey`); nil: none required.
    let transparencyAuditor: Data?
    /// The MLS cipher suites this device runs, the preferred first: the post-quantum suite and
    /// suite 1 (``ConfigSettings/postQuantumChats``), or suite 1 alone. It publishes KeyPackages
    /// of each, and a new chat takes the first that every member device has.
    let suites: [MLSCipherSuite]
    /// Set by `Messenger.stop()`: from then on nothing is written (see `write`).
    let stopped = Locked(false)
    /// Every `events` stream handed out; each event goes to all of them.
    let eventSinks = EventSinks<MessagingEvent>()
    /// Every `messageEvents` stream handed out.
    let messageEventSinks = EventSinks<MessageEvent>()
    /// Messages of other users as they arrive, once each.
    let arrivalSinks = EventSinks<ChatMessage>()
    /// Messages that changed after they arrived.
    let changeSinks = EventSinks<MessageChange>()
    /// A contact became trusted again outside the user's decisions (the domain publishes the
    /// trusted key once more): the messenger then re-examines the chats and releases what was
    /// held. A signal, so that the contact lookup (run inside a send's own check) calls no part
    /// above it.
    let trustRestored: AsyncStream<Void>
    let trustRestoredSink: AsyncStream<Void>.Continuation
    /// A conflict, as an input to the core: a part whose post or commit the domain refused
    /// because a commit came first asks the core to catch up, and returns once the core has
    /// read what the domain ordered (the group is then at the commit that won). The parts do not
    /// know how: the messenger wires it to its mailbox read (which ends a long-poll for it).
    let catchUp = CatchUp()

    /// Domain failures that say nothing about what was sent: retry later.
    /// The domain's refusals that pass: a post over the user's limits (`tooManyAttempts`) stays in
    /// the outbox and goes once the window ends.
    static let transientDomainCodes: [DomainError.Code] = [.storageFailure, .unavailable, .tokenExpired, .tooManyAttempts]

    /// Whether applying an entry failed for a reason outside the entry (the store, the domain or
    /// the token, the messenger stopping, or the read was cancelled), so that it must be read
    /// again rather than dropped.
    static func isRetryable(_ error: any Error) -> Bool {
        switch error {
        case let error as MessagingError:
            error.code == .storageFailure || error.code == .notReady
                || error.domainCode.map(transientDomainCodes.contains) == true
        case let error as DomainError: transientDomainCodes.contains(error.code)
        case is AuthError, is CancellationError: true
        default: false
        }
    }

    /// The largest text and data a message carries.
    static let maximumContentSize = 70 * 1024

    init(
        domain: any DomainService, storage: MessagingStorage, keys: UnlockedKeys, endpointID: String,
        token: @escaping @Sendable () async throws -> String, ownDeviceApproval: OwnDeviceApproval, clock: WallClock,
        transparencyAuditor: Data? = nil, postQuantumChats: Bool = true
    ) {
        self.transparencyAuditor = transparencyAuditor
        suites =
            postQuantumChats ? [.xWingAES128GCMSHA256Ed25519, .x25519AES128GCMSHA256Ed25519] : [.x25519AES128GCMSHA256Ed25519]
        self.domain = domain
        self.storage = storage
        self.keys = keys
        self.endpointID = endpointID
        self.token = token
        self.clock = clock
        groups = GroupStore(cache: GroupCache())
        core = MessagingCore(user: keys.userID, endpointID: endpointID)
        validators = CredentialValidators(user: keys.userID, identityKey: keys.signing.publicKey.rawRepresentation)
        ownDevices = OwnDevices(
            user: keys.userID, endpointID: endpointID, identityKey: keys.signing.publicKey, policy: ownDeviceApproval)
        flows = MessageFlows(storage: storage)
        expiry = Expiry(storage: storage, flows: flows, changes: changeSinks, clock: clock, stopped: stopped)
        (trustRestored, trustRestoredSink) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }
}

/// The core's catch-up, bound late (the messenger makes the parts before it wires them): see
/// `MessagingContext.catchUp`.
final class CatchUp: Sendable {
    private let reader = Locked<(@Sendable () async throws -> Void)?>(nil)

    /// Binds the catch-up to the core's read.
    func connect(_ read: @escaping @Sendable () async throws -> Void) { reader.withLock { $0 = read } }

    /// Catches up: returns once the core's read has run (at once when nothing is connected: a
    /// messenger that is stopping).
    func callAsFunction() async throws { try await reader.withLock { $0 }?() }
}

/// A part of the messaging over one `MessagingContext`: what it shares is named as if it were
/// the part's own (`storage`, `groups`, `me`, `read`, `write`, …).
protocol MessagingPart: Sendable {
    var context: MessagingContext { get }
}

extension MessagingPart {
    var domain: any DomainService { context.domain }
    var storage: MessagingStorage { context.storage }
    var groups: GroupStore { context.groups }
    var core: MessagingCore { context.core }
    var validators: CredentialValidators { context.validators }
    var ownDevices: OwnDevices { context.ownDevices }
    var clock: WallClock { context.clock }
    var suites: [MLSCipherSuite] { context.suites }
    var keys: UnlockedKeys { context.keys }
    var endpointID: String { context.endpointID }
    var token: @Sendable () async throws -> String { context.token }
    var me: String { context.keys.userID }
    var needsReconcile: Locked<Set<String>> { context.needsReconcile }
    var blocked: Set<String> { context.blockedList.withLock { $0 } }
    /// Asks the core to catch up after a conflict (see `MessagingContext.catchUp`).
    func catchUp() async throws { try await context.catchUp() }
    var eventSinks: EventSinks<MessagingEvent> { context.eventSinks }
    var messageEventSinks: EventSinks<MessageEvent> { context.messageEventSinks }
    var arrivalSinks: EventSinks<ChatMessage> { context.arrivalSinks }
    var changeSinks: EventSinks<MessageChange> { context.changeSinks }
    var flows: MessageFlows { context.flows }
    var isStopped: Bool { context.stopped.withLock { $0 } }

    /// Runs `body` on one snapshot of the store (see `MessagingStorage`).
    func read<T: Sendable>(_ body: @escaping @Sendable (any MessagingStore) throws -> T) async throws -> T {
        try await storage.read(body)
    }

    func requireRunning() throws {
        guard !isStopped else {
            throw MessagingError(.notReady, "messaging has stopped (the service was stopped, reset or signed out)")
        }
    }

    /// Every change to the store goes through here, and none once the messenger stopped (the
    /// storage is closed then): a messenger left running after its service stopped must not
    /// overwrite what the next one on this store records.
    @discardableResult
    func write<T: Sendable>(_ body: @escaping @Sendable (any MessagingStore) throws -> T) async throws -> T {
        try requireRunning()
        return try await storage.write(body)
    }

    /// ``write(_:)``, and what it wrote shown in the flows in the same job of the storage's
    /// thread (see `MessagingStorage.write(_:thenShowing:)`).
    func write<T: Sendable>(
        synced: Bool = true,
        _ body: @escaping @Sendable (any MessagingStore) throws -> T,
        thenShowing show: @escaping @Sendable (T, any MessagingStore) throws -> @Sendable () -> Void
    ) async throws -> T {
        try requireRunning()
        return try await storage.write(synced: synced, body, thenShowing: show)
    }

    /// Calls the domain, its refusals as the messenger's (`refused`, with the domain's code).
    nonisolated(nonsending) func domainCall<T>(_ body: () async throws -> T) async throws -> T {
        try requireRunning()
        do { return try await body() } catch let error as DomainError {
            throw MessagingError(.refused, error.reason, domainCode: error.code)
        }
    }

    /// Tells every `messageEvents` stream of steps that committed.
    func report(_ events: [MessageEvent]) {
        for event in events { context.messageEventSinks.yield(event) }
    }

    /// A message may have started counting down (see `Expiry`).
    func noteExpiring() async { await context.expiry.note() }

    /// The chat `chatID` open for `purpose` in this transaction (see `ChatSession`).
    func session(_ chatID: String, in store: any MessagingStore, for purpose: ChatSession.Purpose = .follow) throws
        -> ChatSession?
    {
        try ChatSession.open(chatID, in: store, context, for: purpose)
    }

    /// The chat `chatID` open, active, for sealing or committing; `unknownChat` when this device
    /// is in no group of it.
    func activeSession(_ chatID: String, in store: any MessagingStore) throws -> ChatSession {
        guard let session = try session(chatID, in: store), session.group.group.isActive else {
            throw MessagingError(.unknownChat, "this device is not in chat \(chatID)")
        }
        return session
    }

    /// The validator of devices this device sends to and adds: trusted keys only.
    func trustedValidator(_ store: any MessagingStore) throws -> DeviceCredentialValidator {
        try validators.current(store).trusted
    }

    /// Keeps `group` as the chat's group, in the next epoch, and shows its members and subject.
    func adopt(_ group: ChatGroup, in store: any MessagingStore, updated: Bool) throws {
        let previous = try groups.load(store, chatID: group.chatID, validator: MLSAcceptAnyCredential())
        try groups.save(
            store,
            GroupStore.Stored(
                group: group, sentSinceUpdate: updated ? 0 : previous?.sentSinceUpdate ?? 0,
                updatedAt: updated ? Date() : previous?.updatedAt ?? Date(), lastNumber: previous?.lastNumber ?? 0))
        try ChatSession.applyMembership(store, group: group, now: Date())
        try ChatSession.applySubject(of: group, in: store)
    }

    /// This user is no longer in the chat: it stays listed, inactive, and its group is forgotten.
    func leftChat(_ store: any MessagingStore, chatID: String) throws {
        try groups.leave(store, chatID: chatID)
    }

    /// A new id for a message or a payload.
    func newID() -> String { UUID().uuidString.lowercased() }
}
