package import Foundation
import SparkDomain
import SparkLock
import SparkStore

#if canImport(Glibc)
    import Glibc
#endif

/// The last tree head this domain signed or checked, kept **outside the database**: beside the
/// transparency keys (`<passcode key file>.kt-head`), where an operator's edit of the database
/// cannot roll it back. Before the log signs or serves anything, its rows must give the root of
/// this head at its size (``TransparencyLog``): a log whose past was rewritten, or cut back below
/// a head the domain already signed, is refused.
///
/// The file is one line of JSON, `{"size": N, "root": "<base64>"}`, replaced atomically (a
/// temporary file, `fsync`, `rename`, `fsync` of the directory) and only ever by a larger size,
/// under an exclusive `flock` of `<file>.lock` (processes sharing an embedded domain share it).
/// Without a key file (a domain made in memory for a test) the pin is kept in memory only.
package final class TransparencyHeadPin: Sendable {
    /// A pinned head: its size and root.
    package struct Pinned: Codable, Sendable, Equatable {
        /// The head's size (entries).
        package var size: UInt64
        /// The log's root at that size.
        package var root: Data
    }

    /// The file, or nil for a pin in memory.
    let path: String?
    private let memory = Locked<Pinned?>(nil)

    /// The pin kept at `path` (nil: in memory only).
    package init(path: String?) { self.path = path }

    /// The pinned head, if any.
    ///
    /// - Throws: ``DomainError/Code/unavailable`` when the file exists but cannot be read as a pin.
    package func current() throws -> Pinned? {
        let inMemory = memory.withLock { $0 }
        guard let path, let data = FileManager.default.contents(atPath: path) else { return inMemory }
        guard let stored = try? JSONDecoder().decode(Pinned.self, from: data) else {
            throw DomainError(.unavailable, "\(path) is not a transparency head pin ({\"size\": N, \"root\": base64})")
        }
        guard let inMemory, inMemory.size > stored.size else { return stored }
        return inMemory
    }

    /// Pins `head` if it is larger than the head pinned now (a smaller one changes nothing).
    package func advance(to head: Pinned) throws {
        let grew = memory.withLock { pinned -> Bool in
            if let pinned, pinned.size >= head.size { return false }
            pinned = head
            return true
        }
        guard grew, let path else { return }
        let lock = open(path + ".lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard lock >= 0 else { throw DomainError(.storageFailure, "cannot open \(path).lock") }
        defer { close(lock) }
        guard flock(lock, LOCK_EX) == 0 else { throw DomainError(.storageFailure, "cannot lock \(path).lock") }
        if let data = FileManager.default.contents(atPath: path),
            let stored = try? JSONDecoder().decode(Pinned.self, from: data), stored.size >= head.size
        {
            return
        }
        let temporary = "\(path).\(getpid()).new"
        do {
            try DurableFile.writeSynced(try JSONEncoder().encode(head), to: temporary)
            try DurableFile.replace(path, with: temporary)
        } catch {
            unlink(temporary)
            throw DomainError(.storageFailure, "cannot replace \(path)")
        }
    }
}
