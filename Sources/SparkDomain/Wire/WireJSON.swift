package import Foundation
import SparkLock

/// The wire's JSON written straight to bytes, for the answers the daemon sends most (a
/// check-in's endpoint, a mailbox page, a passcode evaluation): byte for byte what
/// ``WireCoder/encode(_:)`` writes through `JSONEncoder` (keys sorted, slashes unescaped, bytes
/// base64, times as ``WireCoder/time(_:)``), at a fraction of its cost, which was a tenth of a
/// check-in's. `WireJSONTests` holds each type's writer to the encoder's output.
///
/// A writer calls ``key(_:)`` in the order the encoder sorts keys, and leaves a nil optional
/// out, as the encoder does.
package struct WireJSON {
    /// What was written.
    package private(set) var bytes: [UInt8] = []
    /// Lowercase hexadecimal digits, as the encoder writes `\u00XX`.
    private static let hexDigits = Array("0123456789abcdef".utf8)
    /// Whether the next key or element needs a comma before it.
    private var separated = false

    /// An empty document.
    package init() { bytes.reserveCapacity(512) }

    /// `value` as the wire's JSON.
    package static func encode(_ value: some WireWritable) -> Data {
        var json = WireJSON()
        value.write(to: &json)
        return Data(json.bytes)
    }

    /// An object whose fields `body` writes.
    package mutating func object(_ body: (inout WireJSON) -> Void) {
        separate()
        bytes.append(UInt8(ascii: "{"))
        separated = false
        body(&self)
        bytes.append(UInt8(ascii: "}"))
        separated = true
    }

    /// Opens an object whose fields follow; ``close()`` ends it.
    package mutating func open() {
        separate()
        bytes.append(UInt8(ascii: "{"))
        separated = false
    }

    /// Ends the object ``open()`` began.
    package mutating func close() {
        bytes.append(UInt8(ascii: "}"))
        separated = true
    }

    /// Bytes written before by another ``WireJSON`` that end after a key (``SharedEntryEncoding``):
    /// a value follows.
    package mutating func splice(_ written: [UInt8]) {
        separate()
        bytes.append(contentsOf: written)
        separated = false
    }

    /// An array of `items`, each written by `element`.
    package mutating func array<Items: Sequence>(_ items: Items, _ element: (inout WireJSON, Items.Element) -> Void) {
        separate()
        bytes.append(UInt8(ascii: "["))
        separated = false
        for item in items { element(&self, item) }
        bytes.append(UInt8(ascii: "]"))
        separated = true
    }

    /// A field's name (plain ASCII, as the wire's are).
    package mutating func key(_ name: StaticString) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
        separated = false
    }

    /// A string, escaped as the encoder escapes: quote, backslash and control characters.
    package mutating func string(_ value: String) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x08: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x0C: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x00..<0x20:
                bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                bytes.append(contentsOf: [Self.hexDigits[Int(byte >> 4)], Self.hexDigits[Int(byte & 0xF)]])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
        separated = true
    }

    /// An integer.
    package mutating func integer(_ value: some BinaryInteger) {
        separate()
        bytes.append(contentsOf: String(value).utf8)
        separated = true
    }

    /// `true` or `false`.
    package mutating func bool(_ value: Bool) {
        separate()
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
        separated = true
    }

    /// Bytes, as base64.
    package mutating func data(_ value: Data) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: value.base64EncodedString().utf8)
        bytes.append(UInt8(ascii: "\""))
        separated = true
    }

    /// A time, as ``WireCoder/time(_:)``.
    package mutating func time(_ value: Date) { string(WireCoder.time(value)) }

    private mutating func separate() {
        if separated { bytes.append(UInt8(ascii: ",")) }
    }
}

/// A type whose wire form ``WireJSON`` writes directly; ``WireCoder/encode(_:)`` uses it.
package protocol WireWritable: Encodable {
    /// Writes the value as the encoder would.
    func write(to json: inout WireJSON)
}

