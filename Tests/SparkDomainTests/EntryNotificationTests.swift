import Foundation
import SparkDomain
import SparkLock
import SparkStore
import SparkTestSupport
import Testing

@testable import SparkDomainEngine
@testable import SparkDomainServer

/// A post's entries carried to the other instances on PostgreSQL (`NOTIFY` on the entries
/// channel), so that a long-poll waiting there is answered with them instead of a read, where
/// they are exactly what its read would return.
@Suite("Domain: entries handed to long-polls across instances", .serialized)
struct EntryNotificationTests {
    /// Two engines on one new database, the second's reads counted; alice (a1) and bob (b1, b2)
    /// in chat c1.
    static func instances() async throws -> (
        first: DomainEngine, second: DomainEngine, counts: CountingStore, raw: PostgreSQLDomainStore, alice: String,
        bob: String
    ) {
        let conninfo = try await PostgresCluster.newDatabase()
        let (first, second, counts, raw) = try await Fixtures.blocking {
            () -> (DomainEngine, DomainEngine, CountingStore, PostgreSQLDomainStore) in
            let store = try PostgreSQLDomainStore(conninfo: conninfo)
            try DomainEngine.create(in: store, domainID: "pg", policy: DomainPolicy())
            let counts = CountingStore(try PostgreSQLDomainStore(conninfo: conninfo))
            return (
                try DomainEngine(store: store, location: "first", passcodeKeys: .generate()),
                try DomainEngine(store: counts, location: "second", passcodeKeys: .generate()),
                counts, try PostgreSQLDomainStore(conninfo: conninfo)
            )
        }
        let alice = try await first.testToken(userID: "alice").token
        let bob = try await first.testToken(userID: "bob").token
        _ = try await first.registerEndpoint(token: alice, registration: .init(endpointID: "a1", description: "a"))
        for endpoint in ["b1", "b2"] {
            _ = try await first.registerEndpoint(token: bob, registration: .init(endpointID: endpoint, description: "b"))
        }
        _ = try await first.createChat(token: alice, endpointID: "a1", chatID: "c1", participants: ["bob"])
        return (first, second, counts, raw, alice, bob)
    }

    /// Bob's long-poll on `engine` through `endpoint` after his mailbox's end, started once it
    /// waits there. Its wait (30 s, the longest) ends long after any notification would have woken
    /// it, even under ThreadSanitizer on a loaded machine (where a post has taken over 8 s).
    static func waitingPoll(_ engine: DomainEngine, _ bob: String, _ endpoint: String, limit: Int = 10) async throws -> (
        Task<[MailboxEntry], any Error>, Int64
    ) {
        let head = try #require(try await engine.readMailbox(token: bob, endpointID: endpoint, after: 0, limit: 1000).last)
            .sequence
        let before = engine.mailboxWaiters.waiting
        let poll = Task {
            try await engine.readMailbox(token: bob, endpointID: endpoint, after: head, limit: limit, wait: .seconds(30))
        }
        #expect(await eventually { engine.mailboxWaiters.waiting == before + 1 }, "bob's long-poll waits")
        return (poll, head)
    }

    /// Returns once the second engine listens: its first long-poll starts the listener, which
    /// wakes every waiter once it listens (what was announced before was not heard).
    static func listening(_ second: DomainEngine, _ bob: String) async throws {
        let (poll, _) = try await waitingPoll(second, bob, "b1")
        #expect(await eventually { second.mailboxWaiters.ticket(for: "bob").everyone > 0 }, "the listener is in place")
        poll.cancel()
        _ = try? await poll.value
    }

    /// Whether a long-poll answered by `time` was woken rather than ended by its wait (a wake that
    /// never came shows as the whole 30 s: the time is the evidence, not a measure of speed; the
    /// tests that hand entries also check that no mailbox read answered).
    static func woken(since start: ContinuousClock.Instant) -> Bool { ContinuousClock.now - start < .seconds(25) }

