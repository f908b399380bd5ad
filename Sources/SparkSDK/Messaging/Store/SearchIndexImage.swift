import Foundation
import SparkStore

/// The search index kept under the store key: an in-memory SQLite database attached to the
/// endpoint store's connection as `search`, written to the data directory only as one sealed
/// whole, its *image* (`sqlite3_serialize`, then the store's AES-256-GCM), and read back at open
/// (`sqlite3_deserialize`). A copy of the data directory without the store key holds no token,
/// posting or length of the index (`docs/SEARCH.md`, "What a copy of the files reveals").
///
/// What ties the index to the messages, which are in the file:
///
/// - `main.search_index_state(seq, image_through)`: `seq` numbers the write transactions that
///   changed the index (any process's; the latest is the journal's newest row when that is
///   later, so a transaction writes its row alone), `image_through` the `seq` of the newest
///   image written.
/// - `main.search_changes(seq, rows)`: for each transaction since that image that changed the
///   index, the rows of the messages it changed (the journal; rows only, no token).
/// - `search.state(version, building, through, changed, documents, due)`: the tokens' version
///   and a rebuild under way, the `seq` this index reflects, its changes since its image, its
///   documents when the image was made, and whether an image is due at once (something was
///   taken out).
///
/// After a crash (an image older than the file's last changes) or another process's writes, the
/// rows of the journal newer than `through` are made again from the messages as stored
/// (``SQLiteMessagingStore/synchronizeSearchIndex()``); an image older than `image_through` (the
/// journal no longer reaches back to it: another connection's image, or a restored old copy)
/// is read again, and one that cannot be opened is dropped for a rebuild. This file alone reads
/// and writes the image's file; `SQLiteMessagingStore+Search.swift` the tables.
enum SearchIndexImage {
    /// The attached in-memory database's schema name.
    static let schema = "search"
    /// The image's file, in the data directory.
    static let fileName = "search-index.sealed"
    /// The image's sealing context (the store key's AES-256-GCM, bound to this label).
    static let context = "spark-endpoint-store-v1/search-index-image"
    /// Changes since the image that make a new one due, at least (else an eighth of the
    /// documents): a crash then costs at most that many messages indexed again at the next
    /// start, and an image is written once for that many (`docs/SEARCH.md`).
    static let changesPerImage = 5_000

    /// The image in the data directory of the store file `store`, opened with `sealer` (nil:
    /// none, or not this key's). For the tests that read what the key holder reads.
    static func opened(besides store: URL, sealer: StoreSealer) -> Data? {
        guard let sealed = FileManager.default.contents(atPath: path(besides: store.path)) else { return nil }
        return try? sealer.open(sealed, context)
    }

    /// The image's file in the directory of the store file `store`.
    private static func path(besides store: String) -> String {
        URL(fileURLWithPath: store).deletingLastPathComponent().appendingPathComponent(fileName).path
    }

    /// The in-memory index's tables (`search`): see `SQLiteMessagingStore+Search.swift`.
    private static let tables = """
        CREATE VIRTUAL TABLE search.message_search USING fts5(
            tokens, tokenize = 'ascii', content = '', detail = none, columnsize = 0);
        CREATE TABLE search.lengths (row INTEGER PRIMARY KEY, length INTEGER NOT NULL);
        CREATE TABLE search.state (
            singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
            version INTEGER NOT NULL,
            building INTEGER NOT NULL,
            through INTEGER NOT NULL,
            changed INTEGER NOT NULL,
            documents INTEGER NOT NULL,
            due INTEGER NOT NULL
        );
        """

    /// Attaches the index to `queue`'s connection and loads it from its image (at the store's
    /// open, outside any transaction): an image that is missing, does not open under `sealer`'s
    /// key, or is older than the journal reaches back to leaves an empty index of version 0,
    /// which messaging rebuilds when it starts.
    static func attach(_ queue: DatabaseQueue, sealer: StoreSealer) throws {
        try queue.withConnection { db in
            if try db.scalar("SELECT 1 FROM pragma_database_list WHERE name = ?", [schema], as: Int.self) == nil {
                try db.execute("ATTACH DATABASE ':memory:' AS \(schema)")
            }
            try load(db, sealer: sealer)
        }
    }

    /// Reads the image again: another connection wrote a newer one and trimmed the journal
    /// this connection's index had not yet caught up with.
    static func reload(_ queue: DatabaseQueue, sealer: StoreSealer) throws {
        try queue.withConnection { db in try load(db, sealer: sealer) }
    }

    private static func load(_ db: Database, sealer: StoreSealer) throws {
        let (seq, imageThrough) = try journalState(db)
        if let image = opened(besides: URL(fileURLWithPath: db.path), sealer: sealer) {
            do {
                try db.deserialize(schema: schema, image)
                // The tables as this version makes them, and an image the journal reaches back to
                // and the file has not lost (a power cut can take the file's last transactions
                // and not the image written after them: an index of messages that are not there).
                let through = try db.scalar("SELECT through FROM search.state", as: Int64.self)
                _ = try db.scalar("SELECT count(*) FROM search.lengths", as: Int.self)
                if let through, through >= imageThrough, through <= seq { return }
            } catch {
                // A damaged image: dropped below, and rebuilt.
            }
        }
        try makeEmpty(db, through: seq)
    }

