import Foundation
import SparkCrypto
import SparkStore
import SparkTestSupport
import Testing

@testable import SparkSDK

/// The search index under the store key (`SearchIndexImage`, `docs/SEARCH.md`): a copy of the
/// data directory without the key reads nothing of it, even to an attacker who chose messages
/// the victim indexed; what the index held survives a crash, another process's writes, and a
/// damaged, foreign or old image.
@Suite("Search: the index under the store key")
struct SearchIndexSealingTests {
    /// A device's store opened directly (no domain, no MLS): its data directory is `data`, its
    /// key file in `keys` beside it (a copy of `data` does not have it).
    struct Device {
        let store: EndpointStore
        let storage: MessagingStorage

        init(_ root: URL) throws {
            store = try EndpointStore(
                directory: root.appendingPathComponent("data"), key: .keyFile(directory: root.appendingPathComponent("keys")))
            storage = store.messagingStorage()
        }

        var queue: DatabaseQueue { store.queue }

        /// Stores `texts` as received in chat "c", numbered from `first`; returns their ids.
        @discardableResult
        func receive(_ texts: [String], from first: Int = 1, sender: String = "alice") async throws -> [String] {
            let ids = texts.indices.map { "m\(first + $0)" }
            try await storage.write { store in
                try store.setMembership(chatID: "c", participants: [], active: true, at: Date(timeIntervalSince1970: 0))
                for (id, (offset, text)) in zip(ids, texts.enumerated()) {
                    try store.insertReceived(
                        ChatHistory.Record(
                            id: id, number: Int64(first + offset), sender: sender, content: text, tag: "Text", state: .delivered,
                            timestamp: Date(timeIntervalSince1970: 1_790_000_000 + Double(first + offset))),
                        chatID: "c", incoming: true, ignoringTaken: true)
                }
            }
            return ids
        }

        /// The ids of the messages `query` finds, best first.
        func found(_ query: String) async throws -> [String] {
            let match = try SearchMatch(SearchQuery(query, limit: 100))
            return try await storage.read { store in
                try MessageSearch.page(store, match, from: 0, limit: 100, marks: ("[", "]")).results.map(\.messageID)
            }
        }

        /// Rebuilds the index when messaging would at its start (an index of version 0: none, or
        /// one dropped).
        func rebuildIfNeeded() async throws {
            guard try await storage.read({ try $0.searchIndexState() }) != SearchIndexState(current: true, building: false) else {
                return
            }
            try await storage.write { try $0.resetSearchIndex() }
            var after = Int64(0)
            while true {
                let from = after
                guard let last = try await storage.write({ try $0.indexUnindexed(after: from, limit: 500) }).last else { return }
                after = last
            }
        }

        func journal() throws -> Int {
            try queue.read { db in
                try db.scalar("SELECT coalesce(sum(length(rows)), 0) / 8 FROM search_changes", as: Int.self) ?? 0
            }
        }
    }

    // MARK: The chosen-plaintext attack

