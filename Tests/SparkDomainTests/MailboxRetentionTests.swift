import Foundation
import SparkDomain
import SparkDomainEngine
import SparkTestSupport
import Testing

/// The domain deletes a mailbox's entries once every endpoint of the user has read past them
/// (an hour later), and any older than the retention period, read or not.
@Suite("Mailbox retention")
struct MailboxRetentionTests {
    struct World {
        let domain: EmbeddedDomain
        let clock: TestClock
        /// A token of alice's, fresh (the clock moves past their lifetime).
        var alice: String { get async throws { try await domain.testToken(userID: "alice").token } }
        var bob: String { get async throws { try await domain.testToken(userID: "bob").token } }
    }

    static func world(_ directory: URL, retention: Int = 30 * 86400) async throws -> World {
        let clock = TestClock()
        let domain = try makeDomain(
            directory, clock: clock, policy: DomainPolicy(passwordIterations: 1000, mailboxRetention: retention))
        let alice = try await domain.testToken(userID: "alice").token
        let bob = try await domain.testToken(userID: "bob").token
        for (token, endpoint) in [(alice, "e-alice"), (bob, "e-bob-phone"), (bob, "e-bob-tablet")] {
            _ = try await domain.registerEndpoint(token: token, registration: .init(endpointID: endpoint, description: endpoint))
        }
        _ = try await domain.createChat(token: alice, endpointID: "e-alice", chatID: "c1", participants: ["bob"])
        for text in ["one", "two", "three"] {
            _ = try await domain.post(
                token: alice, endpointID: "e-alice", chatID: "c1", kind: .message, payload: Data(text.utf8), recipient: nil,
                clientID: nil)
        }
        return World(domain: domain, clock: clock)
    }

    static func entries(_ world: World, _ endpoint: String, after cursor: Int64 = 0) async throws -> [MailboxEntry] {
        try await world.domain.readMailbox(token: try await world.bob, endpointID: endpoint, after: cursor, limit: 100)
    }

    @Test func entriesEveryDeviceReadPastGoAnHourLater() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try await Self.world(directory)
            let all = try await Self.entries(world, "e-bob-phone")
            #expect(all.map(\.kind) == [.membership, .message, .message, .message])
            let last = try #require(all.last?.sequence)
            world.clock.advance(by: 2 * 3600)
            // The phone read everything; the tablet has not: nothing goes.
            _ = try await Self.entries(world, "e-bob-phone", after: last)
            #expect(try await Self.entries(world, "e-bob-tablet").count == all.count)
            // The tablet reads past the second message: what both read past goes.
            _ = try await Self.entries(world, "e-bob-tablet", after: all[2].sequence)
            #expect(try await Self.entries(world, "e-bob-tablet").map(\.sequence) == [all[3].sequence])
            // Entries read by all, but within the hour, stay.
            _ = try await world.domain.post(
                token: try await world.alice, endpointID: "e-alice", chatID: "c1", kind: .message, payload: Data("four".utf8),
                recipient: nil, clientID: nil)
            let newest = try #require(try await Self.entries(world, "e-bob-phone", after: last).last?.sequence)
            world.clock.advance(by: DomainEngine.cursorRecordInterval + 60)  // past the limit on recording a cursor
            _ = try await Self.entries(world, "e-bob-phone", after: newest)
            _ = try await Self.entries(world, "e-bob-tablet", after: newest)
            #expect(try await Self.entries(world, "e-bob-tablet").map(\.sequence) == [newest], "read an hour ago at most")
            // Alice's own mailbox is hers: none of bob's reads touched it.
            #expect(
                try await world.domain.readMailbox(token: try await world.alice, endpointID: "e-alice", after: 0, limit: 100)
                    .count == 5)
        }
    }

    @Test func entriesOlderThanTheRetentionGoReadOrNot() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try await Self.world(directory, retention: 86400)
            let all = try await Self.entries(world, "e-bob-phone")
            world.clock.advance(by: 86400 + 60)
            _ = try await world.domain.post(
                token: try await world.alice, endpointID: "e-alice", chatID: "c1", kind: .message, payload: Data("later".utf8),
                recipient: nil, clientID: nil)
            // The tablet never read; the phone's next read records its cursor and prunes.
            _ = try await Self.entries(world, "e-bob-phone", after: all[0].sequence)
            let left = try await Self.entries(world, "e-bob-tablet")
            #expect(left.map(\.payload) == [Data("later".utf8)], "only what is younger than a day")
        }
    }

    /// Entries for a user who never reads (the reads that prune are the owner's) go all the same:
    /// the domain prunes on a timer.
    @Test func entriesOfAMailboxNoOneReadsGoAtTheRetention() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try await Self.world(directory, retention: 86400)
            #expect(try world.domain.pruneExpiredEntries() == 0, "nothing is older than a day yet")
            world.clock.advance(by: 86400 + 60)
            _ = try await world.domain.post(
                token: try await world.alice, endpointID: "e-alice", chatID: "c1", kind: .message, payload: Data("later".utf8),
                recipient: nil, clientID: nil)
            // Bob never read; no read of his prunes. The timer does.
            #expect(try world.domain.pruneExpiredEntries() == 8, "bob's four and alice's own four")
            #expect(try await Self.entries(world, "e-bob-tablet").map(\.payload) == [Data("later".utf8)])
        }
    }

    @Test func theRetentionIsAPolicyWithinBounds() throws {
        #expect(throws: DomainError.self) { try DomainPolicy(mailboxRetention: 60).validate() }
        #expect(throws: DomainError.self) { try DomainPolicy(mailboxRetention: 400 * 86400).validate() }
        #expect(throws: Never.self) { try DomainPolicy(mailboxRetention: 7 * 86400).validate() }
        #expect(DomainPolicy().mailboxRetention == 30 * 86400)
    }
}

