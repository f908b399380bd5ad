import Foundation
import SparkDomain
import SparkTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// What `spark-load` runs against, as an organisation would deploy it: a PostgreSQL cluster of
/// its own, `instances` spark-domaind processes on it (each serving TLS, with every limit that
/// would count one load generator's address as one abuser raised), and two haproxy processes
/// in TCP mode sharing one port (`SO_REUSEPORT`) that spread the connections over the instances
/// and pass each client's address on (PROXY protocol v2). Two proxies, because each proxied
/// connection holds two descriptors in haproxy and this machine's hard limit is 20,000.
final class Deployment: @unchecked Sendable {  // immutable after init
    let directory: URL
    let conninfo: String
    let instances: [ChildProcess]
    let proxies: [ChildProcess]
    let port: Int
    let caFile: String

    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let domainID = "load"

    init(instances count: Int, connections: Int) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spark-load-\(UUID().uuidString.prefix(8))")
        self.directory = directory
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // What started before a failure stops with it.
        var started: [ChildProcess] = []
        var ready = false
        defer {
            if !ready {
                for process in started {
                    process.terminate()
                    process.waitUntilExit()
                }
                Self.stopCluster(in: directory)
                try? FileManager.default.removeItem(at: directory)
            }
        }
        let server = try Self.run("bash", [Self.postgresScript, "start", directory.appendingPathComponent("postgres").path])
            .trimmingCharacters(in: .whitespacesAndNewlines)
        _ = try Self.run("psql", ["-X", "-q", "-d", server, "-c", "CREATE DATABASE spark_load"])
        conninfo = server.replacingOccurrences(of: "dbname=postgres", with: "dbname=spark_load")

        let daemon = Self.executable("spark-domaind")
        let home = directory.appendingPathComponent("instance-0")
        _ = try Self.run(
            daemon, ["init", home.path, "--domain", Self.domainID, "--sandbox", "--database", conninfo])
        caFile = home.appendingPathComponent("ca.pem").path
        var instances: [ChildProcess] = []
        var ports: [Int] = []
        for index in 0..<count {
            let served = directory.appendingPathComponent("instance-\(index)")
            if index > 0 { try FileManager.default.copyItem(at: home, to: served) }
            let (process, port) = try Self.serve(daemon, served, connections: connections)
            started.append(process)
            instances.append(process)
            ports.append(port)
        }
        self.instances = instances
        let port = try Self.freePort()
        var proxies: [ChildProcess] = []
        for index in 0..<2 {
            let proxy = try Self.proxy(index, port: port, to: ports, connections: connections, in: directory)
            started.append(proxy)
            proxies.append(proxy)
        }
        self.proxies = proxies
        self.port = port
        try Self.waitForPort(port)
        ready = true
    }

    /// The daemon on a free loopback port: the port it printed.
    static func serve(_ daemon: String, _ home: URL, connections: Int) throws -> (ChildProcess, Int) {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: daemon)
        // The guessing limits (test tokens, passcodes) and the connections per address are
        // raised, since every user here comes from 127.0.0.1. The proxies speak PROXY v2 from 127.0.0.1.
        process.arguments = [
            "serve", home.path, "--listen", "127.0.0.1:0", "--quiet", "--threads", "2",
            "--max-connections", String(2 * connections), "--max-connections-per-address", String(2 * connections),
            "--rate-limits", "1000000000,1000000000",
            "--proxy-from", "127.0.0.1",
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        var line = ""
        while !line.contains("\n") {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line += String(decoding: chunk, as: UTF8.self)
        }
        guard let range = line.range(of: "listening on "),
            let url = URL(string: line[range.upperBound...].trimmingCharacters(in: .whitespacesAndNewlines)), let port = url.port
        else { throw LoadError("spark-domaind did not start: \(line)") }
        return (process, port)
    }

    /// One of the two haproxy processes on `port`, balancing by the fewest connections. The kernel
    /// spreads the connections over the two about evenly; each takes up to 60% of them.
    static func proxy(_ index: Int, port: Int, to ports: [Int], connections: Int, in directory: URL) throws -> ChildProcess {
        let servers = ports.enumerated().map { "    server i\($0.offset) 127.0.0.1:\($0.element) send-proxy-v2" }
        let configuration = """
            global
                maxconn \(connections * 6 / 10)
            defaults
                mode tcp
                timeout connect 5s
                timeout client 60s
                timeout server 60s
            frontend spark
                bind 127.0.0.1:\(port)
                default_backend instances
            backend instances
                balance leastconn
            \(servers.joined(separator: "\n"))

            """
        let file = directory.appendingPathComponent("haproxy-\(index).cfg")
        try configuration.write(to: file, atomically: true, encoding: .utf8)
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/haproxy")
        process.arguments = ["-db", "-f", file.path]
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        return process
    }

    /// The process IDs to watch, by name: the instances, the proxies and PostgreSQL's postmaster
    /// (whose backends the load generator counts with it).
    var watched: [String: Int32] {
        var names: [String: Int32] = [:]
        for (index, process) in instances.enumerated() { names["spark-domaind-\(index)"] = process.processIdentifier }
        for (index, process) in proxies.enumerated() { names["haproxy-\(index)"] = process.processIdentifier }
        let pidFile = directory.appendingPathComponent("postgres/data/postmaster.pid").path
        if let text = try? String(contentsOfFile: pidFile, encoding: .utf8), let pid = Int32(text.prefix { $0 != "\n" }) {
            names["postgres"] = pid
        }
        return names
    }

    func client() throws -> RemoteDomain {
        try RemoteDomain(
            url: URL(string: "https://127.0.0.1:\(port)")!, domainID: Self.domainID, trust: .certificateAuthority(path: caFile))
    }

    func stop() {
        for process in proxies + instances {
            process.terminate()
            process.waitUntilExit()
        }
        Self.stopCluster(in: directory)
        try? FileManager.default.removeItem(at: directory)
    }

    static let postgresScript = repository.appendingPathComponent("scripts/postgres.sh").path

    /// Stops the PostgreSQL cluster in `directory` (if it started).
    static func stopCluster(in directory: URL) {
        _ = try? run("bash", [postgresScript, "stop", directory.appendingPathComponent("postgres").path])
    }

    /// A program built beside this one (`swift build -c release --product spark-domaind`).
    static func executable(_ name: String) -> String {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent(name).path
    }

    /// Runs a program to its end; its standard output, or an error with its standard error.
    @discardableResult
    static func run(_ program: String, _ arguments: [String]) throws -> String {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: program.hasPrefix("/") ? program : "/usr/bin/env")
        process.arguments = program.hasPrefix("/") ? arguments : [program] + arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let text = output.fileHandleForReading.readDataToEndOfFile()
        let problem = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw LoadError("\(program) \(arguments.joined(separator: " ")) failed: \(String(decoding: problem, as: UTF8.self))")
        }
        return String(decoding: text, as: UTF8.self)
    }

    static func freePort() throws -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0
            }
        }
        guard bound else { throw LoadError("no free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Waits until something accepts connections on the loopback `port`.
    static func waitForPort(_ port: Int) throws {
        for _ in 0..<400 {
            let socket = RawHTTP.connect(port: port)
            if socket >= 0 {
                close(socket)
                return
            }
            usleep(25_000)
        }
        throw LoadError("haproxy did not start on port \(port)")
    }
}

/// Why a load run could not go on.
struct LoadError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
