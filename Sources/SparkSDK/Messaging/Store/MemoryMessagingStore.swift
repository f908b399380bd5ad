import Foundation
import SparkCrypto
import SparkDomain
import SparkLock

/// The messaging store in memory: the same statements as ``SQLiteMessagingStore``, on plain
/// values, for the messaging core's tests and for an app that keeps nothing on disk. Nothing is
/// sealed, since nothing leaves the process.
///
/// Transactions are serialized, like a `DatabaseQueue`'s: `write` runs its body on a copy of the
/// state and keeps the copy only when the body returns, so a body that throws changes nothing.
final class MemoryMessagingStore: Sendable {
    struct State: Sendable {
        struct Message: Sendable {
            var message: ChatMessage
            var sealed: Data?
            /// The insertion order (SQLite's rowid).
            var row: Int64
            /// The chat's timer when it was stored, and whether it expired.
            var expireAfter: Int? = nil
            var expired = false
            /// Its attachment, while it has one.
            var attachment: AttachmentDescriptor? = nil
            /// Its place in the search index, and its tokens there, while it is indexed.
            var searchDoc: Int64? = nil
            var searchTokens: Set<SearchToken> = []
        }
        struct Chat: Sendable {
            var timer = 0
            var suite: UInt16 = 1
            var subject = ""
            var isActive = true
            var lastActivity: Date
            var participants: [ChatMember] = []
        }
        struct PendingCommit: Sendable {
            var chatID: String
            var epoch: UInt64
            var group: Data
        }
        var messages: [String: Message] = [:]
        var chats: [String: Chat] = [:]
        var groups: [String: (record: GroupRecord, epochState: Data)] = [:]
        var leftEpochs: [String: UInt64] = [:]
        var refusedCommits: [String: RefusedCommit] = [:]
        var sentSequences: [String: (chatID: String, sequence: UInt64, withdrawn: Bool)] = [:]
        var textSequences: [String: TextSequences] = [:]
        var pendingCommits: [Data: PendingCommit] = [:]
        var deferred: [Int64: MailboxEntry] = [:]
        var departed: [String: Set<String>] = [:]
        var sent: [Data: (chatID: String, localID: String?)] = [:]
        var cursor: Int64 = 0
        var blocked: Set<String> = []
        var nextRow: Int64 = 1
        var contacts: [String: ContactDirectory.Record] = [:]
        var transparency = TransparencyState()
        var contactsVersion = SystemRandom.bytes(count: 16)
        var identityPolicy = IdentityTrustPolicy.trustOnFirstUse
        var signer: StoredSigner?
        var bundles: [Data: (bundle: Data, suite: UInt16, lastResort: Bool, createdAt: Date)] = [:]
        var ownDevices: Set<OwnDevices.Trusted> = []
        var nextSearchDoc: Int64 = 1
        var searchIndexBuilding = false
    }

    private let state = Locked(State())
    /// The search index's token key (the index is in memory; the key keeps the tokens the same
    /// as on disk).
    private let searchKey = SearchKey(key: SymmetricKey(size: .bits256))

    init() {}

    /// Forgets everything (a wipe of the endpoint).
    func reset() { state.withLock { $0 = State() } }

    /// Runs `body` on the state as it is.
    func read<T>(_ body: (Transaction) throws -> T) rethrows -> T {
        try state.withLock { state in try body(Transaction(state, searchKey: searchKey)) }
    }

    /// Runs `body` on a copy of the state, kept when `body` returns.
    func write<T>(_ body: (Transaction) throws -> T) rethrows -> T {
        try state.withLock { state in
            let transaction = Transaction(state, searchKey: searchKey)
            let result = try body(transaction)
            state = transaction.state
            return result
        }
    }

    /// One transaction's view of the state.
    final class Transaction: MessagingStore {
        fileprivate(set) var state: State
        let searchKey: SearchKey

        fileprivate init(_ state: State, searchKey: SearchKey) {
            self.state = state
            self.searchKey = searchKey
        }

        func savepoint<T>(_ body: () throws -> T) throws -> T {
            let saved = state
            do { return try body() } catch {
                state = saved
                throw error
            }
        }

