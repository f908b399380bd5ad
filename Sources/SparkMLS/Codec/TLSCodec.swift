public import Foundation

/// Writes the TLS presentation language as RFC 9420 §2.1 uses it: big-endian integers, and
/// vectors prefixed with their length in bytes as a variable-length integer.
public struct TLSWriter: Sendable {
    /// The bytes written so far.
    public private(set) var bytes: [UInt8] = []

    /// An empty writer.
    public init() {}

    /// The bytes written so far, as `Data`.
    public var data: Data { Data(bytes) }

    /// Writes one byte.
    public mutating func u8(_ value: UInt8) { bytes.append(value) }
    /// Writes a big-endian 16-bit integer.
    public mutating func u16(_ value: UInt16) {
        bytes.append(UInt8(value >> 8))
        bytes.append(UInt8(value & 0xff))
    }
    /// Writes a big-endian 32-bit integer.
    public mutating func u32(_ value: UInt32) {
        bytes.append(UInt8(truncatingIfNeeded: value >> 24))
        bytes.append(UInt8(truncatingIfNeeded: value >> 16))
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
        bytes.append(UInt8(truncatingIfNeeded: value))
    }
    /// Writes a big-endian 64-bit integer.
    public mutating func u64(_ value: UInt64) {
        u32(UInt32(truncatingIfNeeded: value >> 32))
        u32(UInt32(truncatingIfNeeded: value))
    }

    /// Writes `value` as the shortest variable-length integer (RFC 9420 §2.1.2); values of
    /// 2³⁰ or more have no encoding, which is a programming error.
    public mutating func varint(_ value: Int) {
        precondition(value >= 0 && value < 1 << 30, "an MLS vector is shorter than 2^30 bytes")
        switch value {
        case ..<64: u8(UInt8(value))
        case ..<16384: u16(UInt16(value) | 0x4000)
        default: u32(UInt32(value) | 0x8000_0000)
        }
    }

    /// Writes `opaque data<V>`.
    public mutating func opaque(_ value: some ContiguousBytes) {
        value.withUnsafeBytes { raw in
            varint(raw.count)
            bytes.append(contentsOf: raw)
        }
    }

    /// Writes fixed-length bytes with no prefix.
    public mutating func raw(_ value: some ContiguousBytes) { value.withUnsafeBytes { bytes.append(contentsOf: $0) } }

    /// Writes a vector whose contents `body` writes, prefixed with their length.
    public mutating func vector(_ body: (inout TLSWriter) -> Void) {
        var inner = TLSWriter()
        body(&inner)
        varint(inner.bytes.count)
        bytes.append(contentsOf: inner.bytes)
    }

    /// Writes a vector of encodable values.
    public mutating func vector<Element: TLSEncodable>(_ elements: [Element]) {
        vector { writer in for element in elements { element.encode(to: &writer) } }
    }

    /// Writes `optional<T>`: a presence byte, then the value.
    public mutating func optional<Value: TLSEncodable>(_ value: Value?) {
        if let value {
            u8(1)
            value.encode(to: &self)
        } else {
            u8(0)
        }
    }

    /// Writes an encodable value.
    public mutating func write(_ value: some TLSEncodable) { value.encode(to: &self) }
}

/// Reads the TLS presentation language strictly: a length past the end, a varint that is not
/// minimal, a presence byte other than 0 or 1 and bytes left over are all errors.
public struct TLSReader: Sendable {
    private let bytes: [UInt8]
    private var offset: Int
    private let end: Int

    /// A reader over `data`.
    public init(_ data: some ContiguousBytes) {
        bytes = data.withUnsafeBytes { [UInt8]($0) }
        offset = 0
        end = bytes.count
    }

    private init(bytes: [UInt8], offset: Int, end: Int) {
        self.bytes = bytes
        self.offset = offset
        self.end = end
    }

    /// How many bytes were read so far (an offset into the whole input).
    var position: Int { offset }

    /// The bytes from `start` to the current position.
    func bytes(from start: Int) -> [UInt8] { Array(bytes[start..<offset]) }

    /// Whether every byte was read.
    public var isAtEnd: Bool { offset == end }

    /// Throws unless every byte was read.
    public func finish(_ what: @autoclosure () -> String) throws {
        guard isAtEnd else { throw MLSError(.malformed, "\(end - offset) bytes after the end of \(what())") }
    }

    private mutating func take(_ count: Int, _ what: @autoclosure () -> String) throws -> ArraySlice<UInt8> {
        guard count >= 0, count <= end - offset else {
            throw MLSError(.malformed, "\(what()) needs \(count) bytes, \(end - offset) are left")
        }
        let start = offset
        offset += count
        return bytes[start..<start + count]
    }

    private mutating func byte(_ what: @autoclosure () -> String) throws -> UInt8 {
        guard offset < end else { throw MLSError(.malformed, "\(what()) needs 1 byte, none are left") }
        offset += 1
        return bytes[offset - 1]
    }

