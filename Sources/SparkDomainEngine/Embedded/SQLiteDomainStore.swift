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
    /// None: a transaction runs on its caller's thread. The file has one connection, which
    /// serializes its transactions anyway, and a hand-over to a thread of its own and back made
    /// a transaction's time depend on the machine's load (the accounts assistant's known and
    /// unknown callers, which must take the same time, differed by four password hashes under
    /// the full suite).
    package let threads: TransactionThreads

    /// Opens (creating if need be) the file at `path` and brings its schema up to date.
    package init(path: String) throws {
        self.path = path
        queue = try DomainEngine.blockingStorage { try DatabaseQueue(path: path) }
        threads = TransactionThreads(count: 0, name: "spark domain store")
        try DomainEngine.blockingStorage { try DomainSchema.migrator.migrate(queue) }
    }

    /// An immediate transaction: SQLite runs one writer at a time, so every scope is met.
    @discardableResult
    package func blockingWrite<T: Sendable>(_ scope: WriteScope, _ body: (any DomainStatements) throws -> T) throws -> T {
        try queue.write { db in try body(db) }
    }

    /// A deferred transaction.
    package func blockingRead<T: Sendable>(_ body: (any DomainStatements) throws -> T) throws -> T {
        try queue.read { db in try body(db) }
    }
}

/// SparkStore's connection runs the engine's statements as they are (SQLite reads `?`).
extension Database: DomainStatements {}
