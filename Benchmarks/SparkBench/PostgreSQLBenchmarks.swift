import Foundation
import SparkDomain
import SparkDomainEngine
import SparkDomainServer
import SparkLock
import SparkStore

/// The domain on PostgreSQL: its post transaction through the store against `pgbench` running
/// the very statements it sent, on the same throwaway cluster with the same concurrency.
enum PostgreSQLBenchmarks {
    static let all: [Benchmark] = [
        Benchmark(name: "pg-post", run: post),
        Benchmark(name: "synapse-message-throughput", run: { try synapse().throughput }),
        Benchmark(name: "synapse-message-latency-p50", run: { try synapse().p50 }),
        Benchmark(name: "synapse-message-latency-p99", run: { try synapse().p99 }),
    ]

    /// Transactions at once, ours and pgbench's: as many as one `spark-domaind` runs at a time,
    /// one per connection of its store's pool (four per server thread, at least four; eight at
    /// `--threads 2`), no longer the width of Swift's cooperative pool.
    static var concurrency: Int { max(4, 4 * ProcessInfo.processInfo.activeProcessorCount) }
    static let seconds = 5

    /// A throwaway cluster from `scripts/postgres.sh`, removed when done.
    final class Cluster: Sendable {
        let directory: String
        let conninfo: String
        static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/postgres.sh").path

        init() throws {
            directory = "/tmp/spark-bench-pg-\(UUID().uuidString.prefix(8))"
            conninfo = try Harness.run("bash", [Self.script, "start", directory]).output
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }

        /// A new database's connection string.
        func database(_ name: String) throws -> String {
            _ = try Harness.run("psql", ["-X", "-q", "-d", conninfo, "-c", "CREATE DATABASE \(name)"])
            return conninfo.replacingOccurrences(of: "dbname=postgres", with: "dbname=\(name)")
        }

        func stop() { _ = try? Harness.run("bash", [Self.script, "stop", directory]) }

        /// The socket directory and port, for clients that take them apart.
        var socketAndPort: (String, String) {
            let fields = Dictionary(
                conninfo.split(separator: " ").compactMap { part -> (String, String)? in
                    let pair = part.split(separator: "=", maxSplits: 1).map(String.init)
                    return pair.count == 2 ? (pair[0], pair[1]) : nil
                }, uniquingKeysWith: { first, _ in first })
            return (fields["host"] ?? "", fields["port"] ?? "")
        }
    }

    /// A statement as the engine sent it, and the rows it returned.
    struct Recorded: Sendable {
        let sql: String
        let arguments: [DatabaseValue]
        let rows: [[DatabaseValue]]
    }

    /// Statements of one transaction as the engine sent them, with what each returned.
    final class RecordingStore: DomainStore {
        let inner: PostgreSQLDomainStore
        let recorded = Locked<[Recorded]>([])
        init(_ inner: PostgreSQLDomainStore) { self.inner = inner }

        final class Statements: DomainStatements {
            let inner: any DomainStatements
            let store: RecordingStore
            init(_ inner: any DomainStatements, _ store: RecordingStore) {
                self.inner = inner
                self.store = store
            }
            func note(_ sql: String, _ arguments: [any DatabaseValueConvertible], _ returned: [[DatabaseValue]]) {
                store.recorded.withLock {
                    $0.append(Recorded(sql: sql, arguments: arguments.map(\.databaseValue), rows: returned))
                }
            }
            func execute(_ sql: String, _ arguments: [any DatabaseValueConvertible]) throws -> Int {
                note(sql, arguments, [])
                return try inner.execute(sql, arguments)
            }
            func rows(_ sql: String, _ arguments: [any DatabaseValueConvertible]) throws -> [Row] {
                let rows = try inner.rows(sql, arguments)
                note(sql, arguments, rows.map(\.values))
                return rows
            }
            func row(_ sql: String, _ arguments: [any DatabaseValueConvertible]) throws -> Row? {
                let row = try inner.row(sql, arguments)
                note(sql, arguments, row.map { [$0.values] } ?? [])
                return row
            }
            func scalar<T: DatabaseValueConvertible>(
                _ sql: String, _ arguments: [any DatabaseValueConvertible], as type: T.Type
            ) throws -> T? {
                let value = try inner.scalar(sql, arguments, as: type)
                note(sql, arguments, value.map { [[$0.databaseValue]] } ?? [])
                return value
            }
            func announce(_ users: [String]) throws { try inner.announce(users) }
        }

        var threads: TransactionThreads { inner.threads }
        func blockingWrite<T: Sendable>(_ scope: WriteScope, _ body: (any DomainStatements) throws -> T) throws -> T {
            try inner.blockingWrite(scope) { db in try body(Statements(db, self)) }
        }
        func blockingRead<T: Sendable>(_ body: (any DomainStatements) throws -> T) throws -> T {
            try inner.blockingRead { db in try body(Statements(db, self)) }
        }
    }

