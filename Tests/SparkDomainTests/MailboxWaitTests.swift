import Foundation
import SparkLock
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

    @Test func aWaitLongerThanThirtySecondsIsRefused() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let pair = try await Self.pair(directory)
            await #expect(throws: DomainError(.invalidRequest, "")) {
                try await pair.domain.readMailbox(token: pair.bob, endpointID: "bob-1", after: 0, limit: 10, wait: .seconds(31))
            }
        }
    }
}
