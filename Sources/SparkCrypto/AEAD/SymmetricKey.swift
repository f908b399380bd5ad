public import Foundation

/// A symmetric key held in wiped memory. It has no description that shows its bytes.
public struct SymmetricKey: Sendable, Equatable, ContiguousBytes, CustomStringConvertible {
    /// Standard key sizes.
    public enum Size: Int, Sendable {
        /// 128 bits.
        case bits128 = 16
        /// 192 bits.
        case bits192 = 24
        /// 256 bits.
        case bits256 = 32
    }

    private let bytes: SecureBytes
    /// Keyed AES-GCM contexts for this key (see ``CipherContextPool``); not part of equality.
    let cipherContexts = CipherContextPool()

    /// A fresh random key.
    public init(size: Size) { bytes = SecureBytes(randomCount: size.rawValue) }

    /// A key made from existing bytes (copied into secure memory).
    public init(data: some ContiguousBytes) { bytes = SecureBytes(data) }

    /// A key made from secure bytes without another copy.
    public init(secureBytes: SecureBytes) { bytes = secureBytes }

    /// The key length in bytes.
    public var byteCount: Int { bytes.count }

    /// The key length in bits.
    public var bitCount: Int { bytes.count * 8 }

    /// Calls `body` with the key bytes; the pointer must not escape.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try bytes.withUnsafeBytes(body)
    }

    /// Keys are equal when their bytes are (compared in constant time).
    public static func == (lhs: SymmetricKey, rhs: SymmetricKey) -> Bool { lhs.bytes == rhs.bytes }

    /// The key as secure bytes.
    public var secureBytes: SecureBytes { bytes }

    /// Shows the size only.
    public var description: String { "SymmetricKey(\(bitCount) bits)" }
}
