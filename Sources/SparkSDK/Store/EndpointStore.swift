public import Foundation
import SparkCrypto
import SparkLock
import SparkStore

/// This device's local database: one SQLite file in the data directory (created 0600, the
/// directory 0700): the cached credentials for silent sign-in, the registration, the unlocked
/// keys, and the chats, messages, group states, contacts and mailbox cursor of messaging. Deleted
/// content is overwritten (`secure_delete`), and a wipe leaves no byte of it in the file or its
/// write-ahead log.
///
/// The secrets (credentials, identity keys, group states, message bodies and data, subjects) are
/// encrypted per value under a store key that is not in the file (see ``StoreKeySource``).
public final class EndpointStore: Sendable {
    /// The data directory.
    public let directory: URL
    let queue: DatabaseQueue
    let keyring: StoreKeyring
    private let currentSealer: Locked<StoreSealer>

    /// What seals this store's secret values now (a reset makes a new key).
    var sealer: StoreSealer { currentSealer.withLock { $0 } }

    /// Messaging's chats, messages, groups and contacts in memory instead of this store's
    /// tables, when asked for (``keepMessagingInMemory()``).
    private let memoryMessaging = Locked<MemoryMessagingStore?>(nil)

    /// Keeps messaging's data in `memory` from now on, not in the file (the messaging suites run
    /// on both stores; nothing of messaging then outlives `memory`).
    func keepMessagingInMemory(_ memory: MemoryMessagingStore = MemoryMessagingStore()) {
        memoryMessaging.withLock { $0 = memory }
    }

    /// A storage for a new messenger: this store's tables sealed under its key as it is now, or
    /// the store in memory.
    func messagingStorage() -> MessagingStorage {
        if let memory = memoryMessaging.withLock({ $0 }) { return .memory(memory) }
        return .sqlite(queue, sealer: sealer)
    }

    /// Opens (creating if needed) the store in `directory`, with its key from `key`.
    ///
    /// - Throws: ``AuthError/Code/storeLocked`` when the store holds secrets and the key is
    ///   missing or another store's: nothing is changed, so restoring the key opens it again.
    public init(directory: URL, key: StoreKeySource = .automatic) throws {
        self.directory = directory
        keyring = StoreKeyring(source: key, directory: directory)
        let queue: DatabaseQueue
        do {
            // Synced at every commit: what the API says is stored, and every secret of a group
            // (epoch, leaf, generation) a message used, is on the disk before the call returns or
            // the ciphertext leaves (docs/ARCHITECTURE.md, "Durability").
            queue = try DatabaseQueue(
                path: directory.appendingPathComponent("endpoint.sqlite").path, durability: .powerCut)
            try queue.withConnection { db in try db.execute("PRAGMA secure_delete = ON") }
        } catch {
            throw AuthError(.storageFailure, "cannot open the endpoint store in \(directory.path): \(error)")
        }
        self.queue = queue
        // The key first (the check needs no migration), then the schema: values stored before
        // encryption are sealed by the last migration.
        let (sealer, wasSealed) = try Self.unlock(queue, keyring: keyring, directory: directory)
        currentSealer = Locked(sealer)
        do {
            let indexInFile = try queue.read { db in
                try db.scalar("SELECT 1 FROM sqlite_master WHERE name = 'message_search'", as: Int.self) != nil
            }
            try Self.migrator(sealer).migrate(queue)
            if !wasSealed || indexInFile {
                // Values sealed in place leave their plaintext in free pages and the WAL, as the
                // search index of the file (before `v20-sealed-search-index`) leaves its tokens.
                // The VACUUM may renumber messages' rowids, the search index's documents: it comes
                // before the index has an image, so the index is rebuilt.
                try queue.withConnection { db in
                    try db.execute("VACUUM")
                    try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                }
                unlink(directory.appendingPathComponent(SearchIndexImage.fileName).path)
            }
            try SearchIndexImage.attach(queue, sealer: sealer)
        } catch {
            throw AuthError(.storageFailure, "cannot open the endpoint store in \(directory.path): \(error)")
        }
    }