    /// The attack of issue 61 on a copy of a data directory: 10 messages the attacker sent the
    /// victim, word *i* of a 1,023-word list in message *j* iff bit *j* of *i* is set, so that the
    /// messages holding a term spell which word it is. The attacker looks for an FTS5 index in
    /// every file of the copy that opens as SQLite (the store, an unsealed image), lists its
    /// postings with `fts5vocab`, names each term by the chosen messages that hold it, and
    /// returns how many of the postings of the victim's other messages it named, of how many
    /// it saw.
    static func chosenPlaintextAttack(on copy: URL, chosen: [String]) throws -> (named: Int, seen: Int) {
        var rowOfChosen: [Int64: Int] = [:]
        var postings: [(term: String, document: Int64)] = []
        let scratch = copy.appendingPathComponent("attack-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        for file in try FileManager.default.contentsOfDirectory(atPath: copy.path).sorted()
        where !file.hasPrefix("attack-") && !file.hasSuffix("-wal") && !file.hasSuffix("-shm") {
            // The store with its log, or any other file, each opened as a database of its own.
            let target = scratch.appendingPathComponent(file)
            try FileManager.default.copyItem(at: copy.appendingPathComponent(file), to: target)
            if FileManager.default.fileExists(atPath: copy.appendingPathComponent(file + "-wal").path) {
                try FileManager.default.copyItem(
                    at: copy.appendingPathComponent(file + "-wal"), to: scratch.appendingPathComponent(file + "-wal"))
            }
            guard let db = try? DatabaseQueue(path: target.path),
                let tables = try? db.read({ db in
                    try db.rows("SELECT name FROM sqlite_master WHERE sql LIKE '%USING fts5(%'").map {
                        try $0.get(0, as: String.self)
                    }
                })
            else { continue }
            if let rows = try? db.read({ db in
                try db.rows("SELECT rowid, local_id FROM messages").map {
                    (try $0.get(0, as: Int64.self), try $0.get(1, as: String.self))
                }
            }) {
                for (row, id) in rows { if let index = chosen.firstIndex(of: id) { rowOfChosen[row] = index } }
            }
            for table in tables {
                try db.withConnection { db in
                    try db.execute("CREATE VIRTUAL TABLE temp.attack_\(table) USING fts5vocab(main, \(table), 'instance')")
                    postings += try db.rows("SELECT term, doc FROM temp.attack_\(table)").map {
                        (try $0.get(0, as: String.self), try $0.get(1, as: Int64.self))
                    }
                }
            }
        }
        var masks: [String: Int] = [:]
        for (term, document) in postings { if let bit = rowOfChosen[document] { masks[term, default: 0] |= 1 << bit } }
        let victims = postings.filter { rowOfChosen[$0.document] == nil }
        return (victims.filter { (masks[$0.term] ?? 0) != 0 }.count, victims.count)
    }

    /// The 1,023 words and the attacker's 10 messages.
    static func chosenMessages() -> (words: [String], messages: [String]) {
        let letters = Array("bcdfghjklmnprstvz")
        let words = (1...1_023).map { index in
            "q" + String(String(index, radix: 17).map { letters[Int(String($0), radix: 17)!] }) + "x"
        }
        let messages = (0..<10).map { bit in
            words.indices.filter { (($0 + 1) >> bit) & 1 == 1 }.map { words[$0] }.joined(separator: " ")
        }
        return (words, messages)
    }

    @Test func aCopyOfTheFilesWithoutTheKeyReadsNothingUnderChosenPlaintext() async throws {
        try await Fixtures.withTemporaryDirectory { root in
            let device = try Device(root)
            let (words, attack) = Self.chosenMessages()
            let chosen = try await device.receive(attack, from: 1, sender: "mallory")
            // The victim's own messages, from the same words.
            var random = SplitMix64(seed: 61)
            let victim = (0..<300).map { _ in (0..<(6 + random.below(8))).map { _ in words[random.below(words.count)] } }
            try await device.receive(victim.map { $0.joined(separator: " ") }, from: 100)
            #expect(try await device.found(words[0]).count > 1, "the index works")

            // Copies of the data directory: after a crash (the index's changes in the journal
            // only), and after a clean stop (in the image).
            func copy(_ name: String) throws -> URL {
                let target = root.appendingPathComponent(name)
                try FileManager.default.copyItem(at: root.appendingPathComponent("data"), to: target)
                return target
            }
            try device.queue.withConnection { db in try db.execute("PRAGMA wal_checkpoint(PASSIVE)") }
            let crashed = try copy("copy-crashed")
            await device.storage.close()
            let stopped = try copy("copy-stopped")
            #expect(FileManager.default.fileExists(atPath: stopped.appendingPathComponent(SearchIndexImage.fileName).path))
            for copy in [crashed, stopped] {
                let (named, seen) = try Self.chosenPlaintextAttack(on: copy, chosen: chosen)
                #expect(seen == 0 && named == 0, "\(copy.lastPathComponent): \(named) of \(seen) postings")
                // Not a token of a word in any file, not even the image's first bytes as SQLite's.
                let tokens = try await device.storage.read { store in words.prefix(50).map { store.searchKey.token(.word, $0) } }
                for file in try FileManager.default.contentsOfDirectory(atPath: copy.path) {
                    let bytes = try Data(contentsOf: copy.appendingPathComponent(file))
                    #expect(!tokens.contains { bytes.range(of: Data($0.suffix(12).utf8)) != nil }, "\(file)")
                    #expect(!bytes.starts(with: Data("SQLite format 3".utf8)) || !file.hasPrefix("search"), "\(file)")
                }
            }

            // The same attack reads the index when it is readable: the image opened with the
            // key, as it would be were it not sealed (the attack is not a straw man).
            let image = try #require(
                SearchIndexImage.opened(besides: URL(fileURLWithPath: device.queue.path), sealer: device.store.sealer))
            try image.write(to: stopped.appendingPathComponent(SearchIndexImage.fileName))
            let (named, seen) = try Self.chosenPlaintextAttack(on: stopped, chosen: chosen)
            #expect(seen > 2_000 && Double(named) / Double(seen) > 0.99, "\(named) of \(seen)")
        }
    }

