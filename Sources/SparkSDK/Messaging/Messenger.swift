public import Foundation
import SparkCrypto
import SparkDomain
import SparkLock
import SparkMLS
import SparkObservable
import SparkStore

/// Something the app should know that is not a chat or message change.
public enum MessagingEvent: Sendable, Equatable {
    /// A contact's identity key changed (a reset, or an attack): shown on the contact and their
    /// chats until the user accepts it.
    case identityChanged(userID: String)
    /// Something arrived that failed its checks (forged, altered, replayed, reordered or for
    /// another chat) and was dropped; nothing was marked.
    case dropped(chatID: String, reason: String)
    /// The domain says a reset of `userID`'s identity was requested and takes effect at
    /// `effectiveAt` unless cancelled: this user's own (an app shows it, and offers
    /// ``BBMKeyManager/cancelReset(caller:)`` if the user did not ask), or a contact's (whose
    /// new keys, if they come, are not to be trusted without checking).
    case identityResetPending(userID: String, effectiveAt: Date)
    /// The pending reset of `userID`'s identity was cancelled.
    case identityResetCancelled(userID: String)
    /// This device is in the chat without its messages from before it joined: another user
    /// added it (an invitation, or a device of a new identity), or the history a device of this
    /// user sent could not be opened. It shows what follows.
    case historyUnavailable(chatID: String)
    /// A device of this user that this device does not trust registered after it, and set up
    /// (its credential is signed by the user's identity key): it joins no chat and gets no
    /// history until the user approves it here (``BBMAccess/approveDevice(_:code:)``) or on
    /// another device, after both screens show `code`. A device the user did not set up is an
    /// attacker holding the identity key: remove it (``BBMEnterpriseService/deregisterEndpoint(_:)``).
    case deviceAwaitingApproval(endpointID: String, code: String)
    /// `count` messages that `userID`'s devices sent in the chat have not arrived: a later
    /// message's authenticated sequence says they were sent, so the domain withholds them or
    /// they are late. Raised whenever the count changes, with 0 once they all arrived (each
    /// then shows in its place); ``Chat/missingMessageCount`` holds the chat's total.
    case messagesMissing(chatID: String, userID: String, count: Int)
    /// `userID` is typing in the chat (or stopped). A typing user's device repeats the notice
    /// every few seconds while they type: show them as typing until a stop comes or
    /// ``BBMAccess/typingTimeout`` passes without a notice. Only devices online get it.
    case typing(chatID: String, userID: String, isTyping: Bool)
    /// An app-defined live event in the chat (Spark's `chatEventSend`, as its whiteboard and
    /// location-sharing samples used), from ``BBMAccess/sendChatEvent(_:data:to:)``: delivered to
    /// the members' devices that are online, never stored. A device of `userID` other than this
    /// one sent it.
    case chatEvent(chatID: String, userID: String, tag: String, data: String?)
}

/// A step in the life of a message this user sent, as it happens: accepted and numbered by the
/// domain, delivered to a recipient's endpoint, read, or refused. Every step is reported once, in
/// order, even when the next follows at once (a read receipt right after the delivery receipt),
/// which the conflated ``BBMAccess/messages(in:)`` flow may show only as its last state.
public struct MessageEvent: Sendable, Equatable, CustomStringConvertible {
    /// The message's id (``ChatMessage/id``).
    public var messageID: String
    /// Its chat.
    public var chatID: String
    /// The chat-wide number the domain gave it; nil when it was refused before getting one.
    public var number: Int64?
    /// The state it reached: ``MessageState/sent``, ``MessageState/delivered``,
    /// ``MessageState/read`` or ``MessageState/failed(reason:)``.
    public var state: MessageState

    /// An event.
    public init(messageID: String, chatID: String, number: Int64?, state: MessageState) {
        self.messageID = messageID
        self.chatID = chatID
        self.number = number
        self.state = state
    }

    /// `#<number> <state>`.
    public var description: String { "#\(number.map(String.init) ?? "-") \(state)" }
}

