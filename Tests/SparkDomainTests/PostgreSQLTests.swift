import Foundation
import SparkDomain
import SparkDomainEngine
import SparkDomainServer
import SparkStore
import SparkTestSupport
import Testing

/// The domain on PostgreSQL: its schema kept in step with SQLite's, its transactions correct
/// with several writers, and several `spark-domaind` instances serving one domain through
/// faults (an instance killed, the database restarted, a standby promoted).
@Suite("PostgreSQL domain")
struct PostgreSQLTests {
    // MARK: The store

    @Test func theSchemaHasTheSameTablesColumnsAndMigrationsAsSQLites() async throws {
        let conninfo = try await PostgresCluster.newDatabase()
        _ = try await Fixtures.blocking { try PostgreSQLDomainStore(conninfo: conninfo) }
        let cluster = try PostgresCluster.shared
        let database = try #require(conninfo.split(separator: " ").first { $0.hasPrefix("dbname=") }?.dropFirst(7))
        let postgres = try await Fixtures.blocking {
            try cluster.psql(
                """
                SELECT table_name || '.' || column_name FROM information_schema.columns
                WHERE table_schema = 'public' ORDER BY 1
                """, database: String(database))
        }
        let postgresMigrations = try await Fixtures.blocking {
            try cluster.psql("SELECT identifier FROM spark_migrations ORDER BY identifier", database: String(database))
        }
        try await Fixtures.withTemporaryDirectory { directory in
            let sqlite = try SQLiteDomainStore(path: directory.appendingPathComponent("d.sqlite").path)
            let columns = try await sqlite.read { db in
                try db.rows(
                    """
                    SELECT m.name || '.' || p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p
                    WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' ORDER BY 1
                    """
                ).map { try $0.get(0, as: String.self) }
            }
            let migrations = try await sqlite.read { db in
                try db.rows("SELECT identifier FROM spark_migrations ORDER BY identifier").map { try $0.get(0, as: String.self) }
            }
            #expect(columns.count > 40, "the comparison sees the tables")
            #expect(postgres.split(separator: "\n").map(String.init) == columns, "the same tables and columns in both")
            #expect(postgresMigrations.split(separator: "\n").map(String.init) == migrations, "the same migrations")
        }
    }

    /// A server (or database) whose default is `synchronous_commit = off` would answer a commit
    /// before its log is on the disk: the store's connections wait for it all the same.
    @Test func commitsWaitForTheLogEvenWhereTheServerWouldNot() async throws {
        let conninfo = try await PostgresCluster.newDatabase()
        let cluster = try PostgresCluster.shared
        let database = try #require(conninfo.split(separator: " ").first { $0.hasPrefix("dbname=") }?.dropFirst(7))
        _ = try await Fixtures.blocking {
            try cluster.psql("ALTER DATABASE \"\(database)\" SET synchronous_commit = off", database: String(database))
        }
        let store = try await Fixtures.blocking { try PostgreSQLDomainStore(conninfo: conninfo) }
        let mode = try await store.read { db in
            try db.scalar("SELECT current_setting('synchronous_commit')", as: String.self)
        }
        #expect(mode == "on")
        // The setting is the database's default: a plain session has it off.
        let plain = try await Fixtures.blocking {
            try cluster.psql("SELECT current_setting('synchronous_commit')", database: String(database))
        }
        #expect(plain.trimmingCharacters(in: .whitespacesAndNewlines) == "off")
    }

    @Test func aConnectionStringsPasswordNeverShows() throws {
        let redacted = PostgreSQLDomainStore.redact("host=db1,db2 port=5432 user=spark password=hunter2 dbname=spark")
        #expect(!redacted.contains("hunter2") && redacted.contains("password=***") && redacted.contains("host=db1,db2"))
        let uri = PostgreSQLDomainStore.redact("postgresql://spark:hunter2@db1:5432/spark?target_session_attrs=read-write")
        #expect(!uri.contains("hunter2") && uri.contains("target_session_attrs=read-write"))
        #expect(throws: DomainError.self) { try PostgreSQLDomainStore.check("host=db1 nonsense") }
    }

    @Test func initRecordsTheDatabaseAndNeverPrintsItsPassword() async throws {
        let conninfo = try await PostgresCluster.newDatabase()
        // A password the trust-authenticated test cluster ignores, to see where it goes.
        let withPassword = conninfo + " password=s3cret-pass"
        try await Fixtures.withTemporaryDirectory { directory in
            let home = directory.appendingPathComponent("domain")
            let made = try await Fixtures.run(
                Fixtures.executable("spark-domaind"), ["init", home.path, "--domain", "pg", "--database", withPassword])
            #expect(made.status == 0, "\(made.stderr)")
            #expect(made.stdout.contains("PostgreSQL") && !made.stdout.contains("s3cret-pass"), "\(made.stdout)")
            #expect(!FileManager.default.fileExists(atPath: home.appendingPathComponent("domain.sqlite").path))
            let recorded = try String(contentsOf: home.appendingPathComponent("database.conninfo"), encoding: .utf8)
            #expect(recorded.contains("s3cret-pass"), "the directory (mode 0600) keeps the whole string")
            let mode =
                try FileManager.default.attributesOfItem(atPath: home.appendingPathComponent("database.conninfo").path)[
                    .posixPermissions] as? Int
            #expect(mode == 0o600)
            // A second init on the same database is refused: it already holds a domain.
            let again = try await Fixtures.run(
                Fixtures.executable("spark-domaind"),
                ["init", directory.appendingPathComponent("other").path, "--database", withPassword])
            #expect(again.status != 0 && again.stderr.contains("already holds a domain"), "\(again.stderr)")
            let daemon = try await DomainDaemon.serving(home, domainID: "pg", arguments: [])
            let policy = try await daemon.client().policy()
            #expect(policy.userAuthenticationEnabled, "init without --sandbox made a domain that requires sign-in")
            #expect(await daemon.stop() == 0)
            #expect(daemon.log.contains(#""kind":"postgresql""#) && !daemon.log.contains("s3cret-pass"), "\(daemon.log)")
        }
    }

