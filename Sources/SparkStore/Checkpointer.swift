internal import CSQLite
import Foundation

/// Checkpoints a file's write-ahead log on a thread of its own, so that no commit waits for one.
///
/// SQLite's automatic checkpoint runs inside the commit that crosses its threshold (1,000 pages):
/// that commit returns only once the log is copied into the database file and synced, a few
/// milliseconds here. Measured on the messaging bench, those commits were the slowest messages
/// (p99 8–10 ms against a median of 2). Here the commit only notes the log's size (SQLite's WAL
/// hook, which replaces the automatic checkpoint), and a passive checkpoint runs on this
/// object's serial queue through a connection of its own: it copies what no reader still needs,
/// never blocks a writer or a reader, and the log is reused from its start once it has all been
/// copied, as with the automatic one. Checkpoints asked for while one is queued are one.
final class Checkpointer: @unchecked Sendable {
    /// The log's size, in pages, from which a commit asks for a checkpoint (SQLite's default).
    static let threshold: Int32 = 1000

    private let path: String
    private let busyTimeout: Duration
    private let queue = DispatchQueue(label: "spark.store.checkpoint", qos: .utility)
    private let lock = NSLock()
    /// A checkpoint is queued and has not started.
    private var queued = false
    /// The connection checkpoints run through; opened at the first, touched only on `queue`.
    private var connection: Database?
    private var closed = false

    init(path: String, busyTimeout: Duration) {
        self.path = path
        self.busyTimeout = busyTimeout
    }

    /// Called by the committing connection with the log's size after its commit.
    func logGrew(to pages: Int32) {
        guard pages >= Self.threshold else { return }
        let start = lock.withLock {
            defer { queued = true }
            return !queued
        }
        guard start else { return }
        queue.async { self.checkpoint() }
    }

    private func checkpoint() {
        lock.withLock { queued = false }
        guard !closed else { return }
        do {
            // Never a new file: one removed under its queue stays removed.
            if connection == nil { connection = try Database(path: path, busyTimeout: busyTimeout, creating: false) }
            // Busy (another process checkpoints, or writes past its reader): the next commit
            // over the threshold asks again.
            try connection?.execute("PRAGMA wal_checkpoint(PASSIVE)")
        } catch {
            connection = nil
        }
    }

    /// Closes the checkpoint's connection once a checkpoint running now ends; none runs after.
    func close() {
        queue.sync {
            closed = true
            connection = nil
        }
    }
}

extension Database {
    /// Hands every commit's log size to `checkpointer` instead of checkpointing in the commit
    /// (see ``Checkpointer``). The checkpointer must outlive this connection.
    func checkpoint(through checkpointer: Checkpointer) {
        sqlite3_wal_hook(
            handle,
            { context, _, _, pages in
                if let context { Unmanaged<Checkpointer>.fromOpaque(context).takeUnretainedValue().logGrew(to: pages) }
                return SQLITE_OK
            }, Unmanaged.passUnretained(checkpointer).toOpaque())
    }
}