/// Messages of a chat that changed after they arrived (``BBMAccess/messageChanges``).
public struct MessageChange: Sendable, Equatable {
    /// The chat.
    public var chatID: String
    /// The messages' ids, or nil when any of the chat's messages may have changed.
    public var messageIDs: Set<String>?

    /// A change.
    public init(chatID: String, messageIDs: Set<String>?) {
        self.chatID = chatID
        self.messageIDs = messageIDs
    }
}

/// What changed in a chat's messages, for its flow: nothing, the messages of these ids, or
/// anything (the window is read again).
enum MessageChanges: Sendable, Equatable {
    case none
    case some(Set<String>)
    case all

    mutating func formUnion(_ other: MessageChanges) {
        switch (self, other) {
        case (.all, _), (_, .none): break
        case (_, .all), (.none, _): self = other
        case (.some(let mine), .some(let theirs)): self = .some(mine.union(theirs))
        }
    }
}

/// The endpoint's messaging engine. Each chat is an MLS group of devices (`ChatGroup`, the pure
/// per-chat core); the messenger drives it in four parts, each in its own file:
///
/// - the chats (`Messenger+Chats.swift`): making a chat, changing who is in it, and keeping its
///   group in line with the user's devices and trust (commits, ordered by the domain);
/// - the outbox (`Messenger+Outbox.swift`): sealing, storing and posting what the user sends,
///   exactly once, sealing again when a commit overtook it; held sends; receipts;
/// - the mailbox sync (`Messenger+Mailbox.swift`): reading the mailbox a page at a time and
///   applying each page with its cursor in one transaction (each entry applied, dropped with a
///   reason, or kept waiting);
/// - the contact directory (`Messenger+Identities.swift`): identities, and this device's own;
/// - the user's own devices (`Messenger+Devices.swift`): which of them are approved.
///
/// All state is in the store (`MessagingStorage`: the endpoint store's tables, or memory), reached
/// by awaited transactions on the storage's own thread, so a restart continues where it stopped.
actor Messenger {
    let domain: any DomainService
    /// The messaging store, awaited on a thread of its own (see `MessagingStorage`).
    nonisolated let storage: MessagingStorage
    /// The chats' groups, stored and kept live (`GroupStore`, `ChatSessions`).
    nonisolated let groups: GroupStore
    /// The messaging rules for opened payloads (pure: see `MessagingCore`).
    nonisolated let core: MessagingCore
    /// The credential validators, built once per version of the contacts.
    nonisolated let validators: CredentialValidators
    /// Which of the user's devices this one trusts (see `OwnDevices`).
    nonisolated let ownDevices: OwnDevices
    /// The devices of the user already announced as awaiting approval, this run.
    var announcedDevices: Set<String> = []
    /// The wall clock KeyPackages are made and rotated by.
    nonisolated let clock: WallClock
    /// When the KeyPackages were last looked at (``ensureKeyPackages()``).
    var lastKeyPackageCheck: ContinuousClock.Instant?
    /// How often a running device looks at its KeyPackages.
    static let keyPackageCheckInterval: Duration = .seconds(3600)
    /// The user's devices may have changed (at start, and on the domain's notice): the next
    /// reconcile pass looks at them even when no chat needs it, to announce a new one.
    var devicesChanged = true
    let keys: UnlockedKeys
    nonisolated let endpointID: String
    let token: @Sendable () async throws -> String
    let pollInterval: Duration
    /// Told after each mailbox read whether it reached the domain (connectivity).
    let onMailbox: @Sendable (Bool) async -> Void
    nonisolated let chatsOwner = MutableStateFlow<[Chat]>([], label: "Messaging.chats")
    private var messageOwners: [String: MutableStateFlow<[ChatMessage]>] = [:]
    /// The first read of a chat's flow, while it runs.
    private var messageLoads: [String: Task<Void, any Error>] = [:]
    private var syncTask: Task<Void, Never>?
    /// Expires disappearing messages as their time comes (`expireDue`).
    var expiryTask: Task<Void, Never>?
    /// How often the expiry task looks for messages whose time is up.
    static let expiryInterval: Duration = .seconds(1)

    /// The latest mailbox read; each read waits for the one before it (see `syncOnce`).
    var lastSync: Task<Int, any Error>?
    /// The long-poll in flight, if the latest read is one.
    var longPoll: Task<Int, any Error>?
    /// The latest delivery run per chat; each waits for the one before it (see `deliverPending`).
    var deliveries: [String: Task<(settled: Bool, accepted: [String: ChatMessage]), Never>] = [:]
    /// The latest group change per chat; each waits for the one before it (see `change`).
    var changes: [String: Task<Void, any Error>] = [:]
    /// Chats whose group may need a change (a member left, a device of this user came or
    /// went, a key update is due): looked at after the next mailbox read. Noted from inside
    /// transactions too, so it is a lock, not the actor's.
    nonisolated let needsReconcile = Locked<Set<String>>([])
    /// The pass of `reconcile(force:)` in progress; each waits for the one before it.
    var reconciling: Task<Void, Never>?
    /// When every chat was last looked at.
    var lastReconcile: ContinuousClock.Instant?
    /// Delivery receipts due, per chat (the newest number), sent after the read that found them.
    var receiptsDue: [String: [CoveredMessage]] = [:]
    /// Set by `stop()`: from then on this messenger writes nothing (see `write`).
    var stopped = false
    /// `stopped`, readable without a hop onto the messenger.
    nonisolated let hasStopped = Locked(false)
    /// When this device last told each chat that its user is typing (see `sendTyping`).
    var typingSentAt: [String: ContinuousClock.Instant] = [:]
    /// The ephemeral messages seen lately, by nonce, and in the order they came.
    var seenEphemeral: Set<Data> = []
    var seenEphemeralOrder: [Data] = []
    /// The users this user blocked (the store's list, kept here for every arrival to check,
    /// inside its transaction).
    nonisolated let blockedList = Locked<Set<String>>([])
    nonisolated var blocked: Set<String> { blockedList.withLock { $0 } }
    /// Every `events` stream handed out; each event goes to all of them.
    nonisolated let eventSinks = EventSinks<MessagingEvent>()
    /// Every `messageEvents` stream handed out.
    nonisolated let messageEventSinks = EventSinks<MessageEvent>()
    /// Messages of other users as they arrive, once each.
    nonisolated let arrivalSinks = EventSinks<ChatMessage>()
    /// Messages that changed after they arrived.
    nonisolated let changeSinks = EventSinks<MessageChange>()
    static let flowWindow = 200
    /// How long an idle endpoint's mailbox read waits for an entry (a long-poll).
    static let longPoll: Duration = .seconds(25)
    /// How long the loop pauses after a failed read.
    static let retryAfterFailure: Duration = .seconds(1)
    static let maximumContentSize = 70 * 1024
    /// How often every chat is looked at when nothing asked for it (this user's devices may
    /// have changed; an update may be due).
    static let reconcileInterval: Duration = .seconds(60)

    nonisolated var me: String { keys.userID }

    init(
        domain: any DomainService, storage: MessagingStorage, keys: UnlockedKeys, endpointID: String,
        token: @escaping @Sendable () async throws -> String, pollInterval: Duration,
        ownDeviceApproval: OwnDeviceApproval = .required, clock: WallClock = .system,
        onMailbox: @escaping @Sendable (Bool) async -> Void = { _ in }
    ) {
        self.clock = clock
        self.onMailbox = onMailbox
        self.domain = domain
        self.storage = storage
        groups = GroupStore(sessions: ChatSessions())
        core = MessagingCore(user: keys.userID, endpointID: endpointID)
        validators = CredentialValidators(user: keys.userID, identityKey: keys.signing.publicKey.rawRepresentation)
        ownDevices = OwnDevices(
            user: keys.userID, endpointID: endpointID, identityKey: keys.signing.publicKey, policy: ownDeviceApproval)
        self.keys = keys
        self.endpointID = endpointID
        self.token = token
        self.pollInterval = pollInterval
    }

    // MARK: Running

    func start() async {
        await reloadChats()
        guard syncTask == nil else { return }
        // The block list as stored, then as the domain has it now (another device may have
        // changed it while this one was off).
        let stored = Set((try? await read { store in try store.blockedUsers() }) ?? [])
        blockedList.withLock { $0 = stored }
        try? await refreshBlocked()
        // Others can add this device to chats from the moment setup succeeds, offline or not:
        // its KeyPackages are in the domain before (topped up again at each start; a failure now
        // is retried at the next).
        try? await ensureKeyPackages()
        // The user's other devices approve this one by the credential it publishes.
        try? await publishCredential()
        // Every chat is looked at after the first read (this user's devices may have changed
        // while this one was off).
        if let chats = try? await read({ store in try store.groupChats() }) { needsReconcile.withLock { $0.formUnion(chats) } }
        let interval = pollInterval
        // Messages may have been counting down while this device was off.
        noteExpiring()
        syncTask = Task { [weak self] in
            let clock = ContinuousClock()
            var idle = false
            while !Task.isCancelled {
                guard let self else { return }
                let started = clock.now
                // Idle, the read is a long-poll: the domain answers as soon as an entry for
                // this user arrives. While entries keep coming it does not wait, and reads come
                // every `interval`: a burst then arrives in a few reads with one receipt each.
                let received: Int
                var reached = true
                do {
                    received = try await self.syncOnce(wait: idle ? Self.longPoll : .zero)
                } catch {
                    received = -1
                    // A refusal is an answer; only a domain that did not answer is unreachable.
                    reached = (error as? DomainError)?.code != .unavailable
                }
                if Task.isCancelled { return }
                await self.onMailbox(reached)
                await self.afterSync(force: false)
                if received > 0 {
                    idle = false
                    try? await clock.sleep(until: started + interval)
                } else if received < 0 {
                    // The domain failed or is unreachable: try again shortly, and then resend
                    // what the outage left sending.
                    idle = false
                    try? await clock.sleep(until: started + Self.retryAfterFailure)
                } else {
                    idle = true
                }
            }
        }
    }

    /// Stops for good: when it returns, the poll loop has ended and this messenger will not
    /// write to the store again. A post already on its way may still reach the domain; its
    /// message stays `sending` here, and the next messenger on this store resends the same bytes
    /// under the same id, which the domain answers with the number it already gave.
    func stop() async {
        stopped = true
        hasStopped.withLock { $0 = true }
        let loop = syncTask
        syncTask = nil
        loop?.cancel()
        await storage.close()
        await loop?.value
        expiryTask?.cancel()
        await expiryTask?.value
        expiryTask = nil
        groups.sessions.removeAll()
        eventSinks.finish()
        messageEventSinks.finish()
        arrivalSinks.finish()
        changeSinks.finish()
    }

    /// A message may have started counting down (stored or read in a chat with a timer): the
    /// expiry task runs until none is, looking every ``expiryInterval``. A device with no
    /// disappearing message has no such task.
    func noteExpiring() {
        guard expiryTask == nil, !stopped else { return }
        expiryTask = Task { [weak self] in
            while let self, await self.expireDue() {
                try? await Task.sleep(for: Self.expiryInterval)
                if Task.isCancelled { return }
            }
        }
    }

    /// Removes the messages whose disappearing timer ran out (content, data and reactions, from
    /// the store and its write-ahead log) and updates their chats' flows; returns whether any
    /// message is still counting down (if not, the task ends, in the same turn).
    func expireDue() async -> Bool {
        guard !stopped else { return false }
        let now = clock.now()
        let next: Date?
        do { next = try await read { store in try store.nextExpiry() } } catch { return true }
        guard let next else {
            expiryTask = nil
            return false
        }
        guard next <= now, let due = try? await write({ store in try store.expireDue(at: now) }), !due.isEmpty else {
            return true
        }
        // The log held the pages as they were: emptied, nothing of the content is left on disk.
        await storage.checkpoint()
        for chatID in Set(due.map(\.chatID)) {
            await reloadMessages(chatID)
            changeSinks.yield(MessageChange(chatID: chatID, messageIDs: Set(due.filter { $0.chatID == chatID }.map(\.id))))
        }
        await reloadChats(Set(due.map(\.chatID)))
        return true
    }

    // MARK: Queries and flows

    func chat(_ chatID: String) async throws -> Chat {
        guard let chat = try await read({ store in try self.loadChats(store, only: chatID).first }) else {
            throw MessagingError(.unknownChat, "no chat \(chatID)")
        }
        return chat
    }

    func message(id: String) async throws -> ChatMessage {
        guard let message = try await read({ store in try store.message(id) }) else {
            throw MessagingError(.unknownChat, "no message \(id)")
        }
        return message
    }

    /// The latest `limit` messages before `number` (or the newest), oldest first (see
    /// `MessagingStore.page`).
    func messages(in chatID: String, before number: Int64?, limit: Int) async throws -> [ChatMessage] {
        try await read { store in try store.page(chatID: chatID, before: number, limit: limit) }
    }

    func messageFlow(_ chatID: String) async throws -> StateFlow<[ChatMessage]> {
        if let owner = messageOwners[chatID] {
            // Made by a call still reading its first window: shown once that is in.
            try await messageLoads[chatID]?.value
            return owner.flow
        }
        let owner = MutableStateFlow<[ChatMessage]>([], label: "Messaging.messages")
        messageOwners[chatID] = owner
        let load = Task {
            try await self.storage.show { store in
                let page = try store.page(chatID: chatID, before: nil, limit: Self.flowWindow)
                return { owner.value = page }
            }
        }
        messageLoads[chatID] = load
        defer { messageLoads[chatID] = nil }
        do {
            try await load.value
        } catch {
            messageOwners[chatID] = nil
            throw error
        }
        return owner.flow
    }

    /// Brings the chat's flow up to date with what changed: the messages named are read again
    /// (by id) and put in their place in the window, the rest of it untouched; `.all` reads the
    /// window again.
    ///
    /// The flow changes on the storage's thread, inside the read: reads run there one at a time
    /// in the order they were asked for, so a flow never goes back to an older snapshot when two
    /// reloads cross.
    func reloadMessages(_ chatID: String, changed: MessageChanges = .all) async {
        guard let owner = messageOwners[chatID], changed != .none else { return }
        try? await storage.show { store in try Self.reload(owner, chatID: chatID, changed: changed, store: store) }
    }

    /// What a page of the mailbox touched, shown in one read: each chat's flow by what changed in
    /// it, and the chat list's rows of those chats.
    func reloadFlows(_ touched: [String: MessageChanges]) async {
        guard !touched.isEmpty else { return }
        let flows = touched.compactMap { chatID, changed in
            messageOwners[chatID].map { (chatID: chatID, changed: changed, owner: $0) }
        }
        let chats = chatsOwner
        let chatIDs = Set(touched.keys)
        try? await storage.show { store in
            let updates = try flows.map { flow in
                try Self.reload(flow.owner, chatID: flow.chatID, changed: flow.changed, store: store)
            }
            let rows = try self.replaceChats(chatIDs, in: chats, store: store)
            return {
                for update in updates { update() }
                rows()
            }
        }
    }

    /// Reads what `changed` asks of the flow of `chatID`, and returns the change of `owner` (run
    /// by ``MessagingStorage/show(_:)`` on the storage's thread).
    nonisolated static func reload(
        _ owner: MutableStateFlow<[ChatMessage]>, chatID: String, changed: MessageChanges, store: any MessagingStore
    ) throws -> @Sendable () -> Void {
        switch changed {
        case .none:
            return {}
        case .all:
            let page = try store.page(chatID: chatID, before: nil, limit: flowWindow)
            return { owner.value = page }
        case .some(let ids):
            guard !ids.isEmpty else { return {} }
            let found = try store.messages(chatID: chatID, ids: Array(ids))
            return {
                owner.update { window in
                    window = merge(found, removing: ids.subtracting(found.map(\.id)), into: window, limit: flowWindow)
                }
            }
        }
    }

    /// Puts `messages`, as just written, in their places in the chat's flow, without reading them
    /// back.
    func showMessages(_ messages: [ChatMessage], in chatID: String) {
        guard let owner = messageOwners[chatID], !messages.isEmpty else { return }
        owner.update { window in window = Self.merge(messages, removing: [], into: window, limit: Self.flowWindow) }
    }

    /// `window` with `changed` in their places (replaced, or added where they sort) and
    /// `removed` taken out, in the flow's order (numbered messages by number, then those without a
    /// number yet by time), keeping the newest `limit`: what ``messages(in:before:limit:)`` reads.
    static func merge(_ changed: [ChatMessage], removing removed: Set<String>, into window: [ChatMessage], limit: Int)
        -> [ChatMessage]
    {
        let merged = replacing(changed, removing: removed, in: window) { a, b in
            switch (a.number, b.number) {
            case (let x?, let y?): x < y
            case (.some, .none): true
            case (.none, .some): false
            case (.none, .none): a.timestamp < b.timestamp
            }
        }
        return Array(merged.suffix(limit))
    }

    /// `list` with `changed` in place of the items of the same id, the new ones added, those of
    /// `removed` taken out, sorted by `order`: how a flow changes by a delta.
    static func replacing<Item: Identifiable>(
        _ changed: [Item], removing removed: Set<Item.ID>, in list: [Item], sortedBy order: (Item, Item) -> Bool
    ) -> [Item] {
        let replacement = Dictionary(changed.map { ($0.id, $0) }, uniquingKeysWith: { _, last in last })
        var merged = list.compactMap { item in removed.contains(item.id) ? nil : (replacement[item.id] ?? item) }
        let present = Set(list.map(\.id))
        merged += changed.filter { !present.contains($0.id) }
        merged.sort(by: order)
        return merged
    }

    /// Brings the chat list up to date: every chat, or only `chatIDs` (each read again and put
    /// in its place, most recent activity first).
    func reloadChats(_ chatIDs: Set<String>? = nil) async {
        let owner = chatsOwner
        guard let chatIDs else {
            try? await storage.show { store in
                let chats = try self.loadChats(store, only: nil)
                return { owner.value = chats }
            }
            return
        }
        guard !chatIDs.isEmpty else { return }
        // On the storage's thread, as ``reloadMessages(_:changed:)`` does.
        try? await storage.show { store in try self.replaceChats(chatIDs, in: owner, store: store) }
    }

    /// Reads `chatIDs` again; the change returned puts each in its place in the chat list (most
    /// recent activity first), or takes it out when it is gone.
    nonisolated func replaceChats(
        _ chatIDs: Set<String>, in owner: MutableStateFlow<[Chat]>, store: any MessagingStore
    ) throws -> @Sendable () -> Void {
        guard !chatIDs.isEmpty else { return {} }
        let found = try chatIDs.flatMap { try self.loadChats(store, only: $0) }
        return {
            owner.update { chats in
                chats = Self.replacing(
                    found, removing: chatIDs.subtracting(found.map(\.chatID)), in: chats,
                    sortedBy: { $0.lastActivity > $1.lastActivity })
            }
        }
    }

    /// The chat `chatID`, or every chat, as the app sees it: the store's rows, each participant
    /// with the trust the contacts give them.
    nonisolated func loadChats(_ store: any MessagingStore, only chatID: String?) throws -> [Chat] {
        let chats = try store.chats(only: chatID)
        let trust = try store.verifications(of: Set(chats.flatMap { $0.participants.map(\.userID) }))
        return try chats.map { chat in
            Chat(
                chatID: chat.chatID, subject: chat.subject,
                participants: chat.participants.map {
                    Participant(userID: $0.userID, isAdmin: $0.isAdmin, verification: trust[$0.userID] ?? .unverified)
                }, unreadCount: chat.unreadCount,
                missingMessageCount: try store.missingTexts(chatID: chat.chatID).values.reduce(0, +),
                lastActivity: chat.lastActivity, isActive: chat.isActive,
                disappearingTimer: chat.timer > 0 ? .seconds(chat.timer) : nil)
        }
    }

    /// Records a chat's participants as its group has them (the users with a device in it, the
    /// admins its extension names, admins first), and whether this user is in it.
    static func applyMembership(_ store: some MessagingStore, group: ChatGroup, now: Date) throws {
        let admins = group.admins
        let users = group.users.sorted { (admins.contains($0) ? 0 : 1, $0) < (admins.contains($1) ? 0 : 1, $1) }
        try store.setMembership(
            chatID: group.chatID, participants: users.map { ChatMember(userID: $0, isAdmin: admins.contains($0)) },
            active: group.group.isActive, at: now)
    }

    /// This user is no longer in the chat: it stays listed, inactive, and its group is forgotten.
    nonisolated func leftChat(_ store: any MessagingStore, chatID: String) throws {
        try groups.leave(store, chatID: chatID)
    }

    // MARK: Plumbing

    /// Runs `body` on one snapshot of the store (see `MessagingStorage`).
    nonisolated func read<T: Sendable>(_ body: @escaping @Sendable (any MessagingStore) throws -> T) async throws -> T {
        try await storage.read(body)
    }

    func requireRunning() throws {
        guard !stopped else {
            throw MessagingError(.notReady, "messaging has stopped (the service was stopped, reset or signed out)")
        }
    }

    /// Every change to the store goes through here, and none once `stop()` was called (the
    /// storage is closed then): a messenger left running after its service stopped must not
    /// overwrite what the next one on this store records.
    @discardableResult
    func write<T: Sendable>(_ body: @escaping @Sendable (any MessagingStore) throws -> T) async throws -> T {
        try requireRunning()
        return try await storage.write(body)
    }

    func domainCall<T>(_ body: () async throws -> T) async throws -> T {
        try requireRunning()
        do { return try await body() } catch let error as DomainError {
            throw MessagingError(.refused, error.reason, domainCode: error.code)
        }
    }
}