    /// The store's key: the one its check value opens with, or a new one for a store that
    /// holds no sealed value yet.
    private static func unlock(
        _ queue: DatabaseQueue, keyring: StoreKeyring, directory: URL
    ) throws -> (StoreSealer, wasSealed: Bool) {
        let check = try? queue.read { db -> Data? in
            guard try db.scalar("SELECT 1 FROM sqlite_master WHERE name = 'store_key_check'", as: Int.self) != nil else {
                return nil
            }
            return try db.scalar("SELECT value FROM store_key_check", as: Data.self)
        }
        guard let check = check ?? nil else { return (StoreSealer(key: try keyring.existingKey() ?? keyring.makeKey()), false) }
        guard let key = try keyring.existingKey() else {
            throw AuthError(
                .storeLocked,
                "the endpoint store in \(directory.path) is encrypted and its key is missing (\(keyring.place)); restore the key, or reset this device to start over without its data"
            )
        }
        let sealer = StoreSealer(key: key)
        guard (try? sealer.open(check, StoreSealer.checkContext)) == StoreSealer.checkValue else {
            throw AuthError(
                .storeLocked,
                "the key \(keyring.place) does not open the endpoint store in \(directory.path); nothing was changed")
        }
        return (sealer, true)
    }

    /// The bound context of each sealed column: the table, the column and the row's key.
    enum Seal {
        static func credential(_ provider: String) -> String { "credentials.credential/\(provider)" }
        static func signingKey(_ user: String) -> String { "local_keys.signing_key/\(user)" }
        static func encryptionKey(_ user: String) -> String { "local_keys.encryption_key/\(user)" }
        /// The sender keys of stores from before chats were MLS groups (sealed by `v22-encrypted-values`,
        /// dropped by `v23-mls-chats`).
        static func chatKey(_ chat: String, _ sender: String, _ device: String, _ epoch: Int) -> String {
            "sender_keys.key/\(chat)/\(sender)/\(device)/\(epoch)"
        }
        static func content(_ id: String) -> String { "messages.content/\(id)" }
        static func data(_ id: String) -> String { "messages.data/\(id)" }
        static func subject(_ chat: String) -> String { "chats.subject/\(chat)" }
        static func reactions(_ id: String) -> String { "messages.reactions/\(id)" }
        static func attachment(_ id: String) -> String { "messages.attachment/\(id)" }
    }

