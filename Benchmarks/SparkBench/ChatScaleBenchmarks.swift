import Foundation
import SparkCrypto
import SparkMLS
@_spi(Benchmarks) import SparkSDK

/// How messaging scales with a chat's size and with the number of chats, through the endpoint
/// store as the messenger uses it (`MessagingProbe`: the live session, a seal or an open, the
/// ratchets written), without a domain.
enum ChatScaleBenchmarks {
    static let all = [
        Benchmark(name: "message-in-1000-member-chat", run: messageInLargeChat),
        Benchmark(name: "add-one-to-1000", run: addOne),
        Benchmark(name: "rss-10k-chats", run: manyChats),
    ]

    static let now = Date()

    /// A chat of `size` devices as its creator's store and one member's store hold it (the rest
    /// added in one commit).
    static func chat(size: Int, in directory: URL) throws -> (sender: MessagingProbe, receiver: MessagingProbe) {
        var random = MLSSystemRandom()
        let devices = try (0..<size).map { try MessagingProbe.Device(user: "member-\($0)") }
        let sender = try MessagingProbe(directory: directory.appendingPathComponent("sender"), trusting: devices)
        let receiver = try MessagingProbe(directory: directory.appendingPathComponent("receiver"), trusting: devices)
        let created = try MLSGroup.create(
            groupID: MessagingProbe.groupID("chat"), signer: devices[0].signer, validator: sender.credentialValidator,
            random: &random)
        let bundles = try devices.dropFirst().map { try MLSKeyPackageBundle(signer: $0.signer, now: now, random: &random) }
        let added = try created.commit(adding: bundles.map(\.keyPackage), now: now, random: &random)
        try sender.keep(added.group, as: "chat")
        try receiver.keep(
            try MLSGroup.join(welcome: added.welcome!, bundle: bundles[0], validator: receiver.credentialValidator), as: "chat")
        return (sender, receiver)
    }

    /// Microseconds for one message sealed by one device and opened by another, each through its store.
    static func messageMicroseconds(size: Int) throws -> Double {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spark-bench-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (sender, receiver) = try chat(size: size, in: directory)
        var number: Int64 = 0
        let rate = try Harness.rate {
            number += 1
            let sealed = try sender.seal("hello", in: "chat")
            guard try receiver.open(sealed, in: "chat", from: "member-0", number: number) == "hello" else {
                throw BenchError("the message did not open")
            }
        }
        return 1e6 / rate
    }

    static func messageInLargeChat() throws -> BenchmarkResult {
        let small = try messageMicroseconds(size: 2)
        let large = try messageMicroseconds(size: 1000)
        return Harness.result(
            "message-in-1000-member-chat", unit: "µs", ours: large, reference: small, higherIsBetter: false,
            referenceName: "the same in a 2-member chat (goal: ≤ 1.2x)")
    }

