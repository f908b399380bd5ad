import Foundation
import SparkMLS

/// What one MLS application message of a chat carries: a message, a receipt or an edit (the
/// subject is in the group context, see ``ChatGroup/subjectExtensionType``), authenticated by MLS (its sender is the device that signed it). Replies, edits and
/// receipts name messages by their sender-chosen id, which is inside the authenticated message
/// it names, never by the domain's number alone. The bytes (`docs/FORMATS.md`, "Chat payloads"):
///
/// ```text
/// struct {
///     uint8 version;                 // 1; 2 for a receipt that names what it covers; 3 for a
///                                    // text that carries its sender's sequence
///     uint8 kind;                    // 1 text, 3 receipt, 4 edit, 5 history, 6 reaction added,
///                                    // 7 reaction removed, 8 recall, 9 typing, 10 typing
///                                    // stopped, 11 chat event (2 is not used)
///     opaque id<V>;                  // 1..64 bytes: this message's id
///     opaque content<V>;             // UTF-8: the text, the edited text, a reaction's emoji;
///                                    // empty for a receipt and a recall
///     opaque tag<V>;                 // 0..64 bytes of UTF-8 (the app's tag, "Text" by default)
///     optional<opaque data<V>>;      // UTF-8, the app's data; a history transfer's sealed records (base64)
///     optional<opaque ref<V>>;       // a reply's, an edit's, a reaction's or a recall's message,
///                                    // a receipt's newest message, a history's device
///     uint8 receipt;                 // 0 none, 1 delivered, 2 read
///     optional<uint64 up_to>;        // a receipt: the newest chat number it covers; an
///                                    // ephemeral payload: when it was sent (ms since 1970)
///     opaque covers<V>;              // version 2 only: the ids (opaque<V> each) of the messages
///                                    // a receipt covers, 1 to 256 of them
///     uint64 sequence;               // version 3 only: the sending device's count of the texts
///                                    // it sent in this chat before this one
///     uint64 withdrawn<V>;           // version 3 only: sequences below it that the domain
///                                    // refused (never delivered), at most 64, distinct
///     Attachment attachment;         // version 4 only (a text with a file; 3's fields come
///                                    // first): see `AttachmentDescriptor`
/// } ChatPayload;
/// ```
///
/// A text's `sequence` lets every recipient see that a text of a device has not arrived (the
/// domain withholds it, or it is late): the numbers between the last it has and this one,
/// less the `withdrawn`, are missing until they arrive.
///
/// A receipt covers exactly the messages it names: those of `covers`, or, in version 1, its
/// `ref` alone. Never a range: a domain that withholds a message cannot have it counted as
/// delivered or read by a receipt for a later one.
struct ChatPayload: Equatable, Sendable {
    enum Kind: UInt8, Sendable {
        case text = 1, receipt = 3, edit = 4, history = 5
        /// A reaction added to, or removed from, the message `ref` names: `content` is its emoji.
        case reaction = 6, unreaction = 7
        /// The sender deletes the message `ref` names for everyone.
        case recall = 8
        /// Ephemeral (sealed by `MLSGroup.sealEphemeral`, never stored): the sender is typing, or
        /// stopped; an app's live chat event (`tag`, `data`).
        case typing = 9, typingStopped = 10, chatEvent = 11

        /// Whether it travels as an ephemeral entry.
        var isEphemeral: Bool { self == .typing || self == .typingStopped || self == .chatEvent }
    }
    enum Receipt: UInt8, Sendable { case delivered = 1, read = 2 }

    var kind: Kind
    var id: String
    var content: String = ""
    var tag: String = ""
    var data: String?
    var ref: String?
    var receipt: Receipt?
    var upTo: Int64?
    /// A receipt's messages, by id (empty: its `ref` alone).
    var covers: [String] = []
    /// A text's place among the texts its device sent in the chat (0 first); nil in a version 1
    /// text.
    var sequence: UInt64?
    /// Sequences of the device's texts before this one that the domain refused.
    var withdrawn: [UInt64] = []
    /// A text's attachment (version 4).
    var attachment: AttachmentDescriptor?

