import Foundation
import SparkCrypto
import SparkDomain
import SparkMLS
import SparkStore

/// The endpoint store's statements for chats as MLS groups: each chat's group state (sealed),
/// the commit this device has posted and not yet seen answered, the entries that wait for a
/// commit before them, and the digests of what this device posted (so that it knows its own
/// echoes, which MLS does not let a sender open). This file alone writes `chat_groups`,
/// `pending_commits`, `deferred_entries`, `departed_members` and `sent_posts`.
enum GroupStore {
    enum Seal {
        static func state(_ chat: String) -> String { "chat_groups.state/\(chat)" }
        static func pending(_ chat: String, _ digest: Data) -> String {
            "pending_commits.state/\(chat)/\(digest.base64URLEncodedString())"
        }
    }

    /// One chat's stored group.
    struct Stored {
        var group: ChatGroup
        /// Messages this device sent since its last commit (its last key update).
        var sentSinceUpdate: Int
        /// When this device last committed (updating its own keys).
        var updatedAt: Date
        /// The newest chat number seen in the mailbox: numbers only grow, in the domain's order.
        var lastNumber: Int64
    }

    static func load(_ db: Database, chatID: String, sealer: StoreSealer, validator: any MLSCredentialValidator) throws
        -> Stored?
    {
        guard
            let row = try db.row(
                "SELECT state, sent_since_update, updated_at, last_number FROM chat_groups WHERE chat_id = ?", [chatID])
        else { return nil }
        let state = try sealer.open(try row.get(0), Seal.state(chatID))
        let group: MLSGroup
        do {
            group = try MLSGroup(serialized: state, validator: validator)
        } catch {
            throw MessagingError(.storageFailure, "the stored group of chat \(chatID) does not load: \(error)")
        }
        return Stored(
            group: ChatGroup(chatID: chatID, group: group), sentSinceUpdate: try row.get(1),
            updatedAt: Date(timeIntervalSince1970: try row.get(2)), lastNumber: try row.get(3))
    }

    /// The chats this device has a group of.
    static func chats(_ db: Database) throws -> [String] {
        try db.rows("SELECT chat_id FROM chat_groups ORDER BY chat_id").map { try $0.get(0, as: String.self) }
    }

    static func exists(_ db: Database, chatID: String) throws -> Bool {
        try db.scalar("SELECT 1 FROM chat_groups WHERE chat_id = ?", [chatID], as: Int.self) != nil
    }

    /// Stores `stored` as the chat's group (the commits posted and pending for an earlier epoch
    /// are forgotten: the epoch moved).
    static func save(_ db: Database, _ stored: Stored, sealer: StoreSealer) throws {
        let chatID = stored.group.chatID
        try db.execute(
            """
            INSERT INTO chat_groups(chat_id, state, epoch, sent_since_update, updated_at, last_number) VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT(chat_id) DO UPDATE SET state = excluded.state, epoch = excluded.epoch,
                sent_since_update = excluded.sent_since_update, updated_at = excluded.updated_at,
                last_number = excluded.last_number
            """,
            [
                chatID, try sealer.seal(stored.group.group.serialized().unsafeData(), Seal.state(chatID)),
                Int64(clamping: stored.group.group.epoch), stored.sentSinceUpdate, stored.updatedAt.timeIntervalSince1970,
                stored.lastNumber,
            ])
        try forgetPending(db, chatID: chatID, before: stored.group.group.epoch)
    }

    /// Notes a chat number seen in the mailbox (one of this device's own messages).
    static func noteNumber(_ db: Database, chatID: String, number: Int64) throws {
        try db.execute("UPDATE chat_groups SET last_number = max(last_number, ?) WHERE chat_id = ?", [number, chatID])
    }

    static func delete(_ db: Database, chatID: String) throws {
        try db.execute("DELETE FROM chat_groups WHERE chat_id = ?", [chatID])
        try db.execute("DELETE FROM deferred_entries WHERE chat_id = ?", [chatID])
        try db.execute("DELETE FROM departed_members WHERE chat_id = ?", [chatID])
        try db.execute("DELETE FROM pending_commits WHERE chat_id = ?", [chatID])
    }

    /// Keeps the group after a commit this device is about to post: if the answer is lost (a
    /// crash, the network), the commit's echo in the mailbox moves the group to it. Every commit
    /// posted for the epoch is kept until the epoch moves, since any of them may be the one the
    /// domain took.
    static func setPending(_ db: Database, chatID: String, digest: Data, next: ChatGroup, sealer: StoreSealer) throws {
        try db.execute(
            "INSERT OR REPLACE INTO pending_commits(digest, chat_id, epoch, state) VALUES (?, ?, ?, ?)",
            [
                digest, chatID, Int64(clamping: next.group.epoch) - 1,
                try sealer.seal(next.group.serialized().unsafeData(), Seal.pending(chatID, digest)),
            ])
    }

    /// The group after this device's pending commit `digest`.
    static func pending(
        _ db: Database, chatID: String, digest: Data, sealer: StoreSealer, validator: any MLSCredentialValidator
    ) throws -> ChatGroup? {
        guard
            let sealed = try db.scalar(
                "SELECT state FROM pending_commits WHERE chat_id = ? AND digest = ?", [chatID, digest], as: Data.self)
        else { return nil }
        let group = try MLSGroup(serialized: try sealer.open(sealed, Seal.pending(chatID, digest)), validator: validator)
        return ChatGroup(chatID: chatID, group: group)
    }

