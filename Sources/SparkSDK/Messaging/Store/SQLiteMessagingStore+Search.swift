import Foundation
import SparkLock
import SparkStore

/// The search index on SQLite: `message_search`, a contentless FTS5 table (`content = ''`,
/// `detail = none`, `columnsize = 0`) whose documents are the keyed tokens of each message
/// (``SearchDocument``), under the message's rowid; `messages.search_length` is a message's
/// number of tokens (NULL: not indexed). This file alone reads and writes them and
/// `search_index_state`.
///
/// - **No text, no positions, no sizes**: FTS5 keeps only each token's documents, so a copy of
///   the file without the key shows which messages share a token, never a word (see
///   `docs/SEARCH.md`). Phrases, prefixes and substrings are checked on the message itself
///   (`SearchMatch.matches`).
/// - **Taken out without a trace**: a contentless table forgets a document only when given the
///   same tokens again, so they are made again from the message as stored, before it changes;
///   the table is then merged into one segment (`optimize`), which leaves no old segment behind,
///   `secure_delete` zeroes the pages that held it, and the storage truncates the log.
/// - A message's rowid is its document: every VACUUM this store runs either follows a wipe (the
///   index emptied) or asks for a rebuild (`EndpointStore`).
extension SQLiteMessagingStore {
    /// The tokens' version: a store indexed by another is rebuilt (``resetSearchIndex()``).
    static let searchIndexVersion = 6

    var searchKey: SearchKey { sealer.searchKey }

    /// The tokens `document` puts in the index, or nil when its chat is not live (a message
    /// stored in a chat this user left is not found).
    func searchTokens(_ document: SearchDocument) throws -> [SearchToken]? {
        let chatID = document.chatID
        let live: Bool
        if let known = chatsRead.live[chatID] {
            live = known
        } else {
            live = try db.scalar("SELECT active FROM chats WHERE chat_id = ?", [chatID], as: Bool.self) ?? true
            chatsRead.live[chatID] = live
        }
        return live ? document.tokens(sealer.searchKey) : nil
    }

    /// Puts `tokens` in the index as the document of the message in row `row` (whose
    /// `search_length` the caller sets).
    func addToIndex(_ tokens: [SearchToken], row: Int64) throws {
        writeSearchIndex("INSERT INTO message_search(rowid, tokens) VALUES (?, ?)", [row, SearchToken.text(tokens)])
    }

    /// Keeps a write of the index for the end of the transaction (see ``searchWrites``).
    private func writeSearchIndex(_ sql: String, _ arguments: [any DatabaseValueConvertible] = []) {
        searchWrites.pending.append((sql, arguments))
    }

    /// Makes the index's writes kept so far, in order.
    func flushSearchWrites() throws {
        let pending = searchWrites.pending
        searchWrites.pending = []
        for write in pending { try db.execute(write.sql, write.arguments) }
    }

    /// Indexes the message stored in row `row`, with what the caller holds of it, when its chat
    /// is live.
    func index(_ document: SearchDocument, row: Int64) throws {
        guard let tokens = try searchTokens(document) else { return }
        try db.execute("UPDATE messages SET search_length = ? WHERE rowid = ?", [tokens.count, row])
        try addToIndex(tokens, row: row)
    }

    /// Takes message `id` out of the index, if it is there; ``purgeSearchIndex()`` then drops
    /// what the index held of it. Returns its row and the document taken out (nil: it was not
    /// there).
    @discardableResult
    func unindex(_ id: String) throws -> (row: Int64, document: SearchDocument)? {
        guard let (row, indexed, document) = try storedDocument(id), indexed else { return nil }
        writeSearchIndex(
            "INSERT INTO message_search(message_search, rowid, tokens) VALUES ('delete', ?, ?)",
            [row, SearchToken.text(document.tokens(sealer.searchKey))])
        try db.execute("UPDATE messages SET search_length = NULL WHERE rowid = ?", [row])
        return (row, document)
    }

    /// Indexes message `id` as stored now.
    func reindex(_ id: String) throws {
        guard let (row, _, document) = try storedDocument(id) else { return }
        try index(document, row: row)
    }

    /// Message `id`'s row, whether it is indexed, and its document, as stored.
    private func storedDocument(_ id: String) throws -> (row: Int64, indexed: Bool, document: SearchDocument)? {
        guard
            let row = try db.row(
                "SELECT rowid, search_length, chat_id, sender, content, attachment FROM messages WHERE local_id = ?", [id])
        else { return nil }
        let attachment = try row.get(5, as: Data?.self).map {
            try AttachmentDescriptor(encoded: try sealer.open($0, EndpointStore.Seal.attachment(id)))
        }
        let document = SearchDocument(
            content: try sealer.openText(try row.get(4), EndpointStore.Seal.content(id)), fileName: attachment?.fileName,
            mediaType: attachment?.mediaType, chatID: try row.get(2), sender: try row.get(3))
        return (try row.get(0), try row.get(1, as: Int64?.self) != nil, document)
    }