    /// The most withdrawn sequences one text names.
    static let maximumWithdrawn = 64

    /// The most messages one receipt names (a read of more sends several).
    static let maximumCovered = 256

    /// The messages a receipt covers.
    var covered: [String] { covers.isEmpty ? ref.map { [$0] } ?? [] : covers }

    /// The most data a chat event carries.
    static let maximumEventData = 8 * 1024

    /// The most content and data a message may carry together (as today's messages).
    static let maximumContentSize = 70 * 1024

    /// Checks the rules every payload obeys (also before sending one).
    func validate() throws {
        guard (1...64).contains(id.utf8.count), tag.utf8.count <= 64, ref.map({ (1...64).contains($0.utf8.count) }) ?? true,
            content.utf8.count + (data?.utf8.count ?? 0) <= Self.maximumContentSize
        else { throw MessagingError(.forged, "a chat payload's id, tag, reference or size is out of bounds") }
        guard covers.isEmpty || kind == .receipt else {
            throw MessagingError(.forged, "only a receipt names the messages it covers")
        }
        guard sequence == nil || kind == .text, withdrawn.isEmpty || sequence != nil else {
            throw MessagingError(.forged, "only a text carries a sequence, and withdrawn ones only with its own")
        }
        if let attachment {
            guard kind == .text else { throw MessagingError(.forged, "only a text carries an attachment") }
            try attachment.validate()
        }
        if let sequence {
            guard withdrawn.count <= Self.maximumWithdrawn, Set(withdrawn).count == withdrawn.count,
                withdrawn.allSatisfy({ $0 < sequence })
            else { throw MessagingError(.forged, "a text withdraws at most 64 distinct sequences, each before its own") }
        }
        guard covers.count <= Self.maximumCovered, covers.allSatisfy({ (1...64).contains($0.utf8.count) }),
            Set(covers).count == covers.count
        else { throw MessagingError(.forged, "a receipt names at most 256 distinct messages, each by a 1..64-byte id") }
        switch kind {
        case .text:
            guard receipt == nil, upTo == nil else { throw MessagingError(.forged, "only a receipt carries a receipt") }
        case .receipt:
            guard receipt != nil, let upTo, upTo > 0, ref != nil, content.isEmpty, data == nil else {
                throw MessagingError(.forged, "a receipt names its state, its newest message and a number, and nothing else")
            }
        case .edit:
            guard ref != nil, receipt == nil, upTo == nil else {
                throw MessagingError(.forged, "an edit names the message it edits")
            }
        case .history:
            guard ref != nil, data != nil, content.isEmpty, receipt == nil, upTo == nil else {
                throw MessagingError(.forged, "a history transfer names its device and carries its records, and nothing else")
            }
        case .reaction, .unreaction:
            guard ref != nil, Self.isReaction(content), tag.isEmpty, data == nil, receipt == nil, upTo == nil else {
                throw MessagingError(.forged, "a reaction names its message and one emoji, and nothing else")
            }
        case .recall:
            guard ref != nil, content.isEmpty, tag.isEmpty, data == nil, receipt == nil, upTo == nil else {
                throw MessagingError(.forged, "a recall names its message, and nothing else")
            }
        case .typing, .typingStopped:
            guard upTo != nil, ref == nil, content.isEmpty, tag.isEmpty, data == nil, receipt == nil else {
                throw MessagingError(.forged, "a typing notice carries its time, and nothing else")
            }
        case .chatEvent:
            guard upTo != nil, !tag.isEmpty, ref == nil, content.isEmpty, receipt == nil,
                (data?.utf8.count ?? 0) <= Self.maximumEventData
            else { throw MessagingError(.forged, "a chat event carries its time, its tag and at most 8 KB of data") }
        }
    }

    /// Whether `text` is a reaction: one emoji (one grapheme cluster holding an emoji scalar
    /// beyond ASCII, so a letter, a digit or `#` is not one), at most 64 bytes.
    static func isReaction(_ text: String) -> Bool {
        text.count == 1 && text.utf8.count <= 64
            && text.unicodeScalars.contains { $0.value > 0x7F && ($0.properties.isEmoji || $0.properties.isEmojiPresentation) }
    }