    /// The endpoint store's one migration list, in the order a new store applies it, each name
    /// once (`v<n>-<what>`, n counting up). Five shipped under names that repeated a number
    /// (registered after the schema's, in a second list); they are renamed here, so stores that
    /// recorded the old names open as they are.
    static func migrator(_ sealer: StoreSealer) -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.register("v1-credentials") { db in
            try db.execute(
                """
                CREATE TABLE credentials (
                    provider TEXT PRIMARY KEY,
                    credential BLOB NOT NULL,
                    updated_at REAL NOT NULL
                )
                """)
        }
        migrator.register("v2-keys") { db in
            try db.execute(
                """
                CREATE TABLE local_keys (
                    user_id TEXT PRIMARY KEY,
                    key_version INTEGER NOT NULL,
                    signing_key BLOB NOT NULL,
                    encryption_key BLOB NOT NULL
                )
                """)
        }
        migrator.register("v3-registration") { db in
            try db.execute(
                """
                CREATE TABLE registration (
                    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
                    endpoint_id TEXT NOT NULL,
                    user_id TEXT,
                    registration_id INTEGER
                )
                """)
        }
        migrator.register("v4-messaging") { db in
            try db.execute(
                """
                CREATE TABLE chats (
                    chat_id TEXT PRIMARY KEY,
                    subject TEXT NOT NULL DEFAULT '',
                    active INTEGER NOT NULL DEFAULT 1,
                    membership_version INTEGER NOT NULL DEFAULT 1,
                    last_activity REAL NOT NULL
                );
                CREATE TABLE participants (
                    chat_id TEXT NOT NULL,
                    user_id TEXT NOT NULL,
                    is_admin INTEGER NOT NULL,
                    PRIMARY KEY (chat_id, user_id)
                );
                CREATE TABLE messages (
                    local_id TEXT PRIMARY KEY,
                    chat_id TEXT NOT NULL,
                    number INTEGER,
                    sender TEXT NOT NULL,
                    incoming INTEGER NOT NULL,
                    content TEXT NOT NULL,
                    tag TEXT NOT NULL,
                    data TEXT,
                    ref INTEGER,
                    state TEXT NOT NULL,
                    failure TEXT,
                    timestamp REAL NOT NULL,
                    sealed BLOB
                );
                CREATE UNIQUE INDEX messages_by_number ON messages(chat_id, number);
                CREATE INDEX messages_unread ON messages(chat_id, incoming, state);
                CREATE TABLE sender_keys (
                    chat_id TEXT NOT NULL,
                    sender TEXT NOT NULL,
                    device TEXT NOT NULL,
                    epoch INTEGER NOT NULL,
                    key BLOB NOT NULL,
                    membership_version INTEGER NOT NULL,
                    PRIMARY KEY (chat_id, sender, device, epoch)
                );
                CREATE TABLE sender_sequences (
                    chat_id TEXT NOT NULL,
                    sender TEXT NOT NULL,
                    device TEXT NOT NULL,
                    last_seq INTEGER NOT NULL,
                    PRIMARY KEY (chat_id, sender, device)
                );
                CREATE TABLE contacts (
                    user_id TEXT PRIMARY KEY,
                    signing_key BLOB NOT NULL,
                    encryption_key BLOB NOT NULL,
                    key_version INTEGER NOT NULL,
                    key_changed INTEGER NOT NULL DEFAULT 0
                );
                CREATE TABLE mailbox_cursor (
                    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
                    sequence INTEGER NOT NULL
                );
                """)
        }
        migrator.register("v5-pending-key-members") { db in
            // Members a sending key could not be sealed to yet (no identity): they get it later.
            try db.execute("ALTER TABLE sender_keys ADD COLUMN pending TEXT NOT NULL DEFAULT '[]'")
        }
        migrator.register("v6-contact-verification") { db in
            // The trusted key stays in signing_key/encryption_key; a differing published key waits
            // in seen_* until accepted (ContactDirectory). A contact flagged before keeps its flag
            // (its row already holds the new key, so accepting it trusts that key).
            try db.execute(
                """
                ALTER TABLE contacts ADD COLUMN state TEXT NOT NULL DEFAULT 'unverified';
                ALTER TABLE contacts ADD COLUMN seen_signing_key BLOB;
                ALTER TABLE contacts ADD COLUMN seen_encryption_key BLOB;
                ALTER TABLE contacts ADD COLUMN seen_key_version INTEGER;
                UPDATE contacts SET state = 'changed', seen_signing_key = signing_key, seen_encryption_key = encryption_key,
                    seen_key_version = key_version WHERE key_changed = 1;
                ALTER TABLE contacts DROP COLUMN key_changed;
                CREATE TABLE messaging_settings (
                    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
                    identity_policy TEXT NOT NULL
                );
                """)
        }
        migrator.register("v7-device-keys") { db in
            // This device's MLS signature key and credential, and its KeyPackages' private
            // halves (DeviceKeys); every secret sealed.
            try db.execute(
                """
                CREATE TABLE device_signer (
                    user_id TEXT PRIMARY KEY,
                    identity_key_version INTEGER NOT NULL,
                    signature_key BLOB NOT NULL,
                    credential BLOB NOT NULL
                );
                CREATE TABLE key_package_bundles (
                    reference BLOB PRIMARY KEY,
                    bundle BLOB NOT NULL,
                    last_resort INTEGER NOT NULL,
                    created_at REAL NOT NULL
                );
                """)
        }
        migrator.register("v8-own-devices") { db in
            // The user's devices this device trusts (OwnDevices): approved, or itself.
            try db.execute("CREATE TABLE own_devices (endpoint_id TEXT PRIMARY KEY, signature_key BLOB NOT NULL)")
        }
        migrator.register("v9-left-epoch") { db in
            // The epoch of the group this device left a chat at: a Welcome to it or before is a replay.
            try db.execute("ALTER TABLE chats ADD COLUMN left_epoch INTEGER")
        }
        migrator.register("v10-refused-commits") { db in
            // A commit every member refused, which an admin's device replaces (security review 4).
            try db.execute(
                "CREATE TABLE refused_commits (chat_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL, sender TEXT NOT NULL)")
        }
        migrator.register("v11-text-sequences") { db in
            // Each text this device sent has a sequence in its chat (withdrawn when the domain
            // refused it); of each device it receives from, the highest sequence and those missing.
            try db.execute(
                """
                CREATE TABLE sent_sequences (
                    local_id TEXT PRIMARY KEY, chat_id TEXT NOT NULL, sequence INTEGER NOT NULL,
                    withdrawn INTEGER NOT NULL DEFAULT 0
                );
                CREATE INDEX sent_sequences_by_chat ON sent_sequences(chat_id, sequence);
                CREATE INDEX sent_sequences_withdrawn ON sent_sequences(chat_id, sequence) WHERE withdrawn = 1;
                CREATE TABLE text_sequences (
                    chat_id TEXT NOT NULL, device_id TEXT NOT NULL, user_id TEXT NOT NULL, highest INTEGER NOT NULL,
                    missing BLOB NOT NULL, PRIMARY KEY (chat_id, device_id)
                );
                """)
        }
        migrator.register("v12-reactions-recall") { db in
            // A message's reactions (sealed, `Seal.reactions`) and whether its sender recalled it.
            try db.execute(
                """
                ALTER TABLE messages ADD COLUMN reactions BLOB;
                ALTER TABLE messages ADD COLUMN recalled INTEGER NOT NULL DEFAULT 0;
                """)
        }
        migrator.register("v13-disappearing-messages") { db in
            // A chat's timer (the group's, as last applied); each message's, when it was stored,
            // and when it expires (counted from when it was sent, or read); an expired message's
            // row stays, hidden and emptied, so that its id and number are not taken again.
            try db.execute(
                """
                ALTER TABLE chats ADD COLUMN timer INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE messages ADD COLUMN expire_after INTEGER;
                ALTER TABLE messages ADD COLUMN expires_at REAL;
                ALTER TABLE messages ADD COLUMN expired INTEGER NOT NULL DEFAULT 0;
                CREATE INDEX messages_expiring ON messages(expires_at) WHERE expired = 0 AND expires_at IS NOT NULL;
                """)
        }
        migrator.register("v14-attachments") { db in
            // A message's attachment: where its blob is and the key that opens it (sealed,
            // `Seal.attachment`), gone with a recall or an expiry.
            try db.execute("ALTER TABLE messages ADD COLUMN attachment BLOB")
        }
        migrator.register("v15-blocked-users") { db in
            // The users this user blocked, as the domain last listed them (every device of the
            // user reads the same list).
            try db.execute("CREATE TABLE blocked_users (user_id TEXT PRIMARY KEY)")
        }
        migrator.register("v16-search-index") { db in
            // The search index (`SQLiteMessagingStore+Search`): keyed tokens only, no text, no
            // positions, no sizes; a message's document is its rowid there, and `search_length`
            // its number of tokens (NULL: not indexed). A VACUUM may renumber rowids: each one
            // this store runs empties the index or asks for a rebuild. Messages stored before are
            // indexed by the rebuild the state row asks for.
            try db.execute(
                """
                ALTER TABLE messages ADD COLUMN search_length INTEGER;
                CREATE VIRTUAL TABLE message_search USING fts5(
                    tokens, tokenize = 'ascii', content = '', detail = none, columnsize = 0);
                CREATE TABLE search_index_state (
                    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
                    version INTEGER NOT NULL,
                    building INTEGER NOT NULL
                );
                INSERT INTO search_index_state VALUES (1, 0, 1);
                """)
        }
        migrator.register("v17-key-transparency") { db in
            // Key transparency (`docs/FORMATS.md`): the domain's transparency keys as first seen
            // (pinned), the last tree head this device accepted, and the alarm its own identity's
            // monitoring raised; on each contact, why the log's proof for their key failed.
            try db.execute(
                """
                CREATE TABLE transparency_state (
                    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
                    keys BLOB,
                    head BLOB,
                    alarm TEXT,
                    fork TEXT
                );
                ALTER TABLE contacts ADD COLUMN transparency_failure TEXT;
                """)
        }
        migrator.register("v18-outgoing-index") { db in
            // The messages still going out, found without reading every message: the outbox
            // looks for them after each read of the mailbox (`chatsSending`, `chatsHolding`).
            // The queries name the state as these indexes do, literally (`SQLiteMessagingStore`).
            try db.execute(
                """
                CREATE INDEX messages_sending ON messages(chat_id, state) WHERE state = 'sending';
                CREATE INDEX messages_held ON messages(chat_id, state) WHERE state = 'held';
                """)
        }
        migrator.register("v19-unread-counts") { db in
            // Each chat's count of unread messages, kept by triggers as messages come, are read,
            // are recalled or move, so that a chat's row is read without counting its messages
            // (the chat list is read again after every page of the mailbox). A chat's row made
            // after its messages counts them when it is made. `unreadCount(chatID:)` still
            // counts, and the store suite checks the two agree.
            try db.execute(
                """
                ALTER TABLE chats ADD COLUMN unread INTEGER NOT NULL DEFAULT 0;
                UPDATE chats SET unread = (
                    SELECT count(*) FROM messages m
                    WHERE m.chat_id = chats.chat_id AND m.incoming = 1 AND m.state != 'read' AND m.recalled = 0);
                CREATE TRIGGER chats_unread_made AFTER INSERT ON chats BEGIN
                    UPDATE chats SET unread = (
                        SELECT count(*) FROM messages m
                        WHERE m.chat_id = new.chat_id AND m.incoming = 1 AND m.state != 'read' AND m.recalled = 0)
                    WHERE chat_id = new.chat_id;
                END;
                CREATE TRIGGER messages_unread_added AFTER INSERT ON messages
                WHEN new.incoming = 1 AND new.state != 'read' AND new.recalled = 0 BEGIN
                    UPDATE chats SET unread = unread + 1 WHERE chat_id = new.chat_id;
                END;
                CREATE TRIGGER messages_unread_removed AFTER DELETE ON messages
                WHEN old.incoming = 1 AND old.state != 'read' AND old.recalled = 0 BEGIN
                    UPDATE chats SET unread = unread - 1 WHERE chat_id = old.chat_id;
                END;
                CREATE TRIGGER messages_unread_changed AFTER UPDATE OF chat_id, incoming, state, recalled ON messages
                WHEN old.chat_id IS NOT new.chat_id
                    OR (old.incoming = 1 AND old.state != 'read' AND old.recalled = 0)
                        != (new.incoming = 1 AND new.state != 'read' AND new.recalled = 0) BEGIN
                    UPDATE chats SET unread = unread - (old.incoming = 1 AND old.state != 'read' AND old.recalled = 0)
                    WHERE chat_id = old.chat_id;
                    UPDATE chats SET unread = unread + (new.incoming = 1 AND new.state != 'read' AND new.recalled = 0)
                    WHERE chat_id = new.chat_id;
                END;
                """)
        }
        migrator.register("v20-sealed-search-index") { db in
            // The search index leaves the file for memory and a sealed image
            // (`SearchIndexImage`): the file keeps the journal that ties the image to the
            // messages. The old index's pages are zeroed (`secure_delete`) and the file is
            // vacuumed after the migration; the index is rebuilt.
            try db.execute(
                """
                DROP TABLE message_search;
                DROP TABLE search_index_state;
                ALTER TABLE messages DROP COLUMN search_length;
                CREATE TABLE search_index_state (
                    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
                    seq INTEGER NOT NULL,
                    image_through INTEGER NOT NULL
                );
                INSERT INTO search_index_state VALUES (1, 0, 0);
                CREATE TABLE search_changes (seq INTEGER PRIMARY KEY, rows BLOB NOT NULL);
                """)
        }
        migrator.register("v21-fewer-pages-a-message") { db in
            // A message sealed and stored wrote 13 pages to the log, each synced: fewer now.
            // The unread index holds incoming messages only (every query of it names
            // `incoming = 1`; an outgoing message's steps no longer rewrite it), and the tables
            // looked up by their key alone are clustered on it (no second b-tree a row).
            try db.execute(
                """
                DROP INDEX messages_unread;
                CREATE INDEX messages_unread ON messages(chat_id, state) WHERE incoming = 1;
                CREATE TABLE sent_sequences_by_id (
                    local_id TEXT PRIMARY KEY, chat_id TEXT NOT NULL, sequence INTEGER NOT NULL,
                    withdrawn INTEGER NOT NULL DEFAULT 0
                ) WITHOUT ROWID;
                INSERT INTO sent_sequences_by_id SELECT local_id, chat_id, sequence, withdrawn FROM sent_sequences;
                DROP TABLE sent_sequences;
                ALTER TABLE sent_sequences_by_id RENAME TO sent_sequences;
                CREATE INDEX sent_sequences_by_chat ON sent_sequences(chat_id, sequence);
                CREATE INDEX sent_sequences_withdrawn ON sent_sequences(chat_id, sequence) WHERE withdrawn = 1;
                """)
        }
        migrator.register("v22-encrypted-values") { db in
            try db.execute(
                "CREATE TABLE store_key_check (singleton INTEGER PRIMARY KEY CHECK (singleton = 1), value BLOB NOT NULL)")
            try db.execute(
                "INSERT INTO store_key_check(singleton, value) VALUES (1, ?)",
                [try sealer.seal(StoreSealer.checkValue, StoreSealer.checkContext)])
            for row in try db.rows("SELECT provider, credential FROM credentials") {
                let provider = try row.get(0, as: String.self)
                try db.execute(
                    "UPDATE credentials SET credential = ? WHERE provider = ?",
                    [try sealer.seal(try row.get(1, as: Data.self), Seal.credential(provider)), provider])
            }
            for row in try db.rows("SELECT user_id, signing_key, encryption_key FROM local_keys") {
                let user = try row.get(0, as: String.self)
                try db.execute(
                    "UPDATE local_keys SET signing_key = ?, encryption_key = ? WHERE user_id = ?",
                    [
                        try sealer.seal(try row.get(1, as: Data.self), Seal.signingKey(user)),
                        try sealer.seal(try row.get(2, as: Data.self), Seal.encryptionKey(user)), user,
                    ])
            }
            for row in try db.rows("SELECT chat_id, sender, device, epoch, key FROM sender_keys") {
                let (chat, sender, device, epoch) = (
                    try row.get(0, as: String.self), try row.get(1, as: String.self), try row.get(2, as: String.self),
                    try row.get(3, as: Int.self)
                )
                try db.execute(
                    "UPDATE sender_keys SET key = ? WHERE chat_id = ? AND sender = ? AND device = ? AND epoch = ?",
                    [
                        try sealer.seal(try row.get(4, as: Data.self), Seal.chatKey(chat, sender, device, epoch)), chat, sender,
                        device, epoch,
                    ])
            }
            for row in try db.rows("SELECT local_id, content, data FROM messages") {
                let id = try row.get(0, as: String.self)
                let data = try row.get(2, as: String?.self)
                try db.execute(
                    "UPDATE messages SET content = ?, data = ? WHERE local_id = ?",
                    [
                        try sealer.seal(try row.get(1, as: String.self), Seal.content(id)),
                        try data.map { try sealer.seal($0, Seal.data(id)) }, id,
                    ])
            }
            for row in try db.rows("SELECT chat_id, subject FROM chats") {
                let chat = try row.get(0, as: String.self)
                try db.execute(
                    "UPDATE chats SET subject = ? WHERE chat_id = ?",
                    [try sealer.seal(try row.get(1, as: String.self), Seal.subject(chat)), chat])
            }
        }
        migrator.register("v23-mls-chats") { db in
            // Chats are MLS groups (SQLiteMessagingStore); the sender keys they replace go, with what
            // they were sealed under.
            try db.execute(SQLiteMessagingStore.groupsSchema)
        }
        migrator.register("v24-chat-sessions") { db in
            // A chat's group in two parts (epoch state, ratchets) and a version for live sessions.
            try db.execute(SQLiteMessagingStore.sessionsSchema)
            try db.execute(ContactDirectory.versionSchema)
        }
        migrator.register("v25-sent-posts-by-digest") { db in
            // With `v21-fewer-pages-a-message`: the digests of this device's posts clustered on
            // the digest (one b-tree a row, not two).
            try db.execute(
                """
                CREATE TABLE sent_posts_by_digest (
                    digest BLOB PRIMARY KEY, chat_id TEXT NOT NULL, local_id TEXT
                ) WITHOUT ROWID;
                INSERT INTO sent_posts_by_digest SELECT digest, chat_id, local_id FROM sent_posts;
                DROP TABLE sent_posts;
                ALTER TABLE sent_posts_by_digest RENAME TO sent_posts;
                """)
        }
        migrator.register("v26-key-package-suites") { db in
            // A device keeps KeyPackages of each MLS cipher suite it runs, a last-resort one of
            // each: the bundles made before are all of suite 1.
            try db.execute("ALTER TABLE key_package_bundles ADD COLUMN suite INTEGER NOT NULL DEFAULT 1")
            // And each chat's group's suite, shown as `Chat.postQuantum`.
            try db.execute("ALTER TABLE chats ADD COLUMN suite INTEGER NOT NULL DEFAULT 1")
        }
        migrator.rename("v6-encrypted-values", to: "v22-encrypted-values")
        migrator.rename("v8-mls-chats", to: "v23-mls-chats")
        migrator.rename("v9-chat-sessions", to: "v24-chat-sessions")
        migrator.rename("v22-sent-posts-by-digest", to: "v25-sent-posts-by-digest")
        migrator.rename("v23-key-package-suites", to: "v26-key-package-suites")
        return migrator
    }

    /// Runs store work, turning SparkStore errors into ``AuthError/Code/storageFailure``.
    @discardableResult
    func run<T: Sendable>(_ what: String, _ body: (Database) throws -> T) throws -> T {
        do {
            return try queue.write(body)
        } catch {
            throw AuthError(.storageFailure, "the endpoint store could not \(what): \(error)")
        }
    }
}

