public import Foundation

/// Files replaced whole, as a power cut leaves them: the new bytes are written to a file of their
/// own and synced before they take the old file's name, and the directory is synced after, so the
/// name holds the old file or the new one, never a part of either. For what lives beside a
/// database and is not in it (the search index's sealed image, the transparency head pin).
public enum DurableFile {
    /// Writes `data` to a new file at `path` (0600; an existing file is truncated, a symbolic
    /// link refused) and syncs it to the disk.
    public static func writeSynced(_ data: Data, to path: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { throw failure("cannot write \(path)") }
        defer { close(descriptor) }
        try data.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0, errno == EINTR { continue }
                guard written > 0 else { throw failure("cannot write \(path)") }
                offset += written
            }
        }
        guard fsync(descriptor) == 0 else { throw failure("cannot sync \(path)") }
    }

    /// Gives `temporary` (written by ``writeSynced(_:to:)``) the name `path`, replacing what was
    /// there, and syncs the directory so that the new name survives a power cut.
    public static func replace(_ path: String, with temporary: String) throws {
        guard rename(temporary, path) == 0 else { throw failure("cannot put \(path) in place") }
        let directory = open((path as NSString).deletingLastPathComponent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { return }
        _ = fsync(directory)
        close(directory)
    }

    private static func failure(_ what: String) -> StoreError {
        StoreError(.fileAccess, message: "\(what): \(String(cString: strerror(errno)))")
    }
}
