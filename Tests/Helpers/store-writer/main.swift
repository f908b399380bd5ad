// A helper for SparkStoreTests: one process of a multi-process write test.
// Usage: store-writer DATABASE TAG COUNT
// Inserts COUNT rows tagged TAG, one immediate transaction each, then prints "done TAG COUNT".
import Foundation
import SparkStore

let arguments = CommandLine.arguments
guard arguments.count == 4, let count = Int(arguments[3]) else {
    FileHandle.standardError.write(Data("usage: store-writer DATABASE TAG COUNT\n".utf8))
    exit(64)
}
do {
    let queue = try DatabaseQueue(path: arguments[1])
    try queue.write { db in
        try db.execute("CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY, tag TEXT NOT NULL, n INTEGER NOT NULL)")
    }
    for n in 0..<count {
        try queue.write { db in try db.execute("INSERT INTO rows(tag, n) VALUES (?, ?)", [arguments[2], n]) }
    }
    print("done \(arguments[2]) \(count)")
} catch {
    FileHandle.standardError.write(Data("store-writer: \(error)\n".utf8))
    exit(1)
}
