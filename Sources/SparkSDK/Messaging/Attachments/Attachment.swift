public import Foundation
import SparkCrypto
import SparkLock
import SparkMLS

/// A file sent with a message (``ChatMessage/attachment``): its name, media type and size, and
/// whether a thumbnail came with it. The file itself is in the domain, encrypted on the sender's
/// device under a key only the message carries; save it with
/// ``BBMAccess/saveAttachment(of:to:)`` and get the thumbnail with ``BBMAccess/thumbnail(of:)``.
public struct Attachment: Sendable, Equatable {
    /// The file's name as the sender gave it (no directory).
    public var fileName: String
    /// Its media type, such as `image/png`.
    public var mediaType: String
    /// Its size in bytes.
    public var size: Int64
    /// The media type of its thumbnail, when one came with it.
    public var thumbnailMediaType: String?

    init(_ descriptor: AttachmentDescriptor) {
        fileName = descriptor.fileName
        mediaType = descriptor.mediaType
        size = descriptor.size
        thumbnailMediaType = descriptor.thumbnail?.mediaType
    }
}

/// A small picture sent beside an attachment (a preview an app shows before the file is saved):
/// at most 256 KiB, sent as a second, small attachment.
public struct Thumbnail: Sendable, Equatable {
    /// The picture's bytes.
    public var data: Data
    /// Its media type, such as `image/jpeg`.
    public var mediaType: String

    /// A thumbnail of `data` in `mediaType`.
    public init(data: Data, mediaType: String) {
        self.data = data
        self.mediaType = mediaType
    }

    /// The largest thumbnail.
    public static let maximumSize = 256 * 1024
}

/// How far a transfer has come: bytes of the file done, of its total.
public struct TransferProgress: Sendable, Equatable {
    /// The bytes moved so far.
    public var completed: Int64
    /// The file's size.
    public var total: Int64
    /// `completed` over `total`, 0 to 1 (1 for an empty file).
    public var fraction: Double { total == 0 ? 1 : Double(completed) / Double(total) }

    /// Progress of `completed` bytes of `total`.
    public init(completed: Int64, total: Int64) {
        self.completed = completed
        self.total = total
    }
}

/// An attachment going up or coming down: its progress as an `AsyncSequence`, and its outcome.
///
/// ```swift
/// let transfer = access.sendFile(at: "/tmp/cat.png", to: chatID)
/// for await step in transfer.progress { print("\(Int(step.fraction * 100)) %") }
/// let message = try await transfer.value
/// ```
///
/// The transfer runs whether or not anyone reads its progress; the sequence keeps only the
/// latest step. A lost connection is resumed where it stopped (the parts already in the domain
/// are not sent again); ``cancel()`` stops it.
public final class AttachmentTransfer<Value: Sendable>: Sendable {
    /// The progress, latest first-come: it ends when the transfer does. One reader.
    public let progress: AsyncStream<TransferProgress>
    private let task: Task<Value, any Error>

    init(total: Int64, _ work: @escaping @Sendable (_ report: @escaping @Sendable (Int64) -> Void) async throws -> Value) {
        let (stream, continuation) = AsyncStream.makeStream(
            of: TransferProgress.self, bufferingPolicy: .bufferingNewest(1))
        progress = stream
        task = Task {
            defer { continuation.finish() }
            continuation.yield(TransferProgress(completed: 0, total: total))
            return try await work { done in continuation.yield(TransferProgress(completed: done, total: total)) }
        }
    }

    /// The outcome: waits for the transfer to end, and throws what stopped it.
    public var value: Value {
        get async throws { try await task.value }
    }

    /// Stops the transfer; ``value`` throws `CancellationError`.
    public func cancel() { task.cancel() }
}

/// What a message says of its attachment (`docs/FORMATS.md`, "Attachments"): where the blob is,
/// the key that opens it, its digest, and what the file is. Inside the message, so only the
/// chat's members read it, and authenticated with it.
///
/// ```text
/// struct {
///     opaque blob_id<V>;        // 32 lowercase hexadecimal digits
///     opaque key<V>;            // 32 bytes: AES-256, this file's alone
///     opaque digest<V>;         // 32 bytes: SHA-256 of the blob
///     uint64 size;              // the file's bytes
///     opaque media_type<V>;     // 1..127 bytes: type/subtype
///     opaque file_name<V>;      // 1..255 bytes of UTF-8: no '/', no control character
///     uint8 has_thumbnail;      // 0 or 1, then: blob_id, key, digest, size (at most
///                               // 256 KiB) and media_type of the thumbnail
/// } Attachment;
/// ```
struct AttachmentDescriptor: Sendable, Equatable {
    /// A blob and its key.
    struct Blob: Sendable, Equatable {
        var blobID: String
        var key: Data
        var digest: Data
        var size: Int64
        var mediaType: String
    }