/// The open `events` streams of one messenger: each consumer gets its own stream (an
/// `AsyncStream` has one consumer), and every event goes to all of them.
final class EventSinks<Event: Sendable>: Sendable {
    private struct State {
        var open: [Int: AsyncStream<Event>.Continuation] = [:]
        var next = 0
        var finished = false
        /// Events from before the first stream was opened: the catch-up the messenger does as
        /// soon as setup succeeds, which would otherwise happen before the app could listen.
        var early: [Event] = []
        var subscribed = false
    }

    private let sinks = Locked(State())

    /// A new stream of the events from now on (the first stream also gets the events from
    /// before it, up to 1,000). It keeps the newest 1,000 a slow consumer has not taken yet.
    func stream() -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(1000))
        let id = sinks.withLock { state -> Int? in
            guard !state.finished else { return nil }
            defer { state.next += 1 }
            state.open[state.next] = continuation
            if !state.subscribed {
                state.subscribed = true
                for event in state.early { continuation.yield(event) }
                state.early = []
            }
            return state.next
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in self?.sinks.withLock { _ = $0.open.removeValue(forKey: id) } }
        return stream
    }

    func yield(_ event: Event) {
        let open = sinks.withLock { state -> [AsyncStream<Event>.Continuation] in
            if !state.subscribed, state.early.count < 1000 { state.early.append(event) }
            return Array(state.open.values)
        }
        for continuation in open { continuation.yield(event) }
    }

    func finish() {
        let open = sinks.withLock { state -> [AsyncStream<Event>.Continuation] in
            state.finished = true
            defer { state.open = [:] }
            return Array(state.open.values)
        }
        for continuation in open { continuation.finish() }
    }
}