    /// Merges the index into one segment: what was taken out is then in no page of it (the
    /// pages it leaves are zeroed by `secure_delete`).
    func purgeSearchIndex() throws {
        writeSearchIndex("INSERT INTO message_search(message_search) VALUES ('optimize')")
        purged?.withLock { $0 = true }
    }

    func unindexChat(_ chatID: String) throws {
        let ids = try db.rows("SELECT local_id FROM messages WHERE chat_id = ? AND search_length IS NOT NULL", [chatID])
            .map { try $0.get(0, as: String.self) }
        for id in ids { try unindex(id) }
        if !ids.isEmpty { try purgeSearchIndex() }
    }

    /// Ranked by BM25 as it stands without term frequencies (the index keeps none): every
    /// candidate holds every token of the query, so the idf sum is the same for all and the
    /// message with fewer tokens ranks first, then the later stored. (FTS5's own `bm25()`
    /// needs positions, which would keep each message's tokens in order.)
    func searchCandidates(_ terms: [SearchMatch.Term], _ match: SearchMatch, offset: Int, limit: Int) throws -> [SearchHit] {
        try flushSearchWrites()
        var filters = ""
        // Terms are hex: nothing of the query's text is in the MATCH expression.
        var arguments: [any DatabaseValueConvertible] = [SearchMatch.expression(terms)]
        if let chatID = match.chatID {
            filters += " AND m.chat_id = ?"
            arguments.append(chatID)
        }
        if let sender = match.sender {
            filters += " AND m.sender = ?"
            arguments.append(sender)
        }
        if let since = match.since {
            filters += " AND m.timestamp >= ?"
            arguments.append(since.timeIntervalSince1970)
        }
        if let until = match.until {
            filters += " AND m.timestamp < ?"
            arguments.append(until.timeIntervalSince1970)
        }
        let rows = try db.rows(
            """
            SELECT m.rowid FROM message_search s JOIN messages m ON m.rowid = s.rowid
            WHERE message_search MATCH ?\(filters) ORDER BY m.search_length, m.rowid DESC LIMIT ? OFFSET ?
            """, arguments + [limit, offset]
        ).map { try $0.get(0, as: Int64.self) }
        guard !rows.isEmpty else { return [] }
        // What a result shows, for the batch in one statement (not each message whole).
        var hits: [Int64: SearchHit] = [:]
        for row in try db.rows(
            """
            SELECT rowid, local_id, chat_id, sender, timestamp, number, content, attachment FROM messages
            WHERE rowid IN (\(Array(repeating: "?", count: rows.count).joined(separator: ", ")))
            """, rows)
        {
            let id = try row.get(1, as: String.self)
            let attachment = try row.get(7, as: Data?.self).map {
                try AttachmentDescriptor(encoded: try sealer.open($0, EndpointStore.Seal.attachment(id)))
            }
            hits[try row.get(0)] = SearchHit(
                id: id, sender: try row.get(3), timestamp: Date(timeIntervalSince1970: try row.get(4)), number: try row.get(5),
                document: SearchDocument(
                    content: try sealer.openText(try row.get(6), EndpointStore.Seal.content(id)),
                    fileName: attachment?.fileName, mediaType: attachment?.mediaType, chatID: try row.get(2),
                    sender: try row.get(3)))
        }
        return rows.compactMap { hits[$0] }
    }

    func searchIndexState() throws -> SearchIndexState {
        guard let row = try db.row("SELECT version, building FROM search_index_state") else {
            return SearchIndexState(current: false, building: true)
        }
        return SearchIndexState(current: try row.get(0, as: Int.self) == Self.searchIndexVersion, building: try row.get(1))
    }

    func resetSearchIndex() throws {
        writeSearchIndex("INSERT INTO message_search(message_search) VALUES ('delete-all')")
        try db.execute("UPDATE messages SET search_length = NULL WHERE search_length IS NOT NULL", [])
        try db.execute(
            """
            INSERT INTO search_index_state VALUES (1, ?, 1)
            ON CONFLICT(singleton) DO UPDATE SET version = excluded.version, building = 1
            """, [Self.searchIndexVersion])
    }

    /// The messages a rebuild indexes: live, in a live chat, not yet in the index.
    private static let unindexed = """
        FROM messages m JOIN chats c ON c.chat_id = m.chat_id
        WHERE m.search_length IS NULL AND m.expired = 0 AND m.recalled = 0 AND c.active = 1
        """

    func indexUnindexed(after row: Int64, limit: Int) throws -> (indexed: Int, last: Int64?) {
        let found = try db.rows(
            "SELECT m.rowid, m.local_id \(Self.unindexed) AND m.rowid > ? ORDER BY m.rowid LIMIT ?", [row, limit]
        ).map { (row: try $0.get(0, as: Int64.self), id: try $0.get(1, as: String.self)) }
        for message in found { try reindex(message.id) }
        guard found.count == limit, let last = found.last else {
            try db.execute("UPDATE search_index_state SET building = 0", [])
            return (found.count, nil)
        }
        return (found.count, last.row)
    }

    func unindexedCount() throws -> Int { try db.scalar("SELECT count(*) \(Self.unindexed)", as: Int.self) ?? 0 }
}
