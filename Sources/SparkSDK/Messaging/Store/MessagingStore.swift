import Foundation
import SparkDomain

/// Every statement the messenger makes on messages, chats, groups and pending work, as one
/// transaction sees them. A value of it is bound to one transaction: what it writes commits or
/// rolls back with the rest of that transaction (the SQLite store's `Database`, or the
/// in-memory store's copy of its state).
///
/// Two stores keep it, and ``MessagingStoreTests`` runs one suite against both:
/// - ``SQLiteMessagingStore``, the endpoint store's tables, every secret value sealed per value
///   (`StoreSealer`, bound to its column and row);
/// - ``MemoryMessagingStore``, for the messaging core's tests and for an app that keeps nothing
///   on disk.
///
/// The rules of what goes in are not here but in the callers (`MessagingCore`, `GroupStore`);
/// what is here is what a store must guarantee whatever it is:
/// - a message id is taken once, and a chat's number once: a second insert throws
///   `MessagingError(.conflict)` and changes nothing (or, `ignoringTaken`, is left out);
/// - a message's state moves only by a ``MessageStep``, from the step's sources;
/// - a group's row changes its `version` at every write (see ``GroupCache``), and its
///   ratchets are replaced alone only while the row is at the version and epoch the caller names.
protocol MessagingStore: MessageStatements, SearchStatements, ChatStatements, GroupStatements, PendingWorkStatements,
    IdentityStatements
{
    /// Runs `body` in a savepoint of the transaction: what it changed is undone, alone, when it
    /// throws (the rest of the transaction stays). A constraint it breaks is thrown as
    /// `MessagingError(.conflict)`.
    func savepoint<T>(_ body: () throws -> T) throws -> T
}

/// The statements on messages: insert, read, page, and move by a ``MessageStep``; reactions,
/// recalls, expiry and read state. Part of ``MessagingStore``.
protocol MessageStatements {
    /// The message `id`, or nil.
    func message(_ id: String) throws -> ChatMessage?
    /// The chat's messages of these ids (those that exist and have not expired: an expired row
    /// is kept only so that its id and number are not taken again), in no particular order. A
    /// flow updated by these ids so drops an expired message, whatever changed it late (a
    /// receipt, a reaction).
    func messages(chatID: String, ids: [String]) throws -> [ChatMessage]
    /// The latest `limit` messages before `number` (or the newest), oldest first: numbered
    /// messages by number, then, on the newest page, those without a number yet by time.
    func page(chatID: String, before number: Int64?, limit: Int) throws -> [ChatMessage]
    /// The chat's numbered messages, oldest first (what a history transfer hands over).
    func numbered(chatID: String) throws -> [ChatMessage]
    /// The id of the chat's message numbered `number`.
    func messageID(chatID: String, number: Int64) throws -> String?
    /// The chat's message `id` as the messaging core asks for it: its number and sender.
    func known(chatID: String, id: String) throws -> MessagingCore.KnownMessage?
    /// The chat of `sender`'s numbered message `id` (what may be edited).
    func chatOfNumbered(id: String, sender: String) throws -> String?
    /// The newest number of a received message of the chat.
    func newestReceived(chatID: String) throws -> Int64?
    /// How many received messages of the chat are not read.
    func unreadCount(chatID: String) throws -> Int

    /// What this user sends, stored before anything leaves: sealed (`sending`, with its bytes)
    /// or held (no bytes).
    func insertOutgoing(_ message: OutgoingMessage, sealed: Data?) throws
    /// One of this user's messages, to seal it (again, or for the first time once released).
    func outgoing(_ id: String) throws -> OutgoingMessage?
    /// The chat's messages sealed and not yet accepted, oldest first, with their bytes.
    func sending(chatID: String) throws -> [(id: String, sealed: Data)]
    /// The chats with messages sealed and not yet accepted.
    func chatsSending() throws -> [String]
    /// The chat's held messages, oldest first.
    func held(chatID: String) throws -> [String]
    /// The chats with held messages.
    func chatsHolding() throws -> [String]
    /// `.release` with the bytes it was sealed to, or sealed again (a commit overtook it) while sending.
    func setSealed(_ id: String, _ sealed: Data) throws
    /// `.hold`: a message still sending waits, its bytes forgotten.
    func hold(_ id: String) throws
    /// `.accept`: the domain's number and time for one of this user's messages, whose sealed
    /// bytes are forgotten; returns the step when it moved (a message accepted already, by its
    /// echo, keeps its state).
    func accept(_ id: String, number: Int64?, at time: Date?) throws -> [MessageEvent]
    /// `.refuse`: the domain refused a message still sending (its sealed bytes are forgotten);
    /// returns whether it moved.
    func refuse(_ id: String, reason: String) throws -> Bool

