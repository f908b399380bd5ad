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
    // @unchecked Sendable: `database` is only touched while `lock` is held; the group commit's
    // state only while `group` is.
    private let lock = NSLock()
    private let database: Database
    /// ``groupWrite(_:)``'s writes waiting for the next group, and whether a caller is running
    /// one (guarded by `group`).
    private let group = NSCondition()
    private var groupWaiting: [GroupedWrite] = []
    private var groupLeading = false
    /// Checkpoints the file's log beside its commits (nil in memory).
    let checkpointer: Checkpointer?
    /// The database file path.
    public let path: String

    /// What a commit survives when ``write(_:)`` returns.
    public enum Durability: Sendable {
        /// `PRAGMA synchronous=FULL`: the write-ahead log is synced to the disk at every commit,
        /// so a commit survives a power cut (about 0.15 ms a commit on this machine's disk).
        case powerCut
        /// `PRAGMA synchronous=NORMAL`: the log is synced only at checkpoints, so a commit
        /// survives the process's crash but the last ones may roll back after a power cut. For
        /// scratch files whose loss costs nothing.
        case processCrash
    }

    /// What this queue's commits survive.
    public let durability: Durability

    /// Opens (creating if needed) the database at `path` in WAL mode with foreign keys on. The
    /// log is checkpointed on a thread of its own, never in a commit (see `Checkpointer`).
    ///
    /// A new file is created with mode 0600, and a missing parent directory with 0700;
    /// SQLite gives its `-wal` and `-shm` files the database file's mode.
    public init(path: String, busyTimeout: Duration = .seconds(10), durability: Durability = .powerCut) throws {
        if path != ":memory:" { try Self.prepareFile(at: path) }
        let database = try Database(path: path, busyTimeout: busyTimeout)
        var checkpointer: Checkpointer?
        if path != ":memory:" {
            try Self.enableWAL(database, timeout: busyTimeout)
            try database.execute(durability == .powerCut ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL")
            let background = Checkpointer(path: path, busyTimeout: busyTimeout)
            database.checkpoint(through: background)
            checkpointer = background
        }
        try database.execute("PRAGMA foreign_keys=ON")
        self.durability = durability
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

    /// ``write(_:)`` without syncing the log at its commit, on a queue that syncs every other:
    /// for a transaction whose loss a power cut may cost because it is made again (a record of
    /// an answer that asking again gets again). The log is synced in order, so the next synced
    /// commit makes this one durable too; until then a power cut can take it back, alone or with
    /// the unsynced ones after it, never one synced before it.
    @discardableResult
    public func writeWithoutSync<T: Sendable>(_ body: (Database) throws -> T) throws -> T {
        guard durability == .powerCut else { return try write(body) }
        return try locked {
            try database.execute("PRAGMA synchronous=NORMAL")
            defer { _ = try? database.execute("PRAGMA synchronous=FULL") }
            return try database.inTransaction(.immediate) { try body(database) }
        }
    }

    /// Runs `body` in a write transaction that commits together with those other threads bring
    /// meanwhile (group commit): the first caller runs what is waiting, each body in a savepoint
    /// of its own, under one `BEGIN IMMEDIATE … COMMIT` and so one sync of the log; the others wait
    /// for that commit, and the next caller to find none running leads the next group. `body`'s
    /// changes are committed when this returns and none of them are when it throws (its own
    /// savepoint rolled back; the others' stand), as with ``write(_:)``; a group whose
    /// transaction fails as a whole is run again a write at a time. `body` may run on another
    /// caller's thread, and more than once: it runs statements on `db` and nothing else (no write
    /// to this queue).
    @discardableResult
    public func groupWrite<T>(_ body: (Database) throws -> T) throws -> T {
        try withoutActuallyEscaping(body) { body in
            var result: Result<T, any Error>?
            let job = GroupedWrite { db in
                result = Result { try body(db) }
                if case .failure = result { return false }
                return true
            }
            group.lock()
            groupWaiting.append(job)
            while !job.done {
                if groupLeading {
                    group.wait()
                    continue
                }
                groupLeading = true
                let batch = Array(groupWaiting.prefix(Self.groupLimit))
                groupWaiting.removeFirst(batch.count)
                group.unlock()
                // A group that failed as a whole (its commit, or a statement that ended its
                // transaction) is tried again a write at a time, so that one write's failure is
                // never another's: each body ran in a transaction that was rolled back.
                var failures = [commitGroup(batch)]
                if failures[0] != nil, batch.count > 1 { failures = batch.map { commitGroup([$0]) } }
                group.lock()
                for (index, member) in batch.enumerated() {
                    (member.failure, member.done) = (failures[failures.count == 1 ? 0 : index], true)
                }
                groupLeading = false
                group.broadcast()
            }
            group.unlock()
            if let failure = job.failure { throw failure }
            guard let result else { throw StoreError(.misuse, message: "a grouped write did not run") }
            return try result.get()
        }
    }

    /// The most writes one group commits (a bound on how long a group holds the file).
    static let groupLimit = 64

    /// One group's transaction: each write in its savepoint, then one commit. Returns the
    /// failure of the transaction as a whole (nothing of the group committed), or nil.
    private func commitGroup(_ batch: [GroupedWrite]) -> (any Error)? {
        do {
            try locked {
                try database.inTransaction(.immediate) {
                    for member in batch {
                        try database.execute("SAVEPOINT grouped_write", [])
                        if member.run(database) {
                            try database.execute("RELEASE grouped_write", [])
                        } else {
                            try database.execute("ROLLBACK TO grouped_write", [])
                            try database.execute("RELEASE grouped_write", [])
                        }
                    }
                }
            }
            return nil
        } catch {
            return error
        }
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
        // An existing file is left alone: closing any descriptor of a file drops every POSIX
        // lock this process holds on it, SQLite's too (another connection's shared lock on a
        // WAL database, which keeps other processes from deleting its log and index while it
        // reads them: a second queue on an open file, made this way, once let another process
        // remove them under the first, which then read a database that no longer changed).
        if FileManager.default.fileExists(atPath: path) { return }
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

/// One write of a group (``DatabaseQueue/groupWrite(_:)``): its body, run by the group's
/// leader, and the outcome its caller waits for. Touched by the leader while the caller waits,
/// and under the queue's `group` condition otherwise.
private final class GroupedWrite: @unchecked Sendable {
    /// Runs the body on the group's connection; false when it threw (its savepoint is rolled
    /// back).
    let run: (Database) -> Bool
    var done = false
    var failure: (any Error)?

    init(_ run: @escaping (Database) -> Bool) { self.run = run }
}
