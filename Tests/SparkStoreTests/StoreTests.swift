import Foundation
import SparkStore
import SparkTestSupport
import Testing

@Suite("SparkStore")
struct StoreTests {
    @Test func typedBindingAndReading() throws {
        let queue = try DatabaseQueue.inMemory()
        try queue.write { db in
            try db.execute("CREATE TABLE t (i INTEGER, r REAL, s TEXT, b BLOB, n TEXT, f INTEGER)")
            try db.execute(
                "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)",
                [Int64.max, 2.5, "héllo", Data([0, 1, 2]), String?.none, true])
            try db.execute("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)", [0, 0.0, "", Data(), "x", false])
        }
        let rows = try queue.read { db in try db.rows("SELECT * FROM t ORDER BY rowid") }
        #expect(rows.count == 2)
        #expect(try rows[0].get("i", as: Int64.self) == Int64.max)
        #expect(try rows[0].get("r", as: Double.self) == 2.5)
        #expect(try rows[0].get("s", as: String.self) == "héllo")
        #expect(try rows[0].get("b", as: Data.self) == Data([0, 1, 2]))
        #expect(try rows[0].get("n", as: String?.self) == nil)
        #expect(try rows[0].get("f", as: Bool.self))
        #expect(try rows[1].get("b", as: Data.self) == Data())
        #expect(try rows[1].get("n", as: String?.self) == "x")
        #expect(throws: StoreError(.misuse, message: "")) { try rows[0].get("s", as: Int.self) }
        #expect(throws: StoreError(.misuse, message: "")) { try rows[0].get("missing", as: Int.self) }
        #expect(throws: StoreError(.misuse, message: "")) { try rows[0].get(9, as: Int.self) }
        #expect(throws: StoreError(.misuse, message: "")) { try queue.read { db in try db.rows("SELECT ?", []) } }
    }

