internal import CSQLite
public import Foundation

/// One SQLite connection. Not thread-safe: it lives behind one owner, a ``DatabaseQueue``, which
/// hands it to one closure at a time.
public final class Database {
    /// The `sqlite3` handle; this object is its only owner and closes it in `deinit`.
    let handle: OpaquePointer
    /// The file path, or `:memory:`.
    public let path: String
    /// How long a statement waits for another connection's lock before failing with
    /// ``StoreError/Code/busy``.
    let busyTimeout: Duration
    private var statementCache: [String: Statement] = [:]

    /// Opens `path`; with `creating`, a missing file is made (an empty database).
    init(path: String, busyTimeout: Duration, creating: Bool = true) throws {
        self.path = path
        self.busyTimeout = busyTimeout
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | (creating ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI
        let result = sqlite3_open_v2(path, &handle, flags, nil)
        guard result == SQLITE_OK, let handle else {
            // > Whether or not an error occurs when it is opened, resources associated with the
            // > database connection handle should be released by passing it to sqlite3_close().
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(handle)
            throw StoreError(.fileAccess, resultCode: result, message: "cannot open \(path): \(message)")
        }
        self.handle = handle
        sqlite3_extended_result_codes(handle, 1)
        installBusyHandler()
    }

    deinit {
        statementCache.removeAll()
        // > sqlite3_close_v2() ... the database connection becomes an unusable "zombie" which
        // > will automatically be deallocated when the last prepared statement is finalized.
        sqlite3_close_v2(handle)
    }

    /// SQLite's default handler (`sqlite3_busy_timeout`) sleeps in growing steps of up to 100 ms;
    /// with two processes writing one file it was measured here making them 20x slower than
    /// one writer. This handler sleeps 50–250 µs with jitter and gives up after `busyTimeout`.
    private func installBusyHandler() {
        let limit = Int32(
            clamping: busyTimeout.components.seconds * 10_000 + busyTimeout.components.attoseconds / 100_000_000_000_000)
        let context = UnsafeMutableRawPointer(bitPattern: Int(max(limit, 1)))
        sqlite3_busy_handler(
            handle,
            { context, attempt in
                // The context pointer carries the attempt limit (one attempt ≈ 100 µs on average).
                let limit = Int32(truncatingIfNeeded: Int(bitPattern: context))
                guard attempt < limit else { return 0 }
                usleep(useconds_t(50 + UInt32.random(in: 0...200)))
                return 1
            }, context)
    }

    // MARK: Executing

    /// Runs one or more SQL statements without arguments (schema, pragmas).
    public func execute(_ sql: String) throws {
        let result = sqlite3_exec(handle, sql, nil, nil, nil)
        guard result == SQLITE_OK else { throw error(result, sql: sql) }
    }

    /// Runs one statement with arguments and returns the number of rows it changed.
    @discardableResult
    public func execute(_ sql: String, _ arguments: [any DatabaseValueConvertible]) throws -> Int {
        let statement = try cachedStatement(sql)
        try statement.bind(arguments)
        defer { statement.reset() }
        while try statement.step() {}
        return Int(sqlite3_changes(handle))
    }

    /// Runs a query and returns every row.
    public func rows(_ sql: String, _ arguments: [any DatabaseValueConvertible] = []) throws -> [Row] {
        let statement = try cachedStatement(sql)
        try statement.bind(arguments)
        defer { statement.reset() }
        var rows: [Row] = []
        while try statement.step() { rows.append(statement.row()) }
        return rows
    }

    /// Runs a query and returns what `body` reads of each row, in order, reading the row where
    /// SQLite holds it (no ``Row`` built; see ``ColumnReader``).
    @inlinable public func rows<T>(
        _ sql: String, _ arguments: [any DatabaseValueConvertible] = [], reading body: (borrowing ColumnReader) throws -> T
    ) throws -> [T] {
        let statement = try cachedStatement(sql)
        try statement.bind(arguments)
        defer { statement.reset() }
        let reader = ColumnReader(statement: statement)
        var read: [T] = []
        while try statement.step() { read.append(try body(reader)) }
        return read
    }

    /// Runs a query and returns its first row, if any.
    public func row(_ sql: String, _ arguments: [any DatabaseValueConvertible] = []) throws -> Row? {
        let statement = try cachedStatement(sql)
        try statement.bind(arguments)
        defer { statement.reset() }
        return try statement.step() ? statement.row() : nil
    }

    /// Runs a query and returns the first column of its first row, converted.
    public func scalar<T: DatabaseValueConvertible>(
        _ sql: String, _ arguments: [any DatabaseValueConvertible] = [], as type: T.Type = T.self
    ) throws -> T? {
        guard let row = try row(sql, arguments) else { return nil }
        return try row.get(0, as: T?.self)
    }

    /// Calls `body` for each row without collecting them, for large results.
    public func forEachRow(
        _ sql: String, _ arguments: [any DatabaseValueConvertible] = [], _ body: (Row) throws -> Void
    ) throws {
        let statement = try cachedStatement(sql)
        try statement.bind(arguments)
        defer { statement.reset() }
        while try statement.step() { try body(statement.row()) }
    }

    /// The database attached as `schema` as one SQLite file image (`sqlite3_serialize`): for
    /// an in-memory database, what a file of it would hold. Outside a write to it.
    public func serialize(schema: String) throws -> Data {
        var size: sqlite3_int64 = 0
        guard let bytes = sqlite3_serialize(handle, schema, &size, 0) else {
            throw StoreError(.sqlite, message: "cannot serialize the database \(schema) (out of memory or no such database)")
        }
        return Data(
            bytesNoCopy: bytes, count: Int(size),
            deallocator: .custom { pointer, _ in sqlite3_free(pointer) })
    }

    /// Makes the in-memory database attached as `schema` the one `image` holds
    /// (`sqlite3_deserialize`, resizable, its copy freed with the connection), in place of what
    /// it held. Not inside a transaction. A damaged image is refused by the first statement that
    /// reads it (``StoreError/Code/corrupt``), never trusted.
    public func deserialize(schema: String, _ image: Data) throws {
        guard !isInTransaction else { throw StoreError(.misuse, message: "cannot replace \(schema) inside a transaction") }
        let size = max(image.count, 1)
        guard let buffer = sqlite3_malloc64(sqlite3_uint64(size)) else {
            throw StoreError(.sqlite, message: "out of memory for an image of \(image.count) bytes")
        }
        image.withUnsafeBytes { source in
            if let base = source.baseAddress { buffer.copyMemory(from: base, byteCount: image.count) }
        }
        // SQLite owns the buffer from here, also when it refuses it.
        let flags = UInt32(SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_RESIZEABLE)
        let result = sqlite3_deserialize(
            handle, schema, buffer.assumingMemoryBound(to: UInt8.self), sqlite3_int64(image.count), sqlite3_int64(size), flags)
        guard result == SQLITE_OK else { throw error(result, sql: nil) }
        statementCache.removeAll()
    }

    /// The rowid of the last inserted row on this connection.
    public var lastInsertedRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    // MARK: Transactions

    /// How a transaction takes its locks.
    public enum TransactionKind: String, Sendable {
        /// Takes locks as needed; for reads.
        case deferred = "DEFERRED"
        /// Takes the write lock at once, so a writer never fails half-way with a busy snapshot.
        case immediate = "IMMEDIATE"
    }

    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws.
    public func inTransaction<T>(_ kind: TransactionKind = .immediate, _ body: () throws -> T) throws -> T {
        try execute("BEGIN \(kind.rawValue)")
        do {
            let value = try body()
            try execute("COMMIT")
            return value
        } catch {
            // A failed COMMIT or body leaves the transaction open; roll it back and report the
            // original error.
            if sqlite3_get_autocommit(handle) == 0 { _ = sqlite3_exec(handle, "ROLLBACK", nil, nil, nil) }
            throw error
        }
    }

    /// Whether a transaction is open.
    public var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    // MARK: Internals

    @usableFromInline func cachedStatement(_ sql: String) throws -> Statement {
        if let statement = statementCache[sql] { return statement }
        let statement = try Statement(database: self, sql: sql)
        statementCache[sql] = statement
        return statement
    }

    /// An error for `result`, with SQLite's message for this connection.
    func error(_ result: Int32, sql: String?) -> StoreError {
        let message = String(cString: sqlite3_errmsg(handle))
        let code: StoreError.Code
        switch result & 0xFF {
        case SQLITE_BUSY, SQLITE_LOCKED: code = .busy
        case SQLITE_CONSTRAINT: code = .constraint
        case SQLITE_CORRUPT, SQLITE_NOTADB: code = .corrupt
        case SQLITE_CANTOPEN, SQLITE_PERM, SQLITE_READONLY: code = .fileAccess
        case SQLITE_MISUSE, SQLITE_RANGE: code = .misuse
        default: code = .sqlite
        }
        return StoreError(code, resultCode: result, message: message, sql: sql)
    }
}

@available(*, unavailable)
extension Database: Sendable {}