        // MARK: Messages

        func message(_ id: String) throws -> ChatMessage? { state.messages[id]?.message }

        func messages(chatID: String, ids: [String]) throws -> [ChatMessage] {
            ids.compactMap { state.messages[$0] }.filter { !$0.expired && $0.message.chatID == chatID }.map(\.message)
        }

        private func inChat(_ chatID: String) -> [State.Message] {
            state.messages.values.filter { $0.message.chatID == chatID }
        }

        func page(chatID: String, before number: Int64?, limit: Int) throws -> [ChatMessage] {
            let all = inChat(chatID).filter { !$0.expired }.map(\.message)
            let numbered = all.filter { message in message.number.map { number == nil || $0 < number! } ?? false }
                .sorted { $0.number! < $1.number! }.suffix(limit)
            guard number == nil else { return Array(numbered) }
            let pending = all.filter { $0.number == nil }.sorted { $0.timestamp < $1.timestamp }
            return Array((Array(numbered) + pending).suffix(limit))
        }

        func numbered(chatID: String) throws -> [ChatMessage] {
            inChat(chatID).filter { !$0.expired }.map(\.message).filter { $0.number != nil && !$0.isRecalled }
                .sorted { $0.number! < $1.number! }
        }

        func messageID(chatID: String, number: Int64) throws -> String? {
            inChat(chatID).first { $0.message.number == number }?.message.id
        }

        func known(chatID: String, id: String) throws -> MessagingCore.KnownMessage? {
            guard let message = state.messages[id]?.message, message.chatID == chatID else { return nil }
            return MessagingCore.KnownMessage(number: message.number, sender: message.sender, recalled: message.isRecalled)
        }

        func chatOfNumbered(id: String, sender: String) throws -> String? {
            guard let message = state.messages[id]?.message, message.sender == sender, message.number != nil else { return nil }
            return message.chatID
        }

        func newestReceived(chatID: String) throws -> Int64? {
            inChat(chatID).filter(\.message.isIncoming).compactMap(\.message.number).max()
        }

        func unreadCount(chatID: String) throws -> Int {
            inChat(chatID).filter { $0.message.isIncoming && $0.message.state != .read && !$0.message.isRecalled }.count
        }

        func insertOutgoing(_ message: OutgoingMessage, sealed: Data?) throws {
            try insert(
                message.shown(as: sealed == nil ? .held : .sending), sealed: sealed, ignoringTaken: false,
                sentAt: message.timestamp, attachment: message.attachment)
            index(message.id)
        }

        func startExpiry(chatID: String, at now: Date) throws {
            for entry in inChat(chatID) where entry.message.isIncoming && entry.message.state == .read {
                guard let after = entry.expireAfter, entry.message.expiresAt == nil else { continue }
                state.messages[entry.message.id]?.message.expiresAt = now + Double(after)
            }
        }

        func expireDue(at now: Date) throws -> [(chatID: String, id: String)] {
            let due = state.messages.values.filter { !$0.expired && $0.message.expiresAt.map { $0 <= now } == true }
            for entry in due {
                unindex(entry.message.id)
                var message = entry.message
                (message.content, message.data, message.reactions, message.attachment) = ("", nil, [], nil)
                state.messages[message.id]?.message = message
                state.messages[message.id]?.attachment = nil
                state.messages[message.id]?.expired = true
                state.messages[message.id]?.sealed = nil
            }
            return due.map { ($0.message.chatID, $0.message.id) }
        }

        func nextExpiry() throws -> Date? {
            state.messages.values.filter { !$0.expired }.compactMap(\.message.expiresAt).min()
        }

        func timer(chatID: String) throws -> Int { state.chats[chatID]?.timer ?? 0 }

        func setTimer(_ seconds: Int, chatID: String) throws { state.chats[chatID]?.timer = seconds }

        func setSuite(_ suite: UInt16, chatID: String) throws { state.chats[chatID]?.suite = suite }

