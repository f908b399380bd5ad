import Foundation
import SparkDomain
import SparkDomainEngine
import SparkLock
import SparkStore
import SparkTestSupport
import Testing

/// The domain on SQLite through power cuts (`PowerCut`: a VFS that throws away what was not
/// synced): whatever it answered as stored is there after the cut, and no chat number is given
/// twice. Each round cuts at a random write or sync while four writers post to one chat,
/// throwing away all the unsynced writes or a random half of them, then opens the file again.
@Suite("Power cuts: the domain")
struct DomainPowerCutTests {
    /// A domain's store and engine on `path` (made there the first time).
    static func open(_ path: String, creating: Bool) throws -> (SQLiteDomainStore, DomainEngine) {
        let store = try SQLiteDomainStore(path: path)
        if creating { try DomainEngine.create(in: store, domainID: "cuts", policy: DomainPolicy()) }
        return (store, try DomainEngine(store: store, location: path, passcodeKeys: .generate()))
    }

    @Test(arguments: 0..<12)
    func everyPostTheDomainAnsweredSurvivesACut(_ round: Int) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let prefix = try PowerCut.watch(directory)
            let path = directory.appendingPathComponent("domain.sqlite").path
            var random = SplitMix64(seed: 62_000 + UInt64(round))
            var opened: (SQLiteDomainStore, DomainEngine)? = try Self.open(path, creating: true)
            let engine = try #require(opened?.1)
            let alice = try await engine.testToken(userID: "alice").token
            let bob = try await engine.testToken(userID: "bob").token
            _ = try await engine.registerEndpoint(token: alice, registration: .init(endpointID: "a1", description: "a"))
            _ = try await engine.registerEndpoint(token: bob, registration: .init(endpointID: "b1", description: "b"))
            _ = try await engine.createChat(token: alice, endpointID: "a1", chatID: "c", participants: ["bob"])

            // What came before is on the disk (a checkpoint syncs it, whatever the durability), so
            // that a cut tells only of the posts.
            try DatabaseQueue(path: path).withConnection { db in try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
            // The cut: somewhere in the first few dozen posts.
            PowerCut.arm(prefix, at: Int64(1 + random.below(160)), seed: random.next(), losingAll: random.below(2) == 0)
            let failures = Locked<[String]>([])
            let answered = await withTaskGroup(of: [(String, Int64)].self) { group in
                for writer in 0..<4 {
                    group.addTask {
                        var mine: [(String, Int64)] = []
                        for index in 0..<2_000 {
                            let clientID = "w\(writer)-\(index)"
                            do {
                                let receipt = try await engine.post(
                                    token: alice, endpointID: "a1", chatID: "c", kind: .message, payload: Data(clientID.utf8),
                                    recipient: nil, clientID: clientID)
                                mine.append((clientID, try #require(receipt.messageNumber)))
                            } catch {
                                if PowerCut.cuts(prefix) == 0 { failures.withLock { $0.append("\(error)") } }
                                break
                            }
                        }
                        return mine
                    }
                }
                return await group.reduce(into: []) { $0 += $1 }
            }
            #expect(PowerCut.cuts(prefix) == 1, "the cut came before the writers ran out: \(failures.withLock { $0 })")
            opened = nil
            _ = opened

            // The machine comes back: the file as the disk kept it.
            let (_, reopened) = try Self.open(path, creating: false)
            #expect(Set(answered.map(\.1)).count == answered.count, "no number answered twice")
            for (clientID, number) in answered {
                // A retry of an answered post is answered with its first number: it is stored.
                let receipt = try await reopened.post(
                    token: alice, endpointID: "a1", chatID: "c", kind: .message, payload: Data(clientID.utf8), recipient: nil,
                    clientID: clientID)
                #expect(receipt.messageNumber == number, "\(clientID) was answered \(number)")
            }
            // The chat still talks: the next post takes a number after every one answered, and
            // bob's mailbox holds the chat's numbers without a gap.
            let next = try await reopened.post(
                token: alice, endpointID: "a1", chatID: "c", kind: .message, payload: Data("after".utf8), recipient: nil,
                clientID: "after")
            let last = try #require(next.messageNumber)
            #expect(last > answered.map(\.1).max() ?? 0)
            let numbers = try await reopened.readMailbox(token: bob, endpointID: "b1", after: 0, limit: 1_000)
                .compactMap(\.messageNumber)
            #expect(numbers == Array(1...last), "numbers 1…\(last), each once")
        }
    }
}
