import Foundation
import SparkLock
import SparkStore
import SparkTestSupport
import Testing

@testable import SparkDomain
@testable import SparkDomainEngine

/// A mailbox read with a wait is a long-poll: it answers as soon as an entry for this user
/// arrives (from this process or, through the embedded file, another), and only then.
@Suite("Domain: mailbox long-polls")
struct MailboxWaitTests {
    /// A domain with alice and bob registered and a chat between them.
    struct Pair {
        let domain: EmbeddedDomain
        let alice: String
        let bob: String
        let chatID = "chat-1"
    }

    static func pair(_ directory: URL) async throws -> Pair {
        let domain = try makeDomain(directory)
        let alice = try await domain.testToken(userID: "alice").token
        let bob = try await domain.testToken(userID: "bob").token
        _ = try await domain.registerEndpoint(token: alice, registration: .init(endpointID: "alice-1", description: "a"))
        _ = try await domain.registerEndpoint(token: bob, registration: .init(endpointID: "bob-1", description: "b"))
        let pair = Pair(domain: domain, alice: alice, bob: bob)
        _ = try await domain.createChat(token: alice, endpointID: "alice-1", chatID: pair.chatID, participants: ["bob"])
        return pair
    }

    /// Bob's mailbox head (the membership entry of the chat).
    static func head(_ pair: Pair) async throws -> Int64 {
        try await pair.domain.readMailbox(token: pair.bob, endpointID: "bob-1", after: 0, limit: 100).last?.sequence ?? 0
    }