        private func insert(
            _ message: ChatMessage, sealed: Data?, ignoringTaken: Bool, sentAt: Date?, attachment: AttachmentDescriptor?
        ) throws {
            var message = message
            let timer = try self.timer(chatID: message.chatID)
            message.expiresAt = timer > 0 ? sentAt.map { $0 + Double(timer) } : nil
            let taken =
                state.messages[message.id] != nil
                || message.number.map { number in inChat(message.chatID).contains { $0.message.number == number } } == true
            if taken {
                if ignoringTaken { return }
                throw MessagingError(.conflict, "it contradicts what this endpoint stored (message \(message.id) or its number)")
            }
            state.messages[message.id] = State.Message(
                message: message, sealed: sealed, row: state.nextRow, expireAfter: timer > 0 ? timer : nil,
                attachment: attachment)
            state.nextRow += 1
        }

        func outgoing(_ id: String) throws -> OutgoingMessage? {
            guard let message = state.messages[id]?.message, !message.isIncoming else { return nil }
            return OutgoingMessage(
                id: id, chatID: message.chatID, sender: message.sender, content: message.content, tag: message.tag,
                data: message.data, ref: message.ref, timestamp: message.timestamp, attachment: state.messages[id]?.attachment)
        }

        func sending(chatID: String) throws -> [(id: String, sealed: Data)] {
            inChat(chatID).filter { $0.message.state == .sending && $0.sealed != nil }.sorted { $0.row < $1.row }
                .map { ($0.message.id, $0.sealed!) }
        }

        func chatsSending() throws -> [String] {
            Set(state.messages.values.filter { $0.message.state == .sending && $0.sealed != nil }.map(\.message.chatID)).sorted()
        }

        func held(chatID: String) throws -> [String] {
            inChat(chatID).filter { $0.message.state == .held }.sorted { $0.row < $1.row }.map(\.message.id)
        }

        func chatsHolding() throws -> [String] {
            Set(state.messages.values.filter { $0.message.state == .held }.map(\.message.chatID)).sorted()
        }

        func setSealed(_ id: String, _ sealed: Data) throws {
            guard let entry = state.messages[id], [.held, .sending].contains(entry.message.state) else { return }
            state.messages[id]?.message.state = .sending
            state.messages[id]?.sealed = sealed
        }

        func hold(_ id: String) throws {
            guard let next = state.messages[id]?.message.state.after(.hold) else { return }
            state.messages[id]?.message.state = next
            state.messages[id]?.sealed = nil
        }

        func accept(_ id: String, number: Int64?, at time: Date?) throws -> [MessageEvent] {
            guard let message = state.messages[id]?.message else { return [] }
            if let number, number != message.number,
                inChat(message.chatID).contains(where: { $0.message.number == number })
            {
                throw MessagingError(.conflict, "it contradicts what this endpoint stored (number \(number) is taken)")
            }
            state.messages[id]?.message.number = number
            state.messages[id]?.sealed = nil
            if let time { state.messages[id]?.message.timestamp = time }
            guard let next = message.state.after(.accept) else { return [] }
            state.messages[id]?.message.state = next
            return [MessageEvent(messageID: id, chatID: message.chatID, number: number, state: next)]
        }

        func refuse(_ id: String, reason: String) throws -> Bool {
            guard let next = state.messages[id]?.message.state.after(.refuse(reason: reason)) else { return false }
            state.messages[id]?.message.state = next
            state.messages[id]?.sealed = nil
            state.sentSequences[id]?.withdrawn = true
            return true
        }

        func insertReceived(_ message: ChatHistory.Record, chatID: String, incoming: Bool, ignoringTaken: Bool) throws {
            try insert(
                ChatMessage(
                    id: message.id, chatID: chatID, number: message.number, sender: message.sender, isIncoming: incoming,
                    content: message.content, tag: message.tag, data: message.data, ref: message.ref, state: message.state,
                    timestamp: message.timestamp, attachment: message.attachment.map(Attachment.init)), sealed: nil,
                ignoringTaken: ignoringTaken, sentAt: incoming ? nil : message.timestamp, attachment: message.attachment)
            if state.messages[message.id]?.searchDoc == nil { index(message.id) }
        }