/// What a token manager keeps for silent sign-in: the account and the secret that refreshes it.
struct StoredCredential: Sendable, Equatable, Codable {
    var account: BBMAuthenticatedAccount
    /// The accounts assistant's refresh token, or test auth's user id; nil for custom tokens.
    var refreshSecret: String?
}

extension EndpointStore {
    func credential(for provider: String) throws -> StoredCredential? {
        let data = try run("read credentials") { db in
            try db.scalar("SELECT credential FROM credentials WHERE provider = ?", [provider], as: Data.self)
        }
        guard let data else { return nil }
        // A credential this version cannot read is treated as absent: the user signs in again.
        return try? JSONDecoder().decode(StoredCredential.self, from: sealer.open(data, Seal.credential(provider)))
    }

    func saveCredential(_ credential: StoredCredential, for provider: String, now: Date) throws {
        let data = try sealer.seal(try JSONEncoder().encode(credential), Seal.credential(provider))
        try run("save credentials") { db in
            try db.execute(
                """
                INSERT INTO credentials(provider, credential, updated_at) VALUES (?, ?, ?)
                ON CONFLICT(provider) DO UPDATE SET credential = excluded.credential, updated_at = excluded.updated_at
                """, [provider, data, now.timeIntervalSince1970])
        }
    }

