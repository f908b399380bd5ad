import CPostgreSQL
import Foundation
import SparkDomain
package import SparkDomainEngine
import SparkLock
import SparkStore

/// The domain's state in PostgreSQL, for any number of `spark-domaind` instances on one
/// database: a pool of libpq connections, statements prepared once per connection, and the
/// schema's migrations (``PostgreSQLSchema``) applied under an advisory lock so that instances
/// starting together apply each once.
///
/// Transactions (see `docs/SERVER.md`, "PostgreSQL"):
/// - ``WriteScope/serializable`` runs `SERIALIZABLE` and is run again, up to
///   ``maximumAttempts`` times, after a serialization failure or a deadlock.
/// - ``WriteScope/locking(_:)`` runs `READ COMMITTED` after `pg_advisory_xact_lock` on each
///   key's 64-bit hash, in sorted order.
/// - Reads run `REPEATABLE READ, READ ONLY`: one snapshot.
///
/// When the database cannot be reached the store throws ``DomainError/Code/unavailable`` with a
/// retry-after of one second, and a later call connects again (to whichever host of a
/// multi-host connection string accepts writes).
package final class PostgreSQLDomainStore: DomainStore {
    /// The connection string without its secrets, for logs and messages.
    package let redactedConnection: String
    /// The most times a transaction runs before its serialization failure is the caller's.
    package let maximumAttempts = 30
    private let conninfo: String
    private let idle = Locked<[PostgreSQLConnection]>([])
    private let slots: DispatchSemaphore
    /// A thread for each connection of the pool.
    package let threads: TransactionThreads
    private let listener = Locked<MailboxListener?>(nil)

    /// The channel every instance listens on; a payload is user ids, one per line.
    static let channel = "spark_mailbox"
    /// The channel of the entries a transaction wrote (``EntryNotifications``).
    static let entriesChannel = "spark_mailbox_entries"
    /// The channel that says the policy or the trusted issuers changed; its payload is empty.
    static let settingsChannel = "spark_settings"
    /// The longest payload PostgreSQL takes is 8000 bytes; longer lists go out in parts.
    static let payloadLimit = 7900

    /// Connects to `conninfo` (a libpq connection string or `postgresql://` URI) and brings the
    /// schema up to date; `connections` is the pool's size.
    ///
    /// - Parameter settingsLifetime: see ``settingsLifetime``; five seconds unless a test needs
    ///   the announcement alone to end it.
    package init(conninfo: String, connections: Int = 8, settingsLifetime: Duration = .seconds(5)) throws {
        self.conninfo = conninfo
        self.settingsLifetime = settingsLifetime
        self.redactedConnection = Self.redact(conninfo)
        self.slots = DispatchSemaphore(value: max(1, connections))
        self.threads = TransactionThreads(count: max(1, connections), name: "spark postgresql")
        do {
            try withConnection { connection in try PostgreSQLSchema.migrate(connection) }
        } catch let error as PostgreSQLError {
            throw Self.domainError(error)
        }
    }

    deinit {
        listener.withLock { $0?.stop() }
    }

    // MARK: Transactions

    /// A write transaction in the isolation `scope` asks for (see the type's summary).
    @discardableResult
    package func blockingWrite<T: Sendable>(_ scope: WriteScope, _ body: (any DomainStatements) throws -> T) throws -> T {
        let begin: String
        var locks: [String] = []
        switch scope {
        case .serializable:
            begin = "BEGIN ISOLATION LEVEL SERIALIZABLE"
        case .locking(let keys):
            begin = "BEGIN ISOLATION LEVEL READ COMMITTED"
            locks = Array(Set(keys)).sorted()
        }
        return try transaction(begin: begin, locks: locks, body)
    }

    /// A read-only transaction on one snapshot.
    package func blockingRead<T: Sendable>(_ body: (any DomainStatements) throws -> T) throws -> T {
        try transaction(begin: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", locks: [], body)
    }

    /// Yes: every writer of the database is a store like this one, whose commits `NOTIFY` the
    /// others, and a listener that lost its connection announces it may have missed some.
    package var hearsEveryWriter: Bool { true }

    /// Reads with no transaction around them: each statement is one round trip and sees what
    /// was committed when it ran. A connection lost on the way is given up and the reads run
    /// again on another (nothing was written).
    package func blockingReadEach<T: Sendable>(_ body: (any DomainStatements) throws -> T) throws -> T {
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try withConnection { connection in try body(Statements(connection: connection)) }
            } catch let error as PostgreSQLError where error.isConnectionLoss && attempt < 2 {
                continue
            } catch let error as PostgreSQLError {
                throw Self.domainError(error)
            }
        }
    }

    private func transaction<T>(begin: String, locks: [String], _ body: (any DomainStatements) throws -> T) throws -> T {
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try withConnection { connection in
                    do {
                        try connection.simple(begin)
                    } catch let error as PostgreSQLError where error.isConnectionLoss {
                        throw Stale(error: error)
                    }
                    do {
                        let statements = Statements(connection: connection)
                        for key in locks {
                            _ = try connection.run("SELECT pg_advisory_xact_lock($1)", [.integer(Self.lockID(key))])
                        }
                        let value = try body(statements)
                        try statements.flushAnnouncements()
                        try connection.simple("COMMIT")
                        return value
                    } catch {
                        if connection.isHealthy { try? connection.simple("ROLLBACK") }
                        throw error
                    }
                }
            } catch let stale as Stale {
                // A pooled connection that died while idle (a restart, a failover): again on a
                // fresh one, since nothing was sent. A fresh one failing is the answer.
                if attempt >= 2 { throw Self.domainError(stale.error) }
            } catch let error as PostgreSQLError where error.isRetryable && attempt < maximumAttempts {
                // Another transaction won: back off a little, at random, and run again.
                usleep(UInt32.random(in: 0...UInt32(min(attempt, 10) * 500)))
            } catch let error as PostgreSQLError {
                // Lost in the middle, or at COMMIT: whether it committed is unknown, so it is
                // not run again here; the client's retry is idempotent.
                throw Self.domainError(error)
            }
        }
    }

    /// A connection that failed before anything was sent on it.
    private struct Stale: Error {
        var error: PostgreSQLError
    }

    /// A connection from the pool (a new one when none is idle), given back healthy or dropped.
    private func withConnection<T>(_ body: (PostgreSQLConnection) throws -> T) throws -> T {
        slots.wait()
        defer { slots.signal() }
        let connection: PostgreSQLConnection
        if let pooled = idle.withLock({ $0.popLast() }) {
            connection = pooled
        } else {
            do {
                connection = try PostgreSQLConnection(conninfo: conninfo)
            } catch let error as PostgreSQLError {
                throw Self.domainError(error)
            }
        }
        do {
            let value = try body(connection)
            idle.withLock { $0.append(connection) }
            return value
        } catch {
            // A connection left in a transaction, broken, or on a server that will not take
            // writes (a standby, one shutting down) is not reused.
            let lost = (error as? PostgreSQLError)?.isConnectionLoss ?? (error is Stale)
            if connection.isHealthy, !connection.isInTransaction, !lost { idle.withLock { $0.append(connection) } }
            throw error
        }
    }

    /// What the engine sees of a failure: unreachable is ``DomainError/Code/unavailable``
    /// (retry in a second), bad data is the request's fault, anything else a storage failure.
    static func domainError(_ error: PostgreSQLError) -> DomainError {
        if error.isConnectionLoss {
            return DomainError(.unavailable, "the domain's database is unreachable: \(error.message)", retryAfter: 1)
        }
        if error.isRetryable {
            return DomainError(.unavailable, "the domain is busy; try again", retryAfter: 1)
        }
        if error.isDataException {
            return DomainError(.invalidRequest, "a value cannot be stored: \(error.message)")
        }
        return DomainError(.storageFailure, "domain storage failed: \(error)")
    }

    /// A lock key's 64-bit id (its FNV-1a hash: a collision only makes two chats share a lock).
    package static func lockID(_ key: String) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return Int64(bitPattern: hash)
    }

    // MARK: Announcements

    /// Starts the listener: one connection of its own that `LISTEN`s, wakes the users each
    /// notification names, and after losing the database (and on reconnecting) wakes everyone.
    package func listen(_ wake: @escaping @Sendable (Announcement) -> Void) {
        listener.withLock { listener in
            guard listener == nil else { return }
            listener = MailboxListener(
                conninfo: conninfo, channel: Self.channel, entriesChannel: Self.entriesChannel,
                settingsChannel: Self.settingsChannel, wake: wake)
        }
    }

    /// Every instance hears of a change at once (``settingsChannel``); this bounds what a
    /// listener that lost its connection and has not noticed yet can miss.
    package let settingsLifetime: Duration

    /// Stops the listener, if one runs.
    package func stopListening() {
        listener.withLock { listener in
            listener?.stop()
            listener = nil
        }
    }

    /// The statements of one transaction on one connection.
    final class Statements: DomainStatements {
        let connection: PostgreSQLConnection
        private var announced: [String] = []
        /// The entries announced, in order, and where each open savepoint began in them (a
        /// savepoint rolled back takes its entries out: they were never written).
        private var appended: [(user: String, entry: MailboxEntry)] = []
        private var savepoints: [Int] = []
        private var settingsChanged = false
        private var numbered: [String: String] = [:]

        init(connection: PostgreSQLConnection) { self.connection = connection }

        private func run(_ sql: String, _ arguments: [any DatabaseValueConvertible]) throws -> PostgreSQLConnection.Outcome {
            let text: String
            if let known = numbered[sql] {
                text = known
            } else {
                text = PostgreSQLConnection.numbered(sql)
                numbered[sql] = text
            }
            return try connection.run(text, arguments.map(\.databaseValue))
        }

        func execute(_ sql: String, _ arguments: [any DatabaseValueConvertible]) throws -> Int {
            let changed = try run(sql, arguments).changed
            if sql.hasPrefix("SAVEPOINT ") {
                savepoints.append(appended.count)
            } else if sql.hasPrefix("ROLLBACK TO SAVEPOINT "), let start = savepoints.last {
                appended.removeSubrange(start...)
            } else if sql.hasPrefix("RELEASE SAVEPOINT ") {
                _ = savepoints.popLast()
            }
            return changed
        }

        func rows(_ sql: String, _ arguments: [any DatabaseValueConvertible]) throws -> [Row] {
            try run(sql, arguments).rows
        }

        func row(_ sql: String, _ arguments: [any DatabaseValueConvertible]) throws -> Row? {
            try run(sql, arguments).rows.first
        }

        func scalar<T: DatabaseValueConvertible>(_ sql: String, _ arguments: [any DatabaseValueConvertible], as type: T.Type)
            throws -> T?
        {
            guard let value = try run(sql, arguments).rows.first?.values.first, value != .null else { return nil }
            guard let converted = T.fromDatabaseValue(value) else {
                throw PostgreSQLError(state: "", message: "a \(value) is not a \(T.self)", sql: sql)
            }
            return converted
        }

        func announce(_ users: [String]) throws {
            announced.append(contentsOf: users)
        }

        func announce(_ entries: AppendedEntries) throws {
            for (user, list) in entries.byUser {
                for entry in list { appended.append((user, entry)) }
            }
        }

        func announceSettingsChange() throws {
            settingsChanged = true
        }

        /// `pg_notify` inside the transaction: PostgreSQL delivers it when, and only if, it commits.
        func flushAnnouncements() throws {
            if settingsChanged {
                _ = try connection.run("SELECT pg_notify($1, '')", [.text(PostgreSQLDomainStore.settingsChannel)])
                settingsChanged = false
            }
            if !appended.isEmpty {
                let (payloads, uncarried) = EntryNotifications.payloads(appended, limit: PostgreSQLDomainStore.payloadLimit)
                for payload in payloads {
                    _ = try connection.run(
                        "SELECT pg_notify($1, $2)", [.text(PostgreSQLDomainStore.entriesChannel), .text(payload)])
                }
                announced += uncarried
                appended = []
            }
            guard !announced.isEmpty else { return }
            var part = ""
            for user in Set(announced).sorted() {
                if !part.isEmpty, part.utf8.count + user.utf8.count + 1 > PostgreSQLDomainStore.payloadLimit {
                    _ = try connection.run("SELECT pg_notify($1, $2)", [.text(PostgreSQLDomainStore.channel), .text(part)])
                    part = ""
                }
                part += part.isEmpty ? user : "\n" + user
            }
            _ = try connection.run("SELECT pg_notify($1, $2)", [.text(PostgreSQLDomainStore.channel), .text(part)])
            announced = []
        }
    }

    // MARK: Connection strings

    /// `conninfo` without its password (a `password=` keyword or a URI's `user:password@`), so it
    /// may be logged.
    package static func redact(_ conninfo: String) -> String {
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(conninfo, &error) else {
            if let error { PQfreemem(error) }
            return "(an unreadable connection string)"
        }
        defer { PQconninfoFree(options) }
        var parts: [String] = []
        var index = 0
        while let keyword = options[index].keyword {
            defer { index += 1 }
            guard let value = options[index].val else { continue }
            let name = String(cString: keyword)
            let shown = ["password", "sslpassword"].contains(name) ? "***" : String(cString: value)
            parts.append("\(name)=\(shown)")
        }
        return parts.joined(separator: " ")
    }

    /// Whether libpq can read `conninfo`; the reason when it cannot.
    package static func check(_ conninfo: String) throws {
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(conninfo, &error) else {
            let reason = error.map { String(cString: $0).trimmingCharacters(in: .whitespacesAndNewlines) } ?? "unreadable"
            if let error { PQfreemem(error) }
            throw DomainError(.invalidRequest, "the database connection string is not valid: \(reason)")
        }
        PQconninfoFree(options)
    }
}
