import Foundation
import SparkLock
import SparkStore
import SparkTestSupport
import Testing

@testable import SparkDomain
@testable import SparkDomainEngine

/// Posts that arrive together share one transaction (group commit), each in a savepoint, and
/// each is answered only after that transaction committed.
@Suite("Domain: group commit of posts")
struct GroupCommitTests {
    /// The domain of `MailboxWaitTests.pair`, opened again with `hook` run before each posts'
    /// commit.
    static func engine(_ pair: MailboxWaitTests.Pair, hook: @escaping @Sendable (any DomainStatements) throws -> Void)
        throws -> DomainEngine
    {
        try DomainEngine(
            store: try SQLiteDomainStore(path: pair.domain.path), location: pair.domain.path,
            passcodeKeys: try PasscodeKeys.loadOrCreate(at: DomainEngine.passcodeKeysPath(forDatabase: pair.domain.path)),
            allowUnsafePasswordHashing: true, sharedWithOtherProcesses: true, beforePostCommit: hook)
    }

    static func post(_ engine: DomainEngine, _ token: String, _ endpointID: String, _ text: String, chatID: String = "chat-1")
        async throws -> PostReceipt
    {
        try await engine.post(
            token: token, endpointID: endpointID, chatID: chatID, kind: .message, payload: Data(text.utf8), recipient: nil,
            clientID: text)
    }

    /// The texts in bob's mailbox after the chat's membership entry.
    static func texts(_ pair: MailboxWaitTests.Pair) async throws -> [String] {
        try await pair.domain.readMailbox(token: pair.bob, endpointID: "bob-1", after: 0, limit: 500)
            .filter { $0.kind == .message }.map { String(decoding: $0.payload, as: UTF8.self) }
    }

    @Test func postsThatArriveTogetherShareATransactionAndEachIsNumberedOnce() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let pair = try await MailboxWaitTests.pair(directory)
            let engine = try Self.engine(pair) { _ in }
            // Held, so that the twenty arrive together, as a burst does behind a commit.
            await engine.posts.hold()
            let posts = (0..<20).map { index in Task { try await Self.post(engine, pair.alice, "alice-1", "m\(index)") } }
            #expect(await eventuallyAwaiting { await engine.posts.queued == 20 })
            await engine.posts.release()
            var receipts: [PostReceipt] = []
            for post in posts { receipts.append(try await post.value) }
            #expect(Set(receipts.compactMap(\.messageNumber)) == Set(1...20), "each post has a number of its own")
            let (transactions, writes) = (await engine.posts.transactions, await engine.posts.writes)
            #expect(writes == 20)
            #expect(transactions == 1, "posts that arrived together went in one transaction")
            #expect(try await Self.texts(pair).sorted() == (0..<20).map { "m\($0)" }.sorted(), "each once in bob's mailbox")
        }
    }

    @Test func aPostIsAnsweredOnlyAfterItsTransactionCommitted() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let pair = try await MailboxWaitTests.pair(directory)
            // The first two transactions fail at their end, as a commit that fails would.
            let failures = Locked(2)
            let engine = try Self.engine(pair) { _ in
                let fail = failures.withLock { left in
                    defer { left = max(0, left - 1) }
                    return left > 0
                }
                if fail { throw DomainError(.storageFailure, "the commit failed") }
            }
            // A post that finds a lane free, in its own task.
            await #expect(throws: DomainError.self, "a post whose transaction did not commit is not answered as taken") {
                try await Self.post(engine, pair.alice, "alice-1", "lost")
            }
            // A post that queued for a lane, answered by the lane.
            await engine.posts.hold()
            let queued = Task { try await Self.post(engine, pair.alice, "alice-1", "lost") }
            #expect(await eventuallyAwaiting { await engine.posts.queued == 1 })
            await engine.posts.release()
            await #expect(throws: DomainError.self, "a queued post whose transaction did not commit is not answered as taken") {
                try await queued.value
            }
            #expect(try await Self.texts(pair).isEmpty, "nothing of it is in the store")
            let retried = try await Self.post(engine, pair.alice, "alice-1", "lost")
            #expect(retried.messageNumber == 1, "its number was not used: the retry gets the first")
            #expect(try await Self.texts(pair) == ["lost"])
        }
    }

    @Test func aRefusedPostInATransactionIsRolledBackAloneAndTheOthersCommit() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let pair = try await MailboxWaitTests.pair(directory)
            let mallory = try await pair.domain.testToken(userID: "mallory").token
            _ = try await pair.domain.registerEndpoint(
                token: mallory, registration: .init(endpointID: "mallory-1", description: "m"))
            let engine = try Self.engine(pair) { _ in }
            let ahead = try await Self.post(engine, pair.alice, "alice-1", "ahead")
            #expect(ahead.messageNumber == 1)
            // Held, so that the four arrive together.
            await engine.posts.hold()
            let good1 = Task { try await Self.post(engine, pair.alice, "alice-1", "good-1") }
            let intruder = Task { try await Self.post(engine, mallory, "mallory-1", "intruder") }
            // Refused after it took a number (its recipient is not a member): the number goes back.
            let misaddressed = Task {
                try await engine.post(
                    token: pair.alice, endpointID: "alice-1", chatID: pair.chatID, kind: .message,
                    payload: Data("to mallory".utf8), recipient: "mallory", clientID: "to mallory")
            }
            let good2 = Task { try await Self.post(engine, pair.bob, "bob-1", "good-2") }
            #expect(await eventuallyAwaiting { await engine.posts.queued == 4 })
            await engine.posts.release()
            let numbers = [try await good1.value.messageNumber, try await good2.value.messageNumber]
            #expect(Set(numbers.compactMap { $0 }) == [2, 3], "after the post ahead (1)")
            await #expect(throws: DomainError(.notAMember, "")) { try await intruder.value }
            await #expect(throws: DomainError(.notAMember, "")) { try await misaddressed.value }
            let transactions = await engine.posts.transactions
            #expect(transactions == 2, "the four queued posts shared one transaction (\(transactions))")
            let after = try await Self.post(engine, pair.alice, "alice-1", "after")
            #expect(after.messageNumber == 4, "no number was taken by a refused post")
            #expect(
                try await Self.texts(pair).sorted() == ["after", "ahead", "good-1", "good-2"], "nothing of the refused posts")
        }
    }
}