    var file: Blob
    var fileName: String
    var thumbnail: Blob?

    var size: Int64 { file.size }
    var mediaType: String { file.mediaType }

    /// The most bytes of a file (a blob's size is carried in 64 bits, and what the domain
    /// admits is far less).
    static let largestFile: Int64 = 1 << 40

    func validate() throws {
        for (blob, limit) in [(file, Self.largestFile), (thumbnail, Int64(Thumbnail.maximumSize))] {
            guard let blob else { continue }
            guard blob.blobID.utf8.count == 32,
                blob.blobID.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }),
                blob.key.count == 32, blob.digest.count == 32, (0...limit).contains(blob.size),
                Self.isMediaType(blob.mediaType)
            else { throw MessagingError(.forged, "an attachment's blob, key, digest, size or media type is malformed") }
        }
        guard Self.isFileName(fileName) else {
            throw MessagingError(.forged, "an attachment's file name is empty, too long, or holds '/' or a control character")
        }
    }

    /// `type/subtype`, 1 to 127 bytes of printable ASCII without spaces.
    static func isMediaType(_ text: String) -> Bool {
        (3...127).contains(text.utf8.count) && text.utf8.allSatisfy({ (33...126).contains($0) })
            && text.split(separator: "/", omittingEmptySubsequences: false).count == 2 && !text.hasPrefix("/")
            && !text.hasSuffix("/")
    }

    /// 1 to 255 bytes of UTF-8 without '/', control characters, and not "." or "..".
    static func isFileName(_ text: String) -> Bool {
        (1...255).contains(text.utf8.count) && text != "." && text != ".."
            && !text.unicodeScalars.contains { $0 == "/" || $0.properties.generalCategory == .control }
    }

    var encoded: Data {
        var writer = TLSWriter()
        func blob(_ blob: Blob) {
            writer.opaque(Data(blob.blobID.utf8))
            writer.opaque(blob.key)
            writer.opaque(blob.digest)
            writer.u64(UInt64(blob.size))
            writer.opaque(Data(blob.mediaType.utf8))
        }
        blob(file)
        writer.opaque(Data(fileName.utf8))
        if let thumbnail {
            writer.u8(1)
            blob(thumbnail)
        } else {
            writer.u8(0)
        }
        return writer.data
    }

    /// Decodes from a chat payload's reader and validates.
    init(from reader: inout TLSReader) throws {
        func text(_ what: String, _ reader: inout TLSReader) throws -> String {
            guard let text = String(data: try reader.opaque(what), encoding: .utf8) else {
                throw MessagingError(.forged, "an attachment's \(what) is not UTF-8")
            }
            return text
        }
        func blob(_ reader: inout TLSReader) throws -> Blob {
            let blobID = try text("blob id", &reader)
            let key = try reader.opaque("key")
            let digest = try reader.opaque("digest")
            let size = try reader.u64("size")
            guard size <= UInt64(Self.largestFile) else { throw MessagingError(.forged, "an attachment's size is out of range") }
            return Blob(blobID: blobID, key: key, digest: digest, size: Int64(size), mediaType: try text("media type", &reader))
        }
        file = try blob(&reader)
        fileName = try text("file name", &reader)
        switch try reader.u8("thumbnail presence") {
        case 0: thumbnail = nil
        case 1: thumbnail = try blob(&reader)
        default: throw MessagingError(.forged, "an attachment's presence byte is not 0 or 1")
        }
        try validate()
    }

    init(file: Blob, fileName: String, thumbnail: Blob?) {
        self.file = file
        self.fileName = fileName
        self.thumbnail = thumbnail
    }

    /// Decodes a stored descriptor.
    init(encoded: Data) throws {
        do {
            var reader = TLSReader(encoded)
            try self.init(from: &reader)
            try reader.finish("attachment")
        } catch let error as MLSError {
            throw MessagingError(.forged, "an attachment is malformed: \(error.reason)")
        }
    }
}

extension AttachmentDescriptor {
    /// The media type of a file name's extension, for the common ones; `application/octet-stream`
    /// otherwise.
    static func mediaType(forFileName name: String) -> String {
        let types = [
            "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp",
            "heic": "image/heic", "svg": "image/svg+xml", "ppm": "image/x-portable-pixmap", "pdf": "application/pdf",
            "txt": "text/plain", "md": "text/markdown", "json": "application/json", "zip": "application/zip",
            "mp4": "video/mp4", "mov": "video/quicktime", "webm": "video/webm", "mp3": "audio/mpeg", "m4a": "audio/mp4",
            "ogg": "audio/ogg", "wav": "audio/wav",
        ]
        let ext = name.split(separator: ".").count > 1 ? name.split(separator: ".").last.map { $0.lowercased() } : nil
        return ext.flatMap { types[$0] } ?? "application/octet-stream"
    }
}
