import Foundation
import SparkCrypto
import SparkDomain
import SparkLock
import SparkStore

/// The messaging store on the endpoint store's SQLite tables, bound to one transaction: this
/// file and `SQLiteMessagingStore+Chats.swift` alone read and write `messages`, `chats`,
/// `participants`, `chat_groups`, `chat_epoch_states`, `pending_commits`, `deferred_entries`,
/// `departed_members`, `sent_posts` and `mailbox_cursor`.
///
/// Secret values are sealed per value (`StoreSealer`, bound to their column and row): a
/// message's content and data, a chat's subject, a group's epoch state, its ratchets (bound to
/// their epoch too, so that ratchets of another epoch's row cannot be put beside this epoch's
/// state) and a pending commit's group.
///
/// A group is stored in two parts: its epoch state in `chat_epoch_states` (changed by commits,
/// and large in a large chat) and its ratchets in `chat_groups` (changed by every message, small
/// whatever the chat's size). They are in two tables because SQLite rewrites a whole row,
/// overflow pages included, when one column changes: a message rewrites only the small row.
struct SQLiteMessagingStore: MessagingStore {
    let db: Database
    let sealer: StoreSealer
    /// Set when the transaction erased content (expired messages, or messages edited, recalled
    /// or left that were taken out of the search index): the storage then truncates the
    /// write-ahead log, which holds the pages as they were.
    var purged: Locked<Bool>? = nil
    /// What this transaction read of its chats' rows, for each of a page's messages (mostly of
    /// one chat): whether each chat is live (for the search index) and its disappearing-messages
    /// timer; forgotten when a statement changes it or a savepoint rolls back.
    let chatsRead = ChatsRead()

    /// See ``chatsRead``: one transaction's, on its one thread.
    final class ChatsRead: @unchecked Sendable {
        var live: [String: Bool] = [:]
        var timers: [String: Int] = [:]
    }

    /// The search index's writes of this transaction, in order, made when it ends
    /// (``write(_:sealer:purged:_:)``) or before the index is read. FTS5 holds a transaction's
    /// new documents in memory until a savepoint or the commit, and writes them then as a
    /// segment of the index: a page of the mailbox runs a savepoint an entry, so writing each
    /// message's tokens at once made a segment a message (and merges of them); written at the
    /// end, a page's messages make one. A savepoint rolled back drops its own.
    let searchWrites = SearchWrites()

    /// See ``searchWrites``: one transaction's, on its one thread.
    final class SearchWrites: @unchecked Sendable {
        var pending: [(sql: String, arguments: [any DatabaseValueConvertible])] = []
        /// The rows whose place in the index changed, for the journal.
        var rows: [Int64] = []
        /// The index reflects the journal (``synchronizeSearchIndex()``), and this
        /// transaction's `seq` if it changes the index.
        var synchronized = false
        var seq: Int64?
        /// Something was taken out of the index: an image is due after the transaction.
        var takenOut = false
        /// The index was emptied: a new `seq` even with no row journaled.
        var reset = false
    }

    /// Runs `body` in one write transaction of `queue` on a store over it, then makes the search
    /// index's writes it left (``searchWrites``) before the transaction commits, and writes the
    /// index's image when one is due. The messenger's writes (`MessagingStorage`) all go through
    /// here; a write made otherwise must flush them itself (``flushSearchWrites()``) or they are
    /// lost.
    static func write<T: Sendable>(
        _ queue: DatabaseQueue, sealer: StoreSealer, purged: Locked<Bool>? = nil, synced: Bool = true,
        _ body: (SQLiteMessagingStore) throws -> T
    ) throws -> T {
        let result = try catchingUp(queue, sealer: sealer) {
            let transaction = { (db: Database) throws -> T in
                let store = SQLiteMessagingStore(db: db, sealer: sealer, purged: purged)
                try store.synchronizeSearchIndex()
                let result = try body(store)
                try store.flushSearchWrites()
                return result
            }
            return try synced ? queue.write(transaction) : queue.writeWithoutSync(transaction)
        }
        // The write stands whatever becomes of the image: the journal holds its changes.
        try? SearchIndexImage.saveIfDue(queue, sealer: sealer)
        return result
    }

