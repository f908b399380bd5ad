import Foundation
import SparkDomain

#if canImport(Glibc)
    import Glibc
#endif

/// One printed row: our number beside a reference's, measured in the same run.
struct BenchmarkResult: Codable {
    /// The row's name, stable across runs (`pbkdf2-sha512-600k`).
    var name: String
    /// The unit both numbers are in.
    var unit: String
    /// Our measurement.
    var ours: Double
    /// The reference's measurement.
    var reference: Double
    /// ours / reference; read it with `higherIsBetter` (a time wants ≤ 1, a rate ≥ 1).
    var ratio: Double
    /// Whether larger numbers are better (throughput) or worse (time).
    var higherIsBetter: Bool
    /// What the reference is.
    var referenceName: String
}

/// A benchmark: a name, a filterable group, and a closure producing its result.
struct Benchmark: Sendable {
    let name: String
    let run: @Sendable () throws -> BenchmarkResult
}

enum Harness {
    /// Makes a result. The ratio is always ours/reference, printed with the direction, so the
    /// issues' targets (≤ 1.05 for a time, ≥ 0.95 for a throughput) read directly.
    static func result(
        _ name: String, unit: String, ours: Double, reference: Double, higherIsBetter: Bool, referenceName: String
    ) -> BenchmarkResult {
        BenchmarkResult(
            name: name, unit: unit, ours: ours, reference: reference, ratio: reference == 0 ? .nan : ours / reference,
            higherIsBetter: higherIsBetter, referenceName: referenceName)
    }

    /// Seconds taken by `body`, best of `repeats` runs (the least disturbed by the other core).
    static func bestTime(repeats: Int, _ body: () throws -> Void) rethrows -> Double {
        var best = Double.infinity
        for _ in 0..<repeats {
            let start = ContinuousClock.now
            try body()
            best = min(best, (ContinuousClock.now - start).seconds)
        }
        return best
    }

    /// Operations per second of `body`, run in batches for about `seconds`.
    /// Turns a profiler on or off around what a row measures: `perf record -D -1 --control
    /// fifo:PATH` started with `SPARK_PERF_CONTROL=PATH` records only the measured part (a row
    /// that calls this). Nothing without the variable.
    static func profiling(_ on: Bool) {
        guard let path = ProcessInfo.processInfo.environment["SPARK_PERF_CONTROL"],
            let control = FileHandle(forWritingAtPath: path)
        else { return }
        control.write(Data((on ? "enable\n" : "disable\n").utf8))
        try? control.close()
    }

    static func rate(seconds: Double = 1.0, batch: Int = 64, _ body: () throws -> Void) rethrows -> Double {
        // Warm up caches and lazy initialisation.
        for _ in 0..<batch { try body() }
        var operations = 0
        let start = ContinuousClock.now
        var elapsed = 0.0
        repeat {
            for _ in 0..<batch { try body() }
            operations += batch
            elapsed = (ContinuousClock.now - start).seconds
        } while elapsed < seconds
        return Double(operations) / elapsed
    }

    /// Runs a command and returns its standard output; throws when it fails.
    static func run(_ executable: String, _ arguments: [String]) throws -> (output: String, seconds: Double) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [executable] + arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        let start = ContinuousClock.now
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let seconds = (ContinuousClock.now - start).seconds
        guard process.terminationStatus == 0 else {
            throw BenchError("\(executable) \(arguments.joined(separator: " ")) exited with \(process.terminationStatus)")
        }
        return (String(decoding: data, as: UTF8.self), seconds)
    }

    /// The fields of the first line of `output` starting with `prefix`, split on ':'.
    static func machineReadableLine(_ output: String, prefix: String) throws -> [String] {
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else {
            throw BenchError("no '\(prefix)' line in the reference's output")
        }
        return line.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

extension Harness {
    /// This executable's absolute path.
    static var executablePath: String { URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path }

    /// Spawns `path` with `posix_spawn` and waits for it; returns its standard output. Used for
    /// timing short-lived processes, where Foundation's `Process` adds tens of milliseconds of
    /// its own polling to the wait.
    static func spawn(_ path: String, _ arguments: [String]) throws -> String {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw BenchError("pipe failed") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_addclose(&actions, fds[0])
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, nil, argv, environ)
        close(fds[1])
        guard result == 0 else {
            close(fds[0])
            throw BenchError("posix_spawn \(path) failed: \(result)")
        }
        var output = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(fds[0], &buffer, buffer.count)
            if count <= 0 { break }
            output.append(contentsOf: buffer[0..<count])
        }
        close(fds[0])
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        return String(decoding: output, as: UTF8.self)
    }
}

extension Harness {
    /// Starts nginx in the foreground (`daemon off` in `configuration`) on `directory`, as a
    /// child the caller stops with `terminate()` and `waitUntilExit()`; waits a moment for it to
    /// listen.
    static func nginx(configuration: String, in directory: URL, port: Int) throws -> Process {
        let file = directory.appendingPathComponent("nginx.conf")
        try configuration.write(to: file, atomically: true, encoding: .utf8)
        let binary = ["/usr/sbin/nginx", "/usr/bin/nginx"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let binary else { throw BenchError("nginx is not installed (scripts/bench.sh installs it)") }
        let server = Process()
        server.executableURL = URL(fileURLWithPath: binary)
        server.arguments = ["-c", file.path, "-p", directory.path]
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        // Until it listens (a fixed pause was too short on a busy machine: wrk then failed).
        for _ in 0..<100 where !accepts(port: port) { Thread.sleep(forTimeInterval: 0.05) }
        return server
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    static func accepts(port: Int) -> Bool {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return false }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}

extension DomainPolicy {
    /// The benchmarks' domains: the default policy, but no per-user write limits (one user sends
    /// thousands of messages a second here) and room for every passcode attempt a row makes.
    static var bench: DomainPolicy {
        DomainPolicy(
            unlockAttemptsPerHour: 1000, postsPerMinute: 1_000_000, postedBytesPerMinute: 1 << 40,
            commitsPerMinute: 1_000_000, chatsPerHour: 1_000_000)
    }
}
