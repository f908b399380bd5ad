import Foundation
import SparkLock
import SparkStore
import SparkTestSupport
import Testing

/// `DatabaseQueue.groupWrite`: writes brought while one commits are committed together, one
/// sync of the log for the group, and a write that throws takes back only its own changes.
@Suite("SparkStore: group commit")
struct GroupCommitTests {
    /// The commits in a write-ahead log: its frames that end a transaction, of its current
    /// generation (their salts are the header's).
    static func commits(inLog path: String) throws -> Int {
        let log = try Data(contentsOf: URL(fileURLWithPath: path))
        guard log.count >= 32 else { return 0 }
        func word(_ offset: Int) -> UInt32 { log[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) } }
        let pageSize = Int(word(8))
        let salts = (word(16), word(20))
        var (offset, commits) = (32, 0)
        while offset + 24 + pageSize <= log.count {
            guard (word(offset + 8), word(offset + 12)) == salts else { break }
            if word(offset + 4) != 0 { commits += 1 }
            offset += 24 + pageSize
        }
        return commits
    }

    @Test func concurrentWritesShareCommitsAndAFailedOneTakesBackOnlyItsOwn() throws {
        try Fixtures.withTemporaryDirectorySync { directory in
            let path = directory.appendingPathComponent("group.sqlite").path
            let queue = try DatabaseQueue(path: path)
            try queue.write { db in try db.execute("CREATE TABLE t (writer INTEGER, n INTEGER)") }
            let before = try Self.commits(inLog: path + "-wal")
            let (threads, each) = (8, 10)
            let failures = Locked(0)
            // Threads of their own (not the cores' worth `concurrentPerform` would give).
            let finished = DispatchGroup()
            for writer in 0..<threads {
                finished.enter()
                Thread.detachNewThread {
                    defer { finished.leave() }
                    for n in 0..<each {
                        do {
                            try queue.groupWrite { db in
                                try db.execute("INSERT INTO t VALUES (?, ?)", [writer, n])
                                // Long enough that the others arrive while a group commits.
                                usleep(300)
                                if writer == 3, n == 7 { throw StoreError(.constraint, message: "refused") }
                            }
                        } catch {
                            failures.withLock { $0 += 1 }
                        }
                    }
                }
            }
            finished.wait()
            #expect(failures.withLock { $0 } == 1)
            let rows = try queue.read { db in
                try db.rows("SELECT writer, n FROM t ORDER BY writer, n").map {
                    "\(try $0.get(0, as: Int.self))-\(try $0.get(1, as: Int.self))"
                }
            }
            let expected = (0..<threads).flatMap { writer in (0..<each).map { "\(writer)-\($0)" } }.filter { $0 != "3-7" }
            #expect(rows == expected, "each write committed once, the refused one not at all")
            let commits = try Self.commits(inLog: path + "-wal") - before
            #expect(commits >= 1 && commits < threads * each, "\(threads * each) writes in \(commits) commits")
        }
    }

    /// A write that ends the group's transaction itself (here a `ROLLBACK`; a full disk does the
    /// same) fails alone: the group is run again a write at a time.
    @Test func aWriteThatEndsTheGroupsTransactionFailsAlone() throws {
        try Fixtures.withTemporaryDirectorySync { directory in
            let queue = try DatabaseQueue(path: directory.appendingPathComponent("group.sqlite").path)
            try queue.write { db in try db.execute("CREATE TABLE t (writer INTEGER, n INTEGER)") }
            let failures = Locked<[String]>([])
            let finished = DispatchGroup()
            for writer in 0..<4 {
                finished.enter()
                Thread.detachNewThread {
                    defer { finished.leave() }
                    for n in 0..<6 {
                        do {
                            try queue.groupWrite { db in
                                try db.execute("INSERT INTO t VALUES (?, ?)", [writer, n])
                                usleep(300)
                                if writer == 1, n == 2 { try db.execute("ROLLBACK") }
                            }
                        } catch {
                            failures.withLock { $0.append("\(writer)-\(n)") }
                        }
                    }
                }
            }
            finished.wait()
            #expect(failures.withLock { $0 } == ["1-2"])
            let count = try queue.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) }
            #expect(count == 4 * 6 - 1)
        }
    }
}