    /// Runs a transaction of `queue` (`transaction`, which synchronizes the search index before
    /// anything else), reading the index's image again and running it once more when another
    /// connection's image left this one behind (``SearchIndexBehind``).
    static func catchingUp<T>(_ queue: DatabaseQueue, sealer: StoreSealer, _ transaction: () throws -> T) throws -> T {
        // Another connection may write yet another image between the reading and the retry: a
        // few tries, then the index is read again once more and the failure said.
        for _ in 0..<3 {
            do {
                return try transaction()
            } catch is SearchIndexBehind {
                try SearchIndexImage.reload(queue, sealer: sealer)
            }
        }
        return try transaction()
    }

    /// The labels of the group's sealed values (a message's and a chat's are the endpoint
    /// store's, `EndpointStore.Seal`, since its migrations seal them too).
    enum Seal {
        static func state(_ chat: String) -> String { "chat_groups.state/\(chat)" }
        static func ratchets(_ chat: String, epoch: UInt64) -> String { "chat_groups.ratchets/\(chat)/\(epoch)" }
        static func pending(_ chat: String, _ digest: Data) -> String {
            "pending_commits.state/\(chat)/\(digest.base64URLEncodedString())"
        }
    }

    func savepoint<T>(_ body: () throws -> T) throws -> T {
        let (searchWritesBefore, searchRowsBefore, synchronizedBefore) = (
            searchWrites.pending.count, searchWrites.rows.count, searchWrites.synchronized
        )
        // Prepared once and kept (a page runs one savepoint an entry).
        try db.execute("SAVEPOINT entry", [])
        do {
            let result = try body()
            try db.execute("RELEASE entry", [])
            return result
        } catch {
            (chatsRead.live, chatsRead.timers) = ([:], [:])
            searchWrites.pending.removeSubrange(searchWritesBefore...)
            searchWrites.rows.removeSubrange(searchRowsBefore...)
            searchWrites.synchronized = synchronizedBefore
            try db.execute("ROLLBACK TO entry")
            try db.execute("RELEASE entry")
            if let failure = error as? StoreError, Self.dataConflicts.contains(failure.resultCode) {
                throw MessagingError(.conflict, "it contradicts what this endpoint stored (\(failure.message))")
            }
            throw error
        }
    }

    // MARK: Messages

    private static let columns =
        """
        SELECT local_id, chat_id, number, sender, incoming, content, tag, data, ref, state, failure, timestamp, reactions,
            recalled, expires_at, attachment FROM messages
        """

    /// A message from a row of ``columns``, read in place: its sealed values are opened where
    /// SQLite holds them (a page is fifty rows; no copy of each is made first).
    private func message(_ row: borrowing ColumnReader) throws -> ChatMessage {
        let id = try row.get(0, as: String.self)
        guard let content = try row.withBlob(5, { try sealer.openText($0, EndpointStore.Seal.content(id)) }) else {
            throw StoreError(.misuse, message: "message \(id) has no content")
        }
        return ChatMessage(
            id: id, chatID: try row.get(1), number: try row.get(2), sender: try row.get(3), isIncoming: try row.get(4),
            content: content, tag: try row.get(6),
            data: try row.withBlob(7) { try sealer.openText($0, EndpointStore.Seal.data(id)) },
            ref: try row.get(8),
            state: MessageState(storedName: try row.get(9), failure: try row.get(10)),
            timestamp: Date(timeIntervalSince1970: try row.get(11)),
            reactions: try row.get(12, as: Data?.self).map { try reactions(sealed: $0, id: id) } ?? [],
            isRecalled: try row.get(13),
            expiresAt: try row.get(14, as: Double?.self).map(Date.init(timeIntervalSince1970:)),
            attachment: try row.get(15, as: Data?.self).map { Attachment(try attachment(sealed: $0, id: id)) })
    }

    private func attachment(sealed: Data, id: String) throws -> AttachmentDescriptor {
        try AttachmentDescriptor(encoded: try sealer.open(sealed, EndpointStore.Seal.attachment(id)))
    }

    private func sealedAttachment(_ attachment: AttachmentDescriptor?, id: String) throws -> Data? {
        try attachment.map { try sealer.seal($0.encoded, EndpointStore.Seal.attachment(id)) }
    }

    private func reactions(sealed: Data, id: String) throws -> [Reaction] {
        try JSONDecoder().decode([Reaction].self, from: try sealer.open(sealed, EndpointStore.Seal.reactions(id)))
    }

    func message(_ id: String) throws -> ChatMessage? {
        try db.rows("\(Self.columns) WHERE local_id = ?", [id], reading: message).first
    }