    @Test func aLongPollOnAnotherInstanceIsHandedThePostsEntriesWithoutARead() async throws {
        let (first, second, counts, _, alice, bob) = try await Self.instances()
        try await Self.listening(second, bob)

        let (poll, head) = try await Self.waitingPoll(second, bob, "b1", limit: 2)
        let reads = counts.mailboxReads.withLock { $0 }
        let posted = ContinuousClock.now
        let receipt = try await first.postMessages(
            token: alice, endpointID: "a1", chatID: "c1",
            messages: ["one", "two", "three"].map { MessagePost(clientID: $0, payload: Data($0.utf8)) })
        #expect(receipt.receipts.count == 3)
        let answer = try await poll.value
        #expect(Self.woken(since: posted), "woken by the entries' notification")
        #expect(answer.map(\.payload) == [Data("one".utf8), Data("two".utf8)], "the post's entries, up to the limit")
        #expect(counts.mailboxReads.withLock { $0 } == reads, "answered without reading the mailbox")
        let read = try await second.readMailbox(token: bob, endpointID: "b1", after: head, limit: 2)
        #expect(answer == read, "exactly what a read returns")
    }

    /// An endpoint removed where the other instance did not hear of it is not handed the entries:
    /// that instance checks the waiting endpoints by a read after the post committed.
    @Test func aRemovedEndpointsLongPollOnAnotherInstanceIsRefusedNotHandedEntries() async throws {
        let (first, second, _, raw, alice, bob) = try await Self.instances()
        try await Self.listening(second, bob)
        let (poll, _) = try await Self.waitingPoll(second, bob, "b2")
        _ = try await Fixtures.blocking {
            try raw.blockingWrite(.serializable) { db in
                try db.execute("UPDATE endpoints SET removed_reason = 'deregistered' WHERE endpoint_id = ?", ["b2"])
            }
        }
        _ = try await first.post(
            token: alice, endpointID: "a1", chatID: "c1", kind: .message, payload: Data("secret".utf8), recipient: nil,
            clientID: nil)
        await #expect(throws: DomainError(.endpointRemoved, "")) { try await poll.value }
    }

    /// An entry too large for a notification's payload is announced by its users' names: the
    /// long-poll on the other instance is woken all the same, and reads it.
    @Test func anEntryTooLargeToCarryWakesTheOtherInstanceByName() async throws {
        let (first, second, counts, _, alice, bob) = try await Self.instances()
        try await Self.listening(second, bob)
        let (poll, _) = try await Self.waitingPoll(second, bob, "b1")
        let reads = counts.mailboxReads.withLock { $0 }
        let large = Data(repeating: 7, count: 20_000)
        let posted = ContinuousClock.now
        _ = try await first.post(
            token: alice, endpointID: "a1", chatID: "c1", kind: .message, payload: large, recipient: nil, clientID: nil)
        let answer = try await poll.value
        #expect(Self.woken(since: posted), "woken by the names' notification")
        #expect(answer.map(\.payload) == [large])
        #expect(counts.mailboxReads.withLock { $0 } > reads, "read, not handed")
    }

    /// What a savepoint rolled back wrote is not announced: the entries channel carries only the
    /// entries of savepoints kept.
    @Test func entriesOfARolledBackSavepointAreNotAnnounced() async throws {
        let conninfo = try await PostgresCluster.newDatabase()
        let (writer, listener) = try await Fixtures.blocking { () -> (PostgreSQLDomainStore, PostgreSQLDomainStore) in
            (try PostgreSQLDomainStore(conninfo: conninfo), try PostgreSQLDomainStore(conninfo: conninfo))
        }
        let heard = Locked<[AppendedEntries]>([])
        let listening = Locked(false)
        listener.listen { announcement in
            switch announcement {
            case .entries(let entries): heard.withLock { $0.append(entries) }
            case .everyone: listening.withLock { $0 = true }
            default: break
            }
        }
        #expect(await eventually { listening.withLock { $0 } }, "the listener is in place")
        @Sendable func entry(_ sequence: Int64, _ text: String) -> AppendedEntries {
            var appended = AppendedEntries()
            appended.add(
                MailboxEntry(
                    sequence: sequence, chatID: "c", sender: "alice", kind: .message, messageNumber: sequence,
                    payload: Data(text.utf8), members: nil, postedAt: Date(timeIntervalSince1970: 1_000)),
                for: "bob")
            return appended
        }
        try await Fixtures.blocking {
            try writer.blockingWrite(.serializable) { db in
                try db.announce(entry(1, "kept"))
                try db.execute("SAVEPOINT first_part")
                try db.announce(entry(2, "rolled back"))
                try db.execute("SAVEPOINT second_part")
                try db.announce(entry(3, "rolled back with its outer"))
                try db.execute("RELEASE SAVEPOINT second_part")
                try db.execute("ROLLBACK TO SAVEPOINT first_part")
                try db.execute("RELEASE SAVEPOINT first_part")
                try db.execute("SAVEPOINT third_part")
                try db.announce(entry(2, "kept too"))
                try db.execute("RELEASE SAVEPOINT third_part")
            }
        }
        #expect(await eventually { !heard.withLock { $0 }.isEmpty })
        var all = AppendedEntries()
        for entries in heard.withLock({ $0 }) { all.add(entries) }
        #expect(all.byUser["bob"]?.map { String(decoding: $0.payload, as: UTF8.self) } == ["kept", "kept too"])
        listener.stopListening()
    }

