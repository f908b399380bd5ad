public import Foundation
import SparkLock

/// A throwaway PostgreSQL cluster for tests: `initdb` into a directory of its own, served on
/// a Unix socket in a directory of its own (no TCP port to clash over), stopped and removed
/// when the test is done. As root, the server runs as the `postgres` user (it refuses root).
///
/// The tests' shared cluster is ``shared``: the one CI started (`SPARK_TEST_POSTGRES`, a
/// connection string to its `postgres` database) or, when that is unset, one this process
/// starts. Neither being possible fails the test that needs it: no PostgreSQL test is skipped.
public final class PostgresCluster: Sendable {
    /// The data directory.
    public let dataDirectory: URL
    /// The directory of the server's socket.
    public let socketDirectory: URL
    /// The port (names the socket).
    public let port: Int
    /// Whether this object started it (and so stops it).
    private let owned: Bool

    /// A connection string to `database`.
    public func conninfo(database: String = "postgres") -> String {
        "host=\(socketDirectory.path) port=\(port) user=postgres dbname=\(database)"
    }

    private init(dataDirectory: URL, socketDirectory: URL, port: Int, owned: Bool) {
        self.dataDirectory = dataDirectory
        self.socketDirectory = socketDirectory
        self.port = port
        self.owned = owned
    }

    /// The directory of PostgreSQL's server programs (`initdb`, `pg_ctl`), the newest installed.
    public static var binaries: URL {
        get throws {
            let root = "/usr/lib/postgresql"
            let versions = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
            guard let newest = versions.compactMap(Int.init).max() else {
                throw DaemonError("PostgreSQL is not installed (no \(root)/N/bin): run scripts/bootstrap.sh")
            }
            return URL(fileURLWithPath: "\(root)/\(newest)/bin")
        }
    }

    // MARK: The shared cluster

    private static let sharedCluster = Locked<Result<PostgresCluster, DaemonError>?>(nil)
    private static let databaseCounter = Locked(0)

    /// The tests' shared cluster (see the type's summary).
    public static var shared: PostgresCluster {
        get throws {
            try sharedCluster.withLock { cached -> Result<PostgresCluster, DaemonError> in
                if let cached { return cached }
                let made: Result<PostgresCluster, DaemonError>
                if let given = ProcessInfo.processInfo.environment["SPARK_TEST_POSTGRES"], !given.isEmpty {
                    made = Result { try external(given) }.mapError { DaemonError("SPARK_TEST_POSTGRES: \($0)") }
                } else {
                    made = Result { try start() }.mapError { ($0 as? DaemonError) ?? DaemonError("\($0)") }
                    if case .success(let cluster) = made { stopAtExit(cluster) }
                }
                cached = made
                return made
            }.get()
        }
    }

    /// A new, empty database on the shared cluster; its connection string.
    public static func makeDatabase() throws -> String {
        let cluster = try shared
        let number = databaseCounter.withLock { counter -> Int in
            counter += 1
            return counter
        }
        let name = "spark_test_\(getpid())_\(number)"
        try cluster.psql("CREATE DATABASE \(name)")
        return cluster.conninfo(database: name)
    }

    /// ``makeDatabase()`` off Swift's cooperative threads (it waits for `psql`, and the first
    /// call for the cluster to start).
    public static func newDatabase() async throws -> String {
        try await Fixtures.blocking { try makeDatabase() }
    }

    private static func external(_ conninfo: String) throws -> PostgresCluster {
        var fields: [String: String] = [:]
        for part in conninfo.split(separator: " ") {
            let pair = part.split(separator: "=", maxSplits: 1).map(String.init)
            if pair.count == 2 { fields[pair[0]] = pair[1] }
        }
        guard let host = fields["host"], let port = fields["port"].flatMap(Int.init) else {
            throw DaemonError("expected 'host=SOCKETDIR port=N …', got '\(conninfo)'")
        }
        let cluster = PostgresCluster(
            dataDirectory: URL(fileURLWithPath: "/nonexistent"), socketDirectory: URL(fileURLWithPath: host), port: port,
            owned: false)
        try cluster.psql("SELECT 1")
        return cluster
    }

    private static func stopAtExit(_ cluster: PostgresCluster) {
        atExitClusters.withLock { $0.append(cluster) }
        if atExitClusters.withLock({ $0.count }) == 1 {
            atexit {
                for cluster in PostgresCluster.atExitClusters.withLock({ $0 }) { cluster.remove() }
            }
        }
    }

    private static let atExitClusters = Locked<[PostgresCluster]>([])

    // MARK: A cluster of one's own

