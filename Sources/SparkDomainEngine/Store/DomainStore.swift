import SparkDomain
package import SparkStore

/// Where a domain keeps its state, and nothing else: transactions that run statements. Every
/// rule (who may do what, which fields are valid, what a policy allows) is in ``DomainEngine``,
/// which runs the same engine over any store: ``SQLiteDomainStore`` (the embedded file, and
/// `spark-domaind` on one machine) and `SparkDomainServer`'s `PostgreSQLDomainStore` (any
/// number of `spark-domaind` instances on one database).
///
/// The engine's statements are written once in the SQL that SQLite and PostgreSQL share: `?`
/// placeholders (a store numbers them as its engine wants), `INSERT … ON CONFLICT … DO UPDATE`
/// or `DO NOTHING`, `RETURNING`, and no engine-specific functions, types or row ids. Values
/// are integers, reals, text, blobs or null (``DatabaseValue``); booleans are integers.
///
/// The engine, which is async, runs each transaction on the store's own threads (``threads``)
/// with `read` and `write`; `blockingRead` and `blockingWrite` run it on the calling thread, for
/// what is not async (the operator's calls on an embedded domain, opening a domain, tests).
package protocol DomainStore: Sendable {
    /// The threads the store's transactions run on when the caller is async.
    var threads: TransactionThreads { get }
    /// How many write transactions may run at once (`GroupCommit`'s lanes): a store's
    /// connections (the default: its threads), one for SQLite, which has one writer.
    var writeLanes: Int { get }
    /// Runs `body` in a write transaction: all of it commits when it returns, none of it when it
    /// throws. `scope` says how the transaction is kept apart from concurrent ones (SQLite
    /// serializes every write with `BEGIN IMMEDIATE` and needs no more); a store may run `body`
    /// more than once, after a serialization failure, so `body` does nothing but statements.
    @discardableResult
    func blockingWrite<T: Sendable>(_ scope: WriteScope, _ body: (any DomainStatements) throws -> T) throws -> T
    /// Runs `body` in a read transaction that sees one consistent snapshot.
    func blockingRead<T: Sendable>(_ body: (any DomainStatements) throws -> T) throws -> T
    /// Runs `body`, which only reads, with each of its statements on its own: for reads that
    /// need no snapshot shared between statements, since a store may then spare the transaction
    /// around them (PostgreSQL: no `BEGIN` and `COMMIT`, so a one-statement read is one round
    /// trip instead of three).
    func blockingReadEach<T: Sendable>(_ body: (any DomainStatements) throws -> T) throws -> T
    /// Starts delivering what other processes announce (``DomainStatements/announce(_:)``) to
    /// `wake`, once; later calls do nothing. A store whose writers all live in this process
    /// delivers nothing.
    func listen(_ wake: @escaping @Sendable (Announcement) -> Void)
    /// How long an engine may keep using the policy and trusted issuers it read without reading
    /// them again, when it hears of no change: the bound on how late it sees a change that a
    /// writer it does not hear from made (``Announcement/settings``).
    var settingsLifetime: Duration { get }
    /// Whether every process that writes the store announces its mailbox entries to this one
    /// (``listen(_:)``), or announces that it may have missed some (``Announcement/everyone``):
    /// then a read that found a mailbox's end stands until an announcement for its user.
    var hearsEveryWriter: Bool { get }
}

/// How a write transaction is kept apart from the others running at the same time.
package enum WriteScope: Sendable, Hashable {
    /// As if no other transaction ran at once: reads and writes of any rows, checked and
    /// retried by the store (PostgreSQL: `SERIALIZABLE`).
    case serializable
    /// The transaction first takes these locks (in sorted order, so two transactions never wait
    /// on each other) and then sees each committed row as it is when read (PostgreSQL:
    /// `READ COMMITTED` after transaction-scoped advisory locks). For the hot paths whose every
    /// read-then-write is either under one of the locks or a single atomic statement, such as
    /// `UPDATE … SET n = n + 1 RETURNING n`.
    case locking([String])
}