    @Test func aPostWakesTheRecipientsLongPollAtOnce() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let pair = try await Self.pair(directory)
            let cursor = try await Self.head(pair)
            async let read = pair.domain.readMailbox(
                token: pair.bob, endpointID: "bob-1", after: cursor, limit: 10, wait: .seconds(30))
            #expect(await eventually { pair.domain.mailboxWaiters.waiting == 1 }, "bob's read waits")
            _ = try await pair.domain.post(
                token: pair.alice, endpointID: "alice-1", chatID: pair.chatID, kind: .message, payload: Data("hi".utf8),
                recipient: nil, clientID: nil)
            let entries = try await read
            #expect(entries.map(\.payload) == [Data("hi".utf8)], "the wait ends with the entry, not at its timeout")
        }
    }

    @Test func aPostInAnotherProcessWakesTheLongPoll() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let pair = try await Self.pair(directory)
            let cursor = try await Self.head(pair)
            async let read = pair.domain.readMailbox(
                token: pair.bob, endpointID: "bob-1", after: cursor, limit: 10, wait: .seconds(30))
            #expect(await eventually { pair.domain.mailboxWaiters.waiting == 1 })
            let peer = try await Fixtures.run(
                Fixtures.executable("domain-peer"), [pair.domain.path, "post", pair.alice, "alice-1", pair.chatID, "from afar"])
            #expect(peer.status == 0, "\(peer.stderr)")
            #expect(try await read.map(\.payload) == [Data("from afar".utf8)])
        }
    }

    /// SQLite writes a commit's frames to the WAL before the commit is visible, so a watcher woken
    /// by the WAL may look too early; the writer pokes the signal file once the commit shows, and
    /// watchers wake on that poke.
    @Test func aCommitThatReachesAMailboxPokesTheSignalFileAndAWatcherWakesOnIt() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let pair = try await Self.pair(directory)
            let signal = pair.domain.path + FileChangeSignal.Poke.suffix
            func modified() -> timespec {
                var status = stat()
                guard stat(signal, &status) == 0 else { return timespec() }
                return status.st_mtim
            }
            let created = modified()
            #expect(created.tv_sec > 0, "making the chat poked the signal file")
            let woken = Locked(0)
            let watcher = FileChangeSignal(path: pair.domain.path) { woken.withLock { $0 += 1 } }
            try await Task.sleep(for: .milliseconds(20))  // a later modification time than `created` (kernel time is coarse)
            _ = try await pair.domain.post(
                token: pair.alice, endpointID: "alice-1", chatID: pair.chatID, kind: .message, payload: Data("hi".utf8),
                recipient: nil, clientID: nil)
            let posted = modified()
            #expect((posted.tv_sec, posted.tv_nsec) > (created.tv_sec, created.tv_nsec), "the post poked the signal file")
            #expect(await eventually { woken.withLock { $0 } > 0 })
            // The poke alone, with no write to the database or its WAL, wakes the watcher.
            let before = woken.withLock { $0 }
            FileChangeSignal.Poke(path: pair.domain.path)()
            #expect(await eventually { woken.withLock { $0 } > before })
            withExtendedLifetime(watcher) {}
        }
    }

    @Test func anotherUsersEntryDoesNotEndTheWait() async throws {
        // A long-poll that ended whenever anyone posted would tell every client when the
        // domain is busy: waiters are woken per user.
        let waiters = MailboxWaiters()
        let bob = waiters.ticket(for: "bob")
        let ended = Box(false)
        let waiter = Task {
            await waiters.wait(bob, timeout: .seconds(3600))
            ended.value = true
        }
        #expect(await eventually { waiters.waiting == 1 })
        waiters.notify(["carol", "dave"])
        try await Task.sleep(for: .milliseconds(200))
        #expect(!ended.value, "carol's and dave's entries do not wake bob")
        waiters.notify(["bob"])
        #expect(await eventually { ended.value })
        waiter.cancel()
    }

    /// The sweeper ends each wait when its time is up, in the order their times come, and
    /// passes over a wait woken before (resuming it twice would trap); once nothing waits it
    /// stops, and the next wait starts it again.
    @Test func theSweeperEndsWaitsAsTheirTimesComeAndPassesOverWokenOnes() async {
        let waiters = MailboxWaiters()
        let ended = Locked<[String]>([])
        func waiting(_ user: String, _ timeout: Duration) -> Task<Void, Never> {
            let ticket = waiters.ticket(for: user)
            return Task {
                await waiters.wait(ticket, timeout: timeout)
                ended.withLock { $0.append(user) }
            }
        }
        let tasks = [waiting("dave", .seconds(1)), waiting("bob", .milliseconds(200)), waiting("carol", .milliseconds(300))]
        #expect(await eventually { waiters.waiting == 3 })
        waiters.notify(["carol"])
        for task in tasks { await task.value }
        #expect(ended.withLock { $0 } == ["carol", "bob", "dave"])
        #expect(waiters.waiting == 0)
        await waiting("erin", .milliseconds(100)).value
        #expect(ended.withLock { $0 }.last == "erin" && waiters.waiting == 0)
    }

    /// A parked long-poll (no task) is woken exactly once: by an entry, by its timeout, at once
    /// when the entry came first, or when the server ends every wait.
    @Test func aParkedWaitIsWokenOnceWhateverEndsIt() async {
        let waiters = MailboxWaiters()
        let woken = Locked<[String]>([])
        func park(_ user: String, _ timeout: Duration) {
            waiters.park(waiters.ticket(for: user), timeout: timeout) { woken.withLock { $0.append(user) } }
        }
        park("bob", .seconds(3600))
        park("carol", .milliseconds(200))
        park("dave", .seconds(3600))
        #expect(waiters.waiting == 3)
        waiters.notify(["bob"])
        waiters.notify(["bob"])
        #expect(woken.withLock { $0 } == ["bob"], "an entry wakes its user's wait, once")
        #expect(await eventually(seconds: 10) { woken.withLock { $0 } == ["bob", "carol"] }, "the timeout wakes it")
        let before = waiters.ticket(for: "erin")
        waiters.notify(["erin"])
        waiters.park(before, timeout: .seconds(3600)) { woken.withLock { $0.append("erin") } }
        #expect(woken.withLock { $0 }.last == "erin", "an entry before the park wakes it at once")
        waiters.endAll()
        #expect(woken.withLock { $0 } == ["bob", "carol", "erin", "dave"] && waiters.waiting == 0)
        try? await Task.sleep(for: .milliseconds(300))
        #expect(woken.withLock { $0 }.count == 4, "nothing is woken twice (the sweeper passes over it)")
    }

    @Test func anEntryBetweenTheReadAndTheWaitIsNotMissed() async {
        let waiters = MailboxWaiters()
        let ticket = waiters.ticket(for: "bob")
        waiters.notify(["bob"])
        // Taken before the entry: the wait returns at once instead of sleeping its hour.
        await waiters.wait(ticket, timeout: .seconds(3600))
        #expect(waiters.waiting == 0)
    }

    @Test func withoutAnEntryTheWaitEndsEmptyAtItsTimeout() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let pair = try await Self.pair(directory)
            let cursor = try await Self.head(pair)
            let entries = try await pair.domain.readMailbox(
                token: pair.bob, endpointID: "bob-1", after: cursor, limit: 10, wait: .milliseconds(300))
            #expect(entries.isEmpty)
            #expect(pair.domain.mailboxWaiters.waiting == 0, "a timed-out waiter is gone")
        }
    }

    @Test func cancellingALongPollEndsIt() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let pair = try await Self.pair(directory)
            let cursor = try await Self.head(pair)
            let read = Task {
                try await pair.domain.readMailbox(
                    token: pair.bob, endpointID: "bob-1", after: cursor, limit: 10, wait: .seconds(30))
            }
            #expect(await eventually { pair.domain.mailboxWaiters.waiting == 1 })
            read.cancel()
            #expect(try await read.value.isEmpty)
            #expect(pair.domain.mailboxWaiters.waiting == 0)
        }
    }

    /// What a read found ends with anything announced for the user since its ticket, with an
    /// announcement to everyone (the listener lost its connection and may have missed some), and
    /// for a cursor behind the end; another user's entry leaves it.
    @Test func whatAReadFoundLastsUntilAnAnnouncementCouldChangeIt() {
        let waiters = MailboxWaiters()
        waiters.settle(waiters.ticket(for: "bob"), at: 5)
        #expect(waiters.isSettled(waiters.ticket(for: "bob"), after: 5))
        #expect(waiters.isSettled(waiters.ticket(for: "bob"), after: 7), "a cursor past the end")
        #expect(!waiters.isSettled(waiters.ticket(for: "bob"), after: 4), "a cursor behind the end reads")
        #expect(!waiters.isSettled(waiters.ticket(for: "carol"), after: 5), "nothing read for carol")
        waiters.notify(["carol"])
        #expect(waiters.isSettled(waiters.ticket(for: "bob"), after: 5), "carol's entry is not bob's")
        waiters.notify(["bob"])
        #expect(!waiters.isSettled(waiters.ticket(for: "bob"), after: 5), "an entry announced for bob")

        waiters.settle(waiters.ticket(for: "bob"), at: 6)
        #expect(waiters.isSettled(waiters.ticket(for: "bob"), after: 6))
        waiters.notifyEveryone()
        #expect(!waiters.isSettled(waiters.ticket(for: "bob"), after: 6), "announcements may have been missed")

        // A read whose ticket is older than an announcement found nothing that counts.
        let stale = waiters.ticket(for: "bob")
        waiters.notify(["bob"])
        waiters.settle(stale, at: 6)
        #expect(!waiters.isSettled(waiters.ticket(for: "bob"), after: 6), "read before the last entry was announced")
    }

    /// An engine over a new SQLite domain file in `directory`, its store as `wrap` makes it, with
    /// alice's endpoint a1 and bob's b1 in chat c1: the engine, the file, alice's and bob's tokens.
    static func engine(in directory: URL, wrap: (SQLiteDomainStore) -> any DomainStore = { $0 }) async throws -> (
        DomainEngine, String, String, String
    ) {
        let path = directory.appendingPathComponent("domain.sqlite").path
        let sqlite = try SQLiteDomainStore(path: path)
        try DomainEngine.create(in: sqlite, domainID: "polls", policy: DomainPolicy())
        let domain = try DomainEngine(store: wrap(sqlite), location: path, passcodeKeys: .generate())
        let alice = try await domain.testToken(userID: "alice").token
        let bob = try await domain.testToken(userID: "bob").token
        _ = try await domain.registerEndpoint(token: alice, registration: .init(endpointID: "a1", description: "a"))
        _ = try await domain.registerEndpoint(token: bob, registration: .init(endpointID: "b1", description: "b"))
        _ = try await domain.createChat(token: alice, endpointID: "a1", chatID: "c1", participants: ["bob"])
        return (domain, path, alice, bob)
    }

    /// ``engine(in:wrap:)`` with the mailbox reads counted, and bob's mailbox end.
    static func countingEngine(in directory: URL) async throws -> (DomainEngine, CountingStore, String, String, Int64) {
        var made: CountingStore?
        let (domain, _, alice, bob) = try await engine(in: directory) { sqlite in
            made = CountingStore(sqlite)
            return made!
        }
        let head = try #require(try await domain.readMailbox(token: bob, endpointID: "b1", after: 0, limit: 100).last)
            .sequence
        return (domain, try #require(made), alice, bob, head)
    }

    /// Bob's long-poll after `cursor`: what it returned, or nil if it waited (it is then
    /// cancelled once it shows among the waiters, so nothing here depends on a timeout).
    static func pollOrWait(_ domain: DomainEngine, _ bob: String, after cursor: Int64) async throws -> [MailboxEntry]? {
        let answered = Locked(false)
        let read = Task {
            defer { answered.withLock { $0 = true } }
            return try await domain.readMailbox(token: bob, endpointID: "b1", after: cursor, limit: 10, wait: .seconds(30))
        }
        let waited = Task {
            _ = await eventually(seconds: 60) { answered.withLock { $0 } || domain.mailboxWaiters.waiting == 1 }
            guard domain.mailboxWaiters.waiting == 1 else { return false }
            read.cancel()
            return true
        }
        let entries = try await read.value
        return await waited.value ? nil : entries
    }

    /// A long-poll sent again right after its answer (a device's next one) waits without reading
    /// the mailbox, since a read found its end and no entry was announced since; but an entry
    /// announced after that read, or a cursor behind the end (an answer the device lost), is
    /// read at once, not at the end of the wait.
    @Test func aLongPollSentAgainReadsOnlyWhenSomethingCameOrWasMissed() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let (domain, counts, alice, bob, head) = try await Self.countingEngine(in: directory)
            func post(_ text: String) async throws {
                _ = try await domain.post(
                    token: alice, endpointID: "a1", chatID: "c1", kind: .message, payload: Data(text.utf8), recipient: nil,
                    clientID: nil)
            }

            // Read to its end: the next long-poll waits without a read.
            var reads = counts.mailboxReads.withLock { $0 }
            #expect(try await Self.pollOrWait(domain, bob, after: head) == nil, "nothing came: it waits")
            #expect(counts.mailboxReads.withLock { $0 } == reads, "and did not read the mailbox to know it")

            // An entry announced since the last read is read at once.
            try await post("first")
            let first = try #require(try await Self.pollOrWait(domain, bob, after: head), "the entry is read at once")
            #expect(first.map(\.payload) == [Data("first".utf8)])
            let end = try #require(first.last).sequence
            reads = counts.mailboxReads.withLock { $0 }
            #expect(try await Self.pollOrWait(domain, bob, after: end) == nil)
            #expect(counts.mailboxReads.withLock { $0 } == reads, "sent again after its answer, it waits without a read")

            try await post("second")
            let second = try #require(try await Self.pollOrWait(domain, bob, after: end), "announced after the read")
            #expect(second.map(\.payload) == [Data("second".utf8)])

            // A device that lost an answer asks again from further back: it gets what it missed.
            let again = try #require(try await Self.pollOrWait(domain, bob, after: head), "a cursor behind the end")
            #expect(again.map(\.payload) == [Data("first".utf8), Data("second".utf8)])

            // A read cut short by its limit did not find the end: what follows is read at once.
            let page = try await domain.readMailbox(token: bob, endpointID: "b1", after: head, limit: 1)
            #expect(page.map(\.payload) == [Data("first".utf8)])
            let rest = try #require(try await Self.pollOrWait(domain, bob, after: page[0].sequence), "after a full page")
            #expect(rest.map(\.payload) == [Data("second".utf8)])
        }
    }

    /// An entry whose announcement never reaches this engine (another process wrote the file,
    /// as `spark-admin` on a served domain's) is still read when the long-poll's wait ends.
    @Test func anEntryNobodyAnnouncedIsReadWhenTheWaitEnds() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let (here, path, alice, bob) = try await Self.engine(in: directory)
            // A second engine on the file, whose announcements reach only its own waiters.
            let elsewhere = try DomainEngine(store: try SQLiteDomainStore(path: path), location: path, passcodeKeys: .generate())
            let head = try #require(try await here.readMailbox(token: bob, endpointID: "b1", after: 0, limit: 100).last).sequence
            _ = try await elsewhere.post(
                token: alice, endpointID: "a1", chatID: "c1", kind: .message, payload: Data("unheard".utf8), recipient: nil,
                clientID: nil)
            let entries = try await here.readMailbox(
                token: bob, endpointID: "b1", after: head, limit: 10, wait: .milliseconds(300))
            #expect(entries.map(\.payload) == [Data("unheard".utf8)], "read when the wait ended, not skipped again")
        }
    }

    /// A mailbox with entries is read only through an endpoint of its user that is registered
    /// and not taking the profile over: the one statement that reads entries checks the endpoint
    /// too.
    @Test func onlyTheUsersUsableEndpointReadsAMailboxWithEntries() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let (domain, path, alice, bob) = try await Self.engine(in: directory)
            let sqlite = try SQLiteDomainStore(path: path)
            _ = try await domain.post(
                token: alice, endpointID: "a1", chatID: "c1", kind: .message, payload: Data("for bob".utf8), recipient: nil,
                clientID: nil)
            func read(_ endpoint: String) async throws -> [MailboxEntry] {
                try await domain.readMailbox(token: bob, endpointID: endpoint, after: 0, limit: 100)
            }
            #expect(try await read("b1").count == 2, "the membership and the message")

            await #expect(throws: DomainError(.endpointRemoved, ""), "another user's endpoint") { try await read("a1") }
            await #expect(throws: DomainError(.endpointRemoved, ""), "no such endpoint") { try await read("b9") }

            try sqlite.blockingWrite(.serializable) { db in
                try db.execute("UPDATE endpoints SET takeover_pending = 1 WHERE endpoint_id = ?", ["b1"])
            }
            await #expect(throws: DomainError(.forbidden, ""), "a takeover not yet proven") { try await read("b1") }
            try sqlite.blockingWrite(.serializable) { db in
                try db.execute("UPDATE endpoints SET takeover_pending = 0 WHERE endpoint_id = ?", ["b1"])
            }
            try await domain.deregisterEndpoint(token: bob, endpointID: "b1", target: "b1")
            await #expect(throws: DomainError(.endpointRemoved, ""), "a removed endpoint") { try await read("b1") }
        }
    }

    /// A long-poll woken by a post made in its engine is answered with the entries the post
    /// wrote, without reading the mailbox, and they are what a read returns (up to the poll's
    /// limit); its next long-poll waits without a read too.
    @Test func aPostHandsTheLongPollItWokeItsEntriesWithoutARead() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let (domain, counts, alice, bob, head) = try await Self.countingEngine(in: directory)
            let poll = Task {
                try await domain.readMailbox(token: bob, endpointID: "b1", after: head, limit: 2, wait: .seconds(30))
            }
            #expect(await eventually { domain.mailboxWaiters.waiting == 1 }, "bob's long-poll waits")
            let reads = counts.mailboxReads.withLock { $0 }
            let receipt = try await domain.postMessages(
                token: alice, endpointID: "a1", chatID: "c1",
                messages: ["one", "two", "three"].map { MessagePost(clientID: $0, payload: Data($0.utf8)) })
            #expect(receipt.receipts.count == 3 && receipt.refusal == nil)
            let answer = try await poll.value
            #expect(answer.map(\.payload) == [Data("one".utf8), Data("two".utf8)], "the post's entries, up to the limit")
            #expect(counts.mailboxReads.withLock { $0 } == reads, "answered without reading the mailbox")
            let read = try await domain.readMailbox(token: bob, endpointID: "b1", after: head, limit: 2)
            #expect(answer == read, "exactly what a read returns")

            // All three taken: the next long-poll knows the end without a read.
            let all = try await domain.readMailbox(token: bob, endpointID: "b1", after: head, limit: 10)
            #expect(all.map(\.payload) == ["one", "two", "three"].map { Data($0.utf8) })
            let end = try #require(all.last).sequence
            let before = counts.mailboxReads.withLock { $0 }
            #expect(try await Self.pollOrWait(domain, bob, after: end) == nil)
            #expect(counts.mailboxReads.withLock { $0 } == before)
        }
    }

    /// An endpoint removed (or taking the profile over) where this engine did not hear of it —
    /// another instance, or `spark-admin` on the file — is not handed a post's entries by its
    /// waiting long-poll: the post's transaction finds it unusable, so the poll reads, and is
    /// refused as any read of that endpoint is.
    @Test func aLongPollOfAnEndpointRemovedUnheardIsNotHandedAPostsEntries() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let (domain, path, alice, bob) = try await Self.engine(in: directory)
            let sqlite = try SQLiteDomainStore(path: path)
            for (column, value, refusal) in [
                ("takeover_pending", "1", DomainError.Code.forbidden), ("removed_reason", "'deregistered'", .endpointRemoved),
            ] {
                let head = try #require(try await domain.readMailbox(token: bob, endpointID: "b1", after: 0, limit: 100).last)
                    .sequence
                let poll = Task {
                    try await domain.readMailbox(token: bob, endpointID: "b1", after: head, limit: 10, wait: .seconds(30))
                }
                #expect(await eventually { domain.mailboxWaiters.waiting == 1 })
                try sqlite.blockingWrite(.serializable) { db in
                    try db.execute("UPDATE endpoints SET \(column) = \(value) WHERE endpoint_id = ?", ["b1"])
                }
                _ = try await domain.post(
                    token: alice, endpointID: "a1", chatID: "c1", kind: .message, payload: Data("secret".utf8), recipient: nil,
                    clientID: nil)
                await #expect(throws: DomainError(refusal, ""), "\(column): refused, not handed the entry") {
                    try await poll.value
                }
                try sqlite.blockingWrite(.serializable) { db in
                    try db.execute("UPDATE endpoints SET takeover_pending = 0 WHERE endpoint_id = ?", ["b1"])
                }
            }
        }
    }

    /// A waiter is handed entries only where its cursor is just before them: announcements of
    /// two posts may come in either order, and one whose entries do not follow the cursor
    /// would skip the other's. Nor is it handed entries that are not one run of the mailbox, or
    /// any for an endpoint not found usable.
    @Test func aWaiterIsHandedOnlyEntriesThatFollowItsCursor() async {
        let waiters = MailboxWaiters()
        func entries(_ sequences: ClosedRange<Int64>, skipping: Int64? = nil) -> AppendedEntries {
            var appended = AppendedEntries()
            for sequence in sequences where sequence != skipping {
                appended.add(
                    MailboxEntry(
                        sequence: sequence, chatID: "c", sender: "alice", kind: .message, messageNumber: sequence,
                        payload: Data([UInt8(sequence)]), members: nil, postedAt: Date(timeIntervalSince1970: 1)),
                    for: "bob")
            }
            return appended
        }
        let usable: Set<MailboxWaiters.Endpoint> = [.init(user: "bob", endpointID: "b1")]
        func handed(cursor: Int64, endpoint: String = "b1", _ appended: AppendedEntries) -> [Int64]? {
            let reader = MailboxWaiters.Reader(endpointID: endpoint, cursor: cursor, limit: 10)
            let woken = Locked(false)
            waiters.park(waiters.ticket(for: "bob"), reader: reader, timeout: .seconds(30)) { woken.withLock { $0 = true } }
            #expect(waiters.waitingEndpoints(of: ["bob"]) == [.init(user: "bob", endpointID: endpoint)])
            waiters.deliver(appended, usable: usable)
            #expect(woken.withLock { $0 }, "woken either way")
            return reader.take()?.map(\.sequence)
        }
        #expect(handed(cursor: 5, entries(6...7)) == [6, 7])
        #expect(handed(cursor: 5, entries(7...8)) == nil, "an earlier post's entry 6 is not announced yet: read")
        #expect(handed(cursor: 7, entries(6...8)) == nil, "behind the cursor: read")
        #expect(handed(cursor: 5, entries(6...9, skipping: 8)) == nil, "not one run: read")
        #expect(handed(cursor: 5, endpoint: "b2", entries(6...7)) == nil, "an endpoint not found usable: read")
        #expect(waiters.waiting == 0)
    }

    /// A user's mailbox end known from a read moves with entries that follow it, and only those.
    @Test func handedEntriesMoveTheKnownEndOnlyWhenTheyFollowIt() {
        let waiters = MailboxWaiters()
        func appended(_ sequence: Int64) -> AppendedEntries {
            var appended = AppendedEntries()
            appended.add(
                MailboxEntry(
                    sequence: sequence, chatID: "c", sender: "alice", kind: .message, messageNumber: nil, payload: Data(),
                    members: nil, postedAt: Date(timeIntervalSince1970: 1)),
                for: "bob")
            return appended
        }
        waiters.settle(waiters.ticket(for: "bob"), at: 5)
        waiters.deliver(appended(6), usable: [])
        #expect(waiters.isSettled(waiters.ticket(for: "bob"), after: 6), "6 follows the end read: the end is 6")
        #expect(!waiters.isSettled(waiters.ticket(for: "bob"), after: 5))
        waiters.deliver(appended(8), usable: [])
        #expect(!waiters.isSettled(waiters.ticket(for: "bob"), after: 8), "7 is unaccounted for: read")
    }

    @Test func aWaitLongerThanThirtySecondsIsRefused() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let pair = try await Self.pair(directory)
            await #expect(throws: DomainError(.invalidRequest, "")) {
                try await pair.domain.readMailbox(token: pair.bob, endpointID: "bob-1", after: 0, limit: 10, wait: .seconds(31))
            }
        }
    }
}
