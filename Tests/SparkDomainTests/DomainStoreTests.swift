import Foundation
import SparkDomain
import SparkDomainEngine
import SparkLock
import SparkStore
import SparkTestSupport
import Testing

/// The engine over a store it does not know: a store that fails mid-transaction leaves nothing
/// half-applied, and the engine's refusal is a storage failure, not a crash or a wrong answer.
@Suite("Domain engine over a store")
struct DomainStoreTests {
    /// The SQLite store, with a statement that fails once armed (after `countdown` more).
    final class FailingStore: DomainStore {
        let inner: SQLiteDomainStore
        let countdown = Locked<Int?>(nil)

        init(_ inner: SQLiteDomainStore) { self.inner = inner }

        struct Injected: Error {}

        final class Statements: DomainStatements {
            let inner: any DomainStatements
            let store: FailingStore
            init(_ inner: any DomainStatements, _ store: FailingStore) {
                self.inner = inner
                self.store = store
            }
            func check() throws {
                let fail = store.countdown.withLock { countdown -> Bool in
                    guard let left = countdown else { return false }
                    countdown = left - 1
                    return left == 0
                }
                if fail { throw Injected() }
            }
            func execute(_ sql: String, _ arguments: [any DatabaseValueConvertible]) throws -> Int {
                try check()
                return try inner.execute(sql, arguments)
            }
            func rows(_ sql: String, _ arguments: [any DatabaseValueConvertible]) throws -> [Row] {
                try inner.rows(sql, arguments)
            }
            func row(_ sql: String, _ arguments: [any DatabaseValueConvertible]) throws -> Row? { try inner.row(sql, arguments) }
            func scalar<T: DatabaseValueConvertible>(
                _ sql: String, _ arguments: [any DatabaseValueConvertible], as type: T.Type
            ) throws -> T? { try inner.scalar(sql, arguments, as: type) }
        }

        var threads: TransactionThreads { inner.threads }
        func blockingWrite<T: Sendable>(_ scope: WriteScope, _ body: (any DomainStatements) throws -> T) throws -> T {
            try inner.blockingWrite(scope) { db in try body(Statements(db, self)) }
        }
        func blockingRead<T: Sendable>(_ body: (any DomainStatements) throws -> T) throws -> T { try inner.blockingRead(body) }
    }

    @Test func aStoreFailingMidPostLeavesNothingAndSaysStorageFailure() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("domain.sqlite").path
            let sqlite = try SQLiteDomainStore(path: path)
            try DomainEngine.create(in: sqlite, domainID: "faults", policy: DomainPolicy())
            let store = FailingStore(sqlite)
            let domain = try DomainEngine(store: store, location: path, passcodeKeys: .generate())
            let alice = try await domain.testToken(userID: "alice").token
            let bob = try await domain.testToken(userID: "bob").token
            _ = try await domain.registerEndpoint(token: alice, registration: .init(endpointID: "a1", description: "a"))
            _ = try await domain.registerEndpoint(token: bob, registration: .init(endpointID: "b1", description: "b"))
            _ = try await domain.createChat(token: alice, endpointID: "a1", chatID: "c1", participants: ["bob"])
            let before = try await domain.readMailbox(token: bob, endpointID: "b1", after: 0, limit: 100)
            // A post moves the chat's number and the mailbox heads (statements that return rows),
            // then writes the entries and the client id: fail the second of those writes, after
            // the number, the heads and the entries moved.
            store.countdown.withLock { $0 = 1 }
            await #expect(throws: DomainError(.storageFailure, "")) {
                try await domain.post(
                    token: alice, endpointID: "a1", chatID: "c1", kind: .message, payload: Data("lost".utf8), recipient: nil,
                    clientID: "p1")
            }
            #expect(
                try await domain.readMailbox(token: bob, endpointID: "b1", after: 0, limit: 100) == before, "nothing half-posted")
            // The retry with the same client id is the first post, numbered 1: no number was spent.
            let receipt = try await domain.post(
                token: alice, endpointID: "a1", chatID: "c1", kind: .message, payload: Data("lost".utf8), recipient: nil,
                clientID: "p1")
            #expect(receipt.messageNumber == 1)
        }
    }
}
