import Foundation
import SparkLock
import SparkStore

/// The search index on SQLite: `search.message_search`, a contentless FTS5 table
/// (`content = ''`, `detail = none`, `columnsize = 0`) whose documents are the keyed tokens of
/// each message (``SearchDocument``), under the message's rowid, and `search.lengths`, each
/// indexed message's number of tokens. Both are in an in-memory database attached to the
/// endpoint store's connection, written to the disk only as one sealed image
/// (``SearchIndexImage``); the file holds the journal of the messages whose place in the index
/// changed since that image (`search_changes`). This file alone reads and writes these tables.
///
/// - **No text, no positions, no sizes**: FTS5 keeps only each token's documents; phrases,
///   prefixes and substrings are checked on the message itself (`SearchMatch.matches`).
/// - **Taken out without a trace**: a contentless table forgets a document only when given the
///   same tokens again, so they are made again from the message as stored, before it changes;
///   the table is then merged into one segment (`optimize`), which leaves no old segment behind,
///   `secure_delete` zeroes the pages that held it, and a new image is written at once.
/// - **In step with the file**: each write transaction that changes the index journals its
///   messages' rows under a new `seq`; a transaction first makes the index reflect the journal
///   (``synchronizeSearchIndex()``: after a crash, or another process's writes).
/// - A message's rowid is its document: every VACUUM this store runs either follows a wipe (the
///   index emptied) or comes before any image (`EndpointStore`).
extension SQLiteMessagingStore {
    /// The tokens' version: a store indexed by another is rebuilt (``resetSearchIndex()``).
    static let searchIndexVersion = 6

    var searchKey: SearchKey { sealer.searchKey }

    /// The index is behind a journal that no longer reaches back to it (another connection wrote
    /// a newer image and trimmed the journal): the transaction is rolled back before it does
    /// anything, the image read again (``SearchIndexImage/reload(_:sealer:)``), and the
    /// transaction run again.
    struct SearchIndexBehind: Error {}

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

    /// Makes the index reflect every change the journal holds (once a transaction, before its
    /// first use of the index): the rows changed by transactions it has not seen are made again
    /// from the messages as stored.
    ///
    /// - Throws: ``SearchIndexBehind`` when the journal no longer reaches back to this index.
    func synchronizeSearchIndex() throws {
        guard !searchWrites.synchronized else { return }
        let (seq, imageThrough) = try SearchIndexImage.journalState(db)
        let through = try db.scalar("SELECT through FROM search.state", as: Int64.self) ?? 0
        guard through < seq else {
            (searchWrites.synchronized, searchWrites.seq) = (true, seq + 1)
            return
        }
        guard through >= imageThrough else { throw SearchIndexBehind() }
        var rows: [Int64] = []
        var seen: Set<Int64> = []
        for entry in try db.rows("SELECT rows FROM main.search_changes WHERE seq > ? ORDER BY seq", [through]) {
            for row in Self.journaled(try entry.get(0, as: Data.self)) where seen.insert(row).inserted { rows.append(row) }
        }
        try reconcile(rows)
        try db.execute("UPDATE search.state SET through = ?, changed = changed + ?", [seq, rows.count])
        (searchWrites.synchronized, searchWrites.seq) = (true, seq + 1)
    }

    /// Makes the index's documents of `rows` what the messages stored there make now: each
    /// one the index holds is taken out with the tokens it holds for it (read from FTS5's
    /// `fts5vocab`, one pass over the index), then each that is live is indexed again.
    private func reconcile(_ rows: [Int64]) throws {
        let held = try rows.filter {
            try db.scalar("SELECT 1 FROM search.lengths WHERE row = ?", [$0], as: Int.self) != nil
        }
        if !held.isEmpty {
            let wanted = Set(held)
            try db.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.search_vocab USING fts5vocab(search, message_search, 'instance')")
            var tokens: [Int64: [String]] = [:]
            for (term, document) in try db.rows(
                "SELECT term, doc FROM temp.search_vocab",
                reading: {
                    (try $0.get(0, as: String.self), try $0.get(1, as: Int64.self))
                }) where wanted.contains(document)
            {
                tokens[document, default: []].append(term)
            }
            for row in held {
                try db.execute(
                    "INSERT INTO search.message_search(message_search, rowid, tokens) VALUES ('delete', ?, ?)",
                    [row, (tokens[row] ?? []).joined(separator: " ")])
                try db.execute("DELETE FROM search.lengths WHERE row = ?", [row])
            }
            try db.execute("INSERT INTO search.message_search(message_search) VALUES ('optimize')")
            try db.execute("UPDATE search.state SET due = 1")
        }
        for row in rows {
            guard
                let id = try db.scalar(
                    "SELECT m.local_id \(Self.indexable) AND m.rowid = ?", [row], as: String.self),
                let (_, _, document) = try storedDocument(id), let tokens = try searchTokens(document)
            else { continue }
            try db.execute("INSERT INTO search.message_search(rowid, tokens) VALUES (?, ?)", [row, SearchToken.text(tokens)])
            try db.execute("INSERT INTO search.lengths(row, length) VALUES (?, ?)", [row, tokens.count])
        }
    }

