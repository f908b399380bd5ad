internal import CSQLite
import Foundation

/// The serial owner of one ``Database`` connection: every access runs on the calling thread while
/// holding a lock, one closure at a time. Several processes may open queues on the same file;
/// they coordinate through SQLite's WAL locks with a short-sleep busy handler.
///
/// ```swift
/// let queue = try DatabaseQueue(path: url.path)
/// try queue.write { db in try db.execute("INSERT INTO t(v) VALUES (?)", [42]) }
/// let count = try queue.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) }
/// ```
public final class DatabaseQueue: @unchecked Sendable {
    // @unchecked Sendable: `database` is only touched while `lock` is held.
    private let lock = NSLock()
    private let database: Database
    /// Checkpoints the file's log beside its commits (nil in memory).
    let checkpointer: Checkpointer?
    /// The database file path.
    public let path: String

    /// Opens (creating if needed) the database at `path` in WAL mode with foreign keys on. The
    /// log is checkpointed on a thread of its own, never in a commit (see `Checkpointer`).
    ///
    /// A new file is created with mode 0600, and a missing parent directory with 0700;
    /// SQLite gives its `-wal` and `-shm` files the database file's mode.
    public init(path: String, busyTimeout: Duration = .seconds(10)) throws {
        if path != ":memory:" { try Self.prepareFile(at: path) }
        let database = try Database(path: path, busyTimeout: busyTimeout)
        var checkpointer: Checkpointer?
        if path != ":memory:" {
            try Self.enableWAL(database, timeout: busyTimeout)
            try database.execute("PRAGMA synchronous=NORMAL")
            let background = Checkpointer(path: path, busyTimeout: busyTimeout)
            database.checkpoint(through: background)
            checkpointer = background
        }
        try database.execute("PRAGMA foreign_keys=ON")
        self.path = path
        self.database = database
        self.checkpointer = checkpointer
    }

    deinit {
        checkpointer?.close()
    }

    /// An in-memory database, for tests and scratch work.
    public static func inMemory() throws -> DatabaseQueue { try DatabaseQueue(path: ":memory:") }

    /// Runs `body` in an immediate transaction: committed when it returns, rolled back when it
    /// throws, so a failure never leaves half its changes behind.
    @discardableResult
    public func write<T: Sendable>(_ body: (Database) throws -> T) throws -> T {
        try locked { try database.inTransaction(.immediate) { try body(database) } }
    }

    /// Runs `body` in a deferred transaction, seeing one consistent snapshot.
    public func read<T: Sendable>(_ body: (Database) throws -> T) throws -> T {
        try locked { try database.inTransaction(.deferred) { try body(database) } }
    }

    /// Runs `body` with the connection outside any transaction (pragmas, `VACUUM`, checks).
    public func withConnection<T: Sendable>(_ body: (Database) throws -> T) throws -> T {
        try locked { try body(database) }
    }

    /// Runs `PRAGMA integrity_check` and returns its lines (`["ok"]` for a healthy file).
    public func integrityCheck() throws -> [String] {
        try withConnection { db in try db.rows("PRAGMA integrity_check").map { try $0.get(0, as: String.self) } }
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    /// Switches to WAL once per file. The switch needs a moment alone with the file and SQLite
    /// does not run the busy handler for it, so a contended first open retries here.
    private static func enableWAL(_ database: Database, timeout: Duration) throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            do {
                if try database.scalar("PRAGMA journal_mode", as: String.self)?.lowercased() == "wal" { return }
                let mode = try database.scalar("PRAGMA journal_mode=WAL", as: String.self)
                guard mode?.lowercased() == "wal" else {
                    throw StoreError(.sqlite, message: "could not switch \(database.path) to WAL (got \(mode ?? "nothing"))")
                }
                return
            } catch let error as StoreError where error.code == .busy && ContinuousClock.now < deadline {
                usleep(500)
            }
        }
    }

    private static func prepareFile(at path: String) throws {
        let url = URL(fileURLWithPath: path)
        let directory = url.deletingLastPathComponent().path
        if !FileManager.default.fileExists(atPath: directory) {
            do {
                try FileManager.default.createDirectory(
                    atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw StoreError(.fileAccess, message: "cannot create directory \(directory): \(error.localizedDescription)")
            }
        }
        let descriptor = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw StoreError(.fileAccess, message: "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        close(descriptor)
    }
}
