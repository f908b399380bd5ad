import Foundation
import SparkDomain
import SparkDomainEngine
import SparkDomainServer
import SparkLock
import SparkStore
import SparkTestSupport
import Testing

/// The engine runs its transactions on the store's threads, never on Swift's cooperative pool:
/// transactions held up in the database (a slow query, a lock) hold their connections and
/// nothing else, so every other request and every long-poll wake-up goes on.
@Suite("Store threads")
struct StoreThreadsTests {
    /// A PostgreSQL store whose statements carrying `marker` wait at a gate until the test opens
    /// it: a query as slow as the test wants.
    final class GatedStore: DomainStore {
        let inner: PostgreSQLDomainStore
        let marker = Data("a very slow query".utf8)
        /// How many statements wait at the gate now, and whether it is open.
        let state = Locked((waiting: 0, open: false))
        let gate = DispatchSemaphore(value: 0)

        var waiting: Int { state.withLock { $0.waiting } }

        /// Opens the gate for good: what waits goes on, and nothing waits again.
        func open() {
            let waiting = state.withLock { state in
                state.open = true
                return state.waiting
            }
            for _ in 0..<waiting { gate.signal() }
        }

        init(_ inner: PostgreSQLDomainStore) { self.inner = inner }

        var threads: TransactionThreads { inner.threads }

        final class Statements: DomainStatements {
            let inner: any DomainStatements
            let store: GatedStore
            init(_ inner: any DomainStatements, _ store: GatedStore) {
                self.inner = inner
                self.store = store
            }
            func execute(_ sql: String, _ arguments: [any DatabaseValueConvertible]) throws -> Int {
                if arguments.contains(where: { $0.databaseValue == store.marker.databaseValue }),
                    store.state.withLock({ state in
                        if !state.open { state.waiting += 1 }
                        return !state.open
                    })
                {
                    store.gate.wait()
                    store.state.withLock { $0.waiting -= 1 }
                }
                return try inner.execute(sql, arguments)
            }
            func rows(_ sql: String, _ arguments: [any DatabaseValueConvertible]) throws -> [Row] {
                try inner.rows(sql, arguments)
            }
            func row(_ sql: String, _ arguments: [any DatabaseValueConvertible]) throws -> Row? { try inner.row(sql, arguments) }
            func scalar<T: DatabaseValueConvertible>(
                _ sql: String, _ arguments: [any DatabaseValueConvertible], as type: T.Type
            ) throws -> T? { try inner.scalar(sql, arguments, as: type) }
            func announce(_ users: [String]) throws { try inner.announce(users) }
        }

        func blockingWrite<T: Sendable>(_ scope: WriteScope, _ body: (any DomainStatements) throws -> T) throws -> T {
            try inner.blockingWrite(scope) { db in try body(Statements(db, self)) }
        }
        func blockingRead<T: Sendable>(_ body: (any DomainStatements) throws -> T) throws -> T { try inner.blockingRead(body) }
    }

    /// More posts held in the database at once than the cooperative pool has threads: a
    /// check-in, a post in another chat and the long-poll it wakes all go on meanwhile. (Were
    /// the transactions run on the pool, every thread of it would wait at the gate and nothing
    /// else would run: a watchdog thread then opens the gate after a minute, and the test fails.)
    @Test func transactionsHeldInTheDatabaseHoldUpNothingElse() async throws {
        let conninfo = try await PostgresCluster.newDatabase()
        let held = ProcessInfo.processInfo.activeProcessorCount + 1
        let store = try await Fixtures.blocking { () -> GatedStore in
            let inner = try PostgreSQLDomainStore(conninfo: conninfo, connections: held + 4)
            try DomainEngine.create(in: inner, domainID: "threads", policy: DomainPolicy())
            return GatedStore(inner)
        }
        let engine = try DomainEngine(store: store, location: "threads", passcodeKeys: .generate())
        func endpoint(_ user: String) async throws -> String {
            let token = try await engine.testToken(userID: user).token
            _ = try await engine.registerEndpoint(token: token, registration: .init(endpointID: user, description: user))
            return token
        }
        // Senders and recipients of their own, so that no two held posts wait on one lock.
        var slow: [(token: String, user: String, chat: String)] = []
        for index in 0..<held {
            let token = try await endpoint("sender\(index)")
            _ = try await endpoint("recipient\(index)")
            _ = try await engine.createChat(
                token: token, endpointID: "sender\(index)", chatID: "slow\(index)", participants: ["recipient\(index)"])
            slow.append((token, "sender\(index)", "slow\(index)"))
        }
        let carol = try await endpoint("carol")
        let dave = try await endpoint("dave")
        _ = try await engine.createChat(token: carol, endpointID: "carol", chatID: "fast", participants: ["dave"])
        let daveCursor = try await engine.readMailbox(token: dave, endpointID: "dave", after: 0, limit: 100).last?.sequence ?? 0

        // The watchdog: if the rest never finishes, the gate opens after a minute (the patience) anyway.
        let finished = DispatchSemaphore(value: 0)
        let timedOut = Locked(false)
        Thread {
            guard finished.wait(timeout: .now() + patience(60)) == .timedOut else { return }
            timedOut.withLock { $0 = true }
            store.open()
        }.start()

        let posts = slow.map { sender in
            Task {
                try await engine.post(
                    token: sender.token, endpointID: sender.user, chatID: sender.chat, kind: .message, payload: store.marker,
                    recipient: nil, clientID: nil)
            }
        }
        #expect(await eventuallyAwaiting(seconds: 60) { store.waiting == held }, "every slow post is held")

        // Meanwhile: dave waits for mail, carol checks in and posts, and dave's wait ends with it.
        let longPoll = Task {
            try await engine.readMailbox(
                token: dave, endpointID: "dave", after: daveCursor, limit: 100, wait: .seconds(patience(30)))
        }
        let checkedIn = try await engine.checkIn(token: carol, endpointID: "carol")
        let receipt = try await engine.post(
            token: carol, endpointID: "carol", chatID: "fast", kind: .message, payload: Data("not slow".utf8), recipient: nil,
            clientID: nil)
        let woken = try await longPoll.value
        finished.signal()
        #expect(!timedOut.withLock { $0 }, "the rest went on while the slow posts were held")
        #expect(checkedIn.endpointID == "carol" && receipt.messageNumber == 1)
        #expect(woken.contains { $0.payload == Data("not slow".utf8) }, "dave's long-poll woke with carol's post")
        #expect(store.waiting == held || timedOut.withLock { $0 }, "and they were held all along")

        // Let the slow ones go: each commits.
        store.open()
        for post in posts { #expect(try await post.value.messageNumber == 1) }
        store.inner.stopListening()
    }
}
