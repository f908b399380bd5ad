import Foundation
import SparkCrypto
import SparkDomain
import SparkMLS
import SparkStore

/// The endpoint store's statements for chats as MLS groups: each chat's group state (sealed),
/// the commit this device has posted and not yet seen answered, the entries that wait for a
/// commit before them, and the digests of what this device posted (so that it knows its own
/// echoes, which MLS does not let a sender open). This file alone writes `chat_groups`,
/// `chat_epoch_states`, `pending_commits`, `deferred_entries`, `departed_members` and `sent_posts`.
///
/// A group is stored in two sealed parts: its epoch state (`chat_epoch_states.state`, changed
/// by commits, and large in a large chat) and its ratchets (`chat_groups.ratchets`, changed by
/// every message sent or opened, small whatever the chat's size). They are in two tables because
/// SQLite rewrites a whole row, overflow pages included, when one column changes: a message
/// rewrites only the small row. Loaded groups stay live in ``ChatSessions``, checked against the
/// row's `version` on every load.
struct GroupStore: Sendable {
    let sealer: StoreSealer
    let sessions: ChatSessions

    enum Seal {
        static func state(_ chat: String) -> String { "chat_groups.state/\(chat)" }
        /// The ratchets are bound to their epoch too, so that ratchets of another epoch's row
        /// cannot be put beside this epoch's state.
        static func ratchets(_ chat: String, epoch: UInt64) -> String { "chat_groups.ratchets/\(chat)/\(epoch)" }
        static func pending(_ chat: String, _ digest: Data) -> String {
            "pending_commits.state/\(chat)/\(digest.base64URLEncodedString())"
        }
    }

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
    /// since it was loaded or saved here, else the row, opened and parsed (and kept live).
    func load(_ db: Database, chatID: String, validator: any MLSCredentialValidator) throws -> Stored? {
        guard
            let version = try db.row("SELECT version FROM chat_groups WHERE chat_id = ?", [chatID]).map({
                try $0.get(0, as: Data?.self)
            })
        else { return nil }
        if let version, var live = sessions.session(chatID, version: version) {
            live.group = live.group.judged(by: validator)
            return live
        }
        guard
            let row = try db.row(
                """
                SELECT g.state, g.ratchets, g.epoch, g.sent_since_update, g.updated_at, g.last_number, e.state
                FROM chat_groups g LEFT JOIN chat_epoch_states e USING (chat_id) WHERE g.chat_id = ?
                """,
                [chatID])
        else { return nil }
        let group: MLSGroup
        do {
            if let ratchets = try row.get(1, as: Data?.self) {
                let epoch = UInt64(clamping: try row.get(2, as: Int64.self))
                guard let state = try row.get(6, as: Data?.self) else {
                    throw MessagingError(.storageFailure, "the ratchets are stored without their epoch state")
                }
                group = try MLSGroup(
                    epoch: try sealer.open(state, Seal.state(chatID)),
                    ratchets: try sealer.open(ratchets, Seal.ratchets(chatID, epoch: epoch)), validator: validator)
            } else {
                // A row from before the state was stored in two parts: the whole state in one.
                group = try MLSGroup(serialized: try sealer.open(try row.get(0), Seal.state(chatID)), validator: validator)
            }
        } catch {
            throw MessagingError(.storageFailure, "the stored group of chat \(chatID) does not load: \(error)")
        }
        let stored = Stored(
            group: ChatGroup(chatID: chatID, group: group), sentSinceUpdate: try row.get(3),
            updatedAt: Date(timeIntervalSince1970: try row.get(4)), lastNumber: try row.get(5))
        if let version { sessions.remember(stored, version: version) }
        return stored
    }

    /// The chats this device has a group of.
    static func chats(_ db: Database) throws -> [String] {
        try db.rows("SELECT chat_id FROM chat_groups ORDER BY chat_id").map { try $0.get(0, as: String.self) }
    }

    static func exists(_ db: Database, chatID: String) throws -> Bool {
        try db.scalar("SELECT 1 FROM chat_groups WHERE chat_id = ?", [chatID], as: Int.self) != nil
    }