    func removeCredential(for provider: String) throws {
        try run("remove credentials") { db in try db.execute("DELETE FROM credentials WHERE provider = ?", [provider]) }
    }
}

extension EndpointStore {
    /// Keeps unlocked keys (file mode 0600) so that a restart needs no passcode.
    func saveKeys(_ keys: UnlockedKeys) throws {
        do {
            try queue.write { db in
                try db.execute("DELETE FROM local_keys")
                try db.execute(
                    "INSERT INTO local_keys(user_id, key_version, signing_key, encryption_key) VALUES (?, ?, ?, ?)",
                    [
                        keys.userID, keys.keyVersion,
                        try sealer.seal(keys.signing.rawRepresentation.unsafeData(), Seal.signingKey(keys.userID)),
                        try sealer.seal(keys.encryption.rawRepresentation.unsafeData(), Seal.encryptionKey(keys.userID)),
                    ])
            }
        } catch {
            throw KeyManagementError(.storageFailure, "cannot keep the keys on this endpoint: \(error)")
        }
    }

    func keys(userID: String) throws -> UnlockedKeys? {
        let row: Row?
        do {
            row = try queue.read { db in
                try db.row("SELECT key_version, signing_key, encryption_key FROM local_keys WHERE user_id = ?", [userID])
            }
        } catch {
            throw KeyManagementError(.storageFailure, "cannot read the keys kept on this endpoint: \(error)")
        }
        guard let row else { return nil }
        do {
            let signing = try sealer.open(try row.get(1, as: Data.self), Seal.signingKey(userID))
            let encryption = try sealer.open(try row.get(2, as: Data.self), Seal.encryptionKey(userID))
            return UnlockedKeys(
                userID: userID, signing: try Ed25519.PrivateKey(rawRepresentation: signing),
                encryption: try X25519.PrivateKey(rawRepresentation: encryption), keyVersion: try row.get(0))
        } catch {
            throw KeyManagementError(.corruptKeys, "the keys kept on this endpoint are unreadable")
        }
    }

