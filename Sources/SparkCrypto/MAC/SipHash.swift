internal import CSodium
public import Foundation

/// SipHash-2-4 (Aumasson and Bernstein, 2012), a pseudorandom function of short inputs with a
/// 128-bit key and a 64-bit output, through libsodium's `crypto_shorthash`: values that cannot be
/// predicted without the key, such as the search index's tokens. Its 64 bits are not
/// collision-resistant: use it where two inputs sharing a value costs nothing but a second look.
public struct SipHash24: Sendable {
    private let key: SymmetricKey
    /// `sodium_init()` once per process (a static's initialiser runs once).
    private static let ready: Bool = sodium_init() >= 0

    /// A SipHash-2-4 under `key` (16 bytes).
    ///
    /// - Throws: ``CryptoError/Code/invalidParameter`` for a key of another length.
    public init(key: SymmetricKey) throws {
        guard key.byteCount == Int(crypto_shorthash_KEYBYTES) else {
            throw CryptoError(.invalidParameter, "a SipHash-2-4 key is 16 bytes")
        }
        precondition(Self.ready, "libsodium could not start")
        self.key = key
    }

    /// The value of `message`: SipHash's 8 output bytes, read little-endian (the paper's
    /// convention: its vector `a129ca6149be45e5` is the bytes `e5 45 be … a1`).
    public func value(of message: UnsafeRawBufferPointer) -> UInt64 {
        var output: UInt64 = 0
        let result = withUnsafeMutableBytes(of: &output) { output in
            key.withUnsafeBytes { key in
                crypto_shorthash(
                    output.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    message.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(message.count),
                    key.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        // crypto_shorthash has no failure (it returns 0).
        precondition(result == 0, "crypto_shorthash failed")
        return UInt64(littleEndian: output)
    }

    /// The value of `message`.
    public func value(of message: some ContiguousBytes) -> UInt64 {
        message.withUnsafeBytes { value(of: $0) }
    }
}