    /// An empty index of version 0 (a rebuild follows), reflecting the journal up to `through`.
    private static func makeEmpty(_ db: Database, through: Int64) throws {
        try db.execute("DETACH DATABASE \(schema)")
        try db.execute("ATTACH DATABASE ':memory:' AS \(schema)")
        try db.execute("PRAGMA \(schema).secure_delete = ON")
        try db.execute(tables)
        try db.execute("INSERT INTO search.state VALUES (1, 0, 1, ?, 0, 0, 0)", [through])
    }

    /// The journal's `seq` (the latest journal row's, or the state's when that is later: a reset,
    /// or rows trimmed by an image; one page fewer a transaction than keeping it in the state)
    /// and `image_through`.
    static func journalState(_ db: Database) throws -> (seq: Int64, imageThrough: Int64) {
        guard
            let row = try db.row(
                """
                SELECT max(seq, coalesce((SELECT max(seq) FROM main.search_changes), 0)), image_through
                FROM main.search_index_state
                """)
        else { return (0, 0) }
        return (try row.get(0), try row.get(1))
    }

    /// Writes the image when one is due (after a write transaction committed, on the storage's
    /// thread): something was taken out of the index (its words then leave the image at once),
    /// or enough changed since the last (``changesPerImage``); with `anyChange`, when anything
    /// changed (a clean stop, so the next start indexes nothing again).
    ///
    /// The image is serialized and sealed outside any transaction, written to a file of its own
    /// and synced, then put in place in a write transaction that trims the journal up to it,
    /// unless another connection put a newer one there meanwhile.
    static func saveIfDue(_ queue: DatabaseQueue, sealer: StoreSealer, anyChange: Bool = false) throws {
        let taken = try queue.withConnection { db -> (image: Data, through: Int64)? in
            guard let row = try db.row("SELECT due, changed, documents, through FROM search.state") else { return nil }
            let (due, changed, documents) = (
                try row.get(0, as: Bool.self), try row.get(1, as: Int.self), try row.get(2, as: Int.self)
            )
            guard due || changed >= max(changesPerImage, documents / 8) || (anyChange && changed > 0) else { return nil }
            let count = try db.scalar("SELECT count(*) FROM search.lengths", as: Int.self) ?? 0
            try db.execute("UPDATE search.state SET due = 0, changed = 0, documents = ?", [count])
            if anyChange { try compact(db) }
            return (try db.serialize(schema: schema), try row.get(3))
        }
        guard let taken else { return }
        do {
            try write(sealer.seal(taken.image, context), through: taken.through, queue)
        } catch {
            // Not saved: due again at the next write (the journal still has every change).
            _ = try? queue.withConnection { db in
                try db.execute("UPDATE search.state SET due = 1")
            }
            throw error
        }
    }

    /// At a stop: the index merged into one segment (FTS5 otherwise keeps the levels of its
    /// incremental merges: 1.7 times the merged size, measured with `index-size`), and the pages
    /// that frees given back (`VACUUM`) when they are a quarter of the database.
    private static func compact(_ db: Database) throws {
        try db.execute("INSERT INTO search.message_search(message_search) VALUES ('optimize')")
        let free = try db.scalar("PRAGMA search.freelist_count", as: Int.self) ?? 0
        let pages = try db.scalar("PRAGMA search.page_count", as: Int.self) ?? 0
        if free * 4 > pages { try db.execute("VACUUM search") }
    }

    private static func write(_ sealed: Data, through: Int64, _ queue: DatabaseQueue) throws {
        let final = path(besides: queue.path)
        let temporary = "\(final).\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp"
        // Gone whatever happens: renamed into place, or removed (a write that failed half-way).
        defer { unlink(temporary) }
        try DurableFile.writeSynced(sealed, to: temporary)
        try queue.write { db in
            guard try journalState(db).imageThrough <= through else { return }
            try DurableFile.replace(final, with: temporary)
            // The journal's `seq` kept where trimming its rows would take it back.
            try db.execute(
                """
                UPDATE main.search_index_state
                SET image_through = ?, seq = max(seq, coalesce((SELECT max(seq) FROM main.search_changes), 0))
                """, [through])
            try db.execute("DELETE FROM main.search_changes WHERE seq <= ?", [through])
        }
    }

    /// Empties the index with the rest of a wipe (in the wipe's transaction): no document,
    /// current and not building, and a journal that starts again after a new `seq`; the
    /// caller then writes the (empty) image with ``saveIfDue(_:sealer:anyChange:)``.
    static func emptied(_ db: Database, version: Int) throws {
        let seq = try journalState(db).seq + 1
        try db.execute("INSERT INTO search.message_search(message_search) VALUES ('delete-all')")
        try db.execute("DELETE FROM search.lengths")
        try db.execute(
            "UPDATE search.state SET version = ?, building = 0, through = ?, changed = 0, documents = 0, due = 1", [version, seq])
        try db.execute("DELETE FROM main.search_changes")
        try db.execute("UPDATE main.search_index_state SET seq = ?", [seq])
    }
}
