import Foundation
import SparkMLS

/// A chat's history as one device hands it to another device of the same user that was just
/// added to the chat's group: the messages the new device could not read (they were sealed
/// before it joined). The records are sealed to the new device's leaf key alone
/// (`MLSGroup.seal(toMember:context:_:random:)`) and travel in an MLS application message of the
/// group (``ChatPayload/Kind/history``, base64 in its data), posted to this user's own mailbox.
/// The bytes (`docs/FORMATS.md`, "History transfer"):
///
/// ```text
/// struct {
///     opaque id<V>;                  // the message's id
///     uint64 number;                 // its chat number
///     opaque sender<V>;              // its sender's user id
///     opaque content<V>;
///     opaque tag<V>;
///     optional<opaque data<V>>;
///     optional<uint64 ref>;          // the number it replies to
///     uint8 state;                   // 1 sent, 2 delivered, 3 read
///     uint64 timestamp;              // milliseconds since 1970
/// } HistoryRecord;
///
/// HistoryRecord records<V>;
/// ```
struct ChatHistory: Equatable, Sendable {
    struct Record: Equatable, Sendable {
        var id: String
        var number: Int64
        var sender: String
        var content: String
        var tag: String
        var data: String?
        var ref: Int64?
        var state: MessageState
        var timestamp: Date
        /// Its attachment (not handed over in a history transfer: the records' format has none).
        var attachment: AttachmentDescriptor? = nil
    }

    var records: [Record]

    /// The most record bytes one transfer carries: sealed and in base64 it stays within a
    /// payload's limit. A message larger than this on its own is left out.
    static let maximumChunk = 45_000

    /// The chat's numbered `messages`, oldest first, as transfers within ``maximumChunk`` each
    /// (a message too large for a transfer on its own is left out).
    static func chunks(of messages: [ChatMessage]) -> [ChatHistory] {
        var chunks: [ChatHistory] = []
        var current = ChatHistory(records: [])
        var size = 0
        for message in messages {
            guard let number = message.number else { continue }
            let record = Record(
                id: message.id, number: number, sender: message.sender, content: message.content, tag: message.tag,
                data: message.data, ref: message.ref, state: message.state, timestamp: message.timestamp)
            let recordSize = ChatHistory(records: [record]).encoded.count
            guard recordSize <= maximumChunk else { continue }
            if size + recordSize > maximumChunk {
                chunks.append(current)
                current = ChatHistory(records: [])
                size = 0
            }
            current.records.append(record)
            size += recordSize
        }
        if !current.records.isEmpty { chunks.append(current) }
        return chunks
    }

    /// The context the records are sealed under: the device they are for.
    static func sealContext(device: String) -> Data { Data("spark history/\(device)".utf8) }

    var encoded: Data {
        var writer = TLSWriter()
        writer.vector { list in
            for record in records {
                list.opaque(Data(record.id.utf8))
                list.u64(UInt64(max(0, record.number)))
                list.opaque(Data(record.sender.utf8))
                list.opaque(Data(record.content.utf8))
                list.opaque(Data(record.tag.utf8))
                if let data = record.data {
                    list.u8(1)
                    list.opaque(Data(data.utf8))
                } else {
                    list.u8(0)
                }
                if let ref = record.ref {
                    list.u8(1)
                    list.u64(UInt64(max(0, ref)))
                } else {
                    list.u8(0)
                }
                let state: UInt8 =
                    switch record.state {
                    case .read: 3
                    case .delivered: 2
                    default: 1
                    }
                list.u8(state)
                list.u64(UInt64(max(0, record.timestamp.timeIntervalSince1970 * 1000)))
            }
        }
        return writer.data
    }

    init(records: [Record]) { self.records = records }

    /// Decodes strictly; anything malformed is ``MessagingError/Code/forged``.
    init(encoded: Data) throws {
        func text(_ bytes: Data) throws -> String {
            guard let text = String(data: bytes, encoding: .utf8) else {
                throw MessagingError(.forged, "a history record's text is not UTF-8")
            }
            return text
        }
        do {
            var reader = TLSReader(encoded)
            records = try reader.vector("history records") { list in
                var records: [Record] = []
                while !list.isAtEnd {
                    let id = try text(try list.opaque("id"))
                    let number = try list.u64("number")
                    let sender = try text(try list.opaque("sender"))
                    let content = try text(try list.opaque("content"))
                    let tag = try text(try list.opaque("tag"))
                    let data: String? =
                        switch try list.u8("data presence") {
                        case 0: nil
                        case 1: try text(try list.opaque("data"))
                        default: throw MessagingError(.forged, "a history record's presence byte is not 0 or 1")
                        }
                    let ref: UInt64? =
                        switch try list.u8("ref presence") {
                        case 0: nil
                        case 1: try list.u64("ref")
                        default: throw MessagingError(.forged, "a history record's presence byte is not 0 or 1")
                        }
                    let state: MessageState =
                        switch try list.u8("state") {
                        case 1: .sent
                        case 2: .delivered
                        case 3: .read
                        default: throw MessagingError(.forged, "a history record's state is unknown")
                        }
                    let timestamp = try list.u64("timestamp")
                    guard (1...64).contains(id.utf8.count), number >= 1, number <= UInt64(Int64.max),
                        ref.map({ $0 <= UInt64(Int64.max) }) ?? true, timestamp <= UInt64(Int64.max)
                    else { throw MessagingError(.forged, "a history record is out of bounds") }
                    records.append(
                        Record(
                            id: id, number: Int64(number), sender: sender, content: content, tag: tag, data: data,
                            ref: ref.map { Int64($0) }, state: state,
                            timestamp: Date(timeIntervalSince1970: Double(timestamp) / 1000)))
                }
                return records
            }
            try reader.finish("history records")
        } catch let error as MLSError {
            throw MessagingError(.forged, "history records are malformed: \(error.reason)")
        }
    }
}
