// spark-load: an organisation's messaging load on spark-domaind, as deployed (two instances on
// PostgreSQL behind haproxy), with every user's device a lean client of the /v1 wire.
//
//     spark-load [--users N] [--rates R1,R2,...] [--seconds S] [--instances K] [--mix S1,S2,S3] [--json]
//
// Makes N users (one device each, with tokens from the sandbox), their chats (see
// Organisation: one-to-one, teams of 10, company-wide chats of 500), real MLS traffic for each
// chat size, then holds every device's mailbox long-poll open and offers messages at each rate
// in turn for S seconds. Prints, for each rate, delivery latency p50 and p99 (from the moment a
// message was offered to the moment each member's long-poll answered with it), what was
// achieved, errors, deliveries lost and doubled, and each process's CPU and memory. With
// `--json`, the last line is the results as JSON (what spark-bench reads). `--mix` sets the
// shares of the messages that go to one-to-one, team and company-wide chats (0.8,0.199,0.001).
//
// Build: swift build -c release --product spark-load --product spark-domaind. It needs haproxy,
// PostgreSQL's server and psql, and python3 (scripts/bootstrap.sh installs them).
import Foundation
import SparkCLI
import SparkDomain
import SparkTestSupport

#if canImport(Glibc)
    import Glibc
#endif

struct Options {
    var users = 10_000
    var rates = [300.0]
    var seconds = 20
    var instances = 2
    var mix = Organisation.standardMix
    var json = false

    init(_ words: [String]) throws {
        var arguments = Arguments(words)
        users = try arguments.integer("--users", in: 4...1_000_000) ?? users
        if let text = try arguments.option("--rates") {
            let rates = text.split(separator: ",").compactMap { Double($0) }
            guard !rates.isEmpty, rates.count == text.split(separator: ",").count, rates.allSatisfy({ $0 > 0 }) else {
                throw Arguments.UsageError(message: "--rates takes messages a second separated by commas, not '\(text)'")
            }
            self.rates = rates
        }
        seconds = try arguments.integer("--seconds", in: 1...3600) ?? seconds
        instances = try arguments.integer("--instances", in: 1...8) ?? instances
        if let text = try arguments.option("--mix") {
            let shares = text.split(separator: ",").compactMap { Double($0) }
            guard shares.count == 3, text.split(separator: ",").count == 3, shares.allSatisfy({ $0 >= 0 }),
                shares.reduce(0, +) > 0
            else {
                throw Arguments.UsageError(
                    message: "--mix takes the shares of one-to-one, team and company-wide messages "
                        + "(e.g. 0.8,0.199,0.001), not '\(text)'")
            }
            mix = shares
        }
        json = arguments.flag("--json")
        try arguments.finish()
    }
}

/// Delivery latency in the chats of one size.
struct ChatSize: Codable {
    let size: Int
    let deliveries: Int
    let p50: Double?
    let p99: Double?
}

/// One step's outcome, as load.py reports it.
struct Step: Codable {
    let rate: Double
    let seconds: Double
    let offered: Int
    let accepted: Int
    let achieved: Double
    let errors: Int
    let firstError: String?
    let deliveries: Int
    let lost: Int
    let doubled: Int
    let unexpected: Int
    let p50: Double?
    let p99: Double?
    let max: Double?
    let byChatSize: [ChatSize]
    let cpu: [String: Double]
    let rssMB: [String: Double]
    let pollErrors: Int
}

func log(_ text: String) {
    FileHandle.standardError.write(Data("spark-load: \(text)\n".utf8))
}

