import Foundation
import SparkDomain
import SparkLock
import SparkSDK
import SparkTestSupport
import Testing

/// Endpoints on a domain served by spark-domaind, through RemoteDomain over TLS.
struct RemoteDevices {
    let directory: URL
    let daemon: DomainDaemon

    static func start(_ directory: URL) async throws -> RemoteDevices {
        RemoteDevices(directory: directory, daemon: try await DomainDaemon.start(in: directory, domainID: "remote"))
    }

    /// A set-up endpoint of `user` with its own store.
    func endpoint(_ user: String, _ device: String) async throws -> (BBMEnterpriseService, BBMAccess) {
        let domain = try daemon.client()
        let store = try EndpointStore(directory: directory.appendingPathComponent(device))
        let service = BBMEnterpriseService(
            store: store, endpointDescription: device, unsafePasscodeIterations: 1000, checkInInterval: .milliseconds(200))
        try await service.start(domain: domain, environment: .sandbox)
        await service.sendAuthToken(try await domain.testToken(userID: user).token, userIdentifier: user)
        let state = await service.waitForSettledState()
        try await service.syncStart(passcode: "\(user)-passcode", action: state.syncPasscodeState == .new ? .new : .existing)
        let settled = await service.waitForSettledState()
        guard settled.setupState == .success else { throw MessagingError(.notReady, "setup of \(device) ended in \(settled)") }
        return (service, try await service.messaging())
    }

    /// A client configuration naming the daemon, as `spark-domaind init` writes one.
    func writeConfiguration() throws -> URL {
        let plist: [String: Any] = [
            "authProvider": "testAuth",
            "testAuth": ["domain": daemon.domainID, "environment": "sandbox"],
            "domainURL": daemon.url.absoluteString,
            "domainCAFile": daemon.directory.appendingPathComponent("ca.pem").path,
        ]
        let url = directory.appendingPathComponent("ConfigSettings.plist")
        try PropertyListSerialization.data(fromPropertyList: plist, format: .xml, options: 0).write(to: url)
        return url
    }
}

/// Records what a connectivity listener is told.
final class ConnectivityRecorder: BBMConnectivityListener {
    let changes = Locked<[(connected: Bool, strict: Bool)]>([])
    func connectivityStateChange(connected: Bool, strict: Bool) { changes.withLock { $0.append((connected, strict)) } }
    var last: (connected: Bool, strict: Bool)? { changes.withLock { $0.last } }
}