    /// A journal entry's rows as stored: each an 8-byte little-endian integer.
    static func journaled(_ rows: [Int64]) -> Data {
        var data = Data(capacity: rows.count * 8)
        for row in rows { withUnsafeBytes(of: row.littleEndian) { data.append(contentsOf: $0) } }
        return data
    }

    /// The rows of a journal entry (a trailing part shorter than 8 bytes is ignored).
    static func journaled(_ data: Data) -> [Int64] {
        data.withUnsafeBytes { bytes in
            stride(from: 0, to: bytes.count - bytes.count % 8, by: 8).map {
                Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: $0, as: Int64.self))
            }
        }
    }

    /// Puts `tokens` in the index as the document of the message in row `row`.
    func addToIndex(_ tokens: [SearchToken], row: Int64) throws {
        try synchronizeSearchIndex()
        writeSearchIndex("INSERT INTO search.message_search(rowid, tokens) VALUES (?, ?)", [row, SearchToken.text(tokens)])
        try db.execute("INSERT INTO search.lengths(row, length) VALUES (?, ?)", [row, tokens.count])
        searchWrites.rows.append(row)
    }

    /// Keeps a write of the index for the end of the transaction (see ``searchWrites``).
    private func writeSearchIndex(_ sql: String, _ arguments: [any DatabaseValueConvertible] = []) {
        searchWrites.pending.append((sql, arguments))
    }

    /// Makes the index's writes kept so far, in order, and journals the rows they changed under
    /// this transaction's `seq`.
    func flushSearchWrites() throws {
        let pending = searchWrites.pending
        searchWrites.pending = []
        for write in pending { try db.execute(write.sql, write.arguments) }
        let rows = searchWrites.rows
        searchWrites.rows = []
        guard !rows.isEmpty || searchWrites.reset, let seq = searchWrites.seq else { return }
        if !rows.isEmpty {
            // One journal row a transaction: its rows, 8 bytes each (little-endian), added to
            // by a later flush of the same transaction.
            try db.execute(
                """
                INSERT INTO main.search_changes(seq, rows) VALUES (?, ?)
                ON CONFLICT(seq) DO UPDATE SET rows = rows || excluded.rows
                """, [seq, Self.journaled(rows)])
        } else {
            // A journal row says its `seq` (see `SearchIndexImage.journalState`); a reset with no
            // row says it in the state's row.
            try db.execute("UPDATE main.search_index_state SET seq = ?", [seq])
        }
        try db.execute(
            "UPDATE search.state SET through = ?, changed = changed + ?, due = due OR ?",
            [seq, rows.count, searchWrites.takenOut])
        searchWrites.reset = false
    }

    /// Indexes the message stored in row `row`, with what the caller holds of it, when its chat
    /// is live.
    func index(_ document: SearchDocument, row: Int64) throws {
        guard let tokens = try searchTokens(document) else { return }
        try addToIndex(tokens, row: row)
    }

    /// Takes message `id` out of the index, if it is there; ``purgeSearchIndex()`` then drops
    /// what the index held of it. Returns its row and the document taken out (nil: it was not
    /// there).
    @discardableResult
    func unindex(_ id: String) throws -> (row: Int64, document: SearchDocument)? {
        try synchronizeSearchIndex()
        guard let (row, indexed, document) = try storedDocument(id), indexed else { return nil }
        writeSearchIndex(
            "INSERT INTO search.message_search(message_search, rowid, tokens) VALUES ('delete', ?, ?)",
            [row, SearchToken.text(document.tokens(sealer.searchKey))])
        try db.execute("DELETE FROM search.lengths WHERE row = ?", [row])
        searchWrites.rows.append(row)
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
                """
                SELECT m.rowid, l.length, m.chat_id, m.sender, m.content, m.attachment
                FROM messages m LEFT JOIN search.lengths l ON l.row = m.rowid WHERE m.local_id = ?
                """, [id])
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
    /// pages it leaves are zeroed by `secure_delete`), and an image without it is written after
    /// the transaction.
    func purgeSearchIndex() throws {
        writeSearchIndex("INSERT INTO search.message_search(message_search) VALUES ('optimize')")
        searchWrites.takenOut = true
        // What was taken out goes with a change of the message's row (its old text, sealed):
        // the log's copy of that page goes too.
        purged?.withLock { $0 = true }
    }

    func unindexChat(_ chatID: String) throws {
        try synchronizeSearchIndex()
        let ids = try db.rows(
            "SELECT m.local_id FROM messages m JOIN search.lengths l ON l.row = m.rowid WHERE m.chat_id = ?", [chatID]
        ).map { try $0.get(0, as: String.self) }
        for id in ids { try unindex(id) }
        if !ids.isEmpty { try purgeSearchIndex() }
    }

    /// Ranked by BM25 as it stands without term frequencies (the index keeps none): every
    /// candidate holds every token of the query, so the idf sum is the same for all and the
    /// message with fewer tokens ranks first, then the later stored. (FTS5's own `bm25()`
    /// needs positions, which would keep each message's tokens in order.)
    func searchCandidates(_ terms: [SearchMatch.Term], _ match: SearchMatch, offset: Int, limit: Int) throws -> [SearchHit] {
        try synchronizeSearchIndex()
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
        // The messages' rows only for a filter on them: the index holds rows of stored messages
        // alone, and its lengths order the candidates (one lookup a candidate, in memory).
        let messages = filters.isEmpty ? "" : "JOIN messages m ON m.rowid = s.rowid"
        let rows = try db.rows(
            """
            SELECT l.row FROM search.message_search s JOIN search.lengths l ON l.row = s.rowid \(messages)
            WHERE message_search MATCH ?\(filters) ORDER BY l.length, l.row DESC LIMIT ? OFFSET ?
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
        try synchronizeSearchIndex()
        guard let row = try db.row("SELECT version, building FROM search.state") else {
            return SearchIndexState(current: false, building: true)
        }
        return SearchIndexState(current: try row.get(0, as: Int.self) == Self.searchIndexVersion, building: try row.get(1))
    }

    /// Empties the index for a rebuild, and writes an image of it after the transaction: a
    /// new `seq` with no row journaled, so that every other connection reads it again.
    func resetSearchIndex() throws {
        try synchronizeSearchIndex()
        writeSearchIndex("INSERT INTO search.message_search(message_search) VALUES ('delete-all')")
        try db.execute("DELETE FROM search.lengths")
        try db.execute("UPDATE search.state SET version = ?, building = 1", [Self.searchIndexVersion])
        (searchWrites.reset, searchWrites.takenOut) = (true, true)
    }

    /// What makes a message one the index holds when it is complete: live, in a live chat.
    private static let live = "m.expired = 0 AND m.recalled = 0 AND c.active = 1"

    /// The messages the index holds when it is complete.
    private static let indexable = "FROM messages m JOIN chats c ON c.chat_id = m.chat_id WHERE \(live)"

    /// The messages a rebuild indexes: those of ``indexable`` not yet in the index.
    private static let unindexed = """
        FROM messages m JOIN chats c ON c.chat_id = m.chat_id LEFT JOIN search.lengths l ON l.row = m.rowid
        WHERE l.row IS NULL AND \(live)
        """

    func indexUnindexed(after row: Int64, limit: Int) throws -> (indexed: Int, last: Int64?) {
        try synchronizeSearchIndex()
        let found = try db.rows(
            "SELECT m.rowid, m.local_id \(Self.unindexed) AND m.rowid > ? ORDER BY m.rowid LIMIT ?", [row, limit]
        ).map { (row: try $0.get(0, as: Int64.self), id: try $0.get(1, as: String.self)) }
        for message in found { try reindex(message.id) }
        guard found.count == limit, let last = found.last else {
            // The rebuild is over: an image of the whole index after the transaction.
            try db.execute("UPDATE search.state SET building = 0, due = 1", [])
            return (found.count, nil)
        }
        return (found.count, last.row)
    }

    func unindexedCount() throws -> Int {
        try synchronizeSearchIndex()
        return try db.scalar("SELECT count(*) \(Self.unindexed)", as: Int.self) ?? 0
    }
}
