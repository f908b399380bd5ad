import Foundation
import SparkLock
import SparkStore

/// The search index on SQLite: `message_search`, a contentless FTS5 table (`content = ''`,
/// `detail = column`) whose documents are the keyed tokens of each message (``SearchDocument``),
/// under the message's `search_doc`. This file alone reads and writes it and
/// `search_index_state`.
///
/// - **No text and no positions**: FTS5 keeps only each token's documents, so a copy of the file
///   without the key shows which messages share a token and how many tokens each has, never a
///   word (see `docs/SEARCH.md`). Phrases, prefixes and substrings are checked on the message
///   itself (`SearchMatch.matches`).
/// - **Taken out without a trace**: a contentless table forgets a document only when given the
///   same tokens again, so they are made again from the message as stored, before it changes;
///   the table is then merged into one segment (`optimize`), which leaves no old segment behind,
///   and `secure_delete` zeroes the pages that held it.
extension SQLiteMessagingStore {
    /// The tokens' version: a store indexed by another is rebuilt (``resetSearchIndex()``).
    static let searchIndexVersion = 1

    var searchKey: SearchKey { sealer.searchKey }

    /// Indexes a message just stored, with what the caller holds of it, when its chat is live.
    func index(_ document: SearchDocument, id: String) throws {
        guard try db.scalar("SELECT active FROM chats WHERE chat_id = ?", [document.chatID], as: Bool.self) ?? true else {
            return
        }
        // The next document number, kept in the state row (a max() over the messages would be a
        // scan: the doc-id index is partial).
        let doc =
            try db.scalar("UPDATE search_index_state SET next_doc = next_doc + 1 RETURNING next_doc - 1", as: Int64.self) ?? 1
        let tokens = document.tokens(sealer.searchKey)
        try db.execute("UPDATE messages SET search_doc = ?, search_length = ? WHERE local_id = ?", [doc, tokens.count, id])
        try db.execute("INSERT INTO message_search(rowid, tokens) VALUES (?, ?)", [doc, tokens.joined(separator: " ")])
    }

    /// Takes message `id` out of the index, if it is there; ``purgeSearchIndex()`` then drops
    /// what the index held of it. Returns whether it was there.
    @discardableResult
    func unindex(_ id: String) throws -> Bool {
        guard let (doc, document) = try storedDocument(id), let doc else { return false }
        try db.execute(
            "INSERT INTO message_search(message_search, rowid, tokens) VALUES ('delete', ?, ?)",
            [doc, document.tokens(sealer.searchKey).joined(separator: " ")])
        try db.execute("UPDATE messages SET search_doc = NULL, search_length = NULL WHERE local_id = ?", [id])
        return true
    }

    /// Indexes message `id` as stored now.
    func reindex(_ id: String) throws {
        guard let (_, document) = try storedDocument(id) else { return }
        try index(document, id: id)
    }

    /// Message `id`'s place in the index and its document, as stored.
    private func storedDocument(_ id: String) throws -> (doc: Int64?, document: SearchDocument)? {
        guard
            let row = try db.row(
                "SELECT search_doc, chat_id, sender, content, attachment FROM messages WHERE local_id = ?", [id])
        else { return nil }
        let attachment = try row.get(4, as: Data?.self).map {
            try AttachmentDescriptor(encoded: try sealer.open($0, EndpointStore.Seal.attachment(id)))
        }
        let document = SearchDocument(
            content: try sealer.openText(try row.get(3), EndpointStore.Seal.content(id)), fileName: attachment?.fileName,
            mediaType: attachment?.mediaType, chatID: try row.get(1), sender: try row.get(2))
        return (try row.get(0, as: Int64?.self), document)
    }

    /// Merges the index into one segment: what was taken out is then in no page of it (the
    /// pages it leaves are zeroed by `secure_delete`).
    func purgeSearchIndex() throws {
        try db.execute("INSERT INTO message_search(message_search) VALUES ('optimize')")
        purged?.withLock { $0 = true }
    }

    func unindexChat(_ chatID: String) throws {
        let ids = try db.rows("SELECT local_id FROM messages WHERE chat_id = ? AND search_doc IS NOT NULL", [chatID])
            .map { try $0.get(0, as: String.self) }
        for id in ids { try unindex(id) }
        if !ids.isEmpty { try purgeSearchIndex() }
    }

    /// Ranked by BM25 as it stands without term frequencies (the index keeps none): every
    /// candidate holds every token of the query, so the shorter message ranks first, then the
    /// later indexed. (FTS5's own `bm25()` needs positions, which would keep each message's
    /// tokens in order.)
    func searchCandidates(_ tokens: [String], since: Date?, until: Date?, offset: Int, limit: Int) throws -> [String] {
        // Tokens are hex: nothing of the query's text is in the MATCH expression.
        try db.rows(
            """
            SELECT m.local_id FROM message_search s JOIN messages m ON m.search_doc = s.rowid
            WHERE message_search MATCH ? AND m.timestamp >= ? AND m.timestamp < ?
            ORDER BY m.search_length, s.rowid DESC LIMIT ? OFFSET ?
            """,
            [
                tokens.joined(separator: " AND "), since?.timeIntervalSince1970 ?? -Double.greatestFiniteMagnitude,
                until?.timeIntervalSince1970 ?? Double.greatestFiniteMagnitude, limit, offset,
            ]
        ).map { try $0.get(0) }
    }

    func searchIndexState() throws -> SearchIndexState {
        guard let row = try db.row("SELECT version, building FROM search_index_state") else {
            return SearchIndexState(current: false, building: true)
        }
        return SearchIndexState(current: try row.get(0, as: Int.self) == Self.searchIndexVersion, building: try row.get(1))
    }

    func resetSearchIndex() throws {
        try db.execute("INSERT INTO message_search(message_search) VALUES ('delete-all')")
        try db.execute("UPDATE messages SET search_doc = NULL, search_length = NULL WHERE search_doc IS NOT NULL", [])
        try db.execute(
            """
            INSERT INTO search_index_state VALUES (1, ?, 1, 1)
            ON CONFLICT(singleton) DO UPDATE SET version = excluded.version, building = 1
            """, [Self.searchIndexVersion])
    }

    func indexUnindexed(limit: Int) throws -> (indexed: Int, remaining: Int) {
        let ids = try db.rows(
            """
            SELECT m.local_id FROM messages m JOIN chats c ON c.chat_id = m.chat_id
            WHERE m.search_doc IS NULL AND m.expired = 0 AND m.recalled = 0 AND c.active = 1 ORDER BY m.rowid LIMIT ?
            """, [limit]
        ).map { try $0.get(0, as: String.self) }
        for id in ids { try reindex(id) }
        let remaining =
            try db.scalar(
                """
                SELECT count(*) FROM messages m JOIN chats c ON c.chat_id = m.chat_id
                WHERE m.search_doc IS NULL AND m.expired = 0 AND m.recalled = 0 AND c.active = 1
                """, as: Int.self) ?? 0
        if remaining == 0 { try db.execute("UPDATE search_index_state SET building = 0", []) }
        return (ids.count, remaining)
    }
}