    func messages(chatID: String, ids: [String]) throws -> [ChatMessage] {
        guard !ids.isEmpty else { return [] }
        return try db.rows(
            "\(Self.columns) WHERE chat_id = ? AND expired = 0 AND local_id IN (\(Self.placeholders(ids.count)))",
            [chatID] + ids, reading: message)
    }

    /// Numbered messages come through the (chat, number) index, so a chat of a million messages
    /// loads its latest page as fast as a small one.
    func page(chatID: String, before number: Int64?, limit: Int) throws -> [ChatMessage] {
        let numbered =
            if let number {
                try db.rows(
                    "\(Self.columns) WHERE chat_id = ? AND number < ? AND expired = 0 ORDER BY number DESC LIMIT ?",
                    [chatID, number, limit], reading: message)
            } else {
                try db.rows(
                    "\(Self.columns) WHERE chat_id = ? AND number IS NOT NULL AND expired = 0 ORDER BY number DESC LIMIT ?",
                    [chatID, limit], reading: message)
            }
        var page = Array(numbered.reversed())
        if number == nil {
            let pending = try db.rows(
                "\(Self.columns) WHERE chat_id = ? AND number IS NULL AND expired = 0 ORDER BY timestamp", [chatID],
                reading: message)
            page = Array((page + pending).suffix(limit))
        }
        return page
    }

    func numbered(chatID: String) throws -> [ChatMessage] {
        try db.rows(
            "\(Self.columns) WHERE chat_id = ? AND number IS NOT NULL AND expired = 0 AND recalled = 0 ORDER BY number", [chatID],
            reading: message)
    }

    func messageID(chatID: String, number: Int64) throws -> String? {
        try db.scalar("SELECT local_id FROM messages WHERE chat_id = ? AND number = ?", [chatID, number], as: String.self)
    }

    func known(chatID: String, id: String) throws -> MessagingCore.KnownMessage? {
        try db.row("SELECT number, sender, recalled FROM messages WHERE local_id = ? AND chat_id = ?", [id, chatID]).map {
            MessagingCore.KnownMessage(number: try $0.get(0), sender: try $0.get(1), recalled: try $0.get(2))
        }
    }

    func chatOfNumbered(id: String, sender: String) throws -> String? {
        try db.scalar(
            "SELECT chat_id FROM messages WHERE local_id = ? AND sender = ? AND number IS NOT NULL", [id, sender],
            as: String.self)
    }

    func newestReceived(chatID: String) throws -> Int64? {
        try db.scalar("SELECT max(number) FROM messages WHERE chat_id = ? AND incoming = 1", [chatID], as: Int64.self)
    }

    func unreadCount(chatID: String) throws -> Int {
        try db.scalar(
            "SELECT count(*) FROM messages WHERE chat_id = ? AND incoming = 1 AND state != ? AND recalled = 0",
            [chatID, MessageState.read.storedName], as: Int.self) ?? 0
    }

