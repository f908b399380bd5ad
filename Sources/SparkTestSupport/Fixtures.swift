public import Foundation
public import SparkCrypto
public import SparkDomain

/// Helpers shared by the test targets: hex, paths, temporary directories, built products.
public enum Fixtures {
    /// The repository root, found from this file's location.
    public static let repositoryRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The directory of built products (where the test bundle and the helper executables are).
    public static var productsDirectory: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    }

    /// The built executable named `name`, beside the test bundle.
    public static func executable(_ name: String) -> URL { productsDirectory.appendingPathComponent(name) }

    /// A fresh temporary directory (mode 0700) removed when `body` returns.
    public static func withTemporaryDirectory<T>(_ body: (URL) async throws -> T) async rethrows -> T {
        _ = isolatedConfigHome
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("spark-test-\(UUID().uuidString)")
        try! FileManager.default.createDirectory(
            at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: url) }
        return try await body(url)
    }

    /// ``withTemporaryDirectory(_:)`` for synchronous tests.
    public static func withTemporaryDirectorySync<T>(_ body: (URL) throws -> T) rethrows -> T {
        _ = isolatedConfigHome
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("spark-test-\(UUID().uuidString)")
        try! FileManager.default.createDirectory(
            at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: url) }
        return try body(url)
    }

    /// Endpoint stores keep their key files under `$XDG_CONFIG_HOME`: tests (and the binaries
    /// they start, which inherit the environment) use a directory of this process's instead of
    /// the user's, and the Secret Service is left alone. Set once, before the first store opens.
    public static let isolatedConfigHome: URL = {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("spark-test-config-\(getpid())")
        try? FileManager.default.createDirectory(
            at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        setenv("XDG_CONFIG_HOME", url.path, 1)
        setenv("SPARK_SECRET_SERVICE", "off", 1)
        return url
    }()

    /// Runs an executable to completion without holding a thread of Swift's cooperative pool
    /// while it waits (on a two-core machine that pool has two threads, and a test blocked on a
    /// child process would starve every other test's tasks).
    public static func run(
        _ executable: URL, _ arguments: [String], input: Data? = nil, environment: [String: String]? = nil
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(
                    with: Result {
                        try run(executable, arguments, input: input, environment: environment) as (Int32, String, String)
                    })
            }
        }
    }

    /// A fresh, self-signed published identity of `user` and its signing key.
    public static func publishedIdentity(_ user: String, version: Int = 1) throws -> (PublishedIdentity, Ed25519.PrivateKey) {
        let signing = try Ed25519.PrivateKey()
        let encryption = try X25519.PrivateKey()
        var identity = PublishedIdentity(
            userID: user, signingKey: signing.publicKey.rawRepresentation, encryptionKey: encryption.publicKey.rawRepresentation,
            keyVersion: version, signature: Data())
        identity.signature = try signing.signature(for: identity.signedBytes)
        return (identity, signing)
    }

    /// Runs blocking work (reading a pipe, waiting for a process) on a thread of its own, never
    /// on one of Swift's cooperative threads (see ``run(_:_:input:environment:)``).
    public static func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: body()) }
        }
    }

    /// Runs blocking work that may throw on a thread of its own (see ``onThread(_:)``).
    public static func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await onThread { Result { try body() } }.get()
    }

    /// Runs an executable to completion and returns its exit status, standard output and error.
    public static func run(
        _ executable: URL, _ arguments: [String], input: Data? = nil, environment: [String: String]? = nil
    ) throws -> (status: Int32, stdout: String, stderr: String) {
        let process = ChildProcess()
        process.executableURL = executable
        process.arguments = arguments
        if let environment { process.environment = environment }
        let stdout = Pipe()
        let stderr = Pipe()
        let stdin = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = stdin
        try process.run()
        if let input { stdin.fileHandleForWriting.write(input) }
        try stdin.fileHandleForWriting.close()
        // Read both pipes before waiting, so a chatty child cannot block on a full pipe.
        let group = DispatchGroup()
        nonisolated(unsafe) var errorData = Data()
        group.enter()
        DispatchQueue.global().async {
            errorData = stderr.fileHandleForReading.readDataToEndOfFile()
            group.leave()
        }
        let outputData = stdout.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        process.waitUntilExit()
        return (
            process.terminationStatus, String(decoding: outputData, as: UTF8.self), String(decoding: errorData, as: UTF8.self)
        )
    }
}

extension Fixtures {
    /// Runs a Python peer script from the repository with `python3` and returns its trimmed
    /// standard output; a non-zero exit becomes an error carrying its standard error. The
    /// peers need the packages `scripts/bootstrap.sh` installs. Like ``run(_:_:input:environment:)``
    /// it waits on a thread of its own: a Python interpreter takes most of a second to start.
    public static func python(_ script: String, _ arguments: [String], input: String = "") async throws -> String {
        let path = repositoryRoot.appendingPathComponent(script).path
        let result: (status: Int32, stdout: String, stderr: String) = try await run(
            URL(fileURLWithPath: "/usr/bin/env"), ["python3", path] + arguments, input: Data(input.utf8))
        guard result.status == 0 else { throw PythonPeerError(script: script, stderr: result.stderr) }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// A Python peer failed (or its packages are missing: run `scripts/bootstrap.sh`).
public struct PythonPeerError: Error, CustomStringConvertible {
    /// The script that failed.
    public let script: String
    /// What it printed on standard error.
    public let stderr: String
    /// A failure of `script`, with what it printed on standard error.
    public init(script: String, stderr: String) {
        self.script = script
        self.stderr = stderr
    }

    /// `<script> failed: <stderr>`.
    public var description: String { "\(script) failed (are the Python peers installed?): \(stderr)" }
}

extension Data {
    /// The bytes as lower-case hex, for test messages.
    public var hexString: String { map { String(format: "%02x", $0) }.joined() }

    /// Bytes from a hex string (whitespace ignored); traps on bad hex, since it is for fixtures.
    public init(hex: String) {
        let digits = Array(hex.utf8.filter { !($0 == 32 || $0 == 10 || $0 == 9) })
        precondition(digits.count % 2 == 0, "odd hex length")
        func value(_ c: UInt8) -> UInt8 {
            switch c {
            case 48...57: c - 48
            case 97...102: c - 87
            case 65...70: c - 55
            default: preconditionFailure("bad hex digit")
            }
        }
        self.init(stride(from: 0, to: digits.count, by: 2).map { value(digits[$0]) << 4 | value(digits[$0 + 1]) })
    }

    /// Lowercase hex.
    public var hex: String { map { String(format: "%02x", $0) }.joined() }
}