    func wipeKeys() throws {
        do {
            try queue.write { db in try db.execute("DELETE FROM local_keys") }
        } catch {
            throw KeyManagementError(.storageFailure, "cannot wipe the keys on this endpoint: \(error)")
        }
    }
}

/// This device's registration as the endpoint store keeps it.
struct StoredRegistration: Sendable, Equatable {
    var endpointID: String
    var userID: String?
    var registrationID: Int64?
}

extension EndpointStore {
    /// This device's endpoint id, made once (random) and kept until `resetService()`.
    func registration() throws -> StoredRegistration {
        do {
            return try queue.write { db in
                if let row = try db.row("SELECT endpoint_id, user_id, registration_id FROM registration") {
                    return StoredRegistration(endpointID: try row.get(0), userID: try row.get(1), registrationID: try row.get(2))
                }
                let id = SystemRandom.bytes(count: 12).base64URLEncodedString()
                try db.execute("INSERT INTO registration(singleton, endpoint_id) VALUES (1, ?)", [id])
                return StoredRegistration(endpointID: id)
            }
        } catch {
            throw SetupError(.storageFailure, "cannot read this endpoint's registration: \(error)")
        }
    }

    func saveRegistration(userID: String?, registrationID: Int64?) throws {
        do {
            try queue.write { db in
                try db.execute("UPDATE registration SET user_id = ?, registration_id = ?", [userID, registrationID])
            }
        } catch {
            throw SetupError(.storageFailure, "cannot save this endpoint's registration: \(error)")
        }
    }