    /// Stores `stored` as the chat's group (the commits posted and pending for an earlier epoch
    /// are forgotten: the epoch moved). When only its ratchets moved since the live session
    /// (a message sent or opened), only the ratchets are written.
    func save(_ db: Database, _ stored: Stored) throws {
        let chatID = stored.group.chatID
        let group = stored.group.group
        let version = ChatSessions.newVersion()
        let ratchets = try sealer.seal(group.serializedRatchets().unsafeData(), Seal.ratchets(chatID, epoch: group.epoch))
        if let current = try db.scalar("SELECT version FROM chat_groups WHERE chat_id = ?", [chatID], as: Data.self),
            let live = sessions.session(chatID, version: current), live.group.group.epoch == group.epoch,
            live.group.group.epochAuthenticator == group.epochAuthenticator, live.group.group.isActive == group.isActive
        {
            // The row holds this epoch's state already: the session at the row's version is of
            // the same epoch, with the same key schedule (the authenticator derives from the
            // epoch secret, itself from the whole group context), and the row is in two parts
            // (not a whole state from before they were split).
            let changed = try db.execute(
                """
                UPDATE chat_groups SET ratchets = ?, version = ?, sent_since_update = ?, updated_at = ?, last_number = ?
                WHERE chat_id = ? AND version = ? AND epoch = ? AND ratchets IS NOT NULL
                """,
                [
                    ratchets, version, stored.sentSinceUpdate, stored.updatedAt.timeIntervalSince1970, stored.lastNumber,
                    chatID, current, Int64(clamping: group.epoch),
                ])
            if changed == 1 {
                sessions.remember(stored, version: version)
                return
            }
        }
        try db.execute(
            "INSERT OR REPLACE INTO chat_epoch_states(chat_id, state) VALUES (?, ?)",
            [chatID, try sealer.seal(group.serializedEpoch().unsafeData(), Seal.state(chatID))])
        // `chat_groups.state` held the whole state before it was stored in two parts; empty now.
        try db.execute(
            """
            INSERT INTO chat_groups(chat_id, state, ratchets, epoch, sent_since_update, updated_at, last_number, version)
            VALUES (?, x'', ?, ?, ?, ?, ?, ?)
            ON CONFLICT(chat_id) DO UPDATE SET state = excluded.state, ratchets = excluded.ratchets, epoch = excluded.epoch,
                sent_since_update = excluded.sent_since_update, updated_at = excluded.updated_at,
                last_number = excluded.last_number, version = excluded.version
            """,
            [
                chatID, ratchets, Int64(clamping: group.epoch), stored.sentSinceUpdate, stored.updatedAt.timeIntervalSince1970,
                stored.lastNumber, version,
            ])
        sessions.remember(stored, version: version)
        try Self.forgetPending(db, chatID: chatID, before: group.epoch)
    }

    /// Notes a chat number seen in the mailbox (one of this device's own messages).
    func noteNumber(_ db: Database, chatID: String, number: Int64) throws {
        let current = try db.scalar("SELECT version FROM chat_groups WHERE chat_id = ?", [chatID], as: Data.self)
        let version = ChatSessions.newVersion()
        try db.execute(
            "UPDATE chat_groups SET last_number = max(last_number, ?), version = ? WHERE chat_id = ?", [number, version, chatID])
        sessions.update(chatID, from: current, to: version) { $0.lastNumber = max($0.lastNumber, number) }
    }

    func delete(_ db: Database, chatID: String) throws {
        sessions.forget(chatID)
        try db.execute("DELETE FROM chat_groups WHERE chat_id = ?", [chatID])
        try db.execute("DELETE FROM chat_epoch_states WHERE chat_id = ?", [chatID])
        try db.execute("DELETE FROM deferred_entries WHERE chat_id = ?", [chatID])
        try db.execute("DELETE FROM departed_members WHERE chat_id = ?", [chatID])
        try db.execute("DELETE FROM pending_commits WHERE chat_id = ?", [chatID])
    }

    /// Keeps the group after a commit this device is about to post: if the answer is lost (a
    /// crash, the network), the commit's echo in the mailbox moves the group to it. Every commit
    /// posted for the epoch is kept until the epoch moves, since any of them may be the one the
    /// domain took.
    func setPending(_ db: Database, chatID: String, digest: Data, next: ChatGroup) throws {
        try db.execute(
            "INSERT OR REPLACE INTO pending_commits(digest, chat_id, epoch, state) VALUES (?, ?, ?, ?)",
            [
                digest, chatID, Int64(clamping: next.group.epoch) - 1,
                try sealer.seal(next.group.serialized().unsafeData(), Seal.pending(chatID, digest)),
            ])
    }

    /// The group after this device's pending commit `digest`.
    func pending(_ db: Database, chatID: String, digest: Data, validator: any MLSCredentialValidator) throws -> ChatGroup? {
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

    /// The group's state in two parts (the epoch state in a table of its own) and the row's
    /// version (see ``ChatSessions``), added by the endpoint store's migration `v9-chat-sessions`.
    /// A row from before keeps its whole state in `chat_groups.state`, with no ratchets, until
    /// it is next saved.
    static let sessionsSchema = """
        CREATE TABLE chat_epoch_states (
            chat_id TEXT PRIMARY KEY,
            state BLOB NOT NULL
        );
        ALTER TABLE chat_groups ADD COLUMN ratchets BLOB;
        ALTER TABLE chat_groups ADD COLUMN version BLOB;
        UPDATE chat_groups SET version = randomblob(16);
        """

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
