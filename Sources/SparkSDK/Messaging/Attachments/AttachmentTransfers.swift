import Foundation
import SparkCrypto
import SparkDomain
import SparkLock
import SparkStore

/// Attachments: a file is sealed on this device (`AttachmentCipher`) as it is read, uploaded
/// part by part to the chat in the domain, and then named by a message that carries its key and
/// digest; a member's device reads the blob part by part, opens each chunk as it arrives, and
/// writes the file beside its destination, which it takes only once the last chunk opened and the
/// digest matched. Both ways hold one part (a mebibyte) at a time, whatever the file's size. A
/// part whose call fails for want of the domain is sent (or read) again from where the transfer
/// stands, after a pause, so a lost connection costs that part and no more.
struct AttachmentTransfers: MessagingPart {
    let context: MessagingContext

    /// Failed calls in a row, for want of the domain, before a transfer gives up.
    static let transferAttempts = 8

    /// Saves the attachment of message `messageID` at `path` (replacing what is there once the
    /// whole file checked out).
    func saveAttachment(of messageID: String, to path: String) throws -> AttachmentTransfer<Void> {
        let descriptor = try attachment(of: messageID)
        let file = try TransferFile(writingBeside: path)
        return AttachmentTransfer(total: descriptor.size) { report in
            do {
                try await self.download(
                    descriptor.file, write: { try await file.append($0) }, progress: report)
                try await file.commit()
            } catch {
                file.discard()
                throw error
            }
        }
    }

    /// The thumbnail of message `messageID`'s attachment, if it came with one.
    func thumbnail(of messageID: String) async throws -> Data? {
        guard let thumbnail = try attachment(of: messageID).thumbnail else { return nil }
        var data = Data()
        try await download(thumbnail, write: { data.append($0) }, progress: { _ in })
        return data
    }

    /// The attachment of a message this device has, while it has one.
    func attachment(of messageID: String) throws -> AttachmentDescriptor {
        guard let descriptor = try storage.readNow({ store in try store.attachment(of: messageID) }) else {
            throw MessagingError(
                .invalidArgument, "message \(messageID) has no attachment here (or it was recalled or has expired)")
        }
        return descriptor
    }

    /// Deletes the blobs of a recalled message's attachment from the domain (best effort: the
    /// retention deletes what this misses).
    func deleteBlobs(of descriptor: AttachmentDescriptor) async {
        for blob in [descriptor.file] + (descriptor.thumbnail.map { [$0] } ?? []) {
            _ = try? await domain.deleteBlob(token: try await token(), endpointID: endpointID, blobID: blob.blobID)
        }
    }

    // MARK: Moving blobs

    /// Seals `size` bytes, as `read` hands them over, into a new blob of the chat, part by part;
    /// `progress` gets the file's bytes done.
    func upload(
        to chatID: String, size: Int64, mediaType: String,
        read: @Sendable (_ offset: Int64, _ count: Int) async throws -> Data, progress: (Int64) -> Void
    ) async throws -> AttachmentDescriptor.Blob {
        let key = SymmetricKey(size: .bits256)
        let blobID = SystemRandom.bytes(count: 16).map { String(format: "%02x", $0) }.joined()
        let blobSize = AttachmentCipher.blobSize(fileSize: size)
        let status = try await resuming {
            try await self.domain.createBlob(
                token: try await self.token(), endpointID: self.endpointID, chatID: chatID, blobID: blobID, size: blobSize)
        }
        let partSize = max(AttachmentCipher.sealedChunkSize, min(status.partSize, 16 << 20))
        var sealer = AttachmentCipher.Sealer(key: key, fileSize: size)
        let digest = IncrementalDigest(.sha256)
        var sealed = Data()
        var consumed: Int64 = 0
        guard status.received == 0, status.size == blobSize, status.blobID == blobID else {
            throw MessagingError(.refused, "the domain's answer for a new blob does not match what was asked")
        }
        var sent: Int64 = 0
        while sent < blobSize {
            let partLength = Int(min(Int64(partSize), blobSize - sent))
            while sealed.count < partLength {
                // The file is read a part's worth at a time, and sealed a chunk at a time.
                let count = Int(min(Int64(AttachmentCipher.chunkSize * 16), size - consumed))
                let plaintext = try await read(consumed, count)
                guard plaintext.count == count else {
                    throw MessagingError(.invalidArgument, "the file changed while it was sent")
                }
                consumed += Int64(count)
                var start = plaintext.startIndex
                repeat {
                    let end = min(plaintext.endIndex, start + AttachmentCipher.chunkSize)
                    let chunk = try sealer.seal(plaintext[start..<end])
                    digest.update(chunk)
                    sealed.append(chunk)
                    start = end
                } while start < plaintext.endIndex
            }
            let part = sealed.prefix(partLength)
            try await uploadPart(blobID, at: sent, Data(part))
            sealed = Data(sealed.dropFirst(partLength))
            sent += Int64(partLength)
            progress(min(size, sent * size / max(blobSize, 1)))
        }
        guard sealer.index == sealer.chunks else { throw MessagingError(.invalidArgument, "the file changed while it was sent") }
        return AttachmentDescriptor.Blob(
            blobID: blobID, key: key.withUnsafeBytes { Data($0) }, digest: digest.finalize(), size: size, mediaType: mediaType)
    }

