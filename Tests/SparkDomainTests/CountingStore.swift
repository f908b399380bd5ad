import SparkLock
import SparkStore

@testable import SparkDomainEngine

/// A domain store that counts the statements that read a mailbox, and passes everything else on
/// (the announcements it hears included): for the tests of what a long-poll reads.
final class CountingStore: DomainStore {
    let inner: any DomainStore
    let mailboxReads = Locked(0)

    init(_ inner: any DomainStore) { self.inner = inner }

    final class Statements: DomainStatements {
        let inner: any DomainStatements
        let store: CountingStore
        init(_ inner: any DomainStatements, _ store: CountingStore) {
            self.inner = inner
            self.store = store
        }
        func execute(_ sql: String, _ arguments: [any DatabaseValueConvertible]) throws -> Int {
            try inner.execute(sql, arguments)
        }
        func rows(_ sql: String, _ arguments: [any DatabaseValueConvertible]) throws -> [Row] {
            if sql.contains("FROM mailbox ") || sql.contains("FROM mailbox\n") { store.mailboxReads.withLock { $0 += 1 } }
            return try inner.rows(sql, arguments)
        }
        func row(_ sql: String, _ arguments: [any DatabaseValueConvertible]) throws -> Row? { try inner.row(sql, arguments) }
        func scalar<T: DatabaseValueConvertible>(
            _ sql: String, _ arguments: [any DatabaseValueConvertible], as type: T.Type
        ) throws -> T? { try inner.scalar(sql, arguments, as: type) }
        func announce(_ users: [String]) throws { try inner.announce(users) }
        func announce(_ appended: AppendedEntries) throws { try inner.announce(appended) }
        func announceSettingsChange() throws { try inner.announceSettingsChange() }
    }

    var threads: TransactionThreads { inner.threads }
    func blockingWrite<T: Sendable>(_ scope: WriteScope, _ body: (any DomainStatements) throws -> T) throws -> T {
        try inner.blockingWrite(scope) { db in try body(Statements(db, self)) }
    }
    func blockingRead<T: Sendable>(_ body: (any DomainStatements) throws -> T) throws -> T {
        try inner.blockingRead { db in try body(Statements(db, self)) }
    }
    func blockingReadEach<T: Sendable>(_ body: (any DomainStatements) throws -> T) throws -> T {
        try inner.blockingReadEach { db in try body(Statements(db, self)) }
    }
    func listen(_ wake: @escaping @Sendable (Announcement) -> Void) { inner.listen(wake) }
    var settingsLifetime: Duration { inner.settingsLifetime }
    var hearsEveryWriter: Bool { inner.hearsEveryWriter }
}