    /// Forgets one pending commit (the domain refused it: another won the epoch).
    static func clearPending(_ db: Database, chatID: String, digest: Data) throws {
        try db.execute("DELETE FROM pending_commits WHERE chat_id = ? AND digest = ?", [chatID, digest])
    }

    /// Forgets the pending commits of epochs the chat's group has left.
    static func forgetPending(_ db: Database, chatID: String, before epoch: UInt64) throws {
        try db.execute(
            "DELETE FROM pending_commits WHERE chat_id = ? AND epoch < ?", [chatID, Int64(clamping: epoch)])
    }

    // MARK: Entries that wait

    /// Keeps an entry that came before the commit it needs (its epoch is ahead of the group's).
    static func deferEntry(_ db: Database, _ entry: MailboxEntry) throws {
        try db.execute(
            "INSERT OR REPLACE INTO deferred_entries(sequence, chat_id, entry) VALUES (?, ?, ?)",
            [entry.sequence, entry.chatID, try JSONEncoder().encode(entry)])
    }

    /// The chat's waiting entries, oldest first (at most 1,000: a domain cannot make a device
    /// keep more for one chat, see ``maximumDeferred``).
    static func deferred(_ db: Database, chatID: String) throws -> [MailboxEntry] {
        try db.rows("SELECT entry FROM deferred_entries WHERE chat_id = ? ORDER BY sequence", [chatID]).compactMap {
            try? JSONDecoder().decode(MailboxEntry.self, from: try $0.get(0, as: Data.self))
        }
    }

    static func deferredCount(_ db: Database, chatID: String) throws -> Int {
        try db.scalar("SELECT count(*) FROM deferred_entries WHERE chat_id = ?", [chatID], as: Int.self) ?? 0
    }

    /// The most entries one chat keeps waiting; beyond it, the oldest go (a withheld commit that
    /// never comes must not fill the store).
    static let maximumDeferred = 1000

    static func forget(_ db: Database, sequence: Int64) throws {
        try db.execute("DELETE FROM deferred_entries WHERE sequence = ?", [sequence])
    }

    // MARK: Members who left

    /// Notes that the domain no longer lists `users` as members of the chat (they left): an
    /// admin's device removes their devices from the group.
    static func noteDeparted(_ db: Database, chatID: String, users: [String]) throws {
        for user in users {
            try db.execute("INSERT OR IGNORE INTO departed_members(chat_id, user_id) VALUES (?, ?)", [chatID, user])
        }
    }

    static func departed(_ db: Database, chatID: String) throws -> Set<String> {
        Set(
            try db.rows("SELECT user_id FROM departed_members WHERE chat_id = ?", [chatID]).map { try $0.get(0, as: String.self) }
        )
    }

    static func forgetDeparted(_ db: Database, chatID: String) throws {
        try db.execute("DELETE FROM departed_members WHERE chat_id = ?", [chatID])
        try db.execute("DELETE FROM pending_commits WHERE chat_id = ?", [chatID])
    }

    // MARK: What this device posted

    /// Remembers that this device posted `payload` (a message's under `localID`).
    static func recordSent(_ db: Database, chatID: String, payload: Data, localID: String?) throws {
        try db.execute(
            "INSERT OR REPLACE INTO sent_posts(digest, chat_id, local_id) VALUES (?, ?, ?)",
            [SHA256.hash(payload), chatID, localID])
    }

    /// Something this device posted: a message (its local id) or another post (nil).
    struct SentPost {
        var localID: String?
    }

    /// Whether this device posted `payload`.
    static func sent(_ db: Database, payload: Data) throws -> SentPost? {
        try db.row("SELECT local_id FROM sent_posts WHERE digest = ?", [SHA256.hash(payload)]).map {
            SentPost(localID: try $0.get(0, as: String?.self))
        }
    }

    static func forgetSent(_ db: Database, payload: Data) throws {
        try db.execute("DELETE FROM sent_posts WHERE digest = ?", [SHA256.hash(payload)])
    }

    /// The tables, created by the endpoint store's migration `v8-mls-chats` (which also drops
    /// the sender-key tables this replaces).
    static let schema = """
        CREATE TABLE chat_groups (
            chat_id TEXT PRIMARY KEY,
            state BLOB NOT NULL,
            epoch INTEGER NOT NULL,
            sent_since_update INTEGER NOT NULL DEFAULT 0,
            updated_at REAL NOT NULL,
            last_number INTEGER NOT NULL DEFAULT 0
        );
        CREATE TABLE pending_commits (
            digest BLOB PRIMARY KEY,
            chat_id TEXT NOT NULL,
            epoch INTEGER NOT NULL,
            state BLOB NOT NULL
        );
        CREATE TABLE deferred_entries (
            sequence INTEGER PRIMARY KEY,
            chat_id TEXT NOT NULL,
            entry BLOB NOT NULL
        );
        CREATE INDEX deferred_by_chat ON deferred_entries(chat_id, sequence);
        CREATE TABLE departed_members (
            chat_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            PRIMARY KEY (chat_id, user_id)
        );
        CREATE TABLE sent_posts (
            digest BLOB PRIMARY KEY,
            chat_id TEXT NOT NULL,
            local_id TEXT
        );
        DROP TABLE sender_keys;
        DROP TABLE sender_sequences;
        ALTER TABLE chats DROP COLUMN membership_version;
        """
}
