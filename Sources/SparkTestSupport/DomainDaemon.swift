public import Foundation
public import SparkDomain
import SparkLock

/// A `spark-domaind` run by a test: `init` into a directory, `serve` on a free loopback port,
/// and clients that trust its CA. The daemon's request log goes to `DIR/daemon.log`.
public final class DomainDaemon: Sendable {
    /// The domain directory.
    public let directory: URL
    /// The domain id.
    public let domainID: String
    /// Where it serves, `https://127.0.0.1:PORT` (or `http://` when plain).
    public let url: URL
    /// Whether it serves plain HTTP.
    public let plain: Bool
    private let process = Locked<ChildProcess?>(nil)
    private let serveArguments: [String]
    private let launcher: [String]

    private init(
        directory: URL, domainID: String, url: URL, plain: Bool, process: ChildProcess, serveArguments: [String],
        launcher: [String]
    ) {
        self.directory = directory
        self.domainID = domainID
        self.url = url
        self.plain = plain
        self.serveArguments = serveArguments
        self.launcher = launcher
        self.process.withLock { $0 = process }
    }

    /// Makes a domain in `directory/domain` and serves it on `host` (a free port), its
    /// certificate naming `hostnames`; `launcher` prefixes the serve command (for example
    /// `ip netns exec NAME`); `database` is a PostgreSQL connection string (SQLite otherwise).
    public static func start(
        in directory: URL, domainID: String = "test-domain", sandbox: Bool = true, plain: Bool = false,
        serveArguments: [String] = [], host: String = "127.0.0.1", hostnames: [String] = [], launcher: [String] = [],
        database: String? = nil
    ) async throws -> DomainDaemon {
        let home = directory.appendingPathComponent("domain")
        var initArguments = ["init", home.path, "--domain", domainID]
        if let database { initArguments += ["--database", database] }
        if sandbox { initArguments.append("--sandbox") }
        for name in hostnames { initArguments += ["--hostname", name] }
        let made = try await Fixtures.run(Fixtures.executable("spark-domaind"), initArguments)
        guard made.status == 0 else { throw DaemonError("spark-domaind init failed: \(made.stderr)") }
        var arguments = serveArguments
        if plain { arguments.append("--plain") }
        let (process, url) = try await serve(home, listen: "\(host):0", arguments: arguments, launcher: launcher)
        return DomainDaemon(
            directory: home, domainID: domainID, url: url, plain: plain, process: process, serveArguments: arguments,
            launcher: launcher)
    }

    private static func serve(_ home: URL, listen: String, arguments: [String], launcher: [String]) async throws -> (
        ChildProcess, URL
    ) {
        let process = ChildProcess()
        let command = [Fixtures.executable("spark-domaind").path, "serve", home.path, "--listen", listen] + arguments
        let full = launcher + command
        process.executableURL = URL(fileURLWithPath: full[0])
        process.arguments = Array(full.dropFirst())
        let output = Pipe()
        process.standardOutput = output
        let log = home.appendingPathComponent("daemon.log")
        if !FileManager.default.fileExists(atPath: log.path) {
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        }
        let logHandle = try FileHandle(forWritingTo: log)
        logHandle.seekToEndOfFile()
        process.standardError = logHandle
        try process.run()
        let reader = output.fileHandleForReading
        let line = await Fixtures.onThread { () -> String in
            var text = ""
            while !text.contains("\n") {
                let chunk = reader.availableData
                if chunk.isEmpty { break }
                text += String(decoding: chunk, as: UTF8.self)
            }
            return text
        }
        guard let range = line.range(of: "listening on "), let url = URL(string: String(line[range.upperBound...]).trimmed)
        else {
            process.terminate()
            let logged = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            throw DaemonError("spark-domaind serve did not start: \(line) \(logged)")
        }
        return (process, url)
    }