/// Ephemeral entries (typing, live chat events) reach the endpoints that read within their
/// lifetime, and are then gone: from later reads, and from the database.
@Suite("Ephemeral entries")
struct EphemeralEntryTests {
    @Test func anEphemeralEntryLivesSecondsAndLeavesNothing() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try await MailboxRetentionTests.world(directory)
            let before = try await MailboxRetentionTests.entries(world, "e-bob-phone")
            let marker = Data("ephemeral-marker-0123456789".utf8)
            _ = try await world.domain.post(
                token: try await world.alice, endpointID: "e-alice", chatID: "c1", kind: .ephemeral, payload: marker,
                recipient: nil, clientID: nil)
            let live = try await MailboxRetentionTests.entries(world, "e-bob-phone", after: before.last?.sequence ?? 0)
            #expect(live.map(\.kind) == [.ephemeral] && live.first?.messageNumber == nil, "delivered live, unnumbered")
            world.clock.advance(by: DomainEngine.ephemeralLifetime + 1)
            // The tablet reads late: it never gets it.
            #expect(try await MailboxRetentionTests.entries(world, "e-bob-tablet").allSatisfy { $0.kind != .ephemeral })
            #expect(try world.domain.pruneEphemeralEntries() == 2, "bob's copy and alice's own")
            #expect(try world.domain.pruneEphemeralEntries() == 0)
            // A later ephemeral post deletes the chat's expired ones itself (the embedded domain has no timer).
            _ = try await world.domain.post(
                token: try await world.alice, endpointID: "e-alice", chatID: "c1", kind: .ephemeral, payload: marker,
                recipient: nil, clientID: nil)
            world.clock.advance(by: DomainEngine.ephemeralLifetime + 1)
            _ = try await world.domain.post(
                token: try await world.alice, endpointID: "e-alice", chatID: "c1", kind: .ephemeral, payload: marker,
                recipient: nil, clientID: nil)
            #expect(try world.domain.pruneEphemeralEntries() == 0, "the new one is live; the old ones went with it")
        }
    }

    @Test func anEphemeralPostIsBoundedAndGoesToEveryMember() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try await MailboxRetentionTests.world(directory)
            let alice = try await world.alice
            await #expect(throws: DomainError(.invalidRequest, "")) {
                try await world.domain.post(
                    token: alice, endpointID: "e-alice", chatID: "c1", kind: .ephemeral, payload: Data([1]), recipient: "bob",
                    clientID: nil)
            }
            await #expect(throws: DomainError(.invalidRequest, "")) {
                try await world.domain.post(
                    token: alice, endpointID: "e-alice", chatID: "c1", kind: .ephemeral,
                    payload: Data(count: DomainEngine.maximumEphemeralSize + 1), recipient: nil, clientID: nil)
            }
        }
    }
}