extension EndpointInfo: WireWritable {
    /// Writes the record as its synthesized encoding does.
    package func write(to json: inout WireJSON) {
        json.object { json in
            json.key("approvals")
            json.array(approvals) { json, approval in json.data(approval) }
            json.key("createdAt")
            json.time(createdAt)
            if let credential {
                json.key("credential")
                json.data(credential)
            }
            json.key("description")
            json.string(description)
            json.key("endpointID")
            json.string(endpointID)
            json.key("isActive")
            json.bool(isActive)
            json.key("lastSeen")
            json.time(lastSeen)
            json.key("nickname")
            json.string(nickname)
            json.key("registrationID")
            json.integer(registrationID)
        }
    }
}

extension PasscodeEvaluation: WireWritable {
    /// Writes the answer as its synthesized encoding does.
    package func write(to json: inout WireJSON) {
        func evaluation(_ evaluation: Evaluation, _ json: inout WireJSON) {
            json.object { json in
                json.key("element")
                json.data(evaluation.element)
                json.key("keyID")
                json.string(evaluation.keyID)
                json.key("proof")
                json.data(evaluation.proof)
                json.key("publicKey")
                json.data(evaluation.publicKey)
            }
        }
        json.object { json in
            json.key("attemptsLeft")
            json.integer(attemptsLeft)
            json.key("challenge")
            json.data(challenge)
            if let current {
                json.key("current")
                evaluation(current, &json)
            }
            json.key("requested")
            evaluation(requested, &json)
        }
    }
}

/// One post's entry as the wire writes it, up to its `sequence` (the only field that differs
/// between the mailboxes a post reaches), written once and spliced into every answer that
/// carries a copy: a post to a chat of 500 wakes up to 500 long-polls, which then share one
/// encoding of its payload instead of making 500.
///
/// A copy is written from the bytes only when it still holds what they were written from (an
/// entry changed after the domain routed it is written afresh), so sharing never changes what
/// an answer says.
package final class SharedEntryEncoding: Sendable {
    /// The entry written (its sequence aside) and its JSON from `{` to `"sequence":`.
    private let written = Locked<(entry: MailboxEntry, bytes: [UInt8])?>(nil)

    /// None written yet: the first copy to be answered writes it.
    package init() {}

    /// The JSON of `entry` up to its sequence, written now or shared.
    fileprivate func prefix(of entry: MailboxEntry) -> [UInt8] {
        var unsequenced = entry
        unsequenced.sequence = 0
        unsequenced.shared = nil
        if let written = written.withLock({ $0 }), written.entry == unsequenced { return written.bytes }
        var json = WireJSON()
        entry.writeFields(to: &json)
        written.withLock { $0 = (unsequenced, json.bytes) }
        return json.bytes
    }
}

extension MailboxEntry: WireWritable {
    /// Writes the entry as its synthesized encoding does.
    package func write(to json: inout WireJSON) {
        if let shared {
            json.splice(shared.prefix(of: self))
        } else {
            writeFields(to: &json)
        }
        json.integer(sequence)
        json.close()
    }

    /// `{`, then every field in the encoder's order up to `"sequence":`; the caller writes its
    /// value and closes the object.
    fileprivate func writeFields(to json: inout WireJSON) {
        json.open()
        json.key("chatID")
        json.string(chatID)
        if let epoch {
            json.key("epoch")
            json.integer(epoch)
        }
        json.key("kind")
        json.string(kind.rawValue)
        if let members {
            json.key("members")
            json.array(members) { json, member in
                json.object { json in
                    json.key("isAdmin")
                    json.bool(member.isAdmin)
                    json.key("userID")
                    json.string(member.userID)
                }
            }
        }
        if let messageNumber {
            json.key("messageNumber")
            json.integer(messageNumber)
        }
        json.key("payload")
        json.data(payload)
        json.key("postedAt")
        json.time(postedAt)
        json.key("sender")
        json.string(sender)
        json.key("sequence")
    }
}

extension Wire.Entries: WireWritable {
    /// Writes the page as its synthesized encoding does.
    package func write(to json: inout WireJSON) {
        json.object { json in
            json.key("entries")
            json.array(entries) { json, entry in entry.write(to: &json) }
        }
    }
}