    /// A numbered message received from the chat, `incoming` unless this user sent it; with
    /// `ignoringTaken`, a message whose id or number is taken already is left out (a history
    /// transfer hands over what may be here).
    func insertReceived(_ message: ChatHistory.Record, chatID: String, incoming: Bool, ignoringTaken: Bool) throws
    /// An edit: the message's new text.
    func setContent(_ id: String, content: String) throws
    /// The message's reactions (none when it has none or does not exist).
    func reactions(of id: String) throws -> [Reaction]
    /// Replaces the message's reactions.
    func setReactions(_ id: String, _ reactions: [Reaction]) throws
    /// The message's attachment, while it has one (not recalled, not expired).
    func attachment(of id: String) throws -> AttachmentDescriptor?
    /// Starts the clock of the chat's received messages that are read and have a timer: each
    /// expires its `expire_after` seconds from `now`.
    func startExpiry(chatID: String, at now: Date) throws
    /// Expires the messages whose time is up: their content, data and reactions go, and they are
    /// no longer shown (nor handed over in a history); returns them.
    func expireDue(at now: Date) throws -> [(chatID: String, id: String)]
    /// When the next message expires (nil: none is counting down).
    func nextExpiry() throws -> Date?
    /// The chat's disappearing-messages timer in seconds, as last applied (0: off); new messages
    /// take it.
    func timer(chatID: String) throws -> Int
    /// Applies the group's timer.
    func setTimer(_ seconds: Int, chatID: String) throws
    /// Records the MLS cipher suite of the chat's group.
    func setSuite(_ suite: UInt16, chatID: String) throws
    /// The sender recalled the message: its content, data and reactions go, and it shows as
    /// recalled.
    func recall(_ id: String) throws
    /// Applies `step` to those of these messages of the chat that are this user's and numbered,
    /// where it applies; returns those steps, oldest first.
    func advanceSent(chatID: String, ids: [String], _ step: MessageStep) throws -> [MessageEvent]
    /// Marks the chat's received messages numbered up to `number` read.
    func readReceived(chatID: String, upTo number: Int64) throws
    /// Marks these received messages of the chat read.
    func readReceived(chatID: String, ids: [String]) throws
    /// The chat's received messages numbered up to `number` not yet read, oldest first.
    func unreadReceived(chatID: String, upTo number: Int64) throws -> [CoveredMessage]

}

/// The statements of the sealed search index (see `MessageSearch`; the message statements keep the
/// index in step). Part of ``MessagingStore``.
protocol SearchStatements {
    /// The key of the index's tokens.
    var searchKey: SearchKey { get }
    /// The messages that hold every one of `terms` and pass `match`'s row filters (chat, sender,
    /// time), best first (BM25 without term frequencies: the fewest tokens, then the latest
    /// stored), from `offset`.
    func searchCandidates(_ terms: [SearchMatch.Term], _ match: SearchMatch, offset: Int, limit: Int) throws -> [SearchHit]
    /// Whether the index is of the current version, and whether a rebuild is under way.
    func searchIndexState() throws -> SearchIndexState
    /// Empties the index for a rebuild (``indexUnindexed(after:limit:)`` then fills it).
    func resetSearchIndex() throws
    /// Indexes up to `limit` of the messages the index lacks stored after row `row` (in the
    /// order stored); returns how many, and the last row it looked at (nil: none is left, and
    /// the rebuild is over). A rebuild walks the rows once.
    func indexUnindexed(after row: Int64, limit: Int) throws -> (indexed: Int, last: Int64?)
    /// How many messages the index lacks (a rebuild's total).
    func unindexedCount() throws -> Int

}