        func setContent(_ id: String, content: String) throws {
            let indexed = unindex(id)
            state.messages[id]?.message.content = content
            if indexed { index(id) }
        }

        func reactions(of id: String) throws -> [Reaction] { state.messages[id]?.message.reactions ?? [] }

        func attachment(of id: String) throws -> AttachmentDescriptor? { state.messages[id]?.attachment }

        func setReactions(_ id: String, _ reactions: [Reaction]) throws {
            state.messages[id]?.message.reactions = reactions
        }

        func recall(_ id: String) throws {
            guard var message = state.messages[id]?.message else { return }
            unindex(id)
            (message.content, message.data, message.reactions, message.isRecalled) = ("", nil, [], true)
            message.attachment = nil
            state.messages[id]?.message = message
            state.messages[id]?.attachment = nil
        }

        func advanceSent(chatID: String, ids: [String], _ step: MessageStep) throws -> [MessageEvent] {
            var moved: [MessageEvent] = []
            for id in Set(ids) {
                guard let message = state.messages[id]?.message, message.chatID == chatID, !message.isIncoming,
                    let number = message.number, let next = message.state.after(step)
                else { continue }
                state.messages[id]?.message.state = next
                moved.append(MessageEvent(messageID: id, chatID: chatID, number: number, state: next))
            }
            return moved.sorted { $0.number! < $1.number! }
        }

        func readReceived(chatID: String, ids: [String]) throws {
            for id in Set(ids) {
                guard let message = state.messages[id]?.message, message.chatID == chatID, message.isIncoming,
                    let next = message.state.after(.read)
                else { continue }
                state.messages[id]?.message.state = next
            }
        }

        func unreadReceived(chatID: String, upTo number: Int64) throws -> [CoveredMessage] {
            inChat(chatID).compactMap { entry -> CoveredMessage? in
                guard entry.message.isIncoming, entry.message.state != .read, let own = entry.message.number, own <= number
                else { return nil }
                return CoveredMessage(id: entry.message.id, number: own)
            }.sorted { $0.number < $1.number }
        }

        func readReceived(chatID: String, upTo number: Int64) throws {
            for entry in inChat(chatID) where entry.message.isIncoming {
                guard let own = entry.message.number, own <= number, let next = entry.message.state.after(.read) else { continue }
                state.messages[entry.message.id]?.message.state = next
            }
        }

        // MARK: Chats

        func chats(only chatID: String?) throws -> [StoredChat] {
            let ids = chatID.map { state.chats[$0] == nil ? [] : [$0] } ?? Array(state.chats.keys)
            return try ids.map { id in
                let chat = state.chats[id]!
                return StoredChat(
                    chatID: id, subject: chat.subject, isActive: chat.isActive, lastActivity: chat.lastActivity,
                    participants: chat.participants, unreadCount: try unreadCount(chatID: id), timer: chat.timer,
                    suite: chat.suite)
            }.sorted { $0.lastActivity != $1.lastActivity ? $0.lastActivity > $1.lastActivity : $0.chatID < $1.chatID }
        }

        func participants(chatID: String) throws -> [String] { state.chats[chatID]?.participants.map(\.userID) ?? [] }

        func setMembership(chatID: String, participants: [ChatMember], active: Bool, at date: Date) throws {
            var chat = state.chats[chatID] ?? State.Chat(lastActivity: date)
            chat.participants = participants
            chat.isActive = active
            chat.lastActivity = max(chat.lastActivity, date)
            state.chats[chatID] = chat
        }

        func subject(chatID: String) throws -> String? { state.chats[chatID]?.subject }

        func setSubject(_ subject: String, chatID: String, at date: Date) throws {
            guard state.chats[chatID] != nil else { return }
            state.chats[chatID]?.subject = subject
            try touchChat(chatID, at: date)
        }

        func touchChat(_ chatID: String, at date: Date) throws {
            guard let chat = state.chats[chatID] else { return }
            state.chats[chatID]?.lastActivity = max(chat.lastActivity, date)
        }