    func insertOutgoing(_ message: OutgoingMessage, sealed: Data?) throws {
        let id = message.id
        let tokens = try searchTokens(
            SearchDocument(
                content: message.content, fileName: message.attachment?.fileName, mediaType: message.attachment?.mediaType,
                chatID: message.chatID, sender: message.sender))
        try conflictsRefused {
            try db.execute(
                """
                INSERT INTO messages(local_id, chat_id, sender, incoming, content, tag, data, ref, state, timestamp, sealed,
                    attachment, expire_after, expires_at)
                VALUES (?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    id, message.chatID, message.sender, try sealer.seal(message.content, EndpointStore.Seal.content(id)),
                    message.tag,
                    try message.data.map { try sealer.seal($0, EndpointStore.Seal.data(id)) }, message.ref,
                    (sealed == nil ? MessageState.held : .sending).storedName, message.timestamp.timeIntervalSince1970,
                    sealed, try sealedAttachment(message.attachment, id: id),
                ] + (try expiry(chatID: message.chatID, sentAt: message.timestamp)))
        }
        if let tokens { try addToIndex(tokens, row: db.lastInsertedRowID) }
    }

    func outgoing(_ id: String) throws -> OutgoingMessage? {
        try db.row(
            "SELECT chat_id, sender, content, tag, data, ref, timestamp, attachment FROM messages WHERE local_id = ? AND incoming = 0",
            [id]
        ).map { row in
            OutgoingMessage(
                id: id, chatID: try row.get(0), sender: try row.get(1),
                content: try sealer.openText(try row.get(2), EndpointStore.Seal.content(id)), tag: try row.get(3),
                data: try row.get(4, as: Data?.self).map { try sealer.openText($0, EndpointStore.Seal.data(id)) },
                ref: try row.get(5),
                timestamp: Date(timeIntervalSince1970: try row.get(6)),
                attachment: try row.get(7, as: Data?.self).map { try attachment(sealed: $0, id: id) })
        }
    }

    // The outgoing states are named literally, as the partial indexes `messages_sending` and
    // `messages_held` are (SQLite uses a partial index only for a query that names its condition).

    func sending(chatID: String) throws -> [(id: String, sealed: Data)] {
        try db.rows(
            "SELECT local_id, sealed FROM messages WHERE chat_id = ? AND state = 'sending' AND sealed IS NOT NULL ORDER BY rowid",
            [chatID]
        ).map { (try $0.get(0, as: String.self), try $0.get(1, as: Data.self)) }
    }

    func chatsSending() throws -> [String] {
        try db.rows("SELECT DISTINCT chat_id FROM messages WHERE state = 'sending' AND sealed IS NOT NULL ORDER BY chat_id")
            .map { try $0.get(0, as: String.self) }
    }

    func held(chatID: String) throws -> [String] {
        try db.rows("SELECT local_id FROM messages WHERE chat_id = ? AND state = 'held' ORDER BY rowid", [chatID])
            .map { try $0.get(0, as: String.self) }
    }

    func chatsHolding() throws -> [String] {
        try db.rows("SELECT DISTINCT chat_id FROM messages WHERE state = 'held' ORDER BY chat_id")
            .map { try $0.get(0, as: String.self) }
    }

    func setSealed(_ id: String, _ sealed: Data) throws {
        try db.execute(
            "UPDATE messages SET state = ?, sealed = ? WHERE local_id = ? AND state IN (?, ?)",
            [MessageState.sending.storedName, sealed, id, MessageState.held.storedName, MessageState.sending.storedName])
    }

    func hold(_ id: String) throws {
        try step(.hold, where: "local_id = ?", [id], extra: "sealed = NULL")
    }

    func accept(_ id: String, number: Int64?, at time: Date?) throws -> [MessageEvent] {
        guard
            let (chatID, name) = try db.row("SELECT chat_id, state FROM messages WHERE local_id = ?", [id]).map({
                (try $0.get(0, as: String.self), try $0.get(1, as: String.self))
            })
        else { return [] }
        let moves = MessageState(storedName: name, failure: nil).after(.accept) != nil
        // The number and time, and the step where it applies, in one statement; the bytes posted
        // are not needed any more (a device keeps no ciphertext of what it sent).
        try conflictsRefused {
            try db.execute(
                """
                UPDATE messages SET number = ?, timestamp = coalesce(?, timestamp), state = CASE WHEN ? THEN ? ELSE state END,
                    sealed = NULL
                WHERE local_id = ?
                """,
                [number, time?.timeIntervalSince1970, moves, MessageStep.accept.target.storedName, id])
        }
        return moves ? [MessageEvent(messageID: id, chatID: chatID, number: number, state: .sent)] : []
    }

    func refuse(_ id: String, reason: String) throws -> Bool {
        guard try step(.refuse(reason: reason), where: "local_id = ?", [id], extra: "failure = ?, sealed = NULL", [reason]) > 0
        else { return false }
        try db.execute("UPDATE sent_sequences SET withdrawn = 1 WHERE local_id = ?", [id])
        return true
    }

    func insertReceived(_ message: ChatHistory.Record, chatID: String, incoming: Bool, ignoringTaken: Bool) throws {
        let (id, state) = (message.id, message.state)
        let failure: String? = if case .failed(let reason) = state { reason } else { nil }
        let tokens = try searchTokens(
            SearchDocument(
                content: message.content, fileName: message.attachment?.fileName, mediaType: message.attachment?.mediaType,
                chatID: chatID, sender: message.sender))
        var inserted = 0
        try conflictsRefused {
            inserted = try db.execute(
                """
                INSERT \(ignoringTaken ? "OR IGNORE " : "")INTO messages(local_id, chat_id, number, sender, incoming, content, tag,
                    data, ref, state, failure, timestamp, attachment, expire_after, expires_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    id, chatID, message.number, message.sender, incoming,
                    try sealer.seal(message.content, EndpointStore.Seal.content(id)),
                    message.tag, try message.data.map { try sealer.seal($0, EndpointStore.Seal.data(id)) }, message.ref,
                    state.storedName,
                    failure, message.timestamp.timeIntervalSince1970, try sealedAttachment(message.attachment, id: id),
                ] + (try expiry(chatID: chatID, sentAt: incoming ? nil : message.timestamp)))
        }
        if inserted > 0, let tokens { try addToIndex(tokens, row: db.lastInsertedRowID) }
    }

