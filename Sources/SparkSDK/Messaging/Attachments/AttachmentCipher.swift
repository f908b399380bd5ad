import Foundation
import SparkCrypto

/// How an attachment's file becomes the blob the domain keeps (`docs/FORMATS.md`,
/// "Attachments"): the file is cut into chunks of 64 KiB (the last shorter, and an empty file is
/// one empty chunk), and chunk `i` is sealed with AES-256-GCM under a key drawn for this file
/// alone, with the nonce `0x000000 ‖ uint64(i) ‖ last` (`last` 1 for the final chunk, else 0)
/// and the associated data `"spark attachment v1"`. The blob is the sealed chunks (ciphertext
/// and tag) one after another. The chunk's place and the final-chunk flag are bound in, so a
/// blob truncated at a chunk boundary, reordered, or spliced from another file fails to open
/// (the STREAM construction of Hoang, Reyhanitabar, Rogaway and Vizár); a fresh key per file
/// makes a fixed nonce prefix safe. The message carries the key and the SHA-256 of the blob,
/// checked as well once the blob has been read.
enum AttachmentCipher {
    /// The plaintext bytes of every chunk but the last.
    static let chunkSize = 65_536
    /// The tag each chunk adds.
    static let tagSize = AESGCM.tagByteCount
    /// A full chunk as it is in the blob.
    static let sealedChunkSize = chunkSize + tagSize
    /// Bound into every chunk.
    static let associatedData = Data("spark attachment v1".utf8)

    /// The chunks of a file of `size` bytes (one at least).
    static func chunkCount(fileSize size: Int64) -> Int64 { max(1, (size + Int64(chunkSize) - 1) / Int64(chunkSize)) }

    /// The blob's size for a file of `size` bytes.
    static func blobSize(fileSize size: Int64) -> Int64 { size + chunkCount(fileSize: size) * Int64(tagSize) }

    static func nonce(_ index: Int64, last: Bool) throws -> AESGCM.Nonce {
        var bytes = Data(count: 12)
        for shift in 0..<8 { bytes[3 + shift] = UInt8(truncatingIfNeeded: UInt64(index) >> (56 - 8 * shift)) }
        bytes[11] = last ? 1 : 0
        return try AESGCM.Nonce(bytes)
    }

    /// Seals a file chunk by chunk, in order.
    struct Sealer {
        let key: SymmetricKey
        let chunks: Int64
        private(set) var index: Int64 = 0

        init(key: SymmetricKey, fileSize: Int64) {
            self.key = key
            chunks = AttachmentCipher.chunkCount(fileSize: fileSize)
        }

        /// The next chunk sealed (``chunkSize`` bytes, or what remains for the last).
        mutating func seal(_ chunk: Data) throws -> Data {
            guard index < chunks else { throw MessagingError(.invalidArgument, "the file grew while it was sent") }
            let box = try AESGCM.seal(
                chunk, using: key, nonce: try nonce(index, last: index == chunks - 1),
                authenticating: AttachmentCipher.associatedData)
            index += 1
            return box.ciphertext + box.tag
        }
    }

    /// Opens a blob from its bytes in order, in any pieces, and hands out each chunk's plaintext
    /// once its tag checked.
    struct Opener {
        let key: SymmetricKey
        let chunks: Int64
        let fileSize: Int64
        private(set) var index: Int64 = 0
        private var pending = Data()

        init(key: SymmetricKey, fileSize: Int64) {
            self.key = key
            self.fileSize = fileSize
            chunks = AttachmentCipher.chunkCount(fileSize: fileSize)
        }

        /// The sealed size of chunk `index`.
        private func sealedSize(_ index: Int64) -> Int {
            index < chunks - 1 ? sealedChunkSize : Int(fileSize - (chunks - 1) * Int64(chunkSize)) + tagSize
        }

        /// Takes the next bytes of the blob; gives each chunk they complete to `output`.
        mutating func open(_ bytes: Data, _ output: (Data) throws -> Void) throws {
            pending.append(bytes)
            var start = pending.startIndex
            while index < chunks, pending.endIndex - start >= sealedSize(index) {
                let end = start + sealedSize(index)
                let box = try AESGCM.SealedBox(
                    nonce: try nonce(index, last: index == chunks - 1), ciphertext: pending[start..<(end - tagSize)],
                    tag: pending[(end - tagSize)..<end])
                let plaintext: SecureBytes
                do {
                    plaintext = try AESGCM.open(box, using: key, authenticating: AttachmentCipher.associatedData)
                } catch {
                    throw MessagingError(
                        .forged, "chunk \(index) of the attachment does not open: the blob is not the one its message names")
                }
                try plaintext.withUnsafeBytes { try output(Data($0)) }
                index += 1
                start = end
            }
            pending = Data(pending[start...])
        }

        /// Checks that the last chunk was opened and nothing is left over (a blob cut short, or
        /// longer than its file).
        func finish() throws {
            guard index == chunks, pending.isEmpty else {
                throw MessagingError(.forged, "the attachment's blob is not as long as its file: it was cut or extended")
            }
        }
    }
}