    /// Serves an existing domain directory (made by `spark-domaind init`) with `arguments`.
    public static func serving(_ home: URL, domainID: String = "spark", arguments: [String]) async throws -> DomainDaemon {
        let (process, url) = try await serve(home, listen: "127.0.0.1:0", arguments: arguments, launcher: [])
        return DomainDaemon(
            directory: home, domainID: domainID, url: url, plain: arguments.contains("--plain"), process: process,
            serveArguments: arguments, launcher: [])
    }

    /// Serves again on the same port after ``kill()`` or ``stop()``.
    public func restart() async throws {
        let port = url.port ?? 0
        let (process, _) = try await Self.serve(
            directory, listen: "\(url.host ?? "127.0.0.1"):\(port)", arguments: serveArguments, launcher: launcher)
        self.process.withLock { $0 = process }
    }

    /// How clients trust it.
    public var trust: DomainTrust {
        plain ? .plainLoopback : .certificateAuthority(path: directory.appendingPathComponent("ca.pem").path)
    }

    /// A client of it.
    public func client() throws -> RemoteDomain {
        // A daemon under a sanitizer, among a whole suite on two cores, can take longer than the
        // SDK's 15 s for one call (a password hashed 600,000 times while dozens of tests run).
        try RemoteDomain(url: url, domainID: domainID, trust: trust, requestTimeout: .seconds(60))
    }

    /// An operator client of it.
    public func administration() throws -> RemoteAdministration {
        try RemoteAdministration(url: url, domainID: domainID, trust: trust, credential: try operatorCredential())
    }

    /// Writes a `ConfigSettings.plist` naming it (test auth, its URL and CA) into `directory` and
    /// returns its path: what `spark-admin --config` and the quick start read.
    public func writeConfig(in directory: URL) throws -> String {
        let plist: [String: Any] = [
            "authProvider": "testAuth", "testAuth": ["domain": domainID, "environment": "sandbox"],
            "domainURL": url.absoluteString, "domainCAFile": self.directory.appendingPathComponent("ca.pem").path,
        ]
        let path = directory.appendingPathComponent("daemon-\(url.port ?? 0).plist").path
        try PropertyListSerialization.data(fromPropertyList: plist, format: .xml, options: 0).write(
            to: URL(fileURLWithPath: path))
        return path
    }

    /// The operator credential it was set up with (the file's line, without its newline).
    public func operatorCredential() throws -> String {
        try String(contentsOf: directory.appendingPathComponent("operator.credential"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `GET /metrics` as the operator (a plain daemon's).
    public func metrics() async throws -> RawHTTP.Answer {
        await RawHTTP.request(
            port: url.port ?? 0, method: "GET", path: "/metrics",
            headers: ["Authorization": "Bearer \(try operatorCredential())"])
    }

    /// The daemon's process id.
    public var processID: Int32 { process.withLock { $0?.processIdentifier ?? 0 } }

    /// The request log so far.
    public var log: String {
        (try? String(contentsOf: directory.appendingPathComponent("daemon.log"), encoding: .utf8)) ?? ""
    }

    /// SIGTERM, then waits for the exit; returns the exit status.
    @discardableResult
    public func stop() async -> Int32 {
        guard let process = process.withLock({ $0 }) else { return 0 }
        if process.isRunning { process.terminate() }
        return await Self.wait(process)
    }

    /// SIGKILL (a crash), then waits for the process to be gone.
    public func kill() async {
        guard let process = process.withLock({ $0 }) else { return }
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
        _ = await Self.wait(process)
    }

    private static func wait(_ process: ChildProcess) async -> Int32 {
        await Fixtures.onThread {
            process.waitUntilExit()
            return process.terminationStatus
        }
    }

    deinit {
        if let process = process.withLock({ $0 }), process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
    }
}

/// A daemon that would not start.
public struct DaemonError: Error, CustomStringConvertible {
    /// What went wrong.
    public let description: String
    /// A failure described by `description`.
    public init(_ description: String) { self.description = description }
}

extension String {
    fileprivate var trimmed: String { trimmingCharacters(in: .whitespacesAndNewlines) }
}
