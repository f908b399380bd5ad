import Foundation
import SparkDomain
package import SparkStore

/// The domain's state in one SQLite file (WAL mode): the embedded domain, and `spark-domaind`
/// on one machine. It holds the schema and its migrations (``DomainSchema``) and runs the
/// engine's transactions; it holds no rule.
package final class SQLiteDomainStore: DomainStore {
    /// The database file.
    package let path: String
    let queue: DatabaseQueue
    /// Threads of its own: an app's call into the embedded domain never blocks a thread of
    /// Swift's cooperative pool, also while another process holds the file and the transaction
    /// waits in SQLite's busy handler. Four, so that writes brought while one commits wait there
    /// and commit together (``blockingWrite(_:_:)``). `spark-domaind`'s request threads may block
    /// (`TransactionThreads.allowBlocking()`): its transactions run right there, and group the
    /// same way.
    package let threads: TransactionThreads

    /// Opens (creating if need be) the file at `path` and brings its schema up to date.
    package init(path: String) throws {
        self.path = path
        let queue = try DomainEngine.blockingStorage { try DatabaseQueue(path: path, durability: .powerCut) }
        self.queue = queue
        threads = TransactionThreads(count: Self.threadCount, name: "spark domain store")
        try DomainEngine.blockingStorage { try DomainSchema.migrator.migrate(queue) }
        readQueue = try DomainEngine.blockingStorage {
            let reader = try DatabaseQueue(path: path)
            try reader.withConnection { db in try db.execute("PRAGMA query_only = ON") }
            return reader
        }
    }

    /// A connection of its own for reads: in WAL a reader never waits for a writer, this
    /// process's (a group committing, a transaction waiting for another process in the busy
    /// handler) or another's, so the engine's few synchronous reads (the policy, when its copy
    /// is stale) never hold a caller's thread for longer than the read.
    let readQueue: DatabaseQueue

    /// See ``threads``.
    static let threadCount = 4

    /// One: SQLite has one writer (the engine's own group commit of posts runs one transaction
    /// at a time, and queues the rest for the next).
    package var writeLanes: Int { 1 }

    /// An immediate transaction, synced to the disk before it returns (`synchronous=FULL`: what
    /// the domain answered as stored survives a power cut), committed with the writes other
    /// threads bring meanwhile (group commit: one sync for all of them, each in a savepoint of
    /// its own). SQLite runs one writer at a time, so every scope is met.
    @discardableResult
    package func blockingWrite<T: Sendable>(_ scope: WriteScope, _ body: (any DomainStatements) throws -> T) throws -> T {
        try queue.groupWrite { db in try body(db) }
    }

    /// A deferred transaction, on the connection for reads (``readQueue``).
    package func blockingRead<T: Sendable>(_ body: (any DomainStatements) throws -> T) throws -> T {
        try readQueue.read { db in try body(db) }
    }
}

/// SparkStore's connection runs the engine's statements as they are (SQLite reads `?`).
extension Database: DomainStatements {}