    /// One device added to a 1,000-member chat whose tree is populated: the commit, one existing
    /// member applying it, and the new device joining cold (every leaf's device credential checked
    /// against its user's identity key, as on its own device).
    static func addOne() throws -> BenchmarkResult {
        var random = MLSSystemRandom()
        let size = 1000
        let devices = try (0..<size + 1).map { try MessagingProbe.Device(user: "member-\($0)") }
        let probe = try MessagingProbe(
            directory: FileManager.default.temporaryDirectory.appendingPathComponent("spark-bench-\(UUID().uuidString)"),
            trusting: devices)
        let validator = probe.credentialValidator
        let (creator, member) = try MLSBenchmarks.populatedGroup(
            signers: devices.prefix(size).map(\.signer), validator: validator)
        var timings: [Double] = []
        let total =
            try Harness.bestTime(repeats: 3) {
                let bundle = try MLSKeyPackageBundle(signer: devices[size].signer, now: now, random: &random)
                MLSGroup.forgetVerifiedLeaves()
                let start = ContinuousClock.now
                let added = try creator.commit(adding: [bundle.keyPackage], now: now, random: &random)
                let committed = ContinuousClock.now
                var existing = member
                _ = try existing.process(added.commit)
                let applied = ContinuousClock.now
                let joined = try MLSGroup.join(welcome: added.welcome!, bundle: bundle, validator: validator)
                guard joined.epochAuthenticator == existing.epochAuthenticator else { throw BenchError("a fork") }
                let end = ContinuousClock.now
                timings = [committed - start, applied - committed, end - applied].map {
                    Double($0.components.attoseconds) / 1e15 + Double($0.components.seconds) * 1000
                }
            } * 1000
        FileHandle.standardError.write(
            Data(
                ("add-one-to-1000: \(format(total)) ms: the commit \(format(timings[0])) ms, an existing member applying it "
                    + "\(format(timings[1])) ms, the new device joining cold \(format(timings[2])) ms\n").utf8))
        return Harness.result(
            "add-one-to-1000", unit: "ms", ours: total, reference: 734, higherIsBetter: false,
            referenceName: "libxmtp's published 734 ms (goal: ≤ 250 ms)")
    }

    // MARK: Many chats

    /// Peak RSS of a process whose device is in `chats` chats of 10 devices and sends one message
    /// in each (a child process, so that nothing else this run did counts).
    static func manyChats() throws -> BenchmarkResult {
        let chats = 10_000
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spark-bench-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let output = try Harness.run(Harness.executablePath, ["--child-many-chats", directory.path, String(chats)]).output
        var values: [String: Double] = [:]
        for field in output.split(whereSeparator: \.isWhitespace) {
            let parts = field.split(separator: "=")
            if parts.count == 2, let value = Double(parts[1]) { values[String(parts[0])] = value }
        }
        guard let peak = values["peak"], let seconds = values["send"] else { throw BenchError("the child said: \(output)") }
        FileHandle.standardError.write(
            Data(
                ("rss-10k-chats: \(chats) chats of 10 devices made in \(format(values["make"] ?? 0)) s; one message sealed in "
                    + "each in \(format(seconds)) s (\(format(seconds * 1e6 / Double(chats))) µs each, sessions loaded on "
                    + "demand, \(Int(values["live"] ?? 0)) live at the end)\n").utf8))
        return Harness.result(
            "rss-10k-chats", unit: "MB", ours: peak, reference: 200, higherIsBetter: false, referenceName: "the goal: 200 MB")
    }

    /// The child of `rss-10k-chats`: makes the chats in its store, then seals one message in each.
    static func childManyChats(directory: String, chats: Int) -> Int32 {
        do {
            var random = MLSSystemRandom()
            let me = try MessagingProbe.Device(user: "me")
            let others = try (1..<10).map { try MessagingProbe.Device(user: "member-\($0)") }
            let probe = try MessagingProbe(directory: URL(fileURLWithPath: directory), trusting: [me] + others)
            let packages = try others.map { try MLSKeyPackageBundle(signer: $0.signer, now: now, random: &random).keyPackage }
            let making = ContinuousClock.now
            for index in 0..<chats {
                let created = try MLSGroup.create(
                    groupID: MessagingProbe.groupID("chat-\(index)"), signer: me.signer,
                    validator: probe.credentialValidator, random: &random)
                try probe.keep(try created.commit(adding: packages, now: now, random: &random).group, as: "chat-\(index)")
            }
            let sending = ContinuousClock.now
            for index in 0..<chats { _ = try probe.seal("hello", in: "chat-\(index)") }
            let end = ContinuousClock.now
            func seconds(_ duration: Duration) -> Double {
                Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
            }
            print(
                "peak=\(MessagingBenchmarks.peakRSSMegabytes()) make=\(seconds(sending - making)) send=\(seconds(end - sending)) "
                    + "live=\(probe.liveSessions)")
            return 0
        } catch {
            print("failed: \(error)")
            return 1
        }
    }
}