    /// The index then holds the new text alone (the old text's tokens are merged away).
    func setContent(_ id: String, content: String) throws {
        let indexed = try unindex(id)
        try db.execute(
            "UPDATE messages SET content = ? WHERE local_id = ?", [try sealer.seal(content, EndpointStore.Seal.content(id)), id])
        if let (row, taken) = indexed {
            // The document taken out, with the new text (not the row read and opened again).
            var document = taken
            document.fields[0] = content
            try index(document, row: row)
            try purgeSearchIndex()
        }
    }

    func reactions(of id: String) throws -> [Reaction] {
        try db.scalar("SELECT reactions FROM messages WHERE local_id = ?", [id], as: Data.self).map {
            try reactions(sealed: $0, id: id)
        } ?? []
    }

    func attachment(of id: String) throws -> AttachmentDescriptor? {
        try db.scalar("SELECT attachment FROM messages WHERE local_id = ?", [id], as: Data.self).map {
            try attachment(sealed: $0, id: id)
        }
    }

    func setReactions(_ id: String, _ reactions: [Reaction]) throws {
        let sealed = try reactions.isEmpty ? nil : sealer.seal(JSONEncoder().encode(reactions), EndpointStore.Seal.reactions(id))
        try db.execute("UPDATE messages SET reactions = ? WHERE local_id = ?", [sealed, id])
    }

    /// The content's and data's sealed bytes are overwritten in place (`secure_delete`).
    func recall(_ id: String) throws {
        if try unindex(id) != nil { try purgeSearchIndex() }
        try db.execute(
            "UPDATE messages SET content = ?, data = NULL, reactions = NULL, attachment = NULL, recalled = 1 WHERE local_id = ?",
            [try sealer.seal("", EndpointStore.Seal.content(id)), id])
    }

    func advanceSent(chatID: String, ids: [String], _ step: MessageStep) throws -> [MessageEvent] {
        guard !ids.isEmpty else { return [] }
        let sources = step.sources.map(\.storedName)
        let condition = "chat_id = ? AND incoming = 0 AND number IS NOT NULL AND local_id IN (\(Self.placeholders(ids.count)))"
        let moved = try db.rows(
            "SELECT local_id, number FROM messages WHERE \(condition) AND state IN (\(Self.placeholders(sources.count))) ORDER BY number",
            [chatID] + ids + sources
        ).map { MessageEvent(messageID: try $0.get(0), chatID: chatID, number: try $0.get(1), state: step.target) }
        guard !moved.isEmpty else { return [] }
        try self.step(step, where: condition, [chatID] + ids)
        return moved
    }

    /// A new message's `expire_after` and `expires_at` under the chat's timer: one this user
    /// sent counts from when it was sent; a received one from when it is read (`startExpiry`).
    private func expiry(chatID: String, sentAt: Date?) throws -> [any DatabaseValueConvertible] {
        let timer = try self.timer(chatID: chatID)
        guard timer > 0 else { return [Int?.none, Double?.none] }
        return [timer, sentAt.map { $0.timeIntervalSince1970 + Double(timer) }]
    }

    func startExpiry(chatID: String, at now: Date) throws {
        try db.execute(
            """
            UPDATE messages SET expires_at = ? + expire_after
            WHERE chat_id = ? AND incoming = 1 AND state = ? AND expire_after IS NOT NULL AND expires_at IS NULL
            """, [now.timeIntervalSince1970, chatID, MessageState.read.storedName])
    }

    /// The content's and data's sealed bytes are overwritten in place (`secure_delete`); the row
    /// stays, hidden, so that its id and number are not taken again.
    func expireDue(at now: Date) throws -> [(chatID: String, id: String)] {
        let due = try db.rows(
            "SELECT chat_id, local_id FROM messages WHERE expired = 0 AND expires_at <= ?", [now.timeIntervalSince1970]
        ).map { (chatID: try $0.get(0, as: String.self), id: try $0.get(1, as: String.self)) }
        var unindexed = false
        for (_, id) in due {
            if try unindex(id) != nil { unindexed = true }
            try db.execute(
                """
                UPDATE messages SET content = ?, data = NULL, reactions = NULL, attachment = NULL, sealed = NULL, expired = 1
                WHERE local_id = ?
                """,
                [try sealer.seal("", EndpointStore.Seal.content(id)), id])
        }
        if unindexed { try purgeSearchIndex() }
        // The log holds the pages as they were: the storage empties it after this transaction.
        if !due.isEmpty { purged?.withLock { $0 = true } }
        return due
    }