/// The statements on chats: their rows, subjects, members and activity. Part of ``MessagingStore``.
protocol ChatStatements {
    /// The chat `chatID`, or every chat, most recent activity first.
    func chats(only chatID: String?) throws -> [StoredChat]
    /// The chat's participants' user ids, in the order they are shown.
    func participants(chatID: String) throws -> [String]
    /// Records the chat (listed from now on) with its participants, admins first, and whether
    /// this user is in it; its last activity is at least `at`.
    func setMembership(chatID: String, participants: [ChatMember], active: Bool, at: Date) throws
    /// The chat's subject, as last shown.
    func subject(chatID: String) throws -> String?
    /// Shows a new subject; the chat's last activity is at least `at`.
    func setSubject(_ subject: String, chatID: String, at: Date) throws
    /// The chat's last activity is at least `at`.
    func touchChat(_ chatID: String, at: Date) throws
    /// This user left the chat (its group at `epoch`, when it had one): it stays listed,
    /// inactive, and its group and pending work go.
    func leaveChat(_ chatID: String, epoch: UInt64?) throws
    /// The epoch of the group this device last left the chat at (nil: never left one).
    func leftEpoch(chatID: String) throws -> UInt64?

}

/// The statements on each chat's MLS group: its row (state, ratchets, version) and this device's
/// pending commits. Part of ``MessagingStore``.
protocol GroupStatements {
    /// The chats this device has a group of.
    func groupChats() throws -> [String]
    /// The users this user blocked, as last listed.
    func blockedUsers() throws -> [String]
    /// Keeps the users this user blocked.
    func replaceBlockedUsers(_ users: [String]) throws
    /// The version of the chat's group row, or nil when this device has no group of the chat.
    func groupVersion(chatID: String) throws -> Data?
    /// The chat's group row.
    func group(chatID: String) throws -> GroupRecord?
    /// Writes the chat's group row whole (its epoch state and its ratchets), under a new
    /// `version`; the commits pending for an earlier epoch are forgotten.
    func saveGroup(_ record: GroupRecord, epochState: Data) throws
    /// Replaces the ratchets and counters alone, under `record.version`, when the row is still at
    /// `expected` and of `record.epoch` (and stored in two parts); returns whether it did.
    func saveRatchets(_ record: GroupRecord, expected: Data) throws -> Bool
    /// Notes a chat number seen in the mailbox under a new `version`.
    func noteNumber(chatID: String, number: Int64, version: Data) throws

    /// Keeps the whole group after a commit this device is about to post (for epoch `epoch`).
    func setPendingCommit(chatID: String, digest: Data, epoch: UInt64, group: Data) throws
    /// The whole group after this device's pending commit `digest`.
    func pendingCommit(chatID: String, digest: Data) throws -> Data?
    /// Forgets one pending commit (the domain refused it: another won the epoch).
    func clearPendingCommit(chatID: String, digest: Data) throws

}

/// The statements on work left for later: entries waiting for a commit, posts to send and their
/// receipts, the mailbox cursor. Part of ``MessagingStore``.
protocol PendingWorkStatements {
    /// Keeps an entry that came before the commit it needs.
    func deferEntry(_ entry: MailboxEntry) throws
    /// The chat's waiting entries, oldest first.
    func deferred(chatID: String) throws -> [MailboxEntry]
    /// How many entries of the chat wait.
    func deferredCount(chatID: String) throws -> Int
    /// Forgets a waiting entry.
    func forgetDeferred(sequence: Int64) throws
    /// Notes that the domain no longer lists `users` as members of the chat.
    func noteDeparted(chatID: String, users: [String]) throws
    /// The users noted as departed from the chat.
    func departed(chatID: String) throws -> Set<String>
    /// Forgets the chat's departed users (their devices were removed). Pending commits stay: a
    /// review of the chat runs beside a commit whose answer was lost, and only its echo, or the
    /// epoch moving, settles it.
    func forgetDeparted(chatID: String) throws
    /// The sequence of this device's text `localID` in its chat (``ChatPayload/sequence``): the
    /// one it was given, or the next.
    func sendingSequence(chatID: String, localID: String) throws -> UInt64
    /// The sequences of this device's texts in the chat that the domain refused (``refuse(_:reason:)``
    /// withdraws a text's), the newest first, at most `ChatPayload.maximumWithdrawn`.
    func withdrawnSequences(chatID: String) throws -> [UInt64]
    /// What this device received of `device`'s texts in the chat.
    func textSequences(chatID: String, device: String) throws -> TextSequences?
    /// Keeps what this device received of a device's texts.
    func saveTextSequences(_ sequences: TextSequences) throws
    /// The texts known to be missing in the chat, per sending user (users with none left out).
    func missingTexts(chatID: String) throws -> [String: Int]
    /// Notes a commit ordered for the group's `epoch` that every member refuses, posted by
    /// `sender`: an admin's device replaces it (one note per chat, the latest).
    func noteRefusedCommit(chatID: String, epoch: UInt64, sender: String) throws
    /// The chat's refused commit, if one is noted.
    func refusedCommit(chatID: String) throws -> RefusedCommit?
    /// Forgets the chat's refused commit (replaced, or the group moved on).
    func forgetRefusedCommit(chatID: String) throws
    /// Remembers that this device posted `payload` (a message's under `localID`).
    func recordSent(chatID: String, payload: Data, localID: String?) throws
    /// Whether this device posted `payload`: a message (its local id) or another post (nil).
    func sent(payload: Data) throws -> SentPost?
    /// Forgets a post of this device (its echo came, or the domain refused it).
    func forgetSent(payload: Data) throws
    /// The mailbox cursor: the sequence of the last entry applied.
    func mailboxCursor() throws -> Int64
    /// Moves the mailbox cursor.
    func setMailboxCursor(_ sequence: Int64) throws

}