    /// A transaction's entries go out in payloads PostgreSQL takes, and come back as they were;
    /// an entry too large to carry is left to a read (its users named instead).
    @Test func entriesTravelInPayloadsUnderTheLimitAndComeBackWhole() throws {
        let members = [ChatMember(userID: "alice", isAdmin: true), ChatMember(userID: "bob", isAdmin: false)]
        var log: [(user: String, entry: MailboxEntry)] = []
        for post in 0..<5 {
            for user in (0..<400).map({ "user-\($0)" }) {
                log.append(
                    (
                        user,
                        MailboxEntry(
                            sequence: Int64(post + 10), chatID: "company", sender: "ceo",
                            kind: post == 0 ? .membership : .message,
                            messageNumber: post == 0 ? nil : Int64(post), payload: Data(repeating: UInt8(post), count: 300),
                            members: post == 0 ? members : nil, postedAt: Date(timeIntervalSince1970: 1_234.5), epoch: 7)
                    ))
            }
        }
        log.append(
            (
                "bob",
                MailboxEntry(
                    sequence: 99, chatID: "c", sender: "alice", kind: .message, messageNumber: 9,
                    payload: Data(repeating: 1, count: 20_000), members: nil, postedAt: Date(timeIntervalSince1970: 1))
            ))
        let (payloads, uncarried) = EntryNotifications.payloads(log, limit: PostgreSQLDomainStore.payloadLimit)
        #expect(payloads.count > 1 && payloads.allSatisfy { $0.utf8.count <= PostgreSQLDomainStore.payloadLimit })
        #expect(uncarried == ["bob"], "too large for a payload: bob reads it")
        var decoded = AppendedEntries()
        for payload in payloads { decoded.add(try #require(EntryNotifications.entries(payload))) }
        var expected = AppendedEntries()
        for (user, entry) in log.dropLast() { expected.add(entry, for: user) }
        #expect(decoded == expected)
        // Payloads packed to the byte: whatever the sizes, none is over the limit, and every
        // entry comes back.
        for (index, size) in stride(from: 40, through: 7_000, by: 373).enumerated() {
            var many: [(user: String, entry: MailboxEntry)] = []
            for post in 0..<(3 + index % 5) {
                for user in 0..<(1 + (index * 7 + post) % 40) {
                    many.append(
                        (
                            "u\(user)-\(String(repeating: "é", count: (user + index) % 9))",
                            MailboxEntry(
                                sequence: Int64(post + 1), chatID: "c", sender: "s", kind: .message, messageNumber: Int64(post),
                                payload: Data(repeating: 9, count: size + post), members: nil,
                                postedAt: Date(timeIntervalSince1970: 5))
                        ))
                }
            }
            let (packed, left) = EntryNotifications.payloads(many, limit: PostgreSQLDomainStore.payloadLimit)
            #expect(packed.allSatisfy { $0.utf8.count <= PostgreSQLDomainStore.payloadLimit }, "payload size \(size)")
            var back = AppendedEntries()
            for payload in packed { back.add(try #require(EntryNotifications.entries(payload))) }
            var carried = AppendedEntries()
            for (user, entry) in many where !left.contains(user) { carried.add(entry, for: user) }
            #expect(back == carried && (left.isEmpty || size > 5_000), "payload size \(size)")
        }
        #expect(EntryNotifications.entries("not json") == nil)
        #expect(EntryNotifications.entries(#"[{"c":"c","s":"a","k":"message","p":"","t":1,"u":["bob"],"q":[]}]"#) == nil)
    }
}
