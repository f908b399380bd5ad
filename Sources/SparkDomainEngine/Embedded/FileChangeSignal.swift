import Dispatch
import Foundation
import SparkDomain

#if canImport(Glibc)
    import Glibc
#endif

/// Calls back when a commit in another process (or this one) put entries in mailboxes of the
/// embedded domain's file: the quick start's two devices share one file, and a post by one wakes
/// the other's long-poll. Linux inotify watches the file's directory for the signal file
/// (`<file>-signal`), which every such commit pokes (``Poke``) once it is visible. Where inotify
/// is unavailable nothing is called, and long-polls across processes end at their timeout instead.
///
/// The database's own files are not watched: SQLite writes a transaction's frames to the WAL
/// before it makes the commit visible (in the WAL index, which is mapped, not written), so a
/// reader woken by the WAL could look before the commit shows and then wait for nothing; and
/// checkpoints and writes that reach no mailbox would wake every long-poll for nothing.
final class FileChangeSignal: Sendable {
    /// Set once in `init`; Dispatch sources are thread-safe (only `cancel()` is called later).
    nonisolated(unsafe) private let source: (any DispatchSourceRead)?

    /// Watches the signal file of the database at `path`, calling `onChange` after each poke.
    init(path: String, onChange: @escaping @Sendable () -> Void) {
        #if os(Linux)
            let url = URL(fileURLWithPath: path)
            let directory = url.deletingLastPathComponent().path
            let names: Set<String> = [url.lastPathComponent + Poke.suffix]
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
            source.setEventHandler {
                if Self.drain(descriptor, names: names) { onChange() }
            }
            source.setCancelHandler { close(descriptor) }
            source.resume()
        #else
            source = nil
        #endif
    }

    deinit { source?.cancel() }

    /// Writes one byte to the signal file beside the domain's file, after a commit, so that
    /// other processes' watchers wake when the commit is visible. The file holds nothing; it is
    /// opened once and kept open.
    final class Poke: Sendable {
        static let suffix = "-signal"
        /// Set once in `init`.
        private let descriptor: Int32

        init(path: String) {
            descriptor = open(path + Self.suffix, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        }

        deinit { if descriptor >= 0 { close(descriptor) } }

        /// Pokes the file (a failure only delays other processes until their long-poll ends).
        func callAsFunction() {
            guard descriptor >= 0 else { return }
            var byte: UInt8 = 1
            _ = pwrite(descriptor, &byte, 1, 0)
        }
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