    /// What a wipe leaves in place.
    struct Kept: OptionSet, Sendable {
        let rawValue: Int
        /// The endpoint id (else the next setup registers a new one).
        static let registration = Kept(rawValue: 1)
        /// The cached credentials (else the next start asks the user to sign in).
        static let credentials = Kept(rawValue: 2)
    }

    /// The tables that hold a user's data, every one of them: a new table that holds user data
    /// belongs here (a test scans the file after a wipe for what it held).
    static let userDataTables = [
        "local_keys", "chats", "participants", "messages", "chat_groups", "chat_epoch_states", "pending_commits",
        "deferred_entries",
        "departed_members", "sent_posts",
        "contacts",
        "mailbox_cursor", "device_signer", "key_package_bundles", "own_devices", "refused_commits", "sent_sequences",
        "text_sequences",
    ]

    /// Wipes the user's data (keys, chats, messages, group states, contacts, the mailbox cursor),
    /// and the registration and credentials unless `kept`, then rewrites the file and truncates
    /// its write-ahead log, so that neither holds a byte of what was deleted.
    func wipe(keeping kept: Kept = []) throws {
        memoryMessaging.withLock { $0?.reset() }
        do {
            try queue.write { db in
                for table in Self.userDataTables { try db.execute("DELETE FROM \(table)") }
                try SearchIndexImage.emptied(db, version: SQLiteMessagingStore.searchIndexVersion)
                if !kept.contains(.registration) { try db.execute("DELETE FROM registration") }
                if !kept.contains(.credentials) { try db.execute("DELETE FROM credentials") }
            }
            // `secure_delete` zeroes what the deletes freed; VACUUM rebuilds the file without
            // free pages (older content may predate the pragma), and the checkpoint empties the
            // write-ahead log, which held the pages as they were.
            if kept.isEmpty {
                // A reset: the key that sealed the old data goes too, and a new one seals what
                // comes next, so nothing old (a stolen backup of the file) opens with it.
                keyring.destroyKey()
                let fresh = StoreSealer(key: try keyring.makeKey())
                try queue.write { db in
                    try db.execute(
                        "UPDATE store_key_check SET value = ?", [try fresh.seal(StoreSealer.checkValue, StoreSealer.checkContext)]
                    )
                }
                currentSealer.withLock { $0 = fresh }
            }
            // The empty index's image, under the key there is now (the old one's goes).
            try SearchIndexImage.saveIfDue(queue, sealer: sealer)
            try queue.withConnection { db in
                try db.execute("VACUUM")
                try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            }
        } catch {
            throw SetupError(.storageFailure, "cannot wipe this endpoint's data: \(error)")
        }
    }
}