/// The statements on identities (see `ContactDirectory`, `DeviceKeys`, `OwnDevices`): contacts,
/// this device's MLS keys, the user's devices this one trusts. Part of ``MessagingStore``.
protocol IdentityStatements {
    /// The contact `user`, as last stored.
    func contact(_ user: String) throws -> ContactDirectory.Record?
    /// Every stored contact's user id, sorted.
    func contactUsers() throws -> [String]
    /// The contacts' version: a fresh random value at every change of a contact, so that what is
    /// built from the contacts (the validators, a chat's untrusted users) is built again when they
    /// change, here or in another process. Nil on a store without one.
    func contactsVersion() throws -> Data?
    /// Stores a contact, under a new ``contactsVersion()``.
    func saveContact(_ record: ContactDirectory.Record) throws
    /// Each contact's identity keys a group's leaves may be signed by: the trusted key, and the
    /// changed one the domain publishes while the user has not decided.
    func contactGroupKeys() throws -> [String: [Data]]
    /// Each trusted contact's identity key: the only ones a device this one sends to may be
    /// signed by.
    func trustedContactKeys() throws -> [String: Data]
    /// How far each of `users` is trusted, for those met (a state this code did not write is
    /// `changed`).
    func verifications(of users: Set<String>) throws -> [String: ContactVerification]
    /// What key transparency keeps: the domain's keys, the last head accepted, the alarm.
    func transparencyState() throws -> TransparencyState
    /// Keeps what key transparency keeps.
    func setTransparencyState(_ state: TransparencyState) throws
    /// The policy for first contacts, or the default.
    func identityPolicy() throws -> IdentityTrustPolicy
    /// Keeps the policy for first contacts.
    func setIdentityPolicy(_ policy: IdentityTrustPolicy) throws

    /// This device's stored MLS signer for `user`'s identity, if any.
    func deviceSigner(user: String) throws -> StoredSigner?
    /// Replaces this device's signer; every KeyPackage bundle goes with the previous one.
    func replaceDeviceSigner(_ signer: StoredSigner) throws
    /// Keeps the private bundle of a KeyPackage of MLS cipher suite `suite` this device publishes.
    func addKeyPackageBundle(reference: Data, bundle: Data, suite: UInt16, lastResort: Bool, createdAt: Date) throws
    /// The last-resort bundle of `suite` kept now becomes a one-time one (a new last-resort one
    /// follows).
    func demoteLastResortBundle(suite: UInt16) throws
    /// When the last-resort bundle of `suite` kept now was made (nil: none).
    func lastResortMadeAt(suite: UInt16) throws -> Date?
    /// Forgets the bundles made before `date`.
    func forgetKeyPackageBundles(madeBefore date: Date) throws
    /// The private bundle of the KeyPackage `reference` (serialized), if this device has it.
    func keyPackageBundle(reference: Data) throws -> Data?
    /// Forgets a one-time bundle once a Welcome used it (a last-resort one stays).
    func consumeKeyPackageBundle(reference: Data) throws
    /// The user's devices this device trusted at its last look.
    func trustedOwnDevices() throws -> Set<OwnDevices.Trusted>
    /// Keeps `devices` as what this device trusts.
    func setTrustedOwnDevices(_ devices: Set<OwnDevices.Trusted>) throws
    /// Adds `device` to what this device trusts (it approved it).
    func trustOwnDevice(_ device: OwnDevices.Trusted) throws
}