    // MARK: Crashes, other processes, damaged images

    @Test func aCrashLosesNothingTheIndexHeld() async throws {
        try await Fixtures.withTemporaryDirectory { root in
            var device: Device? = try Device(root)
            try await device!.receive((1...40).map { "entry \($0) of the ledger" })
            await device!.storage.close()
            #expect(try device!.journal() == 0, "the clean stop wrote an image of it all")
            device = try Device(root)
            #expect(try await device!.found("ledger").count == 40, "read from the image")

            // After the image: new messages, an edit and a recall, committed; then the process
            // dies before any image is written (a transaction made without one).
            try await device!.receive(["a new walrus"], from: 41)
            let sealer = device!.store.sealer
            try device!.queue.write { db in
                let store = SQLiteMessagingStore(db: db, sealer: sealer)
                try store.synchronizeSearchIndex()
                try store.setContent("m1", content: "the first narwhal")
                try store.recall("m2")
                try store.flushSearchWrites()
            }
            #expect(try device!.journal() >= 3)
            device = nil
            let reopened = try Device(root)
            #expect(try await reopened.found("walrus") == ["m41"])
            #expect(try await reopened.found("narwhal") == ["m1"])
            #expect(try await reopened.found("ledger").count == 38, "m1's old words and m2 are gone")
            #expect(try await reopened.found("entry 2 of").isEmpty)
            // The index's words of the edited and the recalled message are in none of its pages.
            // (A term's last 12 digits: see `SearchTests.tokens(of:in:)`.)
            let tokens = try await reopened.storage.read { store in
                ["1", "2", "3"].map { Data(store.searchKey.token(.word, $0).suffix(12).utf8) }
            }
            let pages = try reopened.queue.withConnection { try $0.serialize(schema: SearchIndexImage.schema) }
            #expect(tokens.map { pages.range(of: $0) != nil } == [false, false, true])
        }
    }

    @Test func anotherProcessesChangesAndImagesAreFollowed() async throws {
        try await Fixtures.withTemporaryDirectory { root in
            let first = try Device(root)
            let second = try Device(root)
            try await first.receive((1...5).map { "pelican \($0)" })
            #expect(try await second.found("pelican").count == 5, "the journal's rows, indexed by the other")
            try await second.receive(["pelican six"], from: 6)
            #expect(try await first.found("pelican").count == 6)
            // An edit by one writes an image at once and trims the journal: the other, behind
            // it, reads the image again.
            try await first.storage.write { store in try store.setContent("m3", content: "heron three") }
            #expect(try first.journal() == 0)
            #expect(try await second.found("heron") == ["m3"])
            #expect(try await second.found("pelican").count == 5)
            try await second.storage.write { store in try store.recall("m4") }
            #expect(try await first.found("pelican").count == 4)
        }
    }