@Suite("Remote domain: the SDK through spark-domaind")
struct RemoteDomainTests {
    @Test func twoUsersChatLiveAndReceiptsComeBack() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let devices = try await RemoteDevices.start(directory)
            let (aliceService, alice) = try await devices.endpoint("alice", "alice-laptop")
            let (bobService, bob) = try await devices.endpoint("bob", "bob-phone")
            let connectivity = ConnectivityRecorder()
            await bobService.addConnectivityListener(connectivity)
            let chat = try await alice.startChat(with: ["bob"], subject: "over the network")
            let sent = try await alice.sendMessage("hello across machines", to: chat.chatID)
            #expect(await eventually { bob.chats.value.first?.subject == "over the network" })
            let messages = try await bob.messages(in: chat.chatID)
            #expect(await eventually { messages.value.contains { $0.content == "hello across machines" } })
            let number = try #require(messages.value.first { $0.content == "hello across machines" }).number
            try await bob.markMessagesRead(in: chat.chatID, upTo: number)
            let aliceMessages = try await alice.messages(in: chat.chatID)
            #expect(await eventually { aliceMessages.value.first { $0.id == sent.id }?.state == .read })
            #expect(await eventually { connectivity.last.map { $0.connected && $0.strict } == true }, "live and set up")
            await aliceService.stop()
            await bobService.stop()
            #expect(await devices.daemon.stop() == 0)
            #expect(!devices.daemon.log.contains(#""status":5"#), "no 5xx")
        }
    }

    @Test func twoProcessesExchangeMessagesThroughTheDaemon() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let devices = try await RemoteDevices.start(directory)
            let config = try devices.writeConfiguration()
            let peer = Fixtures.executable("sdk-peer")
            async let bob = Fixtures.run(
                peer, [config.path, directory.appendingPathComponent("bob").path, "bob", "--serve", "20"],
                input: Data("bob-passcode\n".utf8))
            // Bob's identity must be published before alice starts the chat.
            let admin = try devices.daemon.administration()
            var ready = false
            for _ in 0..<600 where !ready {
                ready = (try? await admin.endpointUsers().contains { $0.userID == "bob" }) == true
                if !ready { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(ready, "bob's peer registered")
            try await Task.sleep(for: .milliseconds(500))
            let alice = try await Fixtures.run(
                peer, [config.path, directory.appendingPathComponent("alice").path, "alice", "--send", "bob", "20"],
                input: Data("alice-passcode\n".utf8))
            #expect(alice.status == 0 && alice.stdout.contains("acked 20 duplicates 0"), "\(alice.stdout) \(alice.stderr)")
            let served = try await bob
            #expect(served.status == 0 && served.stdout.contains("served 20"), "\(served.stdout) \(served.stderr)")
            await devices.daemon.stop()
        }
    }

    @Test func aDaemonKilledDuringABurstLosesAndDoublesNothing() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let devices = try await RemoteDevices.start(directory)
            let (aliceService, alice) = try await devices.endpoint("alice", "alice-laptop")
            let (bobService, bob) = try await devices.endpoint("bob", "bob-phone")
            let connectivity = ConnectivityRecorder()
            await bobService.addConnectivityListener(connectivity)
            let chat = try await alice.startChat(with: ["bob"])
            let bobMessages = try await bob.messages(in: chat.chatID)
            #expect(await eventually { bob.chats.value.count == 1 })
            let burst = Task {
                for index in 1...30 {
                    _ = try? await alice.sendMessage("burst \(index)", to: chat.chatID)
                    try? await Task.sleep(for: .milliseconds(20))
                }
            }
            #expect(await eventually { bobMessages.value.count >= 5 })
            await devices.daemon.kill()
            #expect(await eventually { connectivity.last?.connected == false }, "bob's service reports the lost domain")
            try await Task.sleep(for: .seconds(1))
            try await devices.daemon.restart()
            await burst.value
            // Every message arrives once, numbered without gaps, and each is acknowledged.
            #expect(await eventually { bobMessages.value.count == 30 }, "\(bobMessages.value.count) of 30 arrived")
            let contents = bobMessages.value.map(\.content)
            #expect(Set(contents) == Set((1...30).map { "burst \($0)" }) && contents.count == 30, "\(contents)")
            #expect(bobMessages.value.compactMap(\.number).sorted() == Array(1...30))
            let aliceMessages = try await alice.messages(in: chat.chatID)
            #expect(await eventually { aliceMessages.value.allSatisfy(\.state.isAccepted) })
            #expect(await eventually { connectivity.last.map { $0.connected && $0.strict } == true }, "and then its return")
            await aliceService.stop()
            await bobService.stop()
            await devices.daemon.stop()
        }
    }

    @Test func theConfigurationNamesTheDomainAndHowToTrustIt() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let devices = try await RemoteDevices.start(directory)
            let settings = try ConfigSettings.load(from: try devices.writeConfiguration())
            #expect(settings.domainURL == devices.daemon.url)
            let domain = try #require(try settings.openDomain() as? RemoteDomain)
            #expect(try await domain.policy().userAuthenticationEnabled == false)
            // A client that trusts another CA refuses the daemon's certificate.
            let stranger = directory.appendingPathComponent("stranger")
            _ = try await Fixtures.run(Fixtures.executable("spark-domaind"), ["init", stranger.path])
            let wrong = try RemoteDomain(
                url: devices.daemon.url, domainID: "remote",
                trust: .certificateAuthority(path: stranger.appendingPathComponent("ca.pem").path))
            await #expect(throws: DomainError(.unavailable, "")) { try await wrong.policy() }
            // A pin of another key is refused too; the right pin is accepted.
            let pin = try await Self.pin(devices.daemon.directory.appendingPathComponent("server.pem"))
            let pinned = try RemoteDomain(url: devices.daemon.url, domainID: "remote", trust: .pinnedKey(sha256: pin))
            #expect(try await pinned.policy().maximumEndpoints == 5)
            let otherPin = try await Self.pin(stranger.appendingPathComponent("server.pem"))
            let mispinned = try RemoteDomain(url: devices.daemon.url, domainID: "remote", trust: .pinnedKey(sha256: otherPin))
            await #expect(throws: DomainError(.unavailable, "")) { try await mispinned.policy() }
            // Plain http is for loopback only, and https needs something to trust.
            #expect(throws: DomainError(.invalidRequest, "")) {
                try RemoteDomain(url: URL(string: "http://192.0.2.1:80")!, domainID: "x", trust: .plainLoopback)
            }
            #expect(throws: DomainError(.invalidRequest, "")) {
                try RemoteDomain(url: URL(string: "https://192.0.2.1:80")!, domainID: "x", trust: .plainLoopback)
            }
            await devices.daemon.stop()
        }
    }

    /// The base64 SHA-256 of a certificate's public key (curl's pin), by OpenSSL's CLI.
    static func pin(_ certificate: URL) async throws -> String {
        let key = try await Fixtures.run(
            URL(fileURLWithPath: "/usr/bin/openssl"), ["x509", "-in", certificate.path, "-pubkey", "-noout"])
        // DER is binary: hash it through a file instead of a string.
        let file = certificate.deletingLastPathComponent().appendingPathComponent("pub-\(UUID().uuidString).pem")
        try key.stdout.write(to: file, atomically: true, encoding: .utf8)
        let digest = try await Fixtures.run(
            URL(fileURLWithPath: "/bin/sh"),
            ["-c", "openssl pkey -pubin -in '\(file.path)' -outform DER | openssl dgst -sha256 -binary | base64"])
        return digest.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
