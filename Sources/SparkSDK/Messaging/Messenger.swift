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

/// The endpoint's messaging engine: it seals and posts what the user sends, and reads the
/// user's mailbox, verifying, decrypting and storing what arrives, then answering with receipts.
/// All state is in the endpoint store, so a restart continues where it stopped.
actor Messenger {
    let domain: any DomainService
    let queue: DatabaseQueue
    /// Seals the store's secret values (chat keys, message bodies, subjects): see `StoreSealer`.
    let sealer: StoreSealer
    let keys: UnlockedKeys
    let endpointID: String
    let token: @Sendable () async throws -> String
    let pollInterval: Duration
    /// Told after each mailbox read whether it reached the domain (connectivity).
    let onMailbox: @Sendable (Bool) async -> Void
    nonisolated let chatsOwner = MutableStateFlow<[Chat]>([], label: "Messaging.chats")
    private var messageOwners: [String: MutableStateFlow<[ChatMessage]>] = [:]
    private var syncTask: Task<Void, Never>?
    /// The latest mailbox read; each read waits for the one before it (see `syncOnce`).
    private var lastSync: Task<Int, any Error>?
    /// The long-poll in flight, if the latest read is one.
    private var longPoll: Task<Int, any Error>?
    /// The latest delivery run per chat; each waits for the one before it (see `deliverPending`).
    private var deliveries: [String: Task<Bool, Never>] = [:]
    /// The sending-key check in progress per chat: concurrent sends wait for the same one, so a
    /// chat never gets two keys for one epoch.
    private var keyChecks: [String: Task<(Int, SymmetricKey), any Error>] = [:]
    /// Set by `stop()`: from then on this messenger writes nothing (see `write`).
    private var stopped = false
    /// Every `events` stream handed out; each event goes to all of them.
    nonisolated let eventSinks = EventSinks<MessagingEvent>()
    /// Every `messageEvents` stream handed out.
    nonisolated let messageEventSinks = EventSinks<MessageEvent>()
    static let flowWindow = 200
    /// How long an idle endpoint's mailbox read waits for an entry (a long-poll).
    static let longPoll: Duration = .seconds(25)
    /// How long the loop pauses after a failed read.
    static let retryAfterFailure: Duration = .seconds(1)
    static let maximumContentSize = 70 * 1024

    var me: String { keys.userID }

    init(
        domain: any DomainService, store: EndpointStore, keys: UnlockedKeys, endpointID: String,
        token: @escaping @Sendable () async throws -> String, pollInterval: Duration,
        onMailbox: @escaping @Sendable (Bool) async -> Void = { _ in }
    ) {
        self.onMailbox = onMailbox
        self.domain = domain
        self.queue = store.queue
        self.sealer = store.sealer
        self.keys = keys
        self.endpointID = endpointID
        self.token = token
        self.pollInterval = pollInterval
    }

    // MARK: Running

    func start() {
        reloadChats()
        guard syncTask == nil else { return }
        // Others can add this device to chats while it is offline: its KeyPackages are in the
        // domain (topped up again at each start; a failure now is retried at the next).
        Task { [weak self] in try? await self?.ensureKeyPackages() }
        let interval = pollInterval
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
                await self.resendPending()
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
        let loop = syncTask
        syncTask = nil
        loop?.cancel()
        await loop?.value
        eventSinks.finish()
        messageEventSinks.finish()
    }

    // MARK: Chats

    func startChat(with users: [String], subject: String) async throws -> Chat {
        let others = Array(Set(users)).filter { $0 != me }.sorted()
        guard !others.isEmpty else { throw MessagingError(.unknownUser, "a chat needs at least one other user") }
        try await requireTrusted(others)
        let chatID = SystemRandom.bytes(count: 12).base64URLEncodedString()
        // The subject goes out with the chat, so that no member ever lists it without one.
        let opening =
            subject.isEmpty ? nil : try await announcement(chatID, subject: subject, to: others + [me], epoch: 1, after: 0)
        let info = try await domainCall {
            try await domain.createChat(
                token: try await token(), endpointID: endpointID, chatID: chatID, participants: others,
                posts: opening?.posts ?? [])
        }
        try write { db in
            try Self.applyMembership(db, chatID: chatID, members: info.members, me: self.me, now: Date())
            if let opening { try self.record(opening, in: db, chatID: chatID, subject: subject) }
        }
        reloadChats()
        return try chat(chatID)
    }

    func invite(_ users: [String], to chatID: String) async throws {
        try await requireTrusted(users.filter { $0 != me })
        // The new members get this user's next key and the subject with the invitation itself.
        let (current, latest, after) = try read { db -> (Chat?, Int, Int64) in
            let latest =
                try db.scalar(
                    "SELECT max(epoch) FROM sender_keys WHERE chat_id = ? AND sender = ? AND device = ?",
                    [chatID, self.me, self.endpointID], as: Int.self) ?? 0
            return (
                try Self.loadChats(db, only: chatID, sealer: self.sealer).first, latest, try self.lastSequence(db, chatID: chatID)
            )
        }
        guard let current, current.isActive else { throw MessagingError(.unknownChat, "this user is not in chat \(chatID)") }
        let members = Array(Set(current.participants.map(\.userID) + users)).sorted()
        let rotation = try await announcement(chatID, subject: current.subject, to: members, epoch: latest + 1, after: after)
        let info = try await domainCall {
            try await domain.updateMembers(
                token: try await token(), endpointID: endpointID, chatID: chatID, add: users, remove: [], posts: rotation.posts)
        }
        try write { db in
            try Self.applyMembership(db, chatID: chatID, members: info.members, me: self.me, now: Date())
            try self.record(rotation, in: db, chatID: chatID, subject: nil)
        }
        reloadChats()
    }

    /// Looks up each user's identity now and refuses, before anything is made, when one is not
    /// trusted (a changed key, or a first contact the policy holds).
    private func requireTrusted(_ users: [String]) async throws {
        var unconfirmed: [String] = []
        for user in users where !(try await contactRecord(of: user, refresh: true)).state.isTrusted {
            unconfirmed.append(user)
        }
        guard unconfirmed.isEmpty else {
            throw MessagingError(
                .identityUnconfirmed,
                "the identity of \(unconfirmed.joined(separator: ", ")) is not confirmed: accept it or confirm the safety number first"
            )
        }
    }

    /// A new sending key of this endpoint for `members` and a sealed subject event under it,
    /// as posts that go out with a chat's creation or an invitation.
    private struct Announcement {
        var epoch: Int
        var key: SymmetricKey
        var sequence: Int64
        var posts: [ChatPost]
        var pending: [String]
    }

    private func announcement(
        _ chatID: String, subject: String, to members: [String], epoch: Int, after: Int64
    ) async throws -> Announcement {
        let key = SymmetricKey(size: .bits256)
        let (envelopes, pending) = try await keyEnvelopes(key, chatID: chatID, epoch: epoch, after: after, to: members)
        var posts = envelopes.map { ChatPost(kind: .chatKey, payload: $0.envelope, recipient: $0.member) }
        let event = try SealedFormats.seal(
            SealedFormats.Content(content: "", tag: "Subject", subject: subject), id: UUID().uuidString.lowercased(),
            chat: chatID, device: endpointID, seq: after + 1, epoch: epoch, key: key, sender: keys)
        posts.append(ChatPost(kind: .event, payload: event))
        return Announcement(epoch: epoch, key: key, sequence: after + 1, posts: posts, pending: pending)
    }

    /// Keeps an announcement's key and sequence once the domain took it (inside the write that
    /// records the membership, so the key belongs to the new membership version).
    private func record(_ announcement: Announcement, in db: Database, chatID: String, subject: String?) throws {
        let version = try db.scalar("SELECT membership_version FROM chats WHERE chat_id = ?", [chatID], as: Int.self) ?? 1
        try keep(
            announcement.key, epoch: announcement.epoch, chatID: chatID, membershipVersion: version,
            pending: announcement.pending, in: db)
        try db.execute(
            """
            INSERT INTO sender_sequences(chat_id, sender, device, last_seq) VALUES (?, ?, ?, ?)
            ON CONFLICT(chat_id, sender, device) DO UPDATE SET last_seq = max(last_seq, excluded.last_seq)
            """, [chatID, me, endpointID, announcement.sequence])
        if let subject {
            try db.execute(
                "UPDATE chats SET subject = ? WHERE chat_id = ?",
                [try sealer.seal(subject, EndpointStore.Seal.subject(chatID)), chatID])
        }
    }

    private func lastSequence(_ db: Database, chatID: String) throws -> Int64 {
        try db.scalar(
            "SELECT last_seq FROM sender_sequences WHERE chat_id = ? AND sender = ? AND device = ?", [chatID, me, endpointID],
            as: Int64.self) ?? 0
    }

    func remove(_ user: String, from chatID: String) async throws {
        let info = try await domainCall {
            try await domain.updateMembers(
                token: try await token(), endpointID: endpointID, chatID: chatID, add: [], remove: [user])
        }
        try write { db in try Self.applyMembership(db, chatID: chatID, members: info.members, me: self.me, now: Date()) }
        reloadChats()
    }

    func leave(_ chatID: String) async throws { try await remove(me, from: chatID) }

    func rename(_ chatID: String, subject: String) async throws {
        try await post(
            chatID: chatID, content: SealedFormats.Content(content: "", tag: "Subject", subject: subject), kind: .event)
        try write { db in
            try db.execute(
                "UPDATE chats SET subject = ?, last_activity = ? WHERE chat_id = ?",
                [try self.sealer.seal(subject, EndpointStore.Seal.subject(chatID)), Date().timeIntervalSince1970, chatID])
        }
        reloadChats()
    }

    // MARK: Sending

    func send(_ content: String, tag: String, data: String?, ref: Int64?, to chatID: String) async throws -> ChatMessage {
        guard content.utf8.count + (data?.utf8.count ?? 0) <= Self.maximumContentSize else {
            throw MessagingError(.tooLarge, "content and data together are limited to 70 KB")
        }
        let id = try await post(
            chatID: chatID, content: SealedFormats.Content(content: content, tag: tag, data: data, ref: ref), kind: .message)
        return try message(id: id)
    }

    /// Seals, stores (state sending) and posts. Returns the local id.
    @discardableResult
    private func post(chatID: String, content: SealedFormats.Content, kind: MailboxKind) async throws -> String {
        guard try read({ db in try db.scalar("SELECT active FROM chats WHERE chat_id = ?", [chatID], as: Bool.self) }) == true
        else {
            throw MessagingError(.unknownChat, "this user is not in chat \(chatID)")
        }
        // An event is not stored for retry, so it waits for no earlier message: it goes only
        // when nothing is left sending in the chat, and is refused (using no number) otherwise.
        if kind != .message, await !deliverPending(in: chatID) {
            throw MessagingError(
                .refused, "earlier messages in this chat are still sending; try again", domainCode: .unavailable)
        }
        let id = UUID().uuidString.lowercased()
        let now = Date()
        // Nothing is sealed while a participant's key is not trusted: a message waits, held; an
        // event (a subject) is refused, since it is not stored for later.
        var unconfirmed = try read { db in try ContactDirectory.untrusted(db, chatID: chatID, me: self.me) }
        if !unconfirmed.isEmpty {
            // The domain may publish the trusted key again (a substitution withdrawn): look.
            for user in unconfirmed { _ = try? await contactRecord(of: user, refresh: true) }
            unconfirmed = try read { db in try ContactDirectory.untrusted(db, chatID: chatID, me: self.me) }
        }
        var sender: (Int, SymmetricKey)?
        if unconfirmed.isEmpty {
            do {
                sender = try await ensureSenderKey(chatID)
            } catch let error as MessagingError where error.code == .identityUnconfirmed {
                unconfirmed = try read { db in try ContactDirectory.untrusted(db, chatID: chatID, me: self.me) }
                if kind != .message { throw error }
            }
        }
        guard let (epoch, key) = sender else {
            guard kind == .message else {
                throw MessagingError(
                    .identityUnconfirmed,
                    "the identity of \(unconfirmed.joined(separator: ", ")) changed: accept it or confirm the safety number first"
                )
            }
            try write { db in try self.storeOutgoing(content, id: id, chatID: chatID, state: "held", sealed: nil, at: now, in: db)
            }
            reloadMessages(chatID)
            return id
        }
        let sealed = try write { db -> Data in
            let sealed = try self.sealNext(content, id: id, chatID: chatID, epoch: epoch, key: key, in: db)
            if kind == .message {
                try self.storeOutgoing(content, id: id, chatID: chatID, state: "sending", sealed: sealed, at: now, in: db)
            }
            return sealed
        }
        reloadMessages(chatID)
        if kind == .message {
            _ = await deliverPending(in: chatID)
        } else {
            _ = try await domainCall {
                try await domain.post(
                    token: try await token(), endpointID: endpointID, chatID: chatID, kind: kind, payload: sealed, recipient: nil,
                    clientID: id)
            }
        }
        return id
    }

    /// Seals `content` as this endpoint's next message in the chat (its sequence number moves
    /// in the same transaction).
    private func sealNext(
        _ content: SealedFormats.Content, id: String, chatID: String, epoch: Int, key: SymmetricKey, in db: Database
    ) throws -> Data {
        let seq = try lastSequence(db, chatID: chatID) + 1
        try db.execute(
            """
            INSERT INTO sender_sequences(chat_id, sender, device, last_seq) VALUES (?, ?, ?, ?)
            ON CONFLICT(chat_id, sender, device) DO UPDATE SET last_seq = excluded.last_seq
            """, [chatID, me, endpointID, seq])
        return try SealedFormats.seal(
            content, id: id, chat: chatID, device: endpointID, seq: seq, epoch: epoch, key: key, sender: keys)
    }

    /// Stores a message this user sends, its content sealed for the store.
    private func storeOutgoing(
        _ content: SealedFormats.Content, id: String, chatID: String, state: String, sealed: Data?, at now: Date, in db: Database
    ) throws {
        try db.execute(
            """
            INSERT INTO messages(local_id, chat_id, sender, incoming, content, tag, data, ref, state, timestamp, sealed)
            VALUES (?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                id, chatID, me, try sealer.seal(content.content, EndpointStore.Seal.content(id)), content.tag,
                try content.data.map { try sealer.seal($0, EndpointStore.Seal.data(id)) }, content.ref, state,
                now.timeIntervalSince1970, sealed,
            ])
    }

    /// Posts a stored message; the same bytes and id on every retry, so it is sent exactly once.
    /// Returns false when it is left sending (the domain, its store or the token failed for now).
    private func deliver(localID: String, chatID: String, sealed: Data) async -> Bool {
        var settled = true
        do {
            let receipt = try await domain.post(
                token: try await token(), endpointID: endpointID, chatID: chatID, kind: .message, payload: sealed, recipient: nil,
                clientID: localID)
            let events = try write { db in
                let events = try Self.numbered(db, localID: localID, number: receipt.messageNumber)
                try db.execute(
                    "UPDATE messages SET timestamp = ? WHERE local_id = ?", [receipt.postedAt.timeIntervalSince1970, localID])
                try db.execute(
                    "UPDATE chats SET last_activity = ? WHERE chat_id = ?", [receipt.postedAt.timeIntervalSince1970, chatID])
                return events
            }
            report(events)
        } catch let error as DomainError where !Self.transientDomainCodes.contains(error.code) {
            let failed = try? write { db in
                try db.execute("UPDATE messages SET state = 'failed', failure = ? WHERE local_id = ?", [error.reason, localID])
            }
            if failed != nil {
                report([MessageEvent(messageID: localID, chatID: chatID, number: nil, state: .failed(reason: error.reason))])
            }
        } catch {
            // Left as sending: retried with the same bytes until the domain answers.
            settled = false
        }
        reloadMessages(chatID)
        return settled
    }

    /// Posts every message of the chat still sending, oldest first, and stops at the first one
    /// left sending: recipients refuse a sending endpoint's messages out of order, so a later
    /// message must never overtake an earlier one. Returns false when some are left sending.
    ///
    /// Runs for one chat go one at a time, each after the one before it: concurrent sends would
    /// otherwise each post every message still pending (harmless, the domain answers a repeated
    /// id with its first number, but quadratic in the number of concurrent sends).
    private func deliverPending(in chatID: String) async -> Bool {
        let previous = deliveries[chatID]
        let run = Task {
            _ = await previous?.value
            return await postPending(in: chatID)
        }
        deliveries[chatID] = run
        let settled = await run.value
        if deliveries[chatID] == run { deliveries[chatID] = nil }
        return settled
    }

    private func postPending(in chatID: String) async -> Bool {
        guard !stopped else { return false }
        let pending =
            (try? read { db in
                try db.rows(
                    "SELECT local_id, sealed FROM messages WHERE chat_id = ? AND state = 'sending' AND sealed IS NOT NULL ORDER BY rowid",
                    [chatID]
                ).map { (try $0.get(0, as: String.self), try $0.get(1, as: Data.self)) }
            }) ?? []
        for (id, sealed) in pending {
            guard await deliver(localID: id, chatID: chatID, sealed: sealed) else { return false }
        }
        return true
    }

    /// Messages still sending after a crash or an outage are posted again (idempotently).
    func resendPending() async {
        let chats =
            (try? read { db in
                try db.rows("SELECT DISTINCT chat_id FROM messages WHERE state = 'sending' AND sealed IS NOT NULL").map {
                    try $0.get(0, as: String.self)
                }
            }) ?? []
        for chatID in chats { _ = await deliverPending(in: chatID) }
    }

    /// This user's current sending key for the chat, made and handed to every member when the
    /// membership changed since the last one (so a member who left cannot read what follows).
    private func ensureSenderKey(_ chatID: String) async throws -> (Int, SymmetricKey) {
        if let running = keyChecks[chatID] { return try await running.value }
        let check = Task { try await self.checkSenderKey(chatID) }
        keyChecks[chatID] = check
        defer { keyChecks[chatID] = nil }
        return try await check.value
    }

    private func checkSenderKey(_ chatID: String) async throws -> (Int, SymmetricKey) {
        let (version, members, latest, after) = try read { db -> (Int, [String], (Int, Data, Int, [String])?, Int64) in
            let version = try db.scalar("SELECT membership_version FROM chats WHERE chat_id = ?", [chatID], as: Int.self) ?? 1
            let members = try db.rows("SELECT user_id FROM participants WHERE chat_id = ?", [chatID]).map {
                try $0.get(0, as: String.self)
            }
            let latest = try db.row(
                """
                SELECT epoch, key, membership_version, pending FROM sender_keys WHERE chat_id = ? AND sender = ? AND device = ?
                ORDER BY epoch DESC LIMIT 1
                """, [chatID, self.me, self.endpointID]
            ).map {
                (
                    try $0.get(0, as: Int.self), try $0.get(1, as: Data.self), try $0.get(2, as: Int.self),
                    Self.decodeMembers(try $0.get(3, as: String.self))
                )
            }
            return (version, members, latest, try self.lastSequence(db, chatID: chatID))
        }
        let token = try await token()
        if let latest, latest.2 == version {
            let key = SymmetricKey(
                data: try sealer.open(latest.1, EndpointStore.Seal.chatKey(chatID, me, endpointID, latest.0)))
            // Members who had no identity when the key was made get it once they have one.
            if !latest.3.isEmpty {
                try await hand(key, chatID: chatID, epoch: latest.0, after: after, to: latest.3, token: token)
            }
            return (latest.0, key)
        }
        let epoch = (latest?.0 ?? 0) + 1
        let key = SymmetricKey(size: .bits256)
        let (envelopes, pending) = try await keyEnvelopes(key, chatID: chatID, epoch: epoch, after: after, to: members)
        try await post(envelopes, chatID: chatID, token: token)
        try write { db in
            try self.keep(key, epoch: epoch, chatID: chatID, membershipVersion: version, pending: pending, in: db)
        }
        return (epoch, key)
    }

    /// Posts key envelopes, each to its member.
    private func post(_ envelopes: [(member: String, envelope: Data)], chatID: String, token: String) async throws {
        for (member, envelope) in envelopes {
            _ = try await domainCall {
                try await domain.post(
                    token: token, endpointID: endpointID, chatID: chatID, kind: .chatKey, payload: envelope, recipient: member,
                    clientID: nil)
            }
        }
    }

    /// Keeps one of this endpoint's sending keys, sealed, with the membership it was made for
    /// and the members still pending.
    private func keep(
        _ key: SymmetricKey, epoch: Int, chatID: String, membershipVersion: Int, pending: [String], in db: Database
    ) throws {
        try db.execute(
            """
            INSERT OR REPLACE INTO sender_keys(chat_id, sender, device, epoch, key, membership_version, pending)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """,
            [
                chatID, me, endpointID, epoch,
                try sealer.seal(key.secureBytes.unsafeData(), EndpointStore.Seal.chatKey(chatID, me, endpointID, epoch)),
                membershipVersion, Self.encodeMembers(pending),
            ])
    }

    /// Posts the current key to members who were pending, and records who still is.
    private func hand(_ key: SymmetricKey, chatID: String, epoch: Int, after: Int64, to pending: [String], token: String)
        async throws
    {
        let (envelopes, stillPending) = try await keyEnvelopes(key, chatID: chatID, epoch: epoch, after: after, to: pending)
        guard !envelopes.isEmpty else { return }
        try await post(envelopes, chatID: chatID, token: token)
        try write { db in
            try db.execute(
                "UPDATE sender_keys SET pending = ? WHERE chat_id = ? AND sender = ? AND device = ? AND epoch = ?",
                [Self.encodeMembers(stillPending), chatID, self.me, self.endpointID, epoch])
        }
    }

    static func encodeMembers(_ members: [String]) -> String {
        String(decoding: (try? JSONEncoder().encode(members)) ?? Data("[]".utf8), as: UTF8.self)
    }

    static func decodeMembers(_ text: String) -> [String] {
        (try? JSONDecoder().decode([String].self, from: Data(text.utf8))) ?? []
    }

    /// `key` sealed to each member's current identity (looked up again, so a changed one is
    /// noticed and flagged before anything is sealed to it). Members without an identity (they
    /// never set up a device) are returned as pending: the chat goes on without them, and they
    /// get the key at a later send once they have one.
    private func keyEnvelopes(
        _ key: SymmetricKey, chatID: String, epoch: Int, after: Int64, to members: [String]
    ) async throws -> (envelopes: [(member: String, envelope: Data)], pending: [String]) {
        var envelopes: [(member: String, envelope: Data)] = []
        var pending: [String] = []
        var unconfirmed: [String] = []
        for member in members {
            let record: ContactDirectory.Record
            do {
                record = try await contactRecord(of: member, refresh: true)
            } catch let error as MessagingError where error.code == .unknownUser {
                pending.append(member)
                continue
            }
            // Only a trusted key is sealed to; any other holds the whole key, for everyone.
            guard record.state.isTrusted || member == me else {
                unconfirmed.append(member)
                continue
            }
            envelopes.append(
                (
                    member,
                    try SealedFormats.sealKey(
                        key, chat: chatID, epoch: epoch, after: after, from: keys, device: endpointID, to: member,
                        recipientKey: try X25519.PublicKey(rawRepresentation: record.trusted.encryptionKey))
                ))
        }
        guard unconfirmed.isEmpty else {
            throw MessagingError(
                .identityUnconfirmed,
                "the identity of \(unconfirmed.joined(separator: ", ")) is not confirmed: accept it or confirm the safety number first"
            )
        }
        return (envelopes, pending)
    }

    // MARK: Reading

    func markRead(_ chatID: String, upTo number: Int64?) async throws {
        try requireRunning()
        let upTo =
            try number ?? read { db in
                try db.scalar("SELECT max(number) FROM messages WHERE chat_id = ? AND incoming = 1", [chatID], as: Int64.self)
            } ?? 0
        guard upTo > 0 else { return }
        try write { db in
            try db.execute(
                "UPDATE messages SET state = 'read' WHERE chat_id = ? AND incoming = 1 AND number <= ? AND state != 'read'",
                [chatID, upTo])
        }
        reloadMessages(chatID)
        reloadChats()
        try await sendReceipt(chatID: chatID, state: "read", number: upTo)
    }

    private func sendReceipt(chatID: String, state: String, number: Int64) async throws {
        let payload = try JSONEncoder().encode(Receipt(state: state, number: number))
        _ = try await domainCall {
            try await domain.post(
                token: try await token(), endpointID: endpointID, chatID: chatID, kind: .receipt, payload: payload,
                recipient: nil, clientID: nil)
        }
    }

    struct Receipt: Codable {
        var state: String
        var number: Int64
    }

    /// Reads and applies the mailbox after the stored cursor; returns how many entries came.
    ///
    /// Reads run one at a time: the poll loop and `BBMAccess.refresh()` interleave at every
    /// `await`, and two reads from the same cursor would apply an entry twice (the second time
    /// refused as a replay and reported as dropped).
    func syncOnce(wait: Duration = .zero) async throws -> Int {
        // A read now must not queue behind a long-poll: the long-poll ends (empty) instead.
        if wait == .zero { longPoll?.cancel() }
        let previous = lastSync
        let next = Task {
            _ = try? await previous?.value
            do {
                return try await readMailbox(wait: wait)
            } catch is CancellationError where wait > .zero {
                return 0
            }
        }
        lastSync = next
        if wait > .zero { longPoll = next }
        return try await withTaskCancellationHandler {
            try await next.value
        } onCancel: {
            next.cancel()
        }
    }

    private func readMailbox(wait: Duration) async throws -> Int {
        try requireRunning()
        let cursor = try read { db in try db.scalar("SELECT sequence FROM mailbox_cursor", as: Int64.self) } ?? 0
        let entries = try await domain.readMailbox(
            token: try await token(), endpointID: endpointID, after: cursor, limit: 200, wait: wait)
        var touched = Set<String>()
        var receipts: [(String, Int64)] = []
        var committed: [MessageEvent] = []
        var failure: (any Error)?
        for entry in entries {
            // An entry's changes and the cursor move in one transaction: a crash, or the store,
            // the domain or the token failing, leaves neither, and the entry is read again. An
            // entry that fails its checks is dropped (reported) and only the cursor moves.
            var applied = Applied()
            var events: [MessageEvent] = []
            do {
                applied = try await apply(entry)
            } catch let error where Self.isRetryable(error) {
                failure = error
                break
            } catch {
                eventSinks.yield(.dropped(chatID: entry.chatID, reason: (error as? MessagingError)?.reason ?? "\(error)"))
            }
            do {
                events = try write { db in
                    let events = try applied.changes?(db) ?? []
                    try Self.moveCursor(db, to: entry.sequence)
                    return events
                }
            } catch let error as MessagingError where error.code == .conflict {
                // The entry contradicts the store (a member listed twice, a number already
                // taken): retrying cannot help, so it is dropped like a forgery, its changes
                // rolled back, and only the cursor moves past it.
                eventSinks.yield(.dropped(chatID: entry.chatID, reason: error.reason))
                do {
                    try write { db in try Self.moveCursor(db, to: entry.sequence) }
                } catch {
                    failure = error
                    break
                }
                continue
            } catch {
                failure = error
                break
            }
            if let delivered = applied.delivered { receipts.append((entry.chatID, delivered)) }
            if !entry.chatID.isEmpty { touched.insert(entry.chatID) }
            committed += events
        }
        // What committed before a failure is shown and acknowledged all the same; the flows
        // first, so that an app told of a step finds it there.
        for chatID in touched { reloadMessages(chatID) }
        if !touched.isEmpty { reloadChats() }
        report(committed)
        // One delivery receipt per chat per batch, covering everything up to its newest message.
        var newest: [String: Int64] = [:]
        for (chatID, number) in receipts { newest[chatID] = max(newest[chatID] ?? 0, number) }
        for (chatID, number) in newest { try? await sendReceipt(chatID: chatID, state: "delivered", number: number) }
        if let failure { throw failure }
        return entries.count
    }

    /// SQLite's extended codes for data that contradicts the schema (a primary key or unique
    /// value taken, a NULL or a failed CHECK), as opposed to the store failing: what arrived is at
    /// fault, and retrying it cannot help. (A trigger's RAISE, a full disk or I/O are failures.)
    static let dataConflicts: Set<Int32> = [1555, 2067, 1299, 275]  // PRIMARYKEY, UNIQUE, NOTNULL, CHECK

    static func moveCursor(_ db: Database, to sequence: Int64) throws {
        try db.execute(
            "INSERT INTO mailbox_cursor(singleton, sequence) VALUES (1, ?) ON CONFLICT(singleton) DO UPDATE SET sequence = excluded.sequence",
            [sequence])
    }

    /// Domain failures that say nothing about what was sent: retry later.
    static let transientDomainCodes: [DomainError.Code] = [.storageFailure, .unavailable, .tokenExpired]

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

    /// What one mailbox entry changes in the store, and the message number to acknowledge as
    /// delivered; `readMailbox()` writes the changes together with the cursor.
    private struct Applied {
        /// Writes the entry's changes; returns the steps of this user's messages they made.
        var changes: ((Database) throws -> [MessageEvent])?
        var delivered: Int64?
    }

    /// Opens and checks one entry; returns its changes without writing them.
    private func apply(_ entry: MailboxEntry) async throws -> Applied {
        let me = self.me
        switch entry.kind {
        case .membership:
            guard let members = entry.members else { return Applied() }
            return Applied { db in
                try Self.applyMembership(db, chatID: entry.chatID, members: members, me: me, now: entry.postedAt)
                return []
            }
        case .chatKey:
            guard let to = (try? JSONDecoder().decode(SealedFormats.KeyEnvelope.self, from: entry.payload))?.to, to == me else {
                return Applied()
            }
            let sender = try await identity(of: entry.sender, refresh: false)
            let opened: (device: String, epoch: Int, after: Int64, key: SymmetricKey)
            do {
                opened = try SealedFormats.openKey(
                    entry.payload, chat: entry.chatID, sender: entry.sender,
                    senderKey: try Ed25519.PublicKey(rawRepresentation: sender.signingKey), me: keys)
            } catch {
                // The sender may have new keys: look again once before refusing.
                let fresh = try await identity(of: entry.sender, refresh: true)
                opened = try SealedFormats.openKey(
                    entry.payload, chat: entry.chatID, sender: entry.sender,
                    senderKey: try Ed25519.PublicKey(rawRepresentation: fresh.signingKey), me: keys)
            }
            let sealedKey = try sealer.seal(
                opened.key.secureBytes.unsafeData(),
                EndpointStore.Seal.chatKey(entry.chatID, entry.sender, opened.device, opened.epoch))
            return Applied { db in
                let version =
                    try db.scalar("SELECT membership_version FROM chats WHERE chat_id = ?", [entry.chatID], as: Int.self) ?? 1
                try db.execute(
                    "INSERT OR IGNORE INTO sender_keys(chat_id, sender, device, epoch, key, membership_version) VALUES (?, ?, ?, ?, ?, ?)",
                    [entry.chatID, entry.sender, opened.device, opened.epoch, sealedKey, version])
                // A member who joins late starts counting the sender's messages where the key did.
                try db.execute(
                    "INSERT OR IGNORE INTO sender_sequences(chat_id, sender, device, last_seq) VALUES (?, ?, ?, ?)",
                    [entry.chatID, entry.sender, opened.device, opened.after])
                return []
            }
        case .message, .event:
            let header = try SealedFormats.header(entry.payload)
            let stored = try read { db -> (Data?, Int64, Bool) in
                let key = try db.scalar(
                    "SELECT key FROM sender_keys WHERE chat_id = ? AND sender = ? AND device = ? AND epoch = ?",
                    [entry.chatID, entry.sender, header.device, header.epoch], as: Data.self)
                let last =
                    try db.scalar(
                        "SELECT last_seq FROM sender_sequences WHERE chat_id = ? AND sender = ? AND device = ?",
                        [entry.chatID, entry.sender, header.device], as: Int64.self) ?? 0
                return (key, last, false)
            }
            if entry.sender == me, header.device == endpointID {
                // The echo of what this endpoint sent: record a message's number.
                return Applied { db in try Self.numbered(db, localID: header.id, number: entry.messageNumber) }
            }
            // Strictly increasing per sending endpoint: a replay or a late (reordered) message is
            // refused. Not "exactly one more": a message the domain refused (a timeout) used a
            // number that never arrives.
            guard header.seq > stored.1 else {
                throw MessagingError(
                    .forged, "message \(header.seq) from \(entry.sender) after \(stored.1): replayed or reordered")
            }
            guard let sealedKey = stored.0 else {
                throw MessagingError(.forged, "no chat key from \(entry.sender) for this message")
            }
            let keyData = try sealer.open(
                sealedKey, EndpointStore.Seal.chatKey(entry.chatID, entry.sender, header.device, header.epoch))
            let sender = try await identity(of: entry.sender, refresh: false)
            let content: SealedFormats.Content
            do {
                content = try SealedFormats.open(
                    header, chat: entry.chatID, sender: entry.sender,
                    senderKey: try Ed25519.PublicKey(rawRepresentation: sender.signingKey),
                    key: SymmetricKey(data: keyData))
            } catch {
                let fresh = try await identity(of: entry.sender, refresh: true)
                content = try SealedFormats.open(
                    header, chat: entry.chatID, sender: entry.sender,
                    senderKey: try Ed25519.PublicKey(rawRepresentation: fresh.signingKey),
                    key: SymmetricKey(data: keyData))
            }
            let incoming = entry.sender != me
            let sealer = self.sealer
            let changes: (Database) throws -> [MessageEvent] = { db in
                try db.execute(
                    """
                    INSERT INTO sender_sequences(chat_id, sender, device, last_seq) VALUES (?, ?, ?, ?)
                    ON CONFLICT(chat_id, sender, device) DO UPDATE SET last_seq = excluded.last_seq
                    """, [entry.chatID, entry.sender, header.device, header.seq])
                if entry.kind == .event {
                    if let subject = content.subject {
                        try db.execute(
                            "UPDATE chats SET subject = ?, last_activity = ? WHERE chat_id = ?",
                            [
                                try sealer.seal(subject, EndpointStore.Seal.subject(entry.chatID)),
                                entry.postedAt.timeIntervalSince1970,
                                entry.chatID,
                            ])
                    }
                    return []
                }
                let inserted = try db.execute(
                    """
                    INSERT OR IGNORE INTO messages(local_id, chat_id, number, sender, incoming, content, tag, data, ref, state, timestamp)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                    [
                        header.id, entry.chatID, entry.messageNumber, entry.sender, incoming,
                        try sealer.seal(content.content, EndpointStore.Seal.content(header.id)), content.tag,
                        try content.data.map { try sealer.seal($0, EndpointStore.Seal.data(header.id)) }, content.ref,
                        incoming ? "delivered" : "sent", entry.postedAt.timeIntervalSince1970,
                    ])
                try db.execute(
                    "UPDATE chats SET last_activity = ? WHERE chat_id = ?", [entry.postedAt.timeIntervalSince1970, entry.chatID])
                // Sent from another of this user's endpoints: a step of this user's message.
                return inserted > 0 && !incoming
                    ? [MessageEvent(messageID: header.id, chatID: entry.chatID, number: entry.messageNumber, state: .sent)] : []
            }
            return Applied(changes: changes, delivered: incoming && entry.kind == .message ? entry.messageNumber : nil)
        case .identityReset:
            guard let notice = try? JSONDecoder().decode(IdentityResetNotice.self, from: entry.payload) else {
                throw MessagingError(.forged, "an identity reset notice is malformed")
            }
            switch (notice.state, notice.pending) {
            case (.pending, let pending?):
                eventSinks.yield(.identityResetPending(userID: entry.sender, effectiveAt: pending.effectiveAt))
            case (.cancelled, _): eventSinks.yield(.identityResetCancelled(userID: entry.sender))
            case (.replaced, _):
                // A hint to look again: the key itself is trusted only as the directory decides.
                if entry.sender != me { _ = try? await contactRecord(of: entry.sender, refresh: true) }
            default: throw MessagingError(.forged, "an identity reset notice is malformed")
            }
            return Applied()
        case .commit, .welcome:
            // MLS handshake entries: chats here still use sender keys (docs/MLS.md, "Chats on
            // MLS"), so none of this endpoint's chats has a group to apply them to.
            throw MessagingError(.forged, "an MLS \(entry.kind.rawValue) for a chat that is not an MLS group here")
        case .receipt:
            guard let receipt = try? JSONDecoder().decode(Receipt.self, from: entry.payload) else {
                throw MessagingError(.forged, "a receipt is malformed")
            }
            return Applied { db in
                if entry.sender == me {
                    // Read on another of this user's endpoints.
                    if receipt.state == "read" {
                        try db.execute(
                            "UPDATE messages SET state = 'read' WHERE chat_id = ? AND incoming = 1 AND number <= ?",
                            [entry.chatID, receipt.number])
                    }
                    return []
                }
                // A receipt covers every message up to its number. A message read before its
                // delivery receipt came was delivered too: both steps are reported, in order.
                let delivered = try Self.advance(db, chatID: entry.chatID, upTo: receipt.number, from: "sent", to: .delivered)
                guard receipt.state == "read" else { return receipt.state == "delivered" ? delivered : [] }
                return delivered
                    + (try Self.advance(db, chatID: entry.chatID, upTo: receipt.number, from: "delivered", to: .read))
            }
        }
    }

    /// Moves this user's messages in `chatID` numbered up to `number` from state `from` to
    /// `state`, and returns those steps.
    private static func advance(
        _ db: Database, chatID: String, upTo number: Int64, from: String, to state: MessageState
    ) throws -> [MessageEvent] {
        let moved = try db.rows(
            "SELECT local_id, number FROM messages WHERE chat_id = ? AND incoming = 0 AND number <= ? AND state = ? ORDER BY number",
            [chatID, number, from]
        ).map { MessageEvent(messageID: try $0.get(0), chatID: chatID, number: try $0.get(1), state: state) }
        guard !moved.isEmpty else { return [] }
        try db.execute(
            "UPDATE messages SET state = ? WHERE chat_id = ? AND incoming = 0 AND number <= ? AND state = ?",
            [state.description, chatID, number, from])
        return moved
    }

    /// Records the number the domain gave one of this endpoint's messages; a message still
    /// sending becomes sent, which is returned as its step.
    private static func numbered(_ db: Database, localID: String, number: Int64?) throws -> [MessageEvent] {
        guard
            let (chatID, state) = try db.row("SELECT chat_id, state FROM messages WHERE local_id = ?", [localID]).map({
                (try $0.get(0, as: String.self), try $0.get(1, as: String.self))
            })
        else { return [] }
        try db.execute(
            "UPDATE messages SET number = ?, state = CASE WHEN state = 'sending' THEN 'sent' ELSE state END WHERE local_id = ?",
            [number, localID])
        return state == "sending" ? [MessageEvent(messageID: localID, chatID: chatID, number: number, state: .sent)] : []
    }

    /// Tells every `messageEvents` stream of steps that committed.
    private func report(_ events: [MessageEvent]) {
        for event in events { messageEventSinks.yield(event) }
    }

    // MARK: Identities

    /// A contact as the directory holds it; with `refresh`, after asking the domain what it
    /// publishes now (a differing key is kept beside the trusted one and flagged, never trusted).
    func contactRecord(of user: String, refresh: Bool) async throws -> ContactDirectory.Record {
        let stored = try read { db in try ContactDirectory.record(db, user) }
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
        let (record, changed) = try write { db in
            // Decided inside the write, on the row as it is now (another refresh may have run).
            let outcome = ContactDirectory.observe(
                published, stored: try ContactDirectory.record(db, user), policy: try ContactDirectory.policy(db))
            try ContactDirectory.save(db, outcome.record)
            return outcome
        }
        if changed { eventSinks.yield(.identityChanged(userID: user)) }
        // Chats show each participant's state (unverified when no contact is stored yet): only a
        // different state is news, and reloading mid-batch would show a half-applied step.
        if record.state != (stored?.state ?? .unverified) { reloadChats() }
        if record.state.isTrusted, let stored, !stored.state.isTrusted {
            // Trusted again (the domain publishes the trusted key once more): what was held goes.
            // Not awaited here, since this may run inside a send's own key check.
            Task { await self.releaseHeld() }
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
        guard try write({ db in try ContactDirectory.accept(db, user, verified: false) }) else {
            throw MessagingError(.unknownUser, "no contact \(user)")
        }
        reloadChats()
        await releaseHeld()
    }

    /// The safety number of this user and `user`, for the key the domain publishes now.
    func safetyNumber(with user: String) async throws -> SafetyNumber {
        let record = try await contactRecord(of: user, refresh: true)
        return safetyNumber(for: record.current)
    }

    private func safetyNumber(for identity: PublishedIdentity) -> SafetyNumber {
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
        let marked = try write { db -> Bool in
            // The key may have changed again since it was read: only the compared key is marked.
            guard let now = try ContactDirectory.record(db, user), ContactDirectory.sameKeys(now.current, current) else {
                return false
            }
            return try ContactDirectory.accept(db, user, verified: true)
        }
        guard marked else {
            throw MessagingError(.safetyNumberMismatch, "\(user)'s key changed while comparing: compare again")
        }
        reloadChats()
        await releaseHeld()
    }

    /// A contact as shown to the app.
    func contact(_ user: String) async throws -> Contact {
        let record = try await contactRecord(of: user, refresh: true)
        return Contact(
            userID: user, verification: record.state, safetyNumber: safetyNumber(for: record.current),
            keyVersion: record.current.keyVersion)
    }

    func identityTrustPolicy() throws -> IdentityTrustPolicy { try read { db in try ContactDirectory.policy(db) } }

    func setIdentityTrustPolicy(_ policy: IdentityTrustPolicy) throws {
        try write { db in try ContactDirectory.setPolicy(db, policy) }
    }

    /// Seals and sends, oldest first, the held messages of every chat whose participants are
    /// all trusted now.
    func releaseHeld() async {
        let held =
            (try? read { db -> [(chatID: String, localID: String)] in
                try db.rows("SELECT chat_id, local_id FROM messages WHERE state = 'held' ORDER BY rowid").compactMap { row in
                    let chatID = try row.get(0, as: String.self)
                    guard try ContactDirectory.untrusted(db, chatID: chatID, me: self.me).isEmpty else { return nil }
                    return (chatID, try row.get(1, as: String.self))
                }
            }) ?? []
        var chats: [String] = []
        for (chatID, localID) in held {
            do {
                let (epoch, key) = try await ensureSenderKey(chatID)
                try write { db in
                    guard
                        let row = try db.row(
                            "SELECT content, tag, data, ref FROM messages WHERE local_id = ? AND state = 'held'", [localID])
                    else { return }
                    let content = SealedFormats.Content(
                        content: try self.sealer.openText(try row.get(0), EndpointStore.Seal.content(localID)),
                        tag: try row.get(1),
                        data: try row.get(2, as: Data?.self).map {
                            try self.sealer.openText($0, EndpointStore.Seal.data(localID))
                        }, ref: try row.get(3))
                    let sealed = try self.sealNext(content, id: localID, chatID: chatID, epoch: epoch, key: key, in: db)
                    try db.execute(
                        "UPDATE messages SET state = 'sending', sealed = ? WHERE local_id = ?", [sealed, localID])
                }
                if !chats.contains(chatID) { chats.append(chatID) }
            } catch {
                // Still not sendable (a key changed again meanwhile): it stays held.
                continue
            }
        }
        for chatID in chats {
            reloadMessages(chatID)
            _ = await deliverPending(in: chatID)
        }
    }

    // MARK: This device's MLS identity

    /// This device's MLS signer: its own key, with the credential the identity key signed.
    func deviceSigner() throws -> MLSSigner {
        let (keys, endpointID, sealer) = (self.keys, self.endpointID, self.sealer)
        return try write { db in try DeviceKeys.signer(db, sealer: sealer, keys: keys, endpointID: endpointID) }
    }

    /// Tops this device's one-time KeyPackages in the domain up to ``DeviceKeys/oneTimeTarget``
    /// when fewer than ``DeviceKeys/lowWater`` are left, and publishes a last-resort one the
    /// first time. The private halves are stored before the public ones leave.
    func ensureKeyPackages() async throws {
        try requireRunning()
        let token = try await token()
        let left = try await domainCall { try await domain.keyPackageCount(token: token, endpointID: endpointID) }
        let needsLastResort = try read { db in try !DeviceKeys.hasLastResort(db) }
        guard left < DeviceKeys.lowWater || needsLastResort else { return }
        let signer = try deviceSigner()
        let count = left < DeviceKeys.lowWater ? DeviceKeys.oneTimeTarget - left : 0
        let sealer = self.sealer
        let made = try write { db in
            try DeviceKeys.makeBundles(db, sealer: sealer, signer: signer, count: count, lastResort: needsLastResort, now: Date())
        }
        _ = try await domainCall {
            try await domain.publishKeyPackages(
                token: token, endpointID: endpointID, keyPackages: made.oneTime, lastResort: made.lastResort)
        }
    }

    /// The private bundle of one of this device's KeyPackages.
    func keyPackageBundle(reference: Data) throws -> MLSKeyPackageBundle? {
        let sealer = self.sealer
        return try read { db in try DeviceKeys.bundle(db, sealer: sealer, reference: reference) }
    }

    // MARK: Queries and flows

    func chat(_ chatID: String) throws -> Chat {
        guard let chat = try read({ db in try Self.loadChats(db, only: chatID, sealer: self.sealer).first }) else {
            throw MessagingError(.unknownChat, "no chat \(chatID)")
        }
        return chat
    }

    func message(id: String) throws -> ChatMessage {
        guard
            let message = try read({ db in
                try db.row("\(Self.messageColumns) WHERE local_id = ?", [id]).map { try Self.message($0, sealer: sealer) }
            })
        else {
            throw MessagingError(.unknownChat, "no message \(id)")
        }
        return message
    }

    /// The latest `limit` messages before `number` (or the newest), oldest first. Numbered
    /// messages come through the (chat, number) index, so a chat of a million messages loads its
    /// latest page as fast as a small one; messages without a number yet (sending, failed) follow
    /// the newest page.
    func messages(in chatID: String, before number: Int64?, limit: Int) throws -> [ChatMessage] {
        try read { db in
            let numbered =
                if let number {
                    try db.rows(
                        "\(Self.messageColumns) WHERE chat_id = ? AND number < ? ORDER BY number DESC LIMIT ?",
                        [chatID, number, limit])
                } else {
                    try db.rows(
                        "\(Self.messageColumns) WHERE chat_id = ? AND number IS NOT NULL ORDER BY number DESC LIMIT ?",
                        [chatID, limit])
                }
            var page = try numbered.reversed().map { try Self.message($0, sealer: sealer) }
            if number == nil {
                let pending = try db.rows(
                    "\(Self.messageColumns) WHERE chat_id = ? AND number IS NULL ORDER BY timestamp", [chatID]
                ).map { try Self.message($0, sealer: sealer) }
                page = Array((page + pending).suffix(limit))
            }
            return page
        }
    }

    func messageFlow(_ chatID: String) throws -> StateFlow<[ChatMessage]> {
        if let owner = messageOwners[chatID] { return owner.flow }
        let owner = MutableStateFlow(try messages(in: chatID, before: nil, limit: Self.flowWindow), label: "Messaging.messages")
        messageOwners[chatID] = owner
        return owner.flow
    }

    private func reloadMessages(_ chatID: String) {
        guard let owner = messageOwners[chatID], let latest = try? messages(in: chatID, before: nil, limit: Self.flowWindow)
        else { return }
        owner.value = latest
    }

    private func reloadChats() {
        if let chats = try? read({ db in try Self.loadChats(db, only: nil, sealer: self.sealer) }) { chatsOwner.value = chats }
    }

    static let messageColumns =
        "SELECT local_id, chat_id, number, sender, incoming, content, tag, data, ref, state, failure, timestamp FROM messages"

    static func message(_ row: Row, sealer: StoreSealer) throws -> ChatMessage {
        let id = try row.get(0, as: String.self)
        let state: MessageState =
            switch try row.get(9, as: String.self) {
            case "sending": .sending
            case "held": .held
            case "sent": .sent
            case "delivered": .delivered
            case "read": .read
            default: .failed(reason: try row.get(10, as: String?.self) ?? "failed")
            }
        return ChatMessage(
            id: try row.get(0), chatID: try row.get(1), number: try row.get(2), sender: try row.get(3),
            isIncoming: try row.get(4),
            content: try sealer.openText(try row.get(5), EndpointStore.Seal.content(id)), tag: try row.get(6),
            data: try row.get(7, as: Data?.self).map { try sealer.openText($0, EndpointStore.Seal.data(id)) },
            ref: try row.get(8),
            state: state,
            timestamp: Date(timeIntervalSince1970: try row.get(11)))
    }

    /// A chat's subject: sealed once set; the empty default of a chat met before its subject.
    static func subject(_ value: DatabaseValue, chatID: String, sealer: StoreSealer) throws -> String {
        switch value {
        case .blob(let sealed): try sealer.openText(sealed, EndpointStore.Seal.subject(chatID))
        case .text(""), .null: ""
        default: throw MessagingError(.storageFailure, "a chat's subject in the endpoint store is not sealed")
        }
    }

    static func loadChats(_ db: Database, only chatID: String?, sealer: StoreSealer) throws -> [Chat] {
        let rows =
            if let chatID {
                try db.rows("SELECT chat_id, subject, active, last_activity FROM chats WHERE chat_id = ?", [chatID])
            } else {
                try db.rows("SELECT chat_id, subject, active, last_activity FROM chats ORDER BY last_activity DESC")
            }
        return try rows.map { row in
            let id = try row.get(0, as: String.self)
            let participants = try db.rows(
                """
                SELECT p.user_id, p.is_admin, coalesce(c.state, 'unverified') FROM participants p LEFT JOIN contacts c USING (user_id)
                WHERE p.chat_id = ? ORDER BY p.rowid
                """, [id]
            ).map {
                Participant(
                    userID: try $0.get(0), isAdmin: try $0.get(1),
                    verification: ContactVerification(rawValue: try $0.get(2)) ?? .changed)
            }
            let unread =
                try db.scalar(
                    "SELECT count(*) FROM messages WHERE chat_id = ? AND incoming = 1 AND state != 'read'", [id], as: Int.self)
                ?? 0
            return Chat(
                chatID: id, subject: try Self.subject(row.values[1], chatID: id, sealer: sealer), participants: participants,
                unreadCount: unread,
                lastActivity: Date(timeIntervalSince1970: try row.get(3)), isActive: try row.get(2))
        }
    }

    /// Records a chat's members; a real change bumps the membership version (which rotates this
    /// user's sending key at its next send).
    static func applyMembership(_ db: Database, chatID: String, members: [ChatMember], me: String, now: Date) throws {
        let existing = try db.rows("SELECT user_id, is_admin FROM participants WHERE chat_id = ? ORDER BY user_id", [chatID]).map
        {
            ChatMember(userID: try $0.get(0), isAdmin: try $0.get(1))
        }
        let sorted = members.sorted { $0.userID < $1.userID }
        let known = try db.scalar("SELECT 1 FROM chats WHERE chat_id = ?", [chatID], as: Int.self) != nil
        if !known {
            try db.execute("INSERT INTO chats(chat_id, last_activity) VALUES (?, ?)", [chatID, now.timeIntervalSince1970])
        } else if existing != sorted, Set(existing.map(\.userID)) != Set(sorted.map(\.userID)) {
            try db.execute("UPDATE chats SET membership_version = membership_version + 1 WHERE chat_id = ?", [chatID])
        }
        try db.execute("DELETE FROM participants WHERE chat_id = ?", [chatID])
        for member in members {
            try db.execute(
                "INSERT INTO participants(chat_id, user_id, is_admin) VALUES (?, ?, ?)", [chatID, member.userID, member.isAdmin])
        }
        try db.execute(
            "UPDATE chats SET active = ?, last_activity = max(last_activity, ?) WHERE chat_id = ?",
            [members.contains { $0.userID == me }, now.timeIntervalSince1970, chatID])
    }

    // MARK: Plumbing

    private func read<T: Sendable>(_ body: (Database) throws -> T) throws -> T {
        do { return try queue.read(body) } catch let error as MessagingError { throw error } catch {
            throw MessagingError(.storageFailure, "the endpoint store failed: \(error)")
        }
    }

    private func requireRunning() throws {
        guard !stopped else {
            throw MessagingError(.notReady, "messaging has stopped (the service was stopped, reset or signed out)")
        }
    }

    /// Every change to the store goes through here, and none once `stop()` was called: a
    /// messenger left running after its service stopped must not overwrite what the next one on
    /// this store records.
    @discardableResult
    private func write<T: Sendable>(_ body: (Database) throws -> T) throws -> T {
        try requireRunning()
        do { return try queue.write(body) } catch let error as MessagingError { throw error } catch let error as StoreError
            where Self.dataConflicts.contains(error.resultCode)
        {
            throw MessagingError(.conflict, "it contradicts what this endpoint stored (\(error.message))")
        } catch {
            throw MessagingError(.storageFailure, "the endpoint store failed: \(error)")
        }
    }

    private func domainCall<T>(_ body: () async throws -> T) async throws -> T {
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
