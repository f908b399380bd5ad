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
        queue = try DomainEngine.blockingStorage { try DatabaseQueue(path: path, durability: .powerCut) }
        threads = TransactionThreads(count: Self.threadCount, name: "spark domain store")
        try DomainEngine.blockingStorage { try DomainSchema.migrator.migrate(queue) }
    }

    /// See ``threads``.
    static let threadCount = 4

    /// An immediate transaction, synced to the disk before it returns (`synchronous=FULL`: what
    /// the domain answered as stored survives a power cut), committed with the writes other
    /// threads bring meanwhile (group commit: one sync for all of them, each in a savepoint of
    /// its own). SQLite runs one writer at a time, so every scope is met.
    @discardableResult
    package func blockingWrite<T: Sendable>(_ scope: WriteScope, _ body: (any DomainStatements) throws -> T) throws -> T {
        try queue.groupWrite { db in try body(db) }
    }

    /// A deferred transaction.
    package func blockingRead<T: Sendable>(_ body: (any DomainStatements) throws -> T) throws -> T {
        try queue.read { db in try body(db) }
    }
}

/// SparkStore's connection runs the engine's statements as they are (SQLite reads `?`).
extension Database: DomainStatements {}