    @Test func textTheDatabaseCannotStoreIsTheRequestsFaultAndChangesNothing() async throws {
        let conninfo = try await PostgresCluster.newDatabase()
        let engine = try await Fixtures.blocking { () -> DomainEngine in
            let store = try PostgreSQLDomainStore(conninfo: conninfo)
            try DomainEngine.create(in: store, domainID: "pg", policy: DomainPolicy())
            return try DomainEngine(store: store, location: "pg", passcodeKeys: .generate())
        }
        // PostgreSQL text holds no NUL; the store refuses it rather than cut the text short.
        #expect(throws: DomainError(.invalidRequest, "")) { try engine.ban("mallory", reason: "spam\u{0}hidden") }
        #expect(try engine.moderationStatus(of: "mallory").state == .valid, "nothing was written")
        try engine.ban("mallory", reason: "spam")
        #expect(try engine.moderationStatus(of: "mallory").state == .banned(reason: "spam"))
    }

    /// Two engines (two instances' worth) on one database, writing the same rows at once.
    @Test func concurrentWritersKeepNumbersGaplessAndCompareAndSwapExact() async throws {
        let conninfo = try await PostgresCluster.newDatabase()
        let (first, second) = try await Fixtures.blocking { () -> (DomainEngine, DomainEngine) in
            let store = try PostgreSQLDomainStore(conninfo: conninfo)
            try DomainEngine.create(in: store, domainID: "pg", policy: DomainPolicy(maximumEndpoints: 3))
            let other = try PostgreSQLDomainStore(conninfo: conninfo)
            return (
                try DomainEngine(store: store, location: "first", passcodeKeys: .generate()),
                try DomainEngine(store: other, location: "second", passcodeKeys: .generate())
            )
        }
        let engines = [first, second]
        let alice = try await first.testToken(userID: "alice").token
        _ = try await first.registerEndpoint(token: alice, registration: .init(endpointID: "a1", description: "a"))
        let bobsToken = try await first.testToken(userID: "bob").token
        _ = try await first.registerEndpoint(token: bobsToken, registration: .init(endpointID: "b1", description: "b"))
        _ = try await first.createChat(token: alice, endpointID: "a1", chatID: "c", participants: ["bob"])

        // 150 posts, each sent twice at once (a retry racing the original), once through each
        // engine: enough pairs that, without the chat's lock, some pair interleaves every run.
        let posts = 150
        let receipts = try await withThrowingTaskGroup(of: (String, Int64?).self) { group in
            for index in 0..<(2 * posts) {
                let engine = engines[index % 2]
                let clientID = "m\(index / 2)"
                group.addTask {
                    let receipt = try await engine.post(
                        token: alice, endpointID: "a1", chatID: "c", kind: .message, payload: Data(clientID.utf8), recipient: nil,
                        clientID: clientID)
                    return (clientID, receipt.messageNumber)
                }
            }
            var all: [(String, Int64?)] = []
            for try await receipt in group { all.append(receipt) }
            return all
        }
        var byClient: [String: Set<Int64>] = [:]
        for (client, number) in receipts { byClient[client, default: []].insert(number ?? -1) }
        #expect(byClient.count == posts && byClient.values.allSatisfy { $0.count == 1 }, "a repeated post gets its first number")
        #expect(Set(byClient.values.flatMap { $0 }) == Set(1...Int64(posts)), "numbers 1…150, each once")
        let entries = try await second.readMailbox(token: alice, endpointID: "a1", after: 0, limit: 1000)
        let messages = entries.filter { $0.kind == .message }
        #expect(messages.count == posts && Set(messages.compactMap(\.messageNumber)) == Set(1...Int64(posts)))
        #expect(Set(entries.map(\.sequence)).count == entries.count, "mailbox sequences unique")

        // Compare-and-swap on a key blob: of eight writers of a new blob, one wins.
        let wins = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<8 {
                let engine = engines[index % 2]
                group.addTask {
                    do {
                        _ = try await engine.putKeyBlob(
                            token: alice, endpointID: "a1", name: "profile", data: Data([UInt8(index)]), expectedVersion: nil)
                        return true
                    } catch let error as DomainError where error.code == .conflict {
                        return false
                    }
                }
            }
            var count = 0
            for try await won in group where won { count += 1 }
            return count
        }
        #expect(wins == 1, "exactly one writer of version 1")

        // The endpoint limit (3) holds against eight registrations at once.
        let bob = try await first.testToken(userID: "bob").token
        let registered = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<8 {
                let engine = engines[index % 2]
                group.addTask {
                    let outcome = try await engine.registerEndpoint(
                        token: bob, registration: .init(endpointID: "b\(index)", description: "b"))
                    if case .registered = outcome { return true }
                    return false
                }
            }
            var count = 0
            for try await made in group where made { count += 1 }
            return count
        }
        let listed = try first.endpoints(of: "bob")
        #expect(registered == 3 && listed.count == 3, "exactly the limit, and what was acknowledged is there")
    }
}
