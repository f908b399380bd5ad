import CSparkAPI
import Foundation
import SparkDomainEngine
import SparkSDK

/// The C API's cost over Swift's: two clients of one process on an embedded domain, alice
/// sending and bob receiving through `spark_send` and `spark_next_event`, against the same two
/// through `BBMAccess` (sendMessage, and bob's message flow).
enum CAPIBenchmarks {
    static let all = [Benchmark(name: "c-api-send-receive", run: sendReceive)]

    /// Messages a run; the row's domain lifts the posting limit (600 a minute by default), so
    /// that a run is long enough to time (each run is a new domain).
    static let count = 2000

    /// A sandbox domain for one run, with room for `count` posts, and the plist that names it.
    static func plist(_ directory: URL) throws -> String {
        _ = try EmbeddedDomain.create(
            at: directory.appendingPathComponent("domain.sqlite").path, domainID: "bench",
            policy: DomainPolicy(userAuthenticationEnabled: false, postsPerMinute: 100_000, postedBytesPerMinute: 1 << 30))
        let path = directory.appendingPathComponent("ConfigSettings.plist")
        try Data(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><dict>
              <key>authProvider</key><string>testAuth</string>
              <key>testAuth</key><dict><key>domain</key><string>bench</string><key>environment</key><string>sandbox</string></dict>
              <key>embeddedDomainPath</key><string>domain.sqlite</string>
            </dict></plist>
            """.utf8
        ).write(to: path)
        return path.path
    }

    static func sendReceive() throws -> BenchmarkResult {
        // Each side three times, alternating; the best run of each (the least disturbed).
        var (ours, reference) = (0.0, 0.0)
        for _ in 0..<3 {
            ours = max(ours, try throughC())
            reference = max(reference, try throughSwift())
        }
        return Harness.result(
            "c-api-send-receive", unit: "msg/s", ours: ours, reference: reference, higherIsBetter: true,
            referenceName: "the same through the Swift API (goal ≥ 0.9)")
    }

    /// Messages a second from alice's spark_send to bob's spark_next_event.
    static func throughC() throws -> Double {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spark-bench-c-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = try plist(directory)
        func check(_ status: spark_status, _ what: String) throws {
            guard status == SPARK_OK else { throw BenchError("\(what): \(String(cString: spark_last_error()))") }
        }
        func device(_ user: String) throws -> OpaquePointer {
            var client: OpaquePointer?
            try check(spark_client_open(config, directory.appendingPathComponent(user).path, &client), "open")
            try check(spark_sign_in_test(client, user), "sign in")
            var handlers = spark_setup_handlers()
            handlers.passcode = { _, _, problem, buffer, size in
                guard problem == nil, let buffer else { return 0 }
                _ = "bench-passcode-2026".withCString { strncpy(buffer, $0, size - 1) }
                return 1
            }
            try check(spark_complete_setup(client, &handlers), "setup")
            return client!
        }
        let alice = try device("alice")
        let bob = try device("bob")
        defer {
            spark_client_close(alice)
            spark_client_close(bob)
        }
        var chatID: UnsafeMutablePointer<CChar>?
        try ["bob"].withCStringArray { users in
            try check(spark_start_chat(alice, users, 1, "bench", &chatID), "start chat")
        }
        defer { spark_free(chatID) }
        // One message first, so the chat is set up on both sides before the clock starts.
        try check(spark_send(alice, chatID, "warm-up", nil), "send")
        try drain(bob, messages: 1)
        let start = ContinuousClock.now
        for index in 0..<count { try check(spark_send(alice, chatID, "message \(index)", nil), "send") }
        try drain(bob, messages: count)
        return Double(count) / (ContinuousClock.now - start).seconds
    }

    /// Waits on bob's event descriptor until `messages` messages arrived.
    static func drain(_ client: OpaquePointer, messages: Int) throws {
        var received = 0
        var watched = pollfd(fd: spark_event_fd(client), events: Int16(POLLIN), revents: 0)
        let deadline = ContinuousClock.now + .seconds(120)
        while received < messages {
            guard ContinuousClock.now < deadline else { throw BenchError("bob got \(received) of \(messages)") }
            var event: UnsafeMutablePointer<spark_event>?
            while spark_next_event(client, &event) == SPARK_OK, let got = event {
                if got.pointee.kind == SPARK_EVENT_MESSAGE { received += 1 }
                spark_event_free(got)
            }
            if received < messages { _ = poll(&watched, 1, 100) }
        }
    }

    /// The same through BBMAccess: sendMessage, and bob's flow until it holds them all.
    static func throughSwift() throws -> Double {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spark-bench-s-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = URL(fileURLWithPath: try plist(directory))
        let count = self.count
        return try SetupBenchmarks.blocking {
            func device(_ user: String) async throws -> (BBMAuthController, BBMAccess) {
                let controller = try BBMAuthController.fromConfigFile(
                    config, dataDirectory: directory.appendingPathComponent(user))
                try await controller.startBBMEnterpriseService()
                try await controller.signIn(userID: user)
                try await controller.completeSetup(using: BenchPrompts())
                return (controller, try await controller.service.messaging())
            }
            let (aliceController, alice) = try await device("alice")
            let (bobController, bob) = try await device("bob")
            let chat = try await alice.startChat(with: ["bob"], subject: "bench")
            try await alice.sendMessage("warm-up", to: chat.chatID)
            let flow = try await bob.messages(in: chat.chatID)
            for await messages in flow.values where messages.count >= 1 { break }
            let start = ContinuousClock.now
            for index in 0..<count { try await alice.sendMessage("message \(index)", to: chat.chatID) }
            let last = "message \(count - 1)"
            for await messages in flow.values where messages.last?.content == last { break }
            let rate = Double(count) / (ContinuousClock.now - start).seconds
            await aliceController.service.stop()
            await bobController.service.stop()
            return rate
        }
    }
}

/// Setup's answers in the Swift half of the row.
struct BenchPrompts: SetupHandler {
    func passcode(for request: PasscodeRequest) async -> PasscodeAnswer? {
        request.problem == nil ? .passcode("bench-passcode-2026") : nil
    }
    func confirmDeviceSwitch(active endpoints: [EndpointInfo]) async -> Bool { true }
    func endpointToRemove(from endpoints: [EndpointInfo]) async -> String? { nil }
}

extension Array where Element == String {
    /// Calls `body` with the strings as a C array of C strings.
    func withCStringArray<T>(_ body: (UnsafePointer<UnsafePointer<CChar>?>) throws -> T) rethrows -> T {
        let copies = map { UnsafePointer(strdup($0)) }
        defer { for copy in copies { free(UnsafeMutablePointer(mutating: copy)) } }
        return try copies.withUnsafeBufferPointer { try body($0.baseAddress!) }
    }
}