    /// An image that is damaged, of another key, or older than the journal reaches back to (a
    /// restored copy) is dropped at open and the index rebuilt from the messages: never trusted,
    /// never a failure to open.
    @Test(arguments: ["garbage", "truncated", "another key", "older", "newer than the file"])
    func aBadImageIsRebuiltFromTheMessages(_ damage: String) async throws {
        try await Fixtures.withTemporaryDirectory { root in
            var device: Device? = try Device(root)
            try await device!.receive((1...30).map { "otter \($0)" })
            await device!.storage.close()
            let path = root.appendingPathComponent("data").appendingPathComponent(SearchIndexImage.fileName)
            let older = try Data(contentsOf: path)
            device = try Device(root)
            try await device!.storage.write { store in try store.recall("m1") }
            await device!.storage.close()
            let sealer = device!.store.sealer
            device = nil
            let current = try Data(contentsOf: path)
            switch damage {
            case "garbage": try Data(repeating: 0x42, count: current.count).write(to: path)
            case "truncated": try current.prefix(current.count / 2).write(to: path)
            case "another key":
                let image = try #require(SearchIndexImage.opened(besides: path, sealer: sealer))
                try StoreSealer(key: SymmetricKey(size: .bits256)).seal(image, SearchIndexImage.context).write(to: path)
            case "older": try older.write(to: path)
            default:
                // The file lost its last transactions (a power cut) and the image did not.
                let queue = try DatabaseQueue(path: root.appendingPathComponent("data/endpoint.sqlite").path)
                try queue.write { db in try db.execute("UPDATE search_index_state SET seq = 0, image_through = 0") }
            }
            let reopened = try Device(root)
            #expect(try await reopened.storage.read { try $0.searchIndexState().current } == false)
            try await reopened.rebuildIfNeeded()
            #expect(try await reopened.found("otter").count == 29)
            #expect(try await reopened.found("1").isEmpty)
        }
    }

    /// A store whose index was in the file (before `v20-sealed-search-index`): the migration
    /// drops it and vacuums the file, so no token of it is left there, and the index is
    /// rebuilt in memory.
    @Test func theIndexThatWasInTheFileLeavesIt() async throws {
        try await Fixtures.withTemporaryDirectory { root in
            var device: Device? = try Device(root)
            try await device!.receive(["the capybara memo", "capybara notes"])
            let token = try await device!.storage.read { store in store.searchKey.token(.word, "capybara") }
            device = nil
            // The file as an older version left it: its index in the file, tokens and all.
            let file = root.appendingPathComponent("data/endpoint.sqlite").path
            do {
                let queue = try DatabaseQueue(path: file)
                try queue.write { db in
                    try db.execute(
                        """
                        DROP TABLE search_changes;
                        DROP TABLE search_index_state;
                        ALTER TABLE messages ADD COLUMN search_length INTEGER;
                        CREATE VIRTUAL TABLE message_search USING fts5(
                            tokens, tokenize = 'ascii', content = '', detail = none, columnsize = 0);
                        CREATE TABLE search_index_state (singleton INTEGER PRIMARY KEY, version INTEGER NOT NULL,
                            building INTEGER NOT NULL);
                        INSERT INTO search_index_state VALUES (1, 6, 0);
                        DELETE FROM spark_migrations WHERE identifier = 'v20-sealed-search-index';
                        """)
                    try db.execute("INSERT INTO message_search(rowid, tokens) VALUES (1, ?), (2, ?)", [token, token])
                }
                try queue.withConnection { db in try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: file)).range(of: Data(token.suffix(12).utf8)) != nil)
            let reopened = try Device(root)
            for name in ["endpoint.sqlite", "endpoint.sqlite-wal"] {
                let bytes = (try? Data(contentsOf: root.appendingPathComponent("data").appendingPathComponent(name))) ?? Data()
                #expect(bytes.range(of: Data(token.suffix(12).utf8)) == nil, "\(name)")
            }
            try await reopened.rebuildIfNeeded()
            #expect(try await reopened.found("capybara").count == 2)
        }
    }
}
