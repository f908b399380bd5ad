import Dispatch
import Foundation
import SparkLock

#if canImport(Glibc)
    import Glibc
#endif

/// Tells pollers when the domain's database file or its write-ahead log changes, in this
/// process or any other, so an idle endpoint sleeps until there is something to read instead
/// of reading its mailbox on a fixed interval.
///
/// Linux inotify watches the file's directory (the WAL is created and removed beside it);
/// every commit writes the WAL, so every commit moves ``generation``. Anywhere inotify is not
/// available ``isLive`` is false and callers keep polling.
final class FileChangeSignal: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var nextWaiter: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Locked(State())
    /// Set once in `init`; Dispatch sources are thread-safe (only `cancel()` is called later).
    nonisolated(unsafe) private let source: (any DispatchSourceRead)?

    /// Watches `path` (and `path-wal`, `path-journal`); not live when the watch cannot be made.
    init(path: String) {
        #if os(Linux)
            let url = URL(fileURLWithPath: path)
            let directory = url.deletingLastPathComponent().path
            let names: Set<String> = [url.lastPathComponent, url.lastPathComponent + "-wal", url.lastPathComponent + "-journal"]
            let descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
            guard descriptor >= 0 else {
                source = nil
                return
            }
            let mask = UInt32(IN_MODIFY | IN_CLOSE_WRITE | IN_CREATE | IN_MOVED_TO)
            guard inotify_add_watch(descriptor, directory, mask) >= 0 else {
                close(descriptor)
                source = nil
                return
            }
            let source = DispatchSource.makeReadSource(
                fileDescriptor: descriptor, queue: DispatchQueue(label: "SparkDomain.FileChangeSignal"))
            self.source = source
            source.setEventHandler { [weak self] in
                if Self.drain(descriptor, names: names) { self?.signal() }
            }
            source.setCancelHandler { close(descriptor) }
            source.resume()
        #else
            source = nil
        #endif
    }

    // No waiter can be left here: `wait` holds the signal until it returns.
    deinit { source?.cancel() }

    /// Whether changes are signalled; when false, ``wait(after:timeout:)`` only times out.
    var isLive: Bool { source != nil }

    /// A number that moves whenever a watched file changes. Read it before looking at the data,
    /// then wait with it: a change made after the look cannot be missed.
    var generation: UInt64 { state.withLock { $0.generation } }

    /// Returns when ``generation`` has moved past `generation`, after `timeout`, or when the
    /// task is cancelled, whichever comes first.
    func wait(after generation: UInt64, timeout: Duration) async {
        let id = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            self?.resume(id)
        }
        defer { timer.cancel() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.generation != generation || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            resume(id)
        }
    }

    /// Moves the generation and wakes every waiter.
    func signal() {
        let waiters = state.withLock { state in
            state.generation &+= 1
            defer { state.waiters = [:] }
            return state.waiters.values
        }
        for waiter in waiters { waiter.resume() }
    }

    private func resume(_ id: UInt64) {
        state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
    }

    #if os(Linux)
        /// Reads every pending event; whether one concerned a watched name.
        private static func drain(_ descriptor: Int32, names: Set<String>) -> Bool {
            var relevant = false
            let headerSize = MemoryLayout<inotify_event>.size
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                guard count > 0 else { return relevant }
                var offset = 0
                while offset + headerSize <= count {
                    let length = buffer.withUnsafeBytes {
                        Int($0.loadUnaligned(fromByteOffset: offset, as: inotify_event.self).len)
                    }
                    let nameBytes = buffer[(offset + headerSize)..<min(offset + headerSize + length, count)]
                    let name = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
                    if names.contains(name) { relevant = true }
                    offset += headerSize + length
                }
            }
        }
    #endif
}