    /// Uploads one part; after a call that failed for want of the domain, asks where the upload
    /// stands (the part may have landed) and sends it again if it did not.
    private func uploadPart(_ blobID: String, at offset: Int64, _ bytes: Data) async throws {
        try await resuming {
            do {
                _ = try await self.domain.uploadBlob(
                    token: try await self.token(), endpointID: self.endpointID, blobID: blobID, offset: offset, bytes: bytes)
            } catch let error as DomainError
                where MessagingContext.transientDomainCodes.contains(error.code) || error.code == .conflict
            {
                let status = try? await self.domain.blobStatus(
                    token: try await self.token(), endpointID: self.endpointID, blobID: blobID)
                if let status, status.received >= offset + Int64(bytes.count) { return }
                throw error
            }
        }
    }

    /// Reads a blob part by part, opens it chunk by chunk into `write`, and checks its digest.
    func download(
        _ blob: AttachmentDescriptor.Blob, write: (Data) async throws -> Void, progress: (Int64) -> Void
    ) async throws {
        var opener = AttachmentCipher.Opener(key: SymmetricKey(data: blob.key), fileSize: blob.size)
        let digest = IncrementalDigest(.sha256)
        let blobSize = AttachmentCipher.blobSize(fileSize: blob.size)
        var offset: Int64 = 0
        while offset < blobSize {
            let length = Int(min(Int64(BlobStatus.standardPartSize), blobSize - offset))
            let bytes = try await resuming {
                try await self.domain.downloadBlob(
                    token: try await self.token(), endpointID: self.endpointID, blobID: blob.blobID, offset: offset,
                    length: length)
            }
            guard !bytes.isEmpty, bytes.count <= length else {
                throw MessagingError(.forged, "the attachment's blob ends early: it was truncated")
            }
            digest.update(bytes)
            var plaintext = Data()
            try opener.open(bytes) { plaintext.append($0) }
            try await write(plaintext)
            offset += Int64(bytes.count)
            progress(min(blob.size, offset * blob.size / max(blobSize, 1)))
        }
        try opener.finish()
        guard digest.finalize() == blob.digest else {
            throw MessagingError(.forged, "the attachment's blob does not match its digest: it is not the one its message names")
        }
    }

    /// Runs a call of a transfer until it succeeds, pausing after each that failed for want of
    /// the domain (a lost connection, a restart, a rate limit), up to ``transferAttempts`` in a
    /// row; other refusals are the caller's.
    private func resuming<T>(_ call: () async throws -> T) async throws -> T {
        var failures = 0
        while true {
            try Task.checkCancellation()
            do {
                return try await call()
            } catch let error as DomainError
                where MessagingContext.transientDomainCodes.contains(error.code) || error.code == .tooManyAttempts
            {
                failures += 1
                guard failures < Self.transferAttempts else {
                    throw MessagingError(
                        .refused, "the domain did not answer the transfer: \(error.reason)", domainCode: error.code)
                }
                let pause = error.retryAfter.map { Duration.seconds(min($0, 30)) } ?? .milliseconds(100 << min(failures, 6))
                try await Task.sleep(for: pause)
            } catch let error as DomainError {
                throw MessagingError(.refused, error.reason, domainCode: error.code)
            }
        }
    }
}