    func nextExpiry() throws -> Date? {
        try db.scalar("SELECT min(expires_at) FROM messages WHERE expired = 0 AND expires_at IS NOT NULL", as: Double.self)
            .map(Date.init(timeIntervalSince1970:))
    }

    func timer(chatID: String) throws -> Int {
        if let known = chatsRead.timers[chatID] { return known }
        let timer = try db.scalar("SELECT timer FROM chats WHERE chat_id = ?", [chatID], as: Int.self) ?? 0
        chatsRead.timers[chatID] = timer
        return timer
    }

    func setTimer(_ seconds: Int, chatID: String) throws {
        chatsRead.timers[chatID] = nil
        try db.execute("UPDATE chats SET timer = ? WHERE chat_id = ?", [seconds, chatID])
    }

    func setSuite(_ suite: UInt16, chatID: String) throws {
        try db.execute("UPDATE chats SET suite = ? WHERE chat_id = ? AND suite <> ?", [Int64(suite), chatID, Int64(suite)])
    }

    func readReceived(chatID: String, upTo number: Int64) throws {
        try step(.read, where: "chat_id = ? AND incoming = 1 AND number <= ?", [chatID, number])
    }

    func readReceived(chatID: String, ids: [String]) throws {
        guard !ids.isEmpty else { return }
        try step(.read, where: "chat_id = ? AND incoming = 1 AND local_id IN (\(Self.placeholders(ids.count)))", [chatID] + ids)
    }

    func unreadReceived(chatID: String, upTo number: Int64) throws -> [CoveredMessage] {
        try db.rows(
            "SELECT local_id, number FROM messages WHERE chat_id = ? AND incoming = 1 AND number <= ? AND state != ? ORDER BY number",
            [chatID, number, MessageState.read.storedName]
        ).map { CoveredMessage(id: try $0.get(0), number: try $0.get(1)) }
    }

    /// Applies `step` to the messages matching `condition` that it applies to (and `extra`
    /// assignments with their arguments); returns how many moved.
    @discardableResult
    private func step(
        _ step: MessageStep, where condition: String, _ arguments: [any DatabaseValueConvertible],
        extra: String? = nil, _ extraArguments: [any DatabaseValueConvertible] = []
    ) throws -> Int {
        let sources = step.sources.map(\.storedName)
        return try db.execute(
            """
            UPDATE messages SET state = ?\(extra.map { ", \($0)" } ?? "")
            WHERE \(condition) AND state IN (\(Self.placeholders(sources.count)))
            """,
            [step.target.storedName] + extraArguments + arguments + sources)
    }

    private static func placeholders(_ count: Int) -> String { Array(repeating: "?", count: count).joined(separator: ", ") }

    /// SQLite's extended codes for data that contradicts the schema (a primary key or unique
    /// value taken, a NULL or a failed CHECK), as opposed to the store failing: what arrived is at
    /// fault, and retrying it cannot help. (A trigger's RAISE, a full disk or I/O are failures.)
    static let dataConflicts: Set<Int32> = [1555, 2067, 1299, 275]  // PRIMARYKEY, UNIQUE, NOTNULL, CHECK

    /// Runs one statement, a constraint it breaks thrown as `MessagingError(.conflict)` (SQLite
    /// undoes the statement alone; the caller's transaction decides the rest).
    private func conflictsRefused(_ statement: () throws -> Void) throws {
        do { try statement() } catch let error as StoreError where Self.dataConflicts.contains(error.resultCode) {
            throw MessagingError(.conflict, "it contradicts what this endpoint stored (\(error.message))")
        }
    }

    // MARK: Schema

    /// The group's state in two parts (the epoch state in a table of its own) and the row's
    /// version (see ``GroupCache``), added by the endpoint store's migration `v24-chat-sessions`.
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

    /// The tables, created by the endpoint store's migration `v23-mls-chats` (which also drops
    /// the sender-key tables this replaces).
    static let groupsSchema = """
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