    /// Rows read in place (``Database/rows(_:_:reading:)``) hold what ``Row`` holds: each value
    /// converted alike, a blob read where it lies (an empty one empty, a NULL one nil), and the
    /// same refusals of a wrong type or index.
    @Test func rowsReadInPlaceMatchTheRowsBuilt() throws {
        let queue = try DatabaseQueue.inMemory()
        try queue.write { db in
            try db.execute("CREATE TABLE t (i INTEGER, s TEXT, b BLOB, n BLOB)")
            try db.execute("INSERT INTO t VALUES (?, ?, ?, ?)", [7, "héllo", Data([0, 1, 2]), Data?.none])
            try db.execute("INSERT INTO t VALUES (?, ?, ?, ?)", [8, "", Data(), Data([9])])
        }
        struct Read: Equatable {
            var i: Int64
            var s: String
            var b: [UInt8]?
            var n: [UInt8]?
        }
        let read = try queue.read { db in
            try db.rows("SELECT i, s, b, n FROM t ORDER BY rowid") { row in
                Read(
                    i: try row.get(0), s: try row.get(1), b: try row.withBlob(2) { Array($0) },
                    n: try row.withBlob(3) { Array($0) })
            }
        }
        #expect(read == [Read(i: 7, s: "héllo", b: [0, 1, 2], n: nil), Read(i: 8, s: "", b: [], n: [9])])
        let built = try queue.read { db in try db.rows("SELECT i, s FROM t ORDER BY rowid") }
        #expect(try built.map { try $0.get(1, as: String.self) } == read.map(\.s))
        for column in [1, 9, -1] {
            #expect(throws: StoreError(.misuse, message: "")) {
                try queue.read { db in try db.rows("SELECT i, s FROM t") { row in try row.withBlob(column) { $0.count } } }
            }
        }
        #expect(throws: StoreError(.misuse, message: "")) {
            try queue.read { db in try db.rows("SELECT s FROM t") { row in try row.get(0, as: Int.self) } }
        }
        #expect(throws: StoreError(.misuse, message: "")) {
            try queue.read { db in try db.rows("SELECT s FROM t") { row in try row.get(3, as: String.self) } }
        }
    }

    @Test func failedWriteRollsBackEverything() throws {
        let queue = try DatabaseQueue.inMemory()
        try queue.write { db in try db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT UNIQUE)") }
        try queue.write { db in try db.execute("INSERT INTO t(v) VALUES (?)", ["a"]) }
        #expect(throws: StoreError(.constraint, message: "")) {
            try queue.write { db in
                try db.execute("INSERT INTO t(v) VALUES (?)", ["b"])
                try db.execute("INSERT INTO t(v) VALUES (?)", ["a"])
            }
        }
        #expect(try queue.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 1)
        #expect(try queue.withConnection { db in db.isInTransaction } == false)
    }

    @Test func errorsCarryTheExtendedCodeButNeverBoundValues() throws {
        let queue = try DatabaseQueue.inMemory()
        try queue.write { db in try db.execute("CREATE TABLE secrets (v TEXT UNIQUE)") }
        try queue.write { db in try db.execute("INSERT INTO secrets VALUES (?)", ["hunter2"]) }
        do {
            try queue.write { db in try db.execute("INSERT INTO secrets VALUES (?)", ["hunter2"]) }
            Issue.record("expected a constraint error")
        } catch let error as StoreError {
            #expect(error.code == .constraint)
            #expect(error.resultCode == 2067)  // SQLITE_CONSTRAINT_UNIQUE
            #expect(error.sql == "INSERT INTO secrets VALUES (?)")
            #expect(!error.description.contains("hunter2"))
        }
        #expect(throws: StoreError(.sqlite, message: "")) { try queue.write { db in try db.execute("SELEKT 1") } }
    }

    @Test func migrationsApplyOnceAndRefuseANewerSchema() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("m.sqlite").path
            var migrator = DatabaseMigrator()
            migrator.register("v1") { db in try db.execute("CREATE TABLE a (x INTEGER)") }
            migrator.register("v2") { db in try db.execute("ALTER TABLE a ADD COLUMN y INTEGER") }
            let queue = try DatabaseQueue(path: path)
            try migrator.migrate(queue)
            try migrator.migrate(queue)
            #expect(try migrator.appliedIdentifiers(queue) == ["v1", "v2"])
            try queue.write { db in try db.execute("INSERT INTO a(x, y) VALUES (1, 2)") }

            var newer = migrator
            newer.register("v3") { db in try db.execute("CREATE TABLE b (z INTEGER)") }
            try newer.migrate(queue)
            #expect(throws: StoreError(.schemaTooNew, message: "")) { try migrator.migrate(queue) }

            var failing = DatabaseMigrator()
            failing.register("broken") { db in
                try db.execute("CREATE TABLE half (x INTEGER)")
                try db.execute("NOT SQL")
            }
            let other = try DatabaseQueue(path: directory.appendingPathComponent("f.sqlite").path)
            #expect(throws: StoreError.self) { try failing.migrate(other) }
            // The failed step left nothing behind: neither its table nor its record.
            #expect(
                try other.read { db in try db.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'half'", as: Int.self) }
                    == 0)
            #expect(try failing.appliedIdentifiers(other).isEmpty)
        }
    }

    @Test func aRenamedMigrationIsNotAppliedAgainNorTakenForANewerOne() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let queue = try DatabaseQueue(path: directory.appendingPathComponent("r.sqlite").path)
            var shipped = DatabaseMigrator()
            shipped.register("v1-a") { db in try db.execute("CREATE TABLE a (x INTEGER)") }
            shipped.register("v1-b") { db in try db.execute("CREATE TABLE b (x INTEGER)") }
            try shipped.migrate(queue)
            // The next version numbers them in order: `v1-b` is `v2-b` now, and `v3-c` is new.
            var unaware = DatabaseMigrator()
            unaware.register("v1-a") { db in try db.execute("CREATE TABLE a (x INTEGER)") }
            unaware.register("v2-b") { db in try db.execute("CREATE TABLE b (x INTEGER)") }
            unaware.register("v3-c") { db in try db.execute("CREATE TABLE c (x INTEGER)") }
            var renamed = unaware
            renamed.rename("v1-b", to: "v2-b")
            // Without the rename the store is refused as newer; with it, `b` is not made again.
            #expect(throws: StoreError(.schemaTooNew, message: "")) { try unaware.migrate(queue) }
            try renamed.migrate(queue)
            #expect(try renamed.appliedIdentifiers(queue) == ["v1-a", "v2-b", "v3-c"])
            try renamed.migrate(queue)
            #expect(renamed.prefix(through: "v2-b").migrations.map(\.identifier) == ["v1-a", "v2-b"])
        }
    }

    @Test func filesAreCreatedPrivateInWALMode() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("nested/dir/db.sqlite").path
            let queue = try DatabaseQueue(path: path)
            try queue.write { db in try db.execute("CREATE TABLE t (x)") }
            let fileMode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
            let directoryMode =
                try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent("nested/dir").path)[
                    .posixPermissions] as? Int
            #expect(fileMode == 0o600)
            #expect(directoryMode == 0o700)
            #expect(try queue.withConnection { db in try db.scalar("PRAGMA journal_mode", as: String.self) } == "wal")
            let wal = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.posixPermissions] as? Int
            #expect(wal == 0o600)
        }
    }

    @Test func notADatabaseIsReportedAsCorrupt() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("junk.sqlite").path
            try Data(repeating: 0x42, count: 4096).write(to: URL(fileURLWithPath: path))
            #expect(throws: StoreError(.corrupt, message: "")) { try DatabaseQueue(path: path) }
        }
    }

    @Test func twoProcessesWriteOneFileWithoutLosingRows() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("shared.sqlite").path
            let writer = Fixtures.executable("store-writer")
            let count = 1500
            async let first = Fixtures.run(writer, [path, "a", String(count)])
            async let second = Fixtures.run(writer, [path, "b", String(count)])
            let results = try await [first, second]
            for result in results {
                #expect(result.status == 0, "store-writer failed: \(result.stderr)")
                #expect(!result.stderr.contains("locked"))
            }
            let queue = try DatabaseQueue(path: path)
            let counts = try queue.read { db in
                try db.rows("SELECT tag, count(*), count(DISTINCT n) FROM rows GROUP BY tag ORDER BY tag").map {
                    [try $0.get(0, as: String.self), String(try $0.get(1, as: Int.self)), String(try $0.get(2, as: Int.self))]
                }
            }
            #expect(counts == [["a", "\(count)", "\(count)"], ["b", "\(count)", "\(count)"]])
            #expect(try queue.integrityCheck() == ["ok"])
        }
    }

    @Test func concurrentThreadsShareOneQueue() async throws {
        let queue = try DatabaseQueue.inMemory()
        try queue.write { db in try db.execute("CREATE TABLE c (n INTEGER)") }
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    for n in 0..<100 {
                        _ = try? queue.write { db in try db.execute("INSERT INTO c VALUES (?)", [worker * 1000 + n]) }
                    }
                }
            }
        }
        #expect(try queue.read { db in try db.scalar("SELECT count(DISTINCT n) FROM c", as: Int.self) } == 800)
    }

    /// The log is checkpointed beside the commits (SparkStore's `Checkpointer`), and it is
    /// checkpointed: commits that put three times the threshold in the log (3,000 of a row of
    /// 3 KB) leave the database file holding their pages, which in WAL mode only a checkpoint
    /// writes there, while the connection stays open. Nothing here checkpoints by hand.
    @Test func theLogIsCheckpointedWhileTheFileIsOpen() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("log.sqlite").path
            let queue = try DatabaseQueue(path: path)
            try queue.write { db in try db.execute("CREATE TABLE t (b BLOB)") }
            for _ in 0..<3000 {
                try queue.write { db in try db.execute("INSERT INTO t VALUES (?)", [Data(repeating: 1, count: 3000)]) }
            }
            let size = { @Sendable in ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0 }
            #expect(await eventually { size() > 4_000_000 }, "the database file holds \(size()) bytes")
            #expect(try queue.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 3000)
        }
    }
}