extension Optional where Wrapped: Sendable {
    /// The value mapped by an async transform, or nil.
    func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let self else { return nil }
        return try await transform(self)
    }
}

/// The file of one transfer: its reads and writes run on a queue of the transfer's own, never on
/// Swift's cooperative pool (a slow disk must not stall the app's tasks). A download writes beside
/// its destination, a hidden file only this user reads, renamed over the destination once the
/// whole file checked out, and deleted otherwise.
final class TransferFile: @unchecked Sendable {
    private let queue = DispatchQueue(label: "spark.attachment-file")
    /// Touched only on `queue` after init.
    private var descriptor: Int32
    /// The file's size (a file to send; 0 for a download).
    let size: Int64
    private let destination: String?
    private let temporary: String?

    /// Opens a regular file to send.
    init(reading path: String) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw MessagingError(.invalidArgument, "cannot open \(path): \(String(cString: strerror(errno)))") }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            Glibc.close(fd)
            throw MessagingError(.invalidArgument, "\(path) is not a regular file")
        }
        descriptor = fd
        size = Int64(info.st_size)
        destination = nil
        temporary = nil
    }

    /// Creates a hidden file beside `path` to write a download into.
    init(writingBeside path: String) throws {
        let url = URL(fileURLWithPath: path)
        let directory = url.deletingLastPathComponent().path
        let name = ".\(url.lastPathComponent).spark-\(SystemRandom.bytes(count: 6).map { String(format: "%02x", $0) }.joined())"
        let temporary = (directory as NSString).appendingPathComponent(name)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw MessagingError(.invalidArgument, "cannot write in \(directory): \(String(cString: strerror(errno)))")
        }
        descriptor = fd
        size = 0
        destination = path
        self.temporary = temporary
    }

    deinit { if descriptor >= 0 { Glibc.close(descriptor) } }

    private func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result(catching: body)) }
        }
    }

    /// Up to `count` bytes from `offset` (fewer only at the end of the file).
    func read(at offset: Int64, count: Int) async throws -> Data {
        try await run {
            var data = Data(count: count)
            var done = 0
            while done < count {
                let got = data.withUnsafeMutableBytes { buffer in
                    pread(self.descriptor, buffer.baseAddress! + done, count - done, off_t(offset) + off_t(done))
                }
                if got < 0, errno == EINTR { continue }
                guard got >= 0 else {
                    throw MessagingError(.invalidArgument, "the file cannot be read: \(String(cString: strerror(errno)))")
                }
                if got == 0 { break }
                done += got
            }
            return data.prefix(done)
        }
    }

    /// Appends `data` to a download.
    func append(_ data: Data) async throws {
        try await run {
            try data.withUnsafeBytes { buffer in
                var done = 0
                while done < buffer.count {
                    let wrote = Glibc.write(self.descriptor, buffer.baseAddress! + done, buffer.count - done)
                    if wrote < 0, errno == EINTR { continue }
                    guard wrote > 0 else {
                        throw MessagingError(.storageFailure, "the file cannot be written: \(String(cString: strerror(errno)))")
                    }
                    done += wrote
                }
            }
        }
    }

    /// Flushes a download and puts it in place.
    func commit() async throws {
        try await run {
            guard let temporary = self.temporary, let destination = self.destination else { return }
            guard fsync(self.descriptor) == 0, Glibc.close(self.descriptor) == 0 else {
                throw MessagingError(.storageFailure, "the file cannot be written: \(String(cString: strerror(errno)))")
            }
            self.descriptor = -1
            guard rename(temporary, destination) == 0 else {
                unlink(temporary)
                throw MessagingError(.storageFailure, "cannot save \(destination): \(String(cString: strerror(errno)))")
            }
        }
    }

    /// Deletes a download that failed.
    func discard() {
        queue.sync {
            if descriptor >= 0 { Glibc.close(descriptor) }
            descriptor = -1
            if let temporary { unlink(temporary) }
        }
    }

    /// Closes a file that was read.
    func close() {
        queue.sync {
            if descriptor >= 0 { Glibc.close(descriptor) }
            descriptor = -1
        }
    }
}