    /// A new temporary directory for a cluster: where its data goes (made by the server's
    /// program) and its socket directory, both reachable by the server's user.
    private static func newDirectories() throws -> (data: URL, socket: URL) {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("spark-pg-\(UUID().uuidString.prefix(8))")
        let socket = root.appendingPathComponent("socket")
        try FileManager.default.createDirectory(at: socket, withIntermediateDirectories: true)
        for directory in [root, socket] {
            try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: directory.path)
        }
        return (root.appendingPathComponent("data"), socket)
    }

    /// Makes and starts a cluster in a new temporary directory. `settings` go into its
    /// `postgresql.conf` (replication, for example).
    public static func start(settings: [String: String] = [:]) throws -> PostgresCluster {
        let (data, socket) = try newDirectories()
        try runAsServer("initdb", ["-D", data.path, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"])
        let port = Int.random(in: 20000...60000)
        let cluster = PostgresCluster(dataDirectory: data, socketDirectory: socket, port: port, owned: true)
        try cluster.configure(settings)
        try cluster.startServer()
        return cluster
    }

    /// Makes a streaming standby of this cluster (`pg_basebackup -R`), started, with `settings`
    /// over the primary's; the primary needs `wal_level = replica` (the default) and a free WAL
    /// sender.
    public func standby(settings: [String: String] = [:]) throws -> PostgresCluster {
        let (data, socket) = try Self.newDirectories()
        try Self.runAsServer(
            "pg_basebackup",
            [
                "-D", data.path, "-R", "-X", "stream", "-c", "fast", "-h", socketDirectory.path, "-p", String(port), "-U",
                "postgres",
                "--no-sync", "-d", "application_name=standby",
            ])
        let standby = PostgresCluster(
            dataDirectory: data, socketDirectory: socket, port: Int.random(in: 20000...60000), owned: true)
        try standby.configure(settings)
        try standby.startServer()
        return standby
    }

    private func configure(_ settings: [String: String]) throws {
        var lines = [
            "listen_addresses = ''",
            "unix_socket_directories = '\(socketDirectory.path)'",
            "port = \(port)",
            // A process crash loses nothing without fsync (the kernel has the pages); the tests
            // never crash the kernel.
            "fsync = off",
            "full_page_writes = off",
            "max_connections = 200",
            "shared_buffers = 64MB",
        ]
        for (name, value) in settings.sorted(by: { $0.key < $1.key }) { lines.append("\(name) = \(value)") }
        let config = dataDirectory.appendingPathComponent("postgresql.auto.conf")
        let existing = (try? String(contentsOf: config, encoding: .utf8)) ?? ""
        let text = existing + "\n" + lines.joined(separator: "\n") + "\n"
        try Self.runAsServer("/bin/sh", ["-c", "cat > '\(config.path)'"], input: Data(text.utf8))
    }

    private func startServer() throws {
        try Self.runAsServer(
            "pg_ctl", ["-D", dataDirectory.path, "-l", dataDirectory.appendingPathComponent("server.log").path, "-w", "start"])
    }

    /// Stops the server (`fast`: sessions end, a clean shutdown; `immediate`: a crash).
    public func stop(mode: String = "fast") throws {
        guard owned else { return }
        try Self.runAsServer("pg_ctl", ["-D", dataDirectory.path, "-m", mode, "-w", "stop"])
    }

    /// Starts the server again after ``stop(mode:)``.
    public func restart() throws { try startServer() }

    /// Promotes a standby to primary and waits until it takes writes.
    public func promote() throws {
        try Self.runAsServer("pg_ctl", ["-D", dataDirectory.path, "-w", "promote"])
    }

    /// Stops the server and removes its directories.
    public func remove() {
        guard owned else { return }
        try? stop(mode: "immediate")
        try? FileManager.default.removeItem(at: dataDirectory.deletingLastPathComponent())
    }

    /// Runs SQL with `psql` against `database`; its output, unaligned and without headers.
    @discardableResult
    public func psql(_ sql: String, database: String = "postgres") throws -> String {
        let result = try Fixtures.run(
            URL(fileURLWithPath: "/usr/bin/psql"),
            ["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", conninfo(database: database), "-c", sql])
        guard result.status == 0 else { throw DaemonError("psql '\(sql)' failed: \(result.stderr)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Runs a server program as the `postgres` user when this process is root. Its output goes
    /// to a file, not a pipe (the server `pg_ctl` starts would hold a pipe open for its life),
    /// and it is spawned and reaped with `posix_spawn` and `waitpid` directly.
    private static func runAsServer(_ program: String, _ arguments: [String], input: Data? = nil) throws {
        let path = program.hasPrefix("/") ? program : try binaries.appendingPathComponent(program).path
        let command = geteuid() == 0 ? ["/usr/sbin/runuser", "-u", "postgres", "--", path] + arguments : [path] + arguments
        let directory = FileManager.default.temporaryDirectory
        let output = directory.appendingPathComponent("spark-pg-output-\(UUID().uuidString)")
        let inputFile = directory.appendingPathComponent("spark-pg-input-\(UUID().uuidString)")
        _ = FileManager.default.createFile(
            atPath: inputFile.path, contents: input ?? Data(), attributes: [.posixPermissions: 0o644])
        defer {
            try? FileManager.default.removeItem(at: output)
            try? FileManager.default.removeItem(at: inputFile)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, inputFile.path, O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Nothing else of this process's: a server inheriting another test's pipe would hold it
        // open for its life, and that test would wait for its end forever.
        guard spawnCloseFrom(&actions, 3) == 0 else { throw DaemonError("posix_spawn cannot close descriptors") }
        var argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, command[0], &actions, nil, &argv, environ)
        guard spawned == 0 else { throw DaemonError("cannot run \(command[0]): error \(spawned)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        // Exited with status 0: the low 7 bits (the signal) and the exit code both zero.
        guard status == 0 else {
            let said = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
            throw DaemonError("\(program) \(arguments.joined(separator: " ")) failed (status \(status)): \(said)")
        }
    }
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34+), which its header declares only
/// under `_GNU_SOURCE`, as Swift's Glibc module does not define it.
@_silgen_name("posix_spawn_file_actions_addclosefrom_np")
func spawnCloseFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ from: Int32) -> Int32