func runLoad(_ options: Options) async throws -> [Step] {
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    limit.rlim_cur = limit.rlim_max
    setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)

    let organisation = Organisation(users: options.users, mix: options.mix)
    let clock = ContinuousClock()
    var started = clock.now
    let deployment = try Deployment(instances: options.instances, connections: options.users + 1_000)
    defer { deployment.stop() }
    log("\(options.instances) instances on PostgreSQL behind two haproxy processes on port \(deployment.port)")

    let domain = try deployment.client()
    let administration = try RemoteAdministration(
        url: URL(string: "https://127.0.0.1:\(deployment.port)")!, domainID: Deployment.domainID,
        trust: .certificateAuthority(path: deployment.caFile),
        credential: try String(
            contentsOf: deployment.directory.appendingPathComponent("instance-0/operator.credential"), encoding: .utf8))
    // An organisation's own limits: its users post as fast as the load asks.
    try await administration.setPolicy(
        DomainPolicy(
            tokenLifetime: 4 * 3600, postsPerMinute: 1_000_000, postedBytesPerMinute: 1 << 40, commitsPerMinute: 1_000_000,
            chatsPerHour: 1_000_000))
    let credentials = try await organisation.enroll(through: domain)
    log("\(options.users) users enrolled in \(clock.now - started)")
    started = clock.now
    let perStep = options.rates.map { Int($0 * Double(options.seconds)) }.max() ?? 0
    let traffic = try organisation.traffic(messagesPerClass: min(4_000, max(100, perStep)))
    log(
        "MLS groups of \(organisation.classes.map { String($0.size) }.joined(separator: ", ")) sealed their messages in \(clock.now - started)"
    )
    started = clock.now
    try await organisation.open(through: domain, credentials: credentials, traffic: traffic)
    let sizes = organisation.classes.map { "\($0.count) of \($0.size)" }.joined(separator: ", ")
    log("\(organisation.chats.count) chats (\(sizes)) opened at epoch 1 in \(clock.now - started)")

    let plan: [String: Any] = [
        "host": "127.0.0.1", "port": deployment.port, "ca": deployment.caFile,
        "users": credentials.map { [$0.token, $0.endpoint] },
        "chats": organisation.chats.map { ["id": $0.id, "class": $0.chatClass, "members": $0.members] as [String: Any] },
        "shares": organisation.classes.map(\.share), "sizes": organisation.classes.map(\.size),
        "messages": traffic.messages.map { $0.map { $0.base64EncodedString() } },
        "steps": options.rates.map { [$0, options.seconds] as [Any] },
        "drain": 10, "senders": 64, "settle": 20,
        "watch": deployment.watched,
    ]
    let planFile = deployment.directory.appendingPathComponent("plan.json")
    try JSONSerialization.data(withJSONObject: plan).write(to: planFile)

    return try await Task.detached {
        // load.py's lines as they come, on a thread of its own (a pipe read blocks).
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("load.py").path
        var steps: [Step] = []
        for line in try pythonLines([script, planFile.path]) where line.hasPrefix("{\"rate\"") {
            steps.append(try JSONDecoder().decode(Step.self, from: Data(line.utf8)))
        }
        guard steps.count == options.rates.count else { throw LoadError("load.py stopped early (its errors are above)") }
        return steps
    }.value
}

/// load.py's standard output, line by line as it comes (each step's line echoed at once);
/// call it off Swift's cooperative pool, since a pipe read blocks.
func pythonLines(_ arguments: [String]) throws -> [String] {
    let process = ChildProcess()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3"] + arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.standardError
    try process.run()
    try? output.fileHandleForWriting.close()
    var lines: [String] = []
    var buffer = Data()
    while true {
        let chunk = output.fileHandleForReading.availableData
        if chunk.isEmpty { break }
        buffer.append(chunk)
        while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
            let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
            buffer.removeSubrange(buffer.startIndex...newline)
            if line.hasPrefix("{") { log(line) }
            lines.append(line)
        }
    }
    process.waitUntilExit()
    return lines
}

let options: Options
do {
    options = try Options(Array(CommandLine.arguments.dropFirst()))
} catch let error as Arguments.UsageError {
    FileHandle.standardError.write(
        Data(
            "spark-load: \(error.message)\nusage: spark-load [--users N] [--rates R1,R2,...] [--seconds S] [--instances K] [--mix S1,S2,S3] [--json]\n"
                .utf8))
    exit(2)
}
do {
    let steps = try await runLoad(options)
    print(
        "rate (msg/s)  achieved  p50 (ms)  p99 (ms)  errors  deliveries  lost  doubled  CPU % (instances, postgres, haproxy, client)"
    )
    for step in steps {
        let cpu = step.cpu.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        print(
            "\(Int(step.rate))  \(step.achieved)  \(step.p50 ?? 0)  \(step.p99 ?? 0)  \(step.errors)  \(step.deliveries)  \(step.lost)  \(step.doubled)  \(cpu)"
        )
    }
    if options.json {
        print(String(decoding: try JSONEncoder().encode(steps), as: UTF8.self))
    }
} catch {
    FileHandle.standardError.write(Data("spark-load: \(error)\n".utf8))
    exit(1)
}
