import Foundation
import SparkDomainEngine
import SparkSDK

/// The C API's cost over Swift's: two clients of one process on an embedded domain, alice
/// sending and bob receiving through `spark_send` and `spark_next_event` in a C program linked
/// with the installed release library, against the same two through `BBMAccess` (sendMessage,
/// and bob's message flow) in this process.
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

    /// Where `scripts/bench.sh` installs the release C library (`scripts/install.sh`), as an app
    /// gets it.
    static var installed: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/sparksdk-install")
    }

    /// `Benchmarks/c-send-receive`, built with cc against the installed release library.
    nonisolated(unsafe) static var program: String?

    static func builtProgram() throws -> String {
        if let program { return program }
        let library = installed.appendingPathComponent("lib/libsparksdk.so")
        guard FileManager.default.fileExists(atPath: library.path) else {
            throw BenchError("no \(library.path): run `bash scripts/install.sh \(installed.path)` (bench.sh does)")
        }
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("c-send-receive/send_receive.c")
        let output = installed.appendingPathComponent("send_receive").path
        _ = try Harness.run(
            "sh",
            [
                "-c",
                "cc -std=c11 -O2 -Wall -Werror \"$1\" $(PKG_CONFIG_PATH=\"$2/lib/pkgconfig\" pkg-config --cflags --libs sparksdk) -o \"$3\"",
                "cc", source.path, installed.path, output,
            ])
        program = output
        return output
    }

    /// Messages a second from alice's spark_send to bob's spark_next_event, in a C program of its
    /// own linked with the release library.
    static func throughC() throws -> Double {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spark-bench-c-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = try plist(directory)
        let printed = try Harness.run(try builtProgram(), [config, directory.path, String(count)]).output
        guard let rate = Double(printed.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw BenchError("send_receive printed '\(printed)'")
        }
        return rate
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
