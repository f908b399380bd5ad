public import SparkStore

/// Where a domain keeps its state, and nothing else: transactions that run statements. Every
/// rule (who may do what, which fields are valid, what a policy allows) is in ``DomainEngine``,
/// which runs the same engine over any store: ``SQLiteDomainStore`` (the embedded file, and
/// `spark-domaind` on one machine) today, a PostgreSQL store next.
///
/// The engine's statements are written once in the SQL that SQLite and PostgreSQL share: `?`
/// placeholders (a store numbers them as its engine wants), `INSERT … ON CONFLICT … DO UPDATE`
/// or `DO NOTHING`, `RETURNING`, and no engine-specific functions, types or row ids. Values
/// are integers, reals, text, blobs or null (``DatabaseValue``); booleans are integers.
public protocol DomainStore: Sendable {
    /// Runs `body` in a write transaction: all of it commits when it returns, none of it when it
    /// throws. Writes are serialized (SQLite: `BEGIN IMMEDIATE`; PostgreSQL: the isolation each
    /// transaction needs, with serialization failures retried inside the store).
    @discardableResult
    func write<T: Sendable>(_ body: (any DomainStatements) throws -> T) throws -> T
    /// Runs `body` in a read transaction that sees one consistent snapshot.
    func read<T: Sendable>(_ body: (any DomainStatements) throws -> T) throws -> T
}

/// The statements of one transaction.
public protocol DomainStatements {
    /// Runs a statement; returns the rows it changed.
    @discardableResult
    func execute(_ sql: String, _ arguments: [any DatabaseValueConvertible]) throws -> Int
    /// Every row of a query.
    func rows(_ sql: String, _ arguments: [any DatabaseValueConvertible]) throws -> [Row]
    /// The first row of a query, if any.
    func row(_ sql: String, _ arguments: [any DatabaseValueConvertible]) throws -> Row?
    /// The first column of the first row, if any (and not null).
    func scalar<T: DatabaseValueConvertible>(_ sql: String, _ arguments: [any DatabaseValueConvertible], as type: T.Type)
        throws -> T?
}

extension DomainStatements {
    /// Runs a statement without arguments.
    @discardableResult
    public func execute(_ sql: String) throws -> Int { try execute(sql, []) }
    /// The first row of a query without arguments.
    public func row(_ sql: String) throws -> Row? { try row(sql, []) }
    /// Every row of a query without arguments.
    public func rows(_ sql: String) throws -> [Row] { try rows(sql, []) }
    /// The first column of the first row of a query without arguments.
    public func scalar<T: DatabaseValueConvertible>(_ sql: String, as type: T.Type) throws -> T? {
        try scalar(sql, [], as: type)
    }
}