        func leaveChat(_ chatID: String, epoch: UInt64?) throws {
            if let epoch, state.chats[chatID] != nil { state.leftEpochs[chatID] = epoch }
            state.groups[chatID] = nil
            state.deferred = state.deferred.filter { $0.value.chatID != chatID }
            state.departed[chatID] = nil
            state.refusedCommits[chatID] = nil
            state.pendingCommits = state.pendingCommits.filter { $0.value.chatID != chatID }
            state.chats[chatID]?.isActive = false
            for entry in inChat(chatID) { unindex(entry.message.id) }
        }

        // MARK: Search (the same tokens and order as SQLite's index)

        private func index(_ id: String) {
            guard let entry = state.messages[id], !entry.expired, !entry.message.isRecalled,
                state.chats[entry.message.chatID]?.isActive ?? true
            else { return }
            let doc = state.nextSearchDoc
            state.nextSearchDoc += 1
            state.messages[id]?.searchDoc = doc
            state.messages[id]?.searchTokens = Set(SearchDocument(entry.message).tokens(searchKey))
        }

        @discardableResult
        private func unindex(_ id: String) -> Bool {
            guard state.messages[id]?.searchDoc != nil else { return false }
            state.messages[id]?.searchDoc = nil
            state.messages[id]?.searchTokens = []
            return true
        }

        func searchCandidates(_ terms: [SearchMatch.Term], _ match: SearchMatch, offset: Int, limit: Int) throws -> [SearchHit] {
            // As SQLite's: BM25 without term frequencies, so the shorter first, then the later.
            state.messages.values.filter { entry in
                entry.searchDoc != nil
                    && terms.allSatisfy { term in
                        switch term {
                        case .token(let token): entry.searchTokens.contains(token)
                        case .prefix(let code): entry.searchTokens.contains { $0.first == code && $0.second != nil }
                        }
                    }
                    && match.chatID.map { entry.message.chatID == $0 } != false
                    && match.sender.map { entry.message.sender == $0 } != false
                    && match.since.map { entry.message.timestamp >= $0 } != false
                    && match.until.map { entry.message.timestamp < $0 } != false
            }.sorted { ($0.searchTokens.count, -$0.searchDoc!) < ($1.searchTokens.count, -$1.searchDoc!) }
                .dropFirst(offset).prefix(limit).map { entry in
                    SearchHit(
                        id: entry.message.id, sender: entry.message.sender, timestamp: entry.message.timestamp,
                        number: entry.message.number, document: SearchDocument(entry.message))
                }
        }

        func searchIndexState() throws -> SearchIndexState {
            SearchIndexState(current: true, building: state.searchIndexBuilding)
        }

        func resetSearchIndex() throws {
            for id in state.messages.keys { unindex(id) }
            state.searchIndexBuilding = true
        }

        private var unindexed: [State.Message] {
            state.messages.values.filter {
                $0.searchDoc == nil && !$0.expired && !$0.message.isRecalled && state.chats[$0.message.chatID]?.isActive ?? true
            }.sorted { $0.row < $1.row }
        }

        func indexUnindexed(after row: Int64, limit: Int) throws -> (indexed: Int, last: Int64?) {
            let found = Array(unindexed.filter { $0.row > row }.prefix(limit))
            for entry in found { index(entry.message.id) }
            guard found.count == limit, let last = found.last else {
                state.searchIndexBuilding = false
                return (found.count, nil)
            }
            return (found.count, last.row)
        }

        func unindexedCount() throws -> Int { unindexed.count }

        func leftEpoch(chatID: String) throws -> UInt64? { state.leftEpochs[chatID] }

        // MARK: Groups

        func groupChats() throws -> [String] { state.groups.keys.sorted() }

        func blockedUsers() throws -> [String] { state.blocked.sorted() }

        func replaceBlockedUsers(_ users: [String]) throws { state.blocked = Set(users) }

        func groupVersion(chatID: String) throws -> Data? { state.groups[chatID]?.record.version }

        func group(chatID: String) throws -> GroupRecord? {
            guard let (record, epochState) = state.groups[chatID] else { return nil }
            var read = record
            read.epochState = epochState
            return read
        }