/// What another process told this one about the mailboxes.
package enum Announcement: Sendable, Equatable {
    /// Entries reached these users' mailboxes.
    case users([String])
    /// These entries reached their users' mailboxes (committed): a long-poll waiting on one of
    /// them may be handed them (``MailboxWaiters/deliver(_:usable:)``, its endpoint checked by a
    /// read after the commit).
    case entries(AppendedEntries)
    /// Anything may have changed (the store lost touch and may have missed announcements).
    case everyone
    /// The policy or the trusted issuers changed.
    case settings
}

extension DomainStore {
    package var writeLanes: Int { threads.count }

    /// A serializable write transaction on the calling thread.
    @discardableResult
    package func blockingWrite<T: Sendable>(_ body: (any DomainStatements) throws -> T) throws -> T {
        try blockingWrite(.serializable, body)
    }

    /// A write transaction run on the store's threads (see ``blockingWrite(_:_:)``).
    @discardableResult
    package func write<T: Sendable>(
        _ scope: WriteScope, _ body: @escaping @Sendable (any DomainStatements) throws -> T
    ) async throws -> T {
        try await threads.run { try self.blockingWrite(scope, body) }
    }

    /// A serializable write transaction run on the store's threads.
    @discardableResult
    package func write<T: Sendable>(_ body: @escaping @Sendable (any DomainStatements) throws -> T) async throws -> T {
        try await threads.run { try self.blockingWrite(.serializable, body) }
    }

    /// A read transaction run on the store's threads.
    package func read<T: Sendable>(_ body: @escaping @Sendable (any DomainStatements) throws -> T) async throws -> T {
        try await threads.run { try self.blockingRead(body) }
    }

    /// Reads, each statement on its own (``blockingReadEach(_:)``), run on the store's threads.
    package func readEach<T: Sendable>(_ body: @escaping @Sendable (any DomainStatements) throws -> T) async throws -> T {
        try await threads.run { try self.blockingReadEach(body) }
    }

    /// A read transaction: a store where one costs no more runs every read in one.
    package func blockingReadEach<T: Sendable>(_ body: (any DomainStatements) throws -> T) throws -> T {
        try blockingRead(body)
    }

    /// Nothing to deliver: every writer is in this process.
    package func listen(_ wake: @escaping @Sendable (Announcement) -> Void) {}

    /// A second: a store that announces nothing may still be written by a process this one
    /// does not hear from (`spark-admin` on the file of a served domain).
    package var settingsLifetime: Duration { .seconds(1) }

    /// No: other processes may write the store unheard (`spark-admin` on a served file).
    package var hearsEveryWriter: Bool { false }
}

/// The statements of one transaction.
package protocol DomainStatements {
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
    /// Tells other processes on the same store, when (and only if) this transaction commits,
    /// that entries reached these users' mailboxes. A store without other writers ignores it.
    func announce(_ users: [String]) throws
    /// Tells other processes on the same store, when (and only if) this transaction commits,
    /// that these entries reached their users' mailboxes (what the transaction wrote since the
    /// savepoints around it; entries a savepoint rolled back are not told). A store that cannot
    /// carry the entries tells their users, as ``announce(_:)-([String])`` does.
    func announce(_ appended: AppendedEntries) throws
    /// Tells other processes on the same store, when (and only if) this transaction commits,
    /// that the policy or the trusted issuers changed. A store without other writers ignores it.
    func announceSettingsChange() throws
}

extension DomainStatements {
    /// No one else to tell.
    package func announce(_ users: [String]) throws {}
    /// Tells the entries' users (``announce(_:)-([String])``).
    package func announce(_ appended: AppendedEntries) throws { try announce(appended.users) }
    /// No one else to tell.
    package func announceSettingsChange() throws {}
    /// Runs a statement without arguments.
    @discardableResult
    package func execute(_ sql: String) throws -> Int { try execute(sql, []) }
    /// The first row of a query without arguments.
    package func row(_ sql: String) throws -> Row? { try row(sql, []) }
    /// Every row of a query without arguments.
    package func rows(_ sql: String) throws -> [Row] { try rows(sql, []) }
    /// The first column of the first row of a query without arguments.
    package func scalar<T: DatabaseValueConvertible>(_ sql: String, as type: T.Type) throws -> T? {
        try scalar(sql, [], as: type)
    }
}
