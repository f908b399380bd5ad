package import Foundation
package import SparkDomain
import SparkStore

/// Attachments' blobs: opaque bytes a member uploads to a chat in parts, which the chat's
/// members read by range. The domain never sees a key or a plaintext byte; it enforces who may
/// write and read, the size cap and the per-user quota of the policy, and deletes a blob when
/// its uploader does (a recall) or when the mailbox retention has passed since it was made.
///
/// A blob is kept as rows of ``blobPartSize`` bytes (the last shorter), so that every store
/// (SQLite, PostgreSQL) holds and serves it in pieces and no request holds more than a part.
extension DomainEngine {
    /// The bytes of every part of a blob but the last, and the most one read returns.
    package static let blobPartSize = BlobStatus.standardPartSize

    /// How long an upload may stay unfinished before its parts are deleted.
    package static let unfinishedBlobLifetime: TimeInterval = 86400

    /// The largest blob the policy admits: its `maximumAttachmentSize` of file, plus the
    /// encryption's overhead (16 bytes per 64 KiB chunk, `docs/FORMATS.md`).
    static func largestBlob(_ policy: DomainPolicy) -> Int64 {
        Int64(policy.maximumAttachmentSize) + Int64(policy.maximumAttachmentSize) / 4096 + 16
    }

    /// Starts a blob of `size` bytes in a chat the caller is a member of; a repeat (same id,
    /// chat, size and uploader) answers where the upload stands.
    package func createBlob(as caller: Caller, chatID: String, blobID: String, size: Int64) async throws
        -> BlobStatus
    {
        let (user, endpointID) = (caller.userID, caller.endpointID)
        let policy = try requestPolicy()
        try Self.checkBlobID(blobID)
        guard size >= 1 else { throw DomainError(.invalidRequest, "a blob has at least one byte") }
        guard size <= Self.largestBlob(policy) else {
            throw DomainError(
                .tooLarge, "an attachment is at most \(policy.maximumAttachmentSize) bytes here (its blob \(size))")
        }
        let now = clock.now()
        return try await storage {
            try await store.write(.locking(["blobs:" + user])) { db in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID)
                try Self.requireMember(db, user: user, chatID: chatID)
                if let existing = try Self.blob(db, blobID) {
                    guard existing.owner == user, existing.status.chatID == chatID, existing.status.size == size else {
                        throw DomainError(.conflict, "a blob with that id exists")
                    }
                    return existing.status
                }
                try Self.requireGoodStanding(db, user: user, now: now)
                let used = try db.scalar("SELECT coalesce(sum(size), 0) FROM blobs WHERE owner = ?", [user], as: Int64.self) ?? 0
                guard used + size <= policy.attachmentQuota else {
                    throw DomainError(
                        .tooLarge,
                        "\(user)'s attachments would take \(used + size) bytes; the quota is \(policy.attachmentQuota)")
                }
                try db.execute(
                    "INSERT INTO blobs(blob_id, owner, chat_id, size, received, created_at) VALUES (?, ?, ?, ?, 0, ?)",
                    [blobID, user, chatID, size, now.timeIntervalSince1970])
                return BlobStatus(blobID: blobID, chatID: chatID, size: size, received: 0, partSize: Self.blobPartSize)
            }
        }
    }

    /// Stores the part at `offset` (where the upload stands, a multiple of ``blobPartSize``):
    /// ``blobPartSize`` bytes, or what remains for the last. A part already stored is answered
    /// as it stands (a retry after a lost answer); any other offset is a conflict.
    package func uploadBlob(as caller: Caller, blobID: String, offset: Int64, bytes: Data) async throws
        -> BlobStatus
    {
        let (user, endpointID) = (caller.userID, caller.endpointID)
        let policy = try requestPolicy()
        try Self.checkBlobID(blobID)
        let now = clock.now()
        try usage.charge(user, .blob, bytes: bytes.count, now: now, policy: policy)
        return try await storage {
            try await store.write(.locking(["blob:" + blobID])) { db in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID)
                guard let blob = try Self.blob(db, blobID) else { throw DomainError(.notFound, "no blob \(blobID)") }
                guard blob.owner == user else { throw DomainError(.forbidden, "only its uploader writes a blob") }
                try Self.requireMember(db, user: user, chatID: blob.status.chatID)
                var status = blob.status
                let partSize = Int64(Self.blobPartSize)
                if offset >= 0, offset % partSize == 0, offset < status.received {
                    return status
                }
                guard offset == status.received, !status.isComplete else {
                    throw DomainError(.conflict, "the next part of blob \(blobID) goes at \(status.received), not \(offset)")
                }
                guard bytes.count == min(partSize, status.size - offset) else {
                    throw DomainError(
                        .invalidRequest, "a part is \(min(partSize, status.size - offset)) bytes here, not \(bytes.count)")
                }
                try db.execute(
                    "INSERT INTO blob_parts(blob_id, part, bytes) VALUES (?, ?, ?)", [blobID, offset / partSize, bytes])
                status.received += Int64(bytes.count)
                try db.execute("UPDATE blobs SET received = ? WHERE blob_id = ?", [status.received, blobID])
                return status
            }
        }
    }

    /// Where a blob's upload stands, for its uploader or a member of its chat.
    package func blobStatus(as caller: Caller, blobID: String) async throws -> BlobStatus {
        let (user, endpointID) = (caller.userID, caller.endpointID)
        try Self.checkBlobID(blobID)
        return try await storage {
            try await store.read { db in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID)
                guard let blob = try Self.blob(db, blobID) else { throw DomainError(.notFound, "no blob \(blobID)") }
                if blob.owner != user { try Self.requireMember(db, user: user, chatID: blob.status.chatID) }
                return blob.status
            }
        }
    }

    /// Up to `length` bytes (at most ``blobPartSize``) of a whole blob from `offset`, for a
    /// member of its chat: fewer only at its end.
    package func downloadBlob(as caller: Caller, blobID: String, offset: Int64, length: Int) async throws
        -> Data
    {
        try await readBlob(as: caller, blobID: blobID, offset: offset, length: length).bytes
    }

    /// ``downloadBlob(token:endpointID:blobID:offset:length:)`` with the blob's whole size (for a
    /// `Content-Range`).
    package func readBlob(as caller: Caller, blobID: String, offset: Int64, length: Int) async throws
        -> (bytes: Data, size: Int64)
    {
        let (user, endpointID) = (caller.userID, caller.endpointID)
        try Self.checkBlobID(blobID)
        guard (1...Self.blobPartSize).contains(length), offset >= 0 else {
            throw DomainError(.invalidRequest, "a read is 1 to \(Self.blobPartSize) bytes from an offset of 0 or more")
        }
        return try await storage {
            try await store.read { db in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID)
                guard let blob = try Self.blob(db, blobID), blob.status.isComplete else {
                    throw DomainError(.notFound, "no blob \(blobID) (or it is not all uploaded yet)")
                }
                try Self.requireMember(db, user: user, chatID: blob.status.chatID)
                guard offset < blob.status.size else {
                    throw DomainError(
                        .rangeNotSatisfiable, "blob \(blobID) has \(blob.status.size) bytes; \(offset) is past its end")
                }
                let end = min(blob.status.size, offset + Int64(length))
                let partSize = Int64(Self.blobPartSize)
                let first = offset / partSize
                var bytes = Data()
                for row in try db.rows(
                    "SELECT bytes FROM blob_parts WHERE blob_id = ? AND part >= ? AND part <= ? ORDER BY part",
                    [blobID, first, (end - 1) / partSize])
                {
                    bytes.append(try row.get(0, as: Data.self))
                }
                let start = Int(offset - first * partSize)
                guard bytes.count >= start + Int(end - offset) else {
                    throw DomainError(.storageFailure, "blob \(blobID) is missing parts")
                }
                return (bytes.subdata(in: start..<(start + Int(end - offset))), blob.status.size)
            }
        }
    }

    /// Deletes a blob: its uploader's call (a recall). A blob already gone is not an error.
    package func deleteBlob(as caller: Caller, blobID: String) async throws {
        let (user, endpointID) = (caller.userID, caller.endpointID)
        try Self.checkBlobID(blobID)
        try await storage {
            try await store.write(.locking(["blob:" + blobID])) { db in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID)
                guard let blob = try Self.blob(db, blobID) else { return }
                guard blob.owner == user else { throw DomainError(.forbidden, "only its uploader deletes a blob") }
                try db.execute("DELETE FROM blob_parts WHERE blob_id = ?", [blobID])
                try db.execute("DELETE FROM blobs WHERE blob_id = ?", [blobID])
            }
        }
    }

    /// Deletes the blobs made longer ago than the mailbox retention (every entry that could
    /// name them is gone), and unfinished uploads after a day.
    static func deleteExpiredBlobs(_ db: any DomainStatements, now: TimeInterval, retention: TimeInterval) throws {
        let expired = "SELECT blob_id FROM blobs WHERE created_at < ? OR (received < size AND created_at < ?)"
        let arguments = [now - retention, now - unfinishedBlobLifetime]
        try db.execute("DELETE FROM blob_parts WHERE blob_id IN (\(expired))", arguments)
        try db.execute("DELETE FROM blobs WHERE blob_id IN (\(expired))", arguments)
    }

    private static func checkBlobID(_ blobID: String) throws {
        guard blobID.utf8.count == 32, blobID.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else {
            throw DomainError(.invalidRequest, "a blob id is 32 lowercase hexadecimal digits")
        }
    }

    private static func requireMember(_ db: any DomainStatements, user: String, chatID: String) throws {
        guard try isMember(db, user: user, chatID: chatID) else {
            throw DomainError(.notAMember, "only the members of chat \(chatID) use its attachments")
        }
    }

    private static func blob(_ db: any DomainStatements, _ blobID: String) throws -> (owner: String, status: BlobStatus)? {
        try db.row("SELECT owner, chat_id, size, received FROM blobs WHERE blob_id = ?", [blobID]).map { row in
            (
                try row.get(0),
                BlobStatus(
                    blobID: blobID, chatID: try row.get(1), size: try row.get(2), received: try row.get(3),
                    partSize: blobPartSize)
            )
        }
    }
}