    /// `pg-post`: posts to a two-member chat (the token checked, the endpoint, membership and
    /// standing read, the message numbered, two mailbox entries routed, the client id kept,
    /// the other instances notified), against pgbench replaying the recorded statements.
    static func post() throws -> BenchmarkResult {
        let cluster = try Cluster()
        defer { cluster.stop() }
        let conninfo = try cluster.database("bench")
        let store = try PostgreSQLDomainStore(conninfo: conninfo, connections: 8)
        try DomainEngine.create(in: store, domainID: "bench", policy: .bench)
        let engine = try DomainEngine(store: store, location: "bench", passcodeKeys: .generate())
        let token = try SetupBenchmarks.blocking { () -> String in
            let alice = try await engine.testToken(userID: "alice").token
            let bob = try await engine.testToken(userID: "bob").token
            _ = try await engine.registerEndpoint(token: alice, registration: .init(endpointID: "a1", description: "a"))
            _ = try await engine.registerEndpoint(token: bob, registration: .init(endpointID: "b1", description: "b"))
            _ = try await engine.createChat(token: alice, endpointID: "a1", chatID: "bench", participants: ["bob"])
            return alice
        }
        // Counters far apart, so each recorded number says which statement returned it.
        _ = try Harness.run(
            "psql",
            [
                "-X", "-q", "-d", conninfo, "-c",
                """
                UPDATE mailbox_heads SET last_sequence = last_sequence + 100000 WHERE user_id = 'alice';
                UPDATE mailbox_heads SET last_sequence = last_sequence + 200000 WHERE user_id = 'bob';
                UPDATE chats SET next_message_number = 300000;
                """,
            ])
        let recorder = RecordingStore(store)
        let recording = try DomainEngine(store: recorder, location: "bench", passcodeKeys: .generate())
        try SetupBenchmarks.blocking {
            _ = try await recording.post(
                token: token, endpointID: "a1", chatID: "bench", kind: .message, payload: Data(repeating: 7, count: 200),
                recipient: nil, clientID: "RECORDED")
        }
        let script = pgbenchScript(recorder.recorded.withLock { $0 }, lock: PostgreSQLDomainStore.lockID("chat:bench"))

        // Ours: `concurrency` tasks posting for `seconds`, on request threads as spark-domaind runs
        // them (each runs its transactions itself).
        let requests = RequestExecutor(threads: concurrency)
        defer { requests.shutdown() }
        let ours = try SetupBenchmarks.blocking { () -> Double in
            let start = ContinuousClock.now
            let deadline = start + .seconds(seconds)
            let total = try await withThrowingTaskGroup(of: Int.self) { group in
                for worker in 0..<concurrency {
                    group.addTask(executorPreference: requests) {
                        var count = 0
                        while ContinuousClock.now < deadline {
                            _ = try await engine.post(
                                token: token, endpointID: "a1", chatID: "bench", kind: .message,
                                payload: Data(repeating: 7, count: 200), recipient: nil, clientID: "w\(worker)-\(count)")
                            count += 1
                        }
                        return count
                    }
                }
                var sum = 0
                for try await count in group { sum += count }
                return sum
            }
            return Double(total) / (ContinuousClock.now - start).seconds
        }

        let file = FileManager.default.temporaryDirectory.appendingPathComponent("spark-bench-post-\(UUID().uuidString).sql")
        try script.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let output = try Harness.run(
            "pgbench",
            [
                "-n", "-M", "prepared", "-f", file.path, "-c", String(concurrency), "-j", String(concurrency), "-T",
                String(seconds), conninfo,
            ]
        ).output
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("tps = ") }),
            let reference = Double(line.split(separator: " ")[2])
        else { throw BenchError("pgbench printed no tps (is postgresql-contrib's pgbench installed?): \(output)") }
        return Harness.result(
            "pg-post", unit: "tx/s", ours: ours, reference: reference, higherIsBetter: true,
            referenceName: "pgbench, the same statements, \(concurrency) clients (goal: 0.9 of it)")
    }

    // MARK: Synapse

    nonisolated(unsafe) static var synapseCache: DomainServerBenchmarks.RemoteMessages?
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The bench's own set-up of the peer: Synapse and psycopg2 in `.build/synapse-venv`, once.
    static func synapsePython() throws -> String {
        let venv = repository.appendingPathComponent(".build/synapse-venv")
        let python = venv.appendingPathComponent("bin/python").path
        if (try? Harness.run(python, ["-c", "import synapse, psycopg2"])) == nil {
            FileHandle.standardError.write(Data("spark-bench: installing matrix-synapse into \(venv.path)\n".utf8))
            _ = try Harness.run("python3", ["-m", "venv", venv.path])
            _ = try Harness.run(python, ["-m", "pip", "install", "--quiet", "matrix-synapse", "psycopg2-binary"])
        }
        return python
    }

    /// Two SDK processes through `spark-domaind` on PostgreSQL, end to end encrypted, against
    /// two Matrix users through Synapse on the same PostgreSQL cluster (one room, the receiver
    /// on /sync long-polls; Synapse's messages are not end-to-end encrypted here).
    static func synapse() throws -> DomainServerBenchmarks.RemoteMessages {
        if let cached = synapseCache { return cached }
        let python = try synapsePython()
        let cluster = try Cluster()
        defer { cluster.stop() }
        let spark = try cluster.database("spark")
        _ = try Harness.run(
            "psql",
            [
                "-X", "-q", "-d", cluster.conninfo, "-c",
                "CREATE DATABASE synapse ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0",
            ])
        let served = try DomainServerBenchmarks.Served(database: spark)
        let ours: MessagingBenchmarks.Measured
        do {
            defer { served.stop() }
            try served.liftWriteLimits()
            ours = try MessagingBenchmarks.measureTwoProcesses(
                plist: try served.plist(), open: { try served.client() })
        }
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("spark-bench-synapse-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: work) }
        let (socket, port) = cluster.socketAndPort
        let script = repository.appendingPathComponent("Benchmarks/SparkBench/Python/synapse_messages.py").path
        let report = try Harness.run(python, [script, work.path, socket, port, "synapse"]).output
        let synapse = try MessagingBenchmarks.Measured(report: report, from: "the Synapse reference")
        let result = DomainServerBenchmarks.RemoteMessages(
            throughput: Harness.result(
                "synapse-message-throughput", unit: "msg/s", ours: ours.throughput, reference: synapse.throughput,
                higherIsBetter: true,
                referenceName: "Synapse on the same PostgreSQL, /sync long-polls (goal: ≥ 10x)"),
            p50: Harness.result(
                "synapse-message-latency-p50", unit: "ms", ours: ours.p50, reference: synapse.p50, higherIsBetter: false,
                referenceName: "Synapse p50 (goal: ≤ 1/5)"),
            p99: Harness.result(
                "synapse-message-latency-p99", unit: "ms", ours: ours.p99, reference: synapse.p99, higherIsBetter: false,
                referenceName: "Synapse p99 (goal: ≤ 1/5)"))
        synapseCache = result
        return result
    }

    /// The recorded transaction as a pgbench script: the same statements in the same order,
    /// inside the same `BEGIN`, advisory lock and notification, with a fresh client id each time
    /// and every number a statement returned carried to the statements that used it.
    ///
    /// A statement returning a number for each of several rows (the mailbox heads of a post's
    /// audience, `RETURNING user_id, last_sequence`) is sent as itself inside `WITH`, with one
    /// column a row picked out of it: `\gset` takes one row only.
    static func pgbenchScript(_ recorded: [Recorded], lock: Int64) -> String {
        func literal(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }
        var lines = [
            "\\set n random(1, 2000000000)",
            "BEGIN ISOLATION LEVEL READ COMMITTED;",
            "SELECT pg_advisory_xact_lock(\(lock));",
        ]
        var variables: [Int64: String] = [:]
        for (index, statement) in recorded.enumerated() {
            var arguments = statement.arguments.makeIterator()
            var sql = ""
            for character in statement.sql {
                guard character == "?", let argument = arguments.next() else {
                    sql.append(character)
                    continue
                }
                switch argument {
                case .null: sql += "NULL"
                case .integer(let value): sql += variables[value].map { ":" + $0 } ?? String(value)
                case .real(let value): sql += String(value)
                case .text(let value):
                    sql += value == "RECORDED" ? "('c' || :n)" : literal(value)
                case .blob(let data): sql += "'\\x" + data.map { String(format: "%02x", $0) }.joined() + "'"
                }
            }
            if statement.sql.contains("RETURNING user_id, last_sequence") {
                var columns: [String] = []
                for (row, values) in statement.rows.enumerated() {
                    guard values.count == 2, case .text(let user) = values[0], case .integer(let value) = values[1] else {
                        continue
                    }
                    variables[value] = "r\(index)_head\(row)"
                    columns.append(
                        "max(last_sequence) FILTER (WHERE user_id = \(literal(user))) AS head\(row)"
                    )
                }
                lines.append("WITH heads AS (\(sql)) SELECT \(columns.joined(separator: ", ")) FROM heads \\gset r\(index)_")
            } else if statement.sql.contains("RETURNING"), case .integer(let value)? = statement.rows.first?.first {
                let column = statement.sql.contains("AS number") ? "number" : "last_sequence"
                variables[value] = "r\(index)_\(column)"
                lines.append(sql + " \\gset r\(index)_")
            } else {
                lines.append(sql + ";")
            }
        }
        lines.append("SELECT pg_notify('spark_mailbox', 'alice' || chr(10) || 'bob');")
        lines.append("COMMIT;")
        return lines.joined(separator: "\n") + "\n"
    }
}
