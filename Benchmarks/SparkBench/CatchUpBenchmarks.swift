import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkSDK

/// A device that comes back after 10,000 messages arrived for it in 100 chats: from its start
/// until every message is applied and shown, against the ceiling of verifying as many signatures.
enum CatchUpBenchmarks {
    static let all: [Benchmark] = [Benchmark(name: "catch-up-10k", run: { try catchUp() })]

    static let chats = 100
    static let perChat = 100

    static func catchUp() throws -> BenchmarkResult {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spark-bench-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let total = chats * perChat
        // The ceiling: verifying one signature per message with the library in use (libsodium),
        // measured right before the run and right after it, and the two averaged: on this host
        // one measurement alone moved by a third from one run to the next.
        let key = try Ed25519.PrivateKey()
        let content = Data(repeating: 7, count: 200)
        let signature = try key.signature(for: content)
        let ceiling = { @Sendable in Harness.rate { precondition(key.publicKey.isValidSignature(signature, for: content)) } }
        let (seconds, before) = try SetupBenchmarks.blocking { () -> (Double, Double) in
            let domain = try EmbeddedDomain.create(
                at: directory.appendingPathComponent("domain.sqlite").path, domainID: "bench", policy: .bench)
            // Bob sets up (his KeyPackages are in the domain), then goes offline.
            let bob = try await service("bob", directory: directory, domain: domain)
            _ = try await bob.messaging()
            await bob.stop()
            let alice = try await MessagingBenchmarks.setUp("alice", directory: directory, domain: domain)
            for _ in 0..<chats {
                let chat = try await alice.startChat(with: ["bob"])
                for n in 1...perChat { try await alice.sendMessage("message \(n)", to: chat.chatID) }
            }
            let before = ceiling()
            // Measured: bob's device starts (its setup already done), reads its mailbox and shows
            // every chat with all its messages unread.
            Harness.profiling(true)
            defer { Harness.profiling(false) }
            let clock = ContinuousClock()
            let started = clock.now
            let back = try await service("bob", directory: directory, domain: domain)
            let access = try await back.messaging()
            let deadline = started + .seconds(600)
            while clock.now < deadline {
                let shown = access.chats.value
                if shown.count == chats, shown.reduce(0, { $0 + $1.unreadCount }) == total { break }
                try await Task.sleep(for: .milliseconds(2))
            }
            let elapsed = clock.now - started
            let shown = access.chats.value.reduce(0) { $0 + $1.unreadCount }
            await back.stop()
            guard shown == total else { throw BenchError("bob shows \(shown) of \(total) messages") }
            return (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18, before)
        }
        let verify = (before + ceiling()) / 2
        return Harness.result(
            "catch-up-10k", unit: "msg/s", ours: Double(total) / seconds, reference: verify, higherIsBetter: true,
            referenceName: "Ed25519 verifications a second of the library in use (the ceiling); goal ≥ 0.3")
    }

    /// `user`'s service on its data directory, set up (the first time with a new passcode).
    static func service(_ user: String, directory: URL, domain: any DomainService) async throws -> BBMEnterpriseService {
        let store = try EndpointStore(directory: directory.appendingPathComponent(user))
        let service = BBMEnterpriseService(store: store, endpointDescription: user, unsafePasscodeIterations: 1000)
        try await service.start(domain: domain, environment: .sandbox)
        await service.sendAuthToken(try await domain.testToken(userID: user).token, userIdentifier: user)
        var state = await service.waitForSettledState()
        if state.setupState == .syncRequired {
            try await service.syncStart(
                passcode: "\(user)-passcode", action: state.syncPasscodeState == .existing ? .existing : .new)
            state = await service.waitForSettledState()
        }
        guard state.setupState == .success else { throw BenchError("setup of \(user) ended in \(state)") }
        return service
    }
}