    var encoded: Data {
        var writer = TLSWriter()
        writer.u8(!covers.isEmpty ? 2 : attachment != nil ? 4 : sequence == nil ? 1 : 3)
        writer.u8(kind.rawValue)
        writer.opaque(Data(id.utf8))
        writer.opaque(Data(content.utf8))
        writer.opaque(Data(tag.utf8))
        for text in [data, ref] {
            if let text {
                writer.u8(1)
                writer.opaque(Data(text.utf8))
            } else {
                writer.u8(0)
            }
        }
        writer.u8(receipt?.rawValue ?? 0)
        if let upTo {
            writer.u8(1)
            writer.u64(UInt64(upTo))
        } else {
            writer.u8(0)
        }
        if !covers.isEmpty {
            writer.vector { list in
                for id in covers { list.opaque(Data(id.utf8)) }
            }
        } else if sequence != nil || attachment != nil {
            writer.u64(sequence ?? 0)
            writer.vector { list in
                for value in withdrawn { list.u64(value) }
            }
            if let attachment { writer.raw(attachment.encoded) }
        }
        return writer.data
    }

}

extension ChatPayload {
    /// Decodes strictly: a version other than 1, an unknown kind, invalid UTF-8, trailing bytes
    /// or a payload that breaks ``validate()`` is ``MessagingError/Code/forged``.
    init(encoded: Data) throws {
        do {
            var reader = TLSReader(encoded)
            let version = try reader.u8("version")
            guard (1...4).contains(version), let kind = Kind(rawValue: try reader.u8("kind")) else {
                throw MessagingError(.forged, "a chat payload of an unknown version or kind")
            }
            func text(_ bytes: Data) throws -> String {
                guard let text = String(data: bytes, encoding: .utf8) else {
                    throw MessagingError(.forged, "a chat payload's text is not UTF-8")
                }
                return text
            }
            func optionalText(_ what: String) throws -> String? {
                switch try reader.u8(what) {
                case 0: return nil
                case 1: return try text(try reader.opaque(what))
                default: throw MessagingError(.forged, "a chat payload's presence byte is not 0 or 1")
                }
            }
            self.kind = kind
            id = try text(try reader.opaque("id"))
            content = try text(try reader.opaque("content"))
            tag = try text(try reader.opaque("tag"))
            data = try optionalText("data")
            ref = try optionalText("ref")
            let receiptByte = try reader.u8("receipt")
            guard receiptByte == 0 || Receipt(rawValue: receiptByte) != nil else {
                throw MessagingError(.forged, "a chat payload's receipt state is unknown")
            }
            receipt = Receipt(rawValue: receiptByte)
            switch try reader.u8("up_to presence") {
            case 0: upTo = nil
            case 1:
                let value = try reader.u64("up_to")
                guard value <= UInt64(Int64.max) else { throw MessagingError(.forged, "a receipt's number is out of range") }
                upTo = Int64(value)
            default: throw MessagingError(.forged, "a chat payload's presence byte is not 0 or 1")
            }
            if version == 2 {
                covers = try reader.vector("covers") { list in
                    var ids: [String] = []
                    while !list.isAtEnd { ids.append(try text(try list.opaque("covered id"))) }
                    return ids
                }
                guard !covers.isEmpty else { throw MessagingError(.forged, "a version 2 receipt names no message") }
            }
            if version >= 3 {
                sequence = try reader.u64("sequence")
                withdrawn = try reader.vector("withdrawn") { list in
                    var values: [UInt64] = []
                    while !list.isAtEnd { values.append(try list.u64("withdrawn sequence")) }
                    return values
                }
                guard kind == .text else { throw MessagingError(.forged, "a version 3 payload that is not a text") }
            }
            if version == 4 { attachment = try AttachmentDescriptor(from: &reader) }
            try reader.finish("chat payload")
        } catch let error as MLSError {
            throw MessagingError(.forged, "a chat payload is malformed: \(error.reason)")
        }
        try validate()
    }
}