        func saveGroup(_ record: GroupRecord, epochState: Data) throws {
            guard record.ratchets != nil else {
                throw MessagingError(.storageFailure, "a group is stored with its ratchets")
            }
            var kept = record
            (kept.epochState, kept.whole) = (nil, nil)
            state.groups[record.chatID] = (kept, epochState)
            state.pendingCommits = state.pendingCommits.filter {
                $0.value.chatID != record.chatID || $0.value.epoch >= record.epoch
            }
        }

        func saveRatchets(_ record: GroupRecord, expected: Data) throws -> Bool {
            guard let (current, epochState) = state.groups[record.chatID], current.version == expected,
                current.epoch == record.epoch, current.ratchets != nil, record.ratchets != nil
            else { return false }
            var kept = record
            (kept.epochState, kept.whole) = (nil, nil)
            state.groups[record.chatID] = (kept, epochState)
            return true
        }

        func noteNumber(chatID: String, number: Int64, version: Data) throws {
            guard let current = state.groups[chatID]?.record else { return }
            state.groups[chatID]?.record.lastNumber = max(current.lastNumber, number)
            state.groups[chatID]?.record.version = version
        }

        func setPendingCommit(chatID: String, digest: Data, epoch: UInt64, group: Data) throws {
            state.pendingCommits[digest] = State.PendingCommit(chatID: chatID, epoch: epoch, group: group)
        }

        func pendingCommit(chatID: String, digest: Data) throws -> Data? {
            guard let pending = state.pendingCommits[digest], pending.chatID == chatID else { return nil }
            return pending.group
        }

        func clearPendingCommit(chatID: String, digest: Data) throws {
            if state.pendingCommits[digest]?.chatID == chatID { state.pendingCommits[digest] = nil }
        }

        // MARK: Pending work

        func deferEntry(_ entry: MailboxEntry) throws { state.deferred[entry.sequence] = entry }

        func deferred(chatID: String) throws -> [MailboxEntry] {
            state.deferred.values.filter { $0.chatID == chatID }.sorted { $0.sequence < $1.sequence }
        }

        func deferredCount(chatID: String) throws -> Int { state.deferred.values.filter { $0.chatID == chatID }.count }

        func forgetDeferred(sequence: Int64) throws { state.deferred[sequence] = nil }

        func noteDeparted(chatID: String, users: [String]) throws {
            guard !users.isEmpty else { return }
            state.departed[chatID, default: []].formUnion(users)
        }

        func departed(chatID: String) throws -> Set<String> { state.departed[chatID] ?? [] }

        func forgetDeparted(chatID: String) throws {
            state.departed[chatID] = nil
        }

        func sendingSequence(chatID: String, localID: String) throws -> UInt64 {
            if let given = state.sentSequences[localID] { return given.sequence }
            let next = state.sentSequences.values.filter { $0.chatID == chatID }.map { $0.sequence + 1 }.max() ?? 0
            state.sentSequences[localID] = (chatID, next, false)
            return next
        }

        func withdrawnSequences(chatID: String) throws -> [UInt64] {
            Array(
                state.sentSequences.values.filter { $0.chatID == chatID && $0.withdrawn }.map(\.sequence).sorted(by: >)
                    .prefix(ChatPayload.maximumWithdrawn))
        }

        func textSequences(chatID: String, device: String) throws -> TextSequences? {
            state.textSequences["\(chatID)\u{0}\(device)"]
        }

        func saveTextSequences(_ sequences: TextSequences) throws {
            state.textSequences["\(sequences.chatID)\u{0}\(sequences.device)"] = sequences
        }

        func missingTexts(chatID: String) throws -> [String: Int] {
            var missing: [String: Int] = [:]
            for sequences in state.textSequences.values where sequences.chatID == chatID && !sequences.missing.isEmpty {
                missing[sequences.user, default: 0] += sequences.missing.count
            }
            return missing
        }

        func noteRefusedCommit(chatID: String, epoch: UInt64, sender: String) throws {
            state.refusedCommits[chatID] = RefusedCommit(epoch: epoch, sender: sender)
        }

