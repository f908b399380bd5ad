import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkTestSupport
import Testing

/// The domain enforces moderation and membership itself, whatever a client does: a banned or
/// timed-out user's posts are refused, so are a non-member's, and nothing is routed for them.
@Suite("Embedded domain: moderation and membership")
struct ModerationTests {
    struct World {
        let domain: EmbeddedDomain
        let alice: String
        let bob: String
        let mallory: String
        let chatID = "chat-1"
    }

    static func world(_ directory: URL, clock: TestClock? = nil) async throws -> World {
        let domain = try makeDomain(directory, clock: clock)
        var tokens: [String] = []
        for user in ["alice", "bob", "mallory"] {
            let token = try await domain.testToken(userID: user).token
            _ = try await domain.registerEndpoint(token: token, registration: .init(endpointID: "e-\(user)", description: user))
            tokens.append(token)
        }
        _ = try await domain.createChat(token: tokens[0], endpointID: "e-alice", chatID: "chat-1", participants: ["bob"])
        return World(domain: domain, alice: tokens[0], bob: tokens[1], mallory: tokens[2])
    }

    static func post(_ world: World, _ token: String, _ user: String, kind: MailboxKind = .message) async throws -> PostReceipt {
        try await world.domain.post(
            token: token, endpointID: "e-\(user)", chatID: world.chatID, kind: kind, payload: Data("x".utf8), recipient: nil,
            clientID: nil)
    }

    static func mailboxCount(_ world: World, _ token: String, _ user: String) async throws -> Int {
        try await world.domain.readMailbox(token: token, endpointID: "e-\(user)", after: 0, limit: 1000).count
    }

    @Test func aNonMemberCannotPostReadOrChangeTheChat() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try await Self.world(directory)
            let before = try await Self.mailboxCount(world, world.bob, "bob")
            for kind in [MailboxKind.message, .event, .receipt] {
                await #expect(throws: DomainError(.notAMember, ""), "\(kind)") {
                    try await Self.post(world, world.mallory, "mallory", kind: kind)
                }
            }
            await #expect(throws: DomainError(.notAMember, "")) {
                try await world.domain.chat(token: world.mallory, endpointID: "e-mallory", chatID: world.chatID)
            }
            await #expect(throws: DomainError(.notAMember, "")) {
                try await world.domain.updateMembers(
                    token: world.mallory, endpointID: "e-mallory", chatID: world.chatID, add: ["mallory"], remove: [])
            }
            #expect(try await Self.mailboxCount(world, world.bob, "bob") == before, "nothing reached bob")
            // A member may post; a post for someone outside the chat is refused, and no client
            // posts what only the domain makes.
            #expect(try await Self.post(world, world.bob, "bob").messageNumber == 1)
            await #expect(throws: DomainError(.notAMember, "")) {
                try await world.domain.post(
                    token: world.bob, endpointID: "e-bob", chatID: world.chatID, kind: .event, payload: Data(),
                    recipient: "mallory", clientID: nil)
            }
            for kind in [MailboxKind.membership, .devices, .identityReset, .commit, .welcome] {
                await #expect(throws: DomainError(.invalidRequest, ""), "\(kind)") {
                    try await world.domain.post(
                        token: world.bob, endpointID: "e-bob", chatID: world.chatID, kind: kind, payload: Data("x".utf8),
                        recipient: nil, clientID: nil)
                }
            }
        }
    }

    @Test func aBannedUsersMessagesAndEventsAreRefusedUntilUnbanned() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try await Self.world(directory)
            try world.domain.ban("bob", reason: "abuse")
            for kind in [MailboxKind.message, .event] {
                do {
                    _ = try await Self.post(world, world.bob, "bob", kind: kind)
                    Issue.record("a banned user's \(kind) was routed")
                } catch let error as DomainError {
                    #expect(error.code == .moderated && error.reason.contains("abuse"), "\(error)")
                }
            }
            #expect(try await Self.mailboxCount(world, world.alice, "alice") == 1, "only the chat's membership entry")
            try world.domain.unban("bob")
            #expect(try await Self.post(world, world.bob, "bob").messageNumber == 1, "numbers did not move while refused")
        }
    }

    @Test func aTimeoutRefusesMessagesUntilItEnds() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let clock = TestClock()
            let world = try await Self.world(directory, clock: clock)
            try world.domain.timeOut("bob", for: 60, reason: "cool down")
            do {
                _ = try await Self.post(world, world.bob, "bob")
                Issue.record("a timed-out user's message was routed")
            } catch let error as DomainError {
                #expect(error.code == .moderated && error.reason.contains("cool down"), "\(error)")
            }
            #expect(try world.domain.moderationStatus(of: "bob").state != .valid)
            clock.advance(by: 61)
            #expect(try await Self.post(world, world.bob, "bob").messageNumber == 1)
        }
    }
}
