import Foundation
import SparkCrypto
import SparkDomain
import SparkLock
import SparkMLS

/// Chats as MLS groups, over a ``MessagingStore``: each chat's group parsed from its row and
/// kept live in ``GroupCache`` (checked against the row's `version` on every load), saved in
/// two parts (the epoch state, changed by commits, and the ratchets, changed by every message),
/// and the group after a commit this device posted and has not yet seen answered.
///
/// Inside a page of the mailbox (``deferringSaves(_:_:)``), a chat's group is written once, at
/// the end of the page's transaction, however many of the page's messages moved its ratchets;
/// so are the text sequences of each sending device (``saveTextSequences(_:_:previous:)``).
struct GroupStore: Sendable {
    let cache: GroupCache
    /// What was saved inside ``deferringSaves(_:_:)``, written when it ends; nil outside.
    private let heldSaves = Locked<Held?>(nil)

    /// The saves a page holds back.
    struct Held: Sendable {
        /// Groups, by chat.
        var groups: [String: Stored] = [:]
        /// Text sequences, by chat and sending device.
        var texts: [TextKey: TextSequences] = [:]
    }

    /// A chat and a sending device.
    struct TextKey: Hashable, Comparable, Sendable {
        var chatID: String
        var device: String
        static func < (left: TextKey, right: TextKey) -> Bool { (left.chatID, left.device) < (right.chatID, right.device) }
    }

    init(cache: GroupCache) { self.cache = cache }

    /// One chat's stored group.
    struct Stored: Sendable {
        var group: ChatGroup
        /// Messages this device sent since its last commit (its last key update).
        var sentSinceUpdate: Int
        /// When this device last committed (updating its own keys).
        var updatedAt: Date
        /// The newest chat number seen in the mailbox: numbers only grow, in the domain's order.
        var lastNumber: Int64
    }

    /// The chat's group, judged by `validator`: the live session when the row has not changed
    /// since it was loaded or saved here, else the row, parsed (and kept live).
    func load(_ store: some MessagingStore, chatID: String, validator: any MLSCredentialValidator) throws -> Stored? {
        if var held = heldSaves.withLock({ $0?.groups[chatID] }) {
            held.group = held.group.judged(by: validator)
            return held
        }
        guard let version = try store.groupVersion(chatID: chatID) else { return nil }
        if var live = cache.session(chatID, version: version) {
            live.group = live.group.judged(by: validator)
            return live
        }
        guard let record = try store.group(chatID: chatID) else { return nil }
        let group: MLSGroup
        do {
            if let ratchets = record.ratchets {
                guard let state = record.epochState else {
                    throw MessagingError(.storageFailure, "the ratchets are stored without their epoch state")
                }
                group = try MLSGroup(epoch: state, ratchets: ratchets, validator: validator)
            } else {
                // A row from before the state was stored in two parts: the whole state in one.
                group = try MLSGroup(serialized: record.whole ?? Data(), validator: validator)
            }
        } catch {
            throw MessagingError(.storageFailure, "the stored group of chat \(chatID) does not load: \(error)")
        }
        let stored = Stored(
            group: ChatGroup(chatID: chatID, group: group), sentSinceUpdate: record.sentSinceUpdate,
            updatedAt: record.updatedAt, lastNumber: record.lastNumber)
        cache.remember(stored, version: record.version)
        return stored
    }

    /// Stores `stored` as the chat's group (the commits posted and pending for an earlier epoch
    /// are forgotten: the epoch moved). When only its ratchets moved since the live session
    /// (a message sent or opened), only the ratchets are written.
    func save(_ store: some MessagingStore, _ stored: Stored) throws {
        let held = heldSaves.withLock { saves -> Bool in
            guard saves != nil else { return false }
            saves?.groups[stored.group.chatID] = stored
            return true
        }
        if !held { try write(store, stored) }
    }

    /// The text sequences of `device` in the chat: as held in this page, else as stored.
    func textSequences(_ store: some MessagingStore, chatID: String, device: String) throws -> TextSequences? {
        if let held = heldSaves.withLock({ $0?.texts[TextKey(chatID: chatID, device: device)] }) { return held }
        return try store.textSequences(chatID: chatID, device: device)
    }

    /// Saves a device's text sequences, `previous` being what ``textSequences(_:chatID:device:)``
    /// returned. Inside a page they are held (and written once, when the page ends) while the
    /// texts they count missing are those stored: the store's count of missing texts
    /// (`MessagingStore.missingTexts`) stays right at every step. A change of what is missing is
    /// written at once.
    func saveTextSequences(_ store: some MessagingStore, _ sequences: TextSequences, previous: TextSequences?) throws {
        let key = TextKey(chatID: sequences.chatID, device: sequences.device)
        let unchanged = sequences.missing == previous?.missing ?? []
        let held = heldSaves.withLock { saves -> Bool in
            guard saves != nil else { return false }
            guard unchanged else {
                saves?.texts[key] = nil
                return false
            }
            saves?.texts[key] = sequences
            return true
        }
        if !held { try store.saveTextSequences(sequences) }
    }