    /// Reads one byte.
    public mutating func u8(_ what: @autoclosure () -> String = "uint8") throws -> UInt8 { try byte(what()) }
    /// Reads a big-endian 16-bit integer.
    public mutating func u16(_ what: @autoclosure () -> String = "uint16") throws -> UInt16 {
        let high = try byte(what())
        return UInt16(high) << 8 | UInt16(try byte(what()))
    }
    /// Reads a big-endian 32-bit integer.
    public mutating func u32(_ what: @autoclosure () -> String = "uint32") throws -> UInt32 {
        let high = try u16(what())
        return UInt32(high) << 16 | UInt32(try u16(what()))
    }
    /// Reads a big-endian 64-bit integer.
    public mutating func u64(_ what: @autoclosure () -> String = "uint64") throws -> UInt64 {
        let high = try u32(what())
        return UInt64(high) << 32 | UInt64(try u32(what()))
    }

    /// Reads a variable-length integer, refusing the reserved prefix `11` and any encoding
    /// longer than the value needs (RFC 9420 §2.1.2).
    public mutating func varint(_ what: @autoclosure () -> String = "length") throws -> Int {
        let first = try byte(what())
        let prefix = first >> 6
        var value = Int(first & 0x3f)
        switch prefix {
        case 0: return value
        case 1:
            value = value << 8 | Int(try byte(what()))
            guard value >= 64 else { throw MLSError(.malformed, "\(what()) is not minimally encoded") }
        case 2:
            value = value << 8 | Int(try byte(what()))
            value = value << 8 | Int(try byte(what()))
            value = value << 8 | Int(try byte(what()))
            guard value >= 16384 else { throw MLSError(.malformed, "\(what()) is not minimally encoded") }
        default:
            throw MLSError(.malformed, "\(what()) uses the reserved variable-length prefix 0b11")
        }
        return value
    }

    /// Reads `opaque data<V>`.
    public mutating func opaque(_ what: @autoclosure () -> String) throws -> Data {
        let count = try varint("the length of \(what())")
        return Data(try take(count, what()))
    }

    /// Reads `count` bytes with no prefix.
    public mutating func raw(_ count: Int, _ what: @autoclosure () -> String) throws -> Data { Data(try take(count, what())) }

    /// Reads a vector, calling `body` with a reader over exactly its contents, which it must use up.
    public mutating func vector<Result>(_ what: @autoclosure () -> String, _ body: (inout TLSReader) throws -> Result) throws
        -> Result
    {
        let count = try varint("the length of \(what())")
        guard count <= end - offset else {
            throw MLSError(.malformed, "\(what()) needs \(count) bytes, \(end - offset) are left")
        }
        var inner = TLSReader(bytes: bytes, offset: offset, end: offset + count)
        offset += count
        let result = try body(&inner)
        try inner.finish(what())
        return result
    }

    /// Reads a vector of decodable values.
    public mutating func vector<Element: TLSDecodable>(
        _ what: @autoclosure () -> String, of _: Element.Type = Element.self
    ) throws -> [Element] {
        try vector(what()) { inner in
            var elements: [Element] = []
            while !inner.isAtEnd { elements.append(try Element(from: &inner)) }
            return elements
        }
    }

    /// Reads `optional<T>`.
    public mutating func optional<Value: TLSDecodable>(
        _ what: @autoclosure () -> String, of _: Value.Type = Value.self
    ) throws -> Value? {
        switch try byte("the presence of \(what())") {
        case 0: return nil
        case 1: return try Value(from: &self)
        case let other: throw MLSError(.malformed, "the presence byte of \(what()) is \(other), not 0 or 1")
        }
    }

    /// Reads a decodable value.
    public mutating func read<Value: TLSDecodable>(_: Value.Type = Value.self) throws -> Value { try Value(from: &self) }
}

/// A value with a TLS encoding.
public protocol TLSEncodable {
    /// Appends this value's encoding.
    func encode(to writer: inout TLSWriter)
}

/// A value with a strict TLS decoding.
public protocol TLSDecodable {
    /// Reads one value, throwing ``MLSError`` on malformed input.
    init(from reader: inout TLSReader) throws
}

/// A value with both.
public typealias TLSCodable = TLSEncodable & TLSDecodable

extension TLSEncodable {
    /// This value's encoding.
    public var tlsEncoded: Data {
        var writer = TLSWriter()
        encode(to: &writer)
        return writer.data
    }

    var tlsBytes: [UInt8] {
        var writer = TLSWriter()
        encode(to: &writer)
        return writer.bytes
    }
}

extension TLSDecodable {
    /// Decodes exactly one value from `data`; bytes after it are an error.
    public init(tlsEncoded data: some ContiguousBytes) throws {
        var reader = TLSReader(data)
        self = try Self(from: &reader)
        try reader.finish(String(describing: Self.self))
    }
}

extension UInt32: TLSCodable {
    /// Writes the integer big-endian.
    public func encode(to writer: inout TLSWriter) { writer.u32(self) }
    /// Reads a big-endian integer.
    public init(from reader: inout TLSReader) throws { self = try reader.u32() }
}

extension UInt16: TLSCodable {
    /// Writes the integer big-endian.
    public func encode(to writer: inout TLSWriter) { writer.u16(self) }
    /// Reads a big-endian integer.
    public init(from reader: inout TLSReader) throws { self = try reader.u16() }
}

/// `opaque data<V>` as a standalone value, for vectors of byte strings.
struct Opaque: TLSCodable, Hashable, Sendable {
    var bytes: Data
    init(_ bytes: Data) { self.bytes = bytes }
    func encode(to writer: inout TLSWriter) { writer.opaque(bytes) }
    init(from reader: inout TLSReader) throws { bytes = try reader.opaque("opaque") }
}
