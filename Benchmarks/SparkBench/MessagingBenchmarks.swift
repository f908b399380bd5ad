import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkLock
import SparkMLS
import SparkObservable
import SparkSDK
import SparkStore

/// Messaging: delivery between two processes (one message's cryptography is MLS's
/// `message-seal-open`, in MLSBenchmarks), and loading the latest messages of a very large chat.
enum MessagingBenchmarks {
    static let all: [Benchmark] = [
        Benchmark(name: "message-throughput", run: { try crossProcess().throughput }),
        Benchmark(name: "message-throughput-batched", run: { try crossProcess().batched }),
        Benchmark(name: "message-latency-p50", run: { try crossProcess().p50 }),
        Benchmark(name: "message-latency-p99", run: { try crossProcess().p99 }),
        Benchmark(name: "message-cpu", run: { try crossProcess().cpu }),
        Benchmark(name: "message-cpu-batched", run: { try crossProcess().cpuBatched }),
        Benchmark(name: "store-latest-50", run: { try storeLatest().time }),
        Benchmark(name: "store-latest-50-peak-rss", run: { try storeLatest().memory }),
    ]

    static let megolm = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
        "Python/megolm_seal_open.py")

    // MARK: Two processes

    struct CrossProcess {
        let throughput: BenchmarkResult
        let batched: BenchmarkResult
        let p50: BenchmarkResult
        let p99: BenchmarkResult
        let cpu: BenchmarkResult
        let cpuBatched: BenchmarkResult
    }

    nonisolated(unsafe) static var crossProcessCache: CrossProcess?
    static let burst = 300
    static let batch = 100
    static let paced = 100

    /// What two processes measured: burst throughput (each message queued alone, and 100 a
    /// call with `queueMessages`) and paced latencies (ms).
    struct Measured {
        let throughput: Double
        let batched: Double
        let p50: Double
        let p99: Double
        /// The receiving process's CPU time from finding the chat to the burst's last message, and
        /// then to the batched burst's last (s; nil from a reference that does not say).
        let receiverCPU: (burst: Double, batched: Double)?
        /// The CPU a message cost across both processes (sender, embedded domain, receiver), in
        /// the burst and the batched burst (s; set by ``measureTwoProcesses``).
        var cpuPerMessage: (burst: Double, batched: Double)?

        /// From a `throughput=… p50=… p99=…` line (the receiving child's, or a reference's).
        init(report: String, from source: String) throws {
            var values: [String: Double] = [:]
            for field in report.split(whereSeparator: \.isWhitespace) {
                let parts = field.split(separator: "=")
                if parts.count == 2, let value = Double(parts[1]) { values[String(parts[0])] = value }
            }
            guard let rate = values["throughput"], let p50 = values["p50"], let p99 = values["p99"] else {
                throw BenchError("\(source) reported: \(report)")
            }
            // A reference that sends one way only reports no batched rate.
            (throughput, batched, self.p50, self.p99) = (rate, values["batched"] ?? 0, p50, p99)
            receiverCPU = values["burstcpu"].flatMap { burst in values["batchedcpu"].map { (burst, $0) } }
        }
    }

    /// Alice (this process) sends to bob (a child process), a burst for throughput, then paced
    /// messages for latency; the child reports what it measured. `domain` is the embedded file
    /// (nil: a fresh one) or a plist naming a served domain.
    static func measureTwoProcesses(
        plist: String? = nil, open: (@Sendable () throws -> any DomainService)? = nil
    ) throws -> Measured {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spark-bench-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let domainArgument: String
        let makeDomain: @Sendable () throws -> any DomainService
        if let plist, let open {
            domainArgument = plist
            makeDomain = open
        } else {
            let domainPath = directory.appendingPathComponent("domain.sqlite").path
            _ = try EmbeddedDomain.create(at: domainPath, domainID: "bench", policy: .bench)
            domainArgument = domainPath
            makeDomain = { try EmbeddedDomain.open(at: domainPath) }
        }
        let child = Process()
        child.executableURL = URL(fileURLWithPath: Harness.executablePath)
        child.arguments = [
            "--child-receive", domainArgument, directory.appendingPathComponent("bob").path, String(2 * burst + paced),
        ]
        let output = Pipe()
        child.standardOutput = output
        try child.run()
        let sender = try SetupBenchmarks.blocking { () -> [(cpu: Double, wall: Double)] in
            let domain = try makeDomain()
            let access = try await setUp("alice", directory: directory, domain: domain)
            // Bob's child publishes his identity, then his device's KeyPackages, when it is set
            // up: the chat starts once his device can be added.
            var chat: Chat?
            for _ in 0..<3000 where chat == nil {
                do {
                    chat = try await access.startChat(with: ["bob"])
                } catch let error as MessagingError where error.code == .unknownUser {
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
            guard let chat else { throw BenchError("bob's process never set up") }
            // A profile (SPARK_PERF_CONTROL) holds the burst, both processes, and the first
            // paced messages, by which time the burst is in.
            Harness.profiling(true)
            // Each part starts once bob has all of the one before it (his receipt of its last
            // message is back), so that none is measured behind another's tail.
            let delivered = { @Sendable (last: ChatMessage?) async throws in
                guard let last else { return }
                for _ in 0..<3000 {
                    if case .delivered = try await access.message(last.id).state { return }
                    try await Task.sleep(for: .milliseconds(5))
                }
            }
            var last: ChatMessage?
            // This process's CPU and wall time for each burst.
            var costs: [(cpu: Double, wall: Double)] = []
            var (cpuBefore, wallBefore) = (cpuSeconds(), ContinuousClock.now)
            let measuredPart = {
                let (cpu, wall) = (cpuSeconds(), ContinuousClock.now)
                costs.append((cpu - cpuBefore, (wall - wallBefore).seconds))
                (cpuBefore, wallBefore) = (cpu, wall)
            }
            for _ in 0..<burst { last = try await access.queueMessage(String(wallNanoseconds()), tag: "burst", to: chat.chatID) }
            try await delivered(last)
            measuredPart()
            // The same burst again, 100 messages a call (`queueMessages`, for an app that sends
            // many at once).
            for _ in 0..<(burst / batch) {
                let drafts = (0..<batch).map { _ in NewMessage(String(wallNanoseconds()), tag: "batched") }
                last = try await access.queueMessages(drafts, to: chat.chatID).last
            }
            try await delivered(last)
            measuredPart()
            for index in 0..<paced {
                if index == 10 { Harness.profiling(false) }
                try await access.sendMessage(String(wallNanoseconds()), tag: "paced", to: chat.chatID)
                try await Task.sleep(for: .milliseconds(20))
            }
            return costs
        }
        let report = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        child.waitUntilExit()
        var measured = try Measured(report: report, from: "the receiving process")
        if let receiver = measured.receiverCPU, sender.count == 2 {
            measured.cpuPerMessage = (
                (sender[0].cpu + receiver.burst) / Double(burst), (sender[1].cpu + receiver.batched) / Double(burst)
            )
        }
        // What bounds the burst: CPU time a message in each process (the sender's holds the
        // embedded domain too), against the wall time a message (both share this machine's cores).
        if let receiver = measured.receiverCPU, sender.count == 2 {
            let label = plist == nil ? "message throughput" : "message throughput (served domain)"
            let perMessage = { (seconds: Double) in String(format: "%.0f µs", seconds / Double(burst) * 1e6) }
            for (name, sent, received) in [("burst", sender[0], receiver.burst), ("batched burst", sender[1], receiver.batched)] {
                let cores = String(
                    format: "%.2f of %d cores busy", (sent.cpu + received) / sent.wall,
                    ProcessInfo.processInfo.activeProcessorCount)
                FileHandle.standardError.write(
                    Data(
                        ("\(label): the \(name) took \(perMessage(sent.cpu + received)) of CPU a message (sender's "
                            + "process \(perMessage(sent.cpu)), receiver's \(perMessage(received))) in \(perMessage(sent.wall)) "
                            + "a message; \(cores)\n").utf8))
            }
        }
        return measured
    }

    /// This process's CPU time so far (user and system), in seconds.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let seconds = { (time: timeval) in Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// Alice (this process) sends to bob (a child process) on one embedded domain.
    static func crossProcess() throws -> CrossProcess {
        if let cached = crossProcessCache { return cached }
        let measured = try measureTwoProcesses()
        let (rate, batched, p50, p99) = (measured.throughput, measured.batched, measured.p50, measured.p99)
        // The ceiling is the library in use (SparkCrypto's Ed25519, on libsodium): one signature
        // and one verification per message, as an MLS application message costs.
        let key = try Ed25519.PrivateKey()
        let content = Data(repeating: 7, count: 200)
        let signature = try key.signature(for: content)
        let sign = try Harness.rate { _ = try key.signature(for: content) }
        let verify = Harness.rate { precondition(key.publicKey.isValidSignature(signature, for: content)) }
        let ceiling = 1 / (1 / sign + 1 / verify)
        let poll = 10.0
        // A message's cryptography, measured now: one MLS application message sealed and opened
        // (its signature and its check, the AEAD both ways, the secret tree's steps), in CPU time.
        var random = MLSSystemRandom()
        var (sealer, opener) = try MLSBenchmarks.pair()
        let text = Data(repeating: 0x78, count: 40)
        let rounds = 2_000
        let cryptoStart = cpuSeconds()
        for _ in 0..<rounds {
            let message = try sealer.protect(text, random: &random)
            guard case .application = try opener.process(message) else { throw BenchError("the MLS message did not open") }
        }
        let crypto = (cpuSeconds() - cryptoStart) / Double(rounds) * 1e6
        guard let cpu = measured.cpuPerMessage else { throw BenchError("the receiving process reported no CPU time") }
        let result = CrossProcess(
            throughput: Harness.result(
                "message-throughput", unit: "msg/s", ours: rate, reference: ceiling, higherIsBetter: true,
                referenceName: "Ed25519 sign+verify rate of the library in use (the ceiling)"),
            batched: Harness.result(
                "message-throughput-batched", unit: "msg/s", ours: batched, reference: ceiling, higherIsBetter: true,
                referenceName: "the same ceiling; the burst sent 100 a call (queueMessages)"),
            p50: Harness.result(
                "message-latency-p50", unit: "ms", ours: p50, reference: poll, higherIsBetter: false,
                referenceName: "a fixed 10 ms mailbox poll"),
            p99: Harness.result(
                "message-latency-p99", unit: "ms", ours: p99, reference: poll, higherIsBetter: false,
                referenceName: "a fixed 10 ms mailbox poll"),
            cpu: Harness.result(
                "message-cpu", unit: "µs", ours: cpu.burst * 1e6, reference: crypto, higherIsBetter: false,
                referenceName: "a message's cryptography (MLS seal+open) in CPU; goal ≤ 3.5x"),
            cpuBatched: Harness.result(
                "message-cpu-batched", unit: "µs", ours: cpu.batched * 1e6, reference: crypto, higherIsBetter: false,
                referenceName: "the same; the burst sent 100 a call; goal ≤ 2x"))
        crossProcessCache = result
        return result
    }

    static func wallNanoseconds() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    /// A set-up endpoint of `user` (a cheap passcode hash: setup is not what is measured).
    static func setUp(
        _ user: String, directory: URL, domain: any DomainService, storeKey: StoreKeySource = .automatic
    ) async throws -> BBMAccess {
        let store = try EndpointStore(directory: directory.appendingPathComponent(user), key: storeKey)
        let service = BBMEnterpriseService(store: store, endpointDescription: user, unsafePasscodeIterations: 1000)
        try await service.start(domain: domain, environment: .sandbox)
        await service.sendAuthToken(try await domain.testToken(userID: user).token, userIdentifier: user)
        var state = await service.waitForSettledState()
        try await service.syncStart(passcode: "\(user)-passcode", action: state.syncPasscodeState == .existing ? .existing : .new)
        state = await service.waitForSettledState()
        guard state.setupState == .success else { throw BenchError("setup of \(user) ended in \(state)") }
        return try await service.messaging()
    }

    /// The receiving child: sets bob up, waits for `count` messages, prints what it measured.
    static func childReceive(domainPath: String, dataDirectory: String, count: Int) async -> Int32 {
        do {
            let domain: any DomainService =
                domainPath.hasSuffix(".plist")
                ? try ConfigSettings.load(from: URL(fileURLWithPath: domainPath)).openDomain()
                : try EmbeddedDomain.open(at: domainPath)
            let directory = URL(fileURLWithPath: dataDirectory).deletingLastPathComponent()
            let access = try await setUp("bob", directory: directory, domain: domain)
            let deadline = ContinuousClock.now + .seconds(120)
            var chatID: String?
            while chatID == nil, ContinuousClock.now < deadline {
                chatID = access.chats.value.first?.chatID
                if chatID == nil { try await Task.sleep(for: .milliseconds(1)) }
            }
            guard let chatID else {
                print("failed: alice's chat never came")
                return 1
            }
            // A message arrives when the chat's flow shows it: the subscription runs on the thread
            // that changed the flow, as an app's observer does (polling the flow would add half the
            // poll's interval to every latency).
            let received = Locked<[String: (sent: UInt64, received: UInt64, tag: String)]>([:])
            // CPU time from here to the burst's last message (the burst comes first, alone), then to
            // the batched burst's last.
            let cpuAtStart = cpuSeconds()
            let burstCPU = Locked<[Double]>([])
            let subscription = try await access.messages(in: chatID).subscribe { window in
                let now = wallNanoseconds()
                let count = received.withLock { arrivals in
                    for message in window where message.isIncoming && arrivals[message.id] == nil {
                        arrivals[message.id] = (UInt64(message.content) ?? 0, now, message.tag)
                    }
                    return arrivals.count
                }
                burstCPU.withLock { marks in
                    if count >= (marks.count + 1) * Self.burst, marks.count < 2 { marks.append(cpuSeconds() - cpuAtStart) }
                }
            }
            while received.withLock({ $0.count }) < count, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
            subscription.cancel()
            let arrivals = received.withLock { $0 }
            let burst = arrivals.values.filter { $0.tag == "burst" }
            let batched = arrivals.values.filter { $0.tag == "batched" }
            let paced = arrivals.values.filter { $0.tag == "paced" }.map { Double($0.received - $0.sent) / 1e6 }.sorted()
            guard let firstSent = burst.map(\.sent).min(), let lastReceived = burst.map(\.received).max(), !paced.isEmpty else {
                let tags = Dictionary(grouping: arrivals.values, by: \.tag).mapValues(\.count)
                print("failed: received \(arrivals.count) of \(count) (by tag: \(tags.sorted { $0.key < $1.key }))")
                return 1
            }
            let throughput = Double(burst.count) / (Double(lastReceived - firstSent) / 1e9)
            let batchedRate =
                if let first = batched.map(\.sent).min(), let last = batched.map(\.received).max() {
                    Double(batched.count) / (Double(last - first) / 1e9)
                } else { 0.0 }
            // Where the tail is: the slowest paced messages and their places (the first ones follow
            // the burst, while this process may still be catching up with it).
            let inOrder = arrivals.values.filter { $0.tag == "paced" }.sorted { $0.sent < $1.sent }.map {
                Double($0.received - $0.sent) / 1e6
            }
            let slowest = inOrder.enumerated().sorted { $0.element > $1.element }.prefix(3).map {
                String(format: "#%d %.1f ms", $0.offset + 1, $0.element)
            }
            FileHandle.standardError.write(
                Data("message latency: the slowest of \(inOrder.count) paced: \(slowest.joined(separator: ", "))\n".utf8))
            let p50 = paced[paced.count / 2]
            let p99 = paced[min(paced.count - 1, Int(Double(paced.count) * 0.99))]
            let marks = burstCPU.withLock { $0 }
            let cpu = marks.count == 2 ? " burstcpu=\(marks[0]) batchedcpu=\(marks[1] - marks[0])" : ""
            print("throughput=\(throughput) batched=\(batchedRate) p50=\(p50) p99=\(p99)\(cpu)")
            return 0
        } catch {
            print("failed: \(error)")
            return 1
        }
    }

    // MARK: A chat with a million messages

    struct StoreLatest {
        let time: BenchmarkResult
        let memory: BenchmarkResult
    }

    nonisolated(unsafe) static var storeCache: StoreLatest?

    /// A value sealed as the endpoint store seals it: `0x01 ‖ nonce ‖ ciphertext ‖ tag`, the
    /// table, column and row as associated data.
    static func sealedValue(_ plaintext: Data, context: String, key: SymmetricKey) throws -> Data {
        let box = try AESGCM.seal(plaintext, using: key, authenticating: Data(context.utf8))
        return Data([1]) + box.nonce.bytes + box.ciphertext + box.tag
    }

    /// Loads the latest 50 messages of a chat holding 1,000,000, through `BBMAccess`, against
    /// the same query straight on SQLite.
    static func storeLatest() throws -> StoreLatest {
        if let cached = storeCache { return cached }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spark-bench-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let result = try SetupBenchmarks.blocking { () -> StoreLatest in
            let domain = try EmbeddedDomain.create(
                at: directory.appendingPathComponent("domain.sqlite").path, domainID: "bench", policy: .bench)
            _ = try await setUp("bob", directory: directory, domain: domain)
            // The bench knows alice's store key, so that it can seal the bulk rows itself in the
            // store's format (docs/FORMATS.md, "Secrets at rest").
            let storeKey = SymmetricKey(size: .bits256)
            let access = try await setUp("alice", directory: directory, domain: domain, storeKey: .provided(storeKey))
            let chat = try await access.startChat(with: ["bob"])
            let file = directory.appendingPathComponent("alice/endpoint.sqlite").path
            let queue = try DatabaseQueue(path: file)
            try queue.write { db in
                for number in 1...1_000_000 {
                    try db.execute(
                        """
                        INSERT INTO messages(local_id, chat_id, number, sender, incoming, content, tag, state, timestamp)
                        VALUES (?, ?, ?, 'bob', 1, ?, 'Text', 'read', ?)
                        """,
                        [
                            "bulk-\(number)", chat.chatID, number,
                            try sealedValue(
                                Data("message number \(number) with some text in it".utf8),
                                context: "messages.content/bulk-\(number)",
                                key: storeKey),
                            Double(number),
                        ])
                }
            }
            let before = peakRSSMegabytes()
            var loaded = 0
            Harness.profiling(true)
            let ours = try await bestTime {
                loaded = try await access.messages(in: chat.chatID, before: nil, limit: 50).count
            }
            Harness.profiling(false)
            precondition(loaded == 50)
            let floor = try Harness.bestTime(repeats: latestRepeats) {
                _ = try queue.read { db in
                    try db.rows("SELECT * FROM messages WHERE chat_id = ? ORDER BY number DESC LIMIT 50", [chat.chatID]).count
                }
            }
            let after = peakRSSMegabytes()
            return StoreLatest(
                time: Harness.result(
                    "store-latest-50", unit: "ms", ours: ours * 1000, reference: floor * 1000, higherIsBetter: false,
                    referenceName: "the same SQLite query, bare"),
                memory: Harness.result(
                    "store-latest-50-peak-rss", unit: "MB", ours: after, reference: before, higherIsBetter: false,
                    referenceName: "peak RSS before loading (after building the chat)"))
        }
        storeCache = result
        return result
    }

    /// How many times each side of `store-latest-50` runs; the best run counts. A load is about
    /// a tenth of a millisecond, ours with a hop to the storage's thread and back: the best of
    /// five moved the row by half between runs on this machine (a wake-up of a thread slower
    /// than another), the best of thirty by a tenth.
    static let latestRepeats = 30

    /// The best of ``latestRepeats`` runs of `body` (of `PROFILE_REPEATS` runs when set, to
    /// profile it).
    static func bestTime(_ body: () async throws -> Void) async throws -> Double {
        var best = Double.infinity
        for _ in 0..<(ProcessInfo.processInfo.environment["PROFILE_REPEATS"].flatMap { Int($0) } ?? latestRepeats) {
            let start = ContinuousClock.now
            try await body()
            best = min(best, (ContinuousClock.now - start).seconds)
        }
        return best
    }

    static func peakRSSMegabytes() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_maxrss) / 1024
    }
}