    /// Runs `body` (a page of the mailbox, inside its transaction) with the groups it saves held
    /// back and written once each when it returns, in the same transaction: a chat whose ratchets
    /// moved with each of a page's messages is written once, not once a message. When `body`
    /// throws, nothing held is written (the transaction rolls back).
    func deferringSaves<T>(_ store: some MessagingStore, _ body: () throws -> T) throws -> T {
        heldSaves.withLock { $0 = Held() }
        defer { heldSaves.withLock { $0 = nil } }
        let result = try body()
        let saves = heldSaves.withLock { saves in
            defer { saves = nil }
            return saves ?? Held()
        }
        for chatID in saves.groups.keys.sorted() {
            if let stored = saves.groups[chatID] { try write(store, stored) }
        }
        for key in saves.texts.keys.sorted() {
            if let sequences = saves.texts[key] { try store.saveTextSequences(sequences) }
        }
        return result
    }

    /// What is held back so far (to restore it when one entry of the page is rolled back alone,
    /// with ``restoreHeldSaves(_:)``).
    func heldSavesSnapshot() -> Held? { heldSaves.withLock { $0 } }

    /// Puts back what ``heldSavesSnapshot()`` returned.
    func restoreHeldSaves(_ snapshot: Held?) { heldSaves.withLock { $0 = snapshot } }

    /// Writes `stored` as the chat's group now.
    private func write(_ store: some MessagingStore, _ stored: Stored) throws {
        let chatID = stored.group.chatID
        let group = stored.group.group
        var record = GroupRecord(
            chatID: chatID, epoch: group.epoch, ratchets: group.serializedRatchets().unsafeData(),
            sentSinceUpdate: stored.sentSinceUpdate, updatedAt: stored.updatedAt, lastNumber: stored.lastNumber,
            version: GroupCache.newVersion())
        if let current = try store.groupVersion(chatID: chatID),
            let live = cache.session(chatID, version: current), live.group.group.epoch == group.epoch,
            live.group.group.epochAuthenticator == group.epochAuthenticator, live.group.group.isActive == group.isActive
        {
            // The row holds this epoch's state already: the session at the row's version is of
            // the same epoch, with the same key schedule (the authenticator derives from the
            // epoch secret, itself from the whole group context), and the row is in two parts
            // (not a whole state from before they were split).
            if try store.saveRatchets(record, expected: current) {
                cache.remember(stored, version: record.version)
                return
            }
        }
        record.epochState = nil
        try store.saveGroup(record, epochState: group.serializedEpoch().unsafeData())
        cache.remember(stored, version: record.version)
    }

    /// Notes a chat number seen in the mailbox (one of this device's own messages).
    func noteNumber(_ store: some MessagingStore, chatID: String, number: Int64) throws {
        let held = heldSaves.withLock { saves -> Bool in
            guard var stored = saves?.groups[chatID] else { return false }
            stored.lastNumber = max(stored.lastNumber, number)
            saves?.groups[chatID] = stored
            return true
        }
        if held { return }
        let current = try store.groupVersion(chatID: chatID)
        let version = GroupCache.newVersion()
        try store.noteNumber(chatID: chatID, number: number, version: version)
        cache.update(chatID, from: current, to: version) { $0.lastNumber = max($0.lastNumber, number) }
    }

    /// This user left the chat: its group goes, with its pending work.
    func leave(_ store: some MessagingStore, chatID: String) throws {
        heldSaves.withLock { _ = $0?.groups.removeValue(forKey: chatID) }
        cache.forget(chatID)
        try store.leaveChat(chatID, epoch: try store.group(chatID: chatID)?.epoch)
    }

    /// Keeps the group after a commit this device is about to post: if the answer is lost (a
    /// crash, the network), the commit's echo in the mailbox moves the group to it. Every commit
    /// posted for the epoch is kept until the epoch moves, since any of them may be the one the
    /// domain took.
    func setPending(_ store: some MessagingStore, chatID: String, digest: Data, next: ChatGroup) throws {
        try store.setPendingCommit(
            chatID: chatID, digest: digest, epoch: next.group.epoch - 1, group: next.group.serialized().unsafeData())
    }

    /// The group after this device's pending commit `digest`.
    func pending(
        _ store: some MessagingStore, chatID: String, digest: Data, validator: any MLSCredentialValidator
    ) throws -> ChatGroup? {
        guard let state = try store.pendingCommit(chatID: chatID, digest: digest) else { return nil }
        return ChatGroup(chatID: chatID, group: try MLSGroup(serialized: state, validator: validator))
    }

    /// The most entries one chat keeps waiting; beyond it, the oldest go (a withheld commit that
    /// never comes must not fill the store).
    static let maximumDeferred = 1000
}
