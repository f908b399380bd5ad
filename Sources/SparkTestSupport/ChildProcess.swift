public import Foundation
import SparkLock

#if canImport(Glibc)
    import Glibc
#endif

/// A child process started with `posix_spawn`, closing every descriptor of this process but its
/// three standard ones: what tests use instead of Foundation's `Process`. `Process.run` reads
/// `/proc/self/fd` to find the descriptors to close, and on Linux it copies each entry with a
/// fixed 256-byte read past the end of glibc's directory buffer once about 1,360 descriptors
/// are open, as the whole suite running in parallel has (AddressSanitizer stops the run there).
/// The same surface as `Process` for what the tests need: the executable, arguments,
/// environment, standard streams as a `Pipe`, a `FileHandle` or nothing (`/dev/null`).
public final class ChildProcess: @unchecked Sendable {
    /// The program.
    public var executableURL: URL?
    /// Its arguments (without the program's name).
    public var arguments: [String] = []
    /// Its environment; this process's when nil.
    public var environment: [String: String]?
    /// A `Pipe` (the child reads its read end), a `FileHandle`, or nil for `/dev/null`.
    public var standardInput: Any?
    /// A `Pipe` (the child writes its write end), a `FileHandle`, or nil for `/dev/null`.
    public var standardOutput: Any?
    /// As ``standardOutput``.
    public var standardError: Any?

    private struct State {
        var pid: pid_t = 0
        var status: Int32?
    }
    private let state = Locked(State())

    /// A process to configure, then ``run()``.
    public init() {}

    /// Starts it; throws when it cannot be spawned.
    public func run() throws {
        guard let executableURL else { throw DaemonError("no executable to run") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (target, stream, reads) in [(Int32(0), standardInput, true), (1, standardOutput, false), (2, standardError, false)] {
            switch stream {
            case let pipe as Pipe:
                let end = reads ? pipe.fileHandleForReading : pipe.fileHandleForWriting
                posix_spawn_file_actions_adddup2(&actions, end.fileDescriptor, target)
            case let handle as FileHandle:
                posix_spawn_file_actions_adddup2(&actions, handle.fileDescriptor, target)
            default:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", reads ? O_RDONLY : O_WRONLY, 0)
            }
        }
        guard spawnCloseFrom(&actions, 3) == 0 else { throw DaemonError("posix_spawn cannot close descriptors") }
        let path = executableURL.path
        var argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let environment = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        var envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
        defer { for pointer in envp { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, path, &actions, nil, &argv, &envp)
        guard spawned == 0 else { throw DaemonError("cannot run \(path): error \(spawned)") }
        state.withLock { $0.pid = pid }
        // The child's ends are the child's now: without closing them here, a reader of the
        // child's output would never see its end.
        if let pipe = standardInput as? Pipe { try? pipe.fileHandleForReading.close() }
        if let pipe = standardOutput as? Pipe { try? pipe.fileHandleForWriting.close() }
        if let pipe = standardError as? Pipe { try? pipe.fileHandleForWriting.close() }
    }

    /// The child's process id (0 before ``run()``).
    public var processIdentifier: Int32 { state.withLock { $0.pid } }

    /// Whether it has not exited yet.
    public var isRunning: Bool {
        let pid = processIdentifier
        guard pid > 0, state.withLock({ $0.status }) == nil else { return false }
        var status: Int32 = 0
        if waitpid(pid, &status, WNOHANG) == pid { record(status) }
        return state.withLock { $0.status } == nil
    }

    /// Blocks until it exits.
    public func waitUntilExit() {
        let pid = processIdentifier
        guard pid > 0 else { return }
        while state.withLock({ $0.status }) == nil {
            var status: Int32 = 0
            let result = waitpid(pid, &status, 0)
            if result == pid {
                record(status)
            } else if result < 0, errno != EINTR {
                // Reaped by another caller (isRunning on another thread): its status comes.
                usleep(1000)
            }
        }
    }

    /// Its exit code, or the number of the signal that ended it (as `Process` reports them).
    public var terminationStatus: Int32 { state.withLock { $0.status } ?? 0 }

    /// SIGTERM.
    public func terminate() { signal(SIGTERM) }

    /// SIGINT.
    public func interrupt() { signal(SIGINT) }

    /// Sends `number` while it runs.
    public func signal(_ number: Int32) {
        if isRunning { kill(processIdentifier, number) }
    }

    private func record(_ status: Int32) {
        let low = status & 0x7F
        let code = low == 0 ? (status >> 8) & 0xFF : low
        state.withLock { $0.status = code }
    }
}