/// What this device keeps of key transparency.
struct TransparencyState: Sendable, Equatable {
    /// The domain's transparency keys, pinned when first fetched.
    var keys: TransparencyKeys?
    /// The last tree head this device accepted: every later one must extend it.
    var head: TreeHead?
    /// Why the monitoring of this user's own identity raised an alarm (nil: none raised).
    var alarm: String?
    /// The fork this device found (a member's gossiped head that no single log can hold beside
    /// this device's): evidence signed by the domain, never cleared.
    var fork: String?
}

/// This device's MLS signer as stored: its key, and the credential the identity key signed.
struct StoredSigner: Sendable, Equatable {
    /// The user whose identity signed the credential.
    var user: String
    /// The version of that identity key.
    var identityKeyVersion: Int
    /// The Ed25519 seed of the device's signature key.
    var seed: Data
    /// The encoded ``DeviceCredential``.
    var credential: Data
}

/// One of this user's messages before the domain numbered it.
struct OutgoingMessage: Sendable, Equatable {
    var id: String
    var chatID: String
    var sender: String
    var content: String
    var tag: String
    var data: String?
    /// The number of the message it refers to.
    var ref: Int64?
    var timestamp: Date
    var attachment: AttachmentDescriptor? = nil
}

extension OutgoingMessage {
    /// The message as the app sees it before the domain numbers it.
    func shown(as state: MessageState) -> ChatMessage {
        ChatMessage(
            id: id, chatID: chatID, number: nil, sender: sender, isIncoming: false, content: content, tag: tag, data: data,
            ref: ref, state: state, timestamp: timestamp, attachment: attachment.map(Attachment.init))
    }
}

/// A chat's row: everything but its participants' trust, which the contacts decide.
struct StoredChat: Sendable, Equatable {
    var chatID: String
    var subject: String
    var isActive: Bool
    var lastActivity: Date
    /// In the order they are shown: admins first.
    var participants: [ChatMember]
    var unreadCount: Int
    /// The disappearing-messages timer in seconds (0: off).
    var timer: Int = 0
    /// The MLS cipher suite of the chat's group (1 until one was recorded).
    var suite: UInt16 = 1
}

/// A chat's group row, without its epoch state.
struct GroupRecord: Sendable, Equatable {
    var chatID: String
    var epoch: UInt64
    /// The ratchets (`MLSGroup.serializedRatchets`); nil in a row from before a group was stored
    /// in two parts, whose `whole` state holds everything.
    var ratchets: Data?
    /// The epoch state (`MLSGroup.serializedEpoch`), when read.
    var epochState: Data?
    /// The whole state of a row from before the split.
    var whole: Data?
    var sentSinceUpdate: Int
    var updatedAt: Date
    var lastNumber: Int64
    var version: Data
}

/// A message a receipt covers: its id and number.
struct CoveredMessage: Sendable, Equatable {
    var id: String
    var number: Int64
}

/// A commit every member refuses, which an admin's device replaces.
struct RefusedCommit: Sendable, Equatable {
    /// The group's epoch it was ordered for.
    var epoch: UInt64
    /// The user the domain names as its sender.
    var sender: String
}

/// Something this device posted: a message (its local id) or another post (nil).
struct SentPost: Sendable, Equatable {
    var localID: String?
}

extension MessagingStore {
    /// The messaging core's lookups.
    var lookup: some MessageLookup { StoreLookup(store: self) }
}

private struct StoreLookup<Store: MessagingStore>: MessageLookup {
    let store: Store
    func message(_ id: String, in chatID: String) throws -> MessagingCore.KnownMessage? {
        try store.known(chatID: chatID, id: id)
    }
    func isTaken(_ number: Int64, in chatID: String) throws -> Bool {
        try store.messageID(chatID: chatID, number: number) != nil
    }
}

/// A message a search's terms found: what its result shows, and its text to check and quote.
struct SearchHit: Sendable {
    var id: String
    var sender: String
    var timestamp: Date
    var number: Int64?
    var document: SearchDocument
}

/// The search index's state (``SearchStatements/searchIndexState()``).
struct SearchIndexState: Sendable, Equatable {
    /// Its tokens are of the current version.
    var current: Bool
    /// A rebuild has not finished.
    var building: Bool
}