        func refusedCommit(chatID: String) throws -> RefusedCommit? { state.refusedCommits[chatID] }

        func forgetRefusedCommit(chatID: String) throws { state.refusedCommits[chatID] = nil }

        func recordSent(chatID: String, payload: Data, localID: String?) throws {
            state.sent[SHA256.hash(payload)] = (chatID, localID)
        }

        func sent(payload: Data) throws -> SentPost? { state.sent[SHA256.hash(payload)].map { SentPost(localID: $0.localID) } }

        func forgetSent(payload: Data) throws { state.sent[SHA256.hash(payload)] = nil }

        func mailboxCursor() throws -> Int64 { state.cursor }

        func setMailboxCursor(_ sequence: Int64) throws { state.cursor = sequence }

        // MARK: Identities

        func contact(_ user: String) throws -> ContactDirectory.Record? { state.contacts[user] }
        func contactUsers() throws -> [String] { state.contacts.keys.sorted() }

        func contactsVersion() throws -> Data? { state.contactsVersion }

        func saveContact(_ record: ContactDirectory.Record) throws {
            state.contactsVersion = SystemRandom.bytes(count: 16)
            state.contacts[record.trusted.userID] = record
        }

        func contactGroupKeys() throws -> [String: [Data]] {
            state.contacts.mapValues { [$0.trusted.signingKey] + [$0.seen?.signingKey].compactMap { $0 } }
        }

        func trustedContactKeys() throws -> [String: Data] {
            state.contacts.filter { [.unverified, .verified].contains($0.value.state) }.mapValues(\.trusted.signingKey)
        }

        func verifications(of users: Set<String>) throws -> [String: ContactVerification] {
            state.contacts.filter { users.contains($0.key) }.mapValues(\.state)
        }

        func identityPolicy() throws -> IdentityTrustPolicy { state.identityPolicy }
        func transparencyState() throws -> TransparencyState { state.transparency }
        func setTransparencyState(_ state: TransparencyState) throws { self.state.transparency = state }

        func setIdentityPolicy(_ policy: IdentityTrustPolicy) throws { state.identityPolicy = policy }

        func deviceSigner(user: String) throws -> StoredSigner? { state.signer?.user == user ? state.signer : nil }

        func replaceDeviceSigner(_ signer: StoredSigner) throws {
            state.signer = signer
            state.bundles = [:]
        }

        func addKeyPackageBundle(reference: Data, bundle: Data, suite: UInt16, lastResort: Bool, createdAt: Date) throws {
            guard state.bundles[reference] == nil else {
                throw MessagingError(.conflict, "a KeyPackage bundle of that reference is kept already")
            }
            state.bundles[reference] = (bundle, suite, lastResort, createdAt)
        }

        func demoteLastResortBundle(suite: UInt16) throws {
            for (reference, kept) in state.bundles where kept.lastResort && kept.suite == suite {
                state.bundles[reference]?.lastResort = false
            }
        }

        func lastResortMadeAt(suite: UInt16) throws -> Date? {
            state.bundles.values.filter { $0.lastResort && $0.suite == suite }.map(\.createdAt).max()
        }

        func forgetKeyPackageBundles(madeBefore date: Date) throws {
            state.bundles = state.bundles.filter { $0.value.createdAt >= date }
        }

        func keyPackageBundle(reference: Data) throws -> Data? { state.bundles[reference]?.bundle }

        func consumeKeyPackageBundle(reference: Data) throws {
            if state.bundles[reference]?.lastResort == false { state.bundles[reference] = nil }
        }

        func trustedOwnDevices() throws -> Set<OwnDevices.Trusted> { state.ownDevices }

        func setTrustedOwnDevices(_ devices: Set<OwnDevices.Trusted>) throws { state.ownDevices = devices }

        func trustOwnDevice(_ device: OwnDevices.Trusted) throws {
            state.ownDevices = state.ownDevices.filter { $0.endpointID != device.endpointID }
            state.ownDevices.insert(device)
        }
    }
}
