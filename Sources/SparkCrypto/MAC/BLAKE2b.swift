internal import CSodium
public import Foundation

/// BLAKE2b in its keyed mode (RFC 7693 §2.5), a pseudorandom function, through libsodium's
/// `crypto_generichash`: one call and no lock per message, where OpenSSL 3.0's one-shot `HMAC()`
/// fetches its digest (and takes a lock) every time. Search's tokens are made with it.
public struct KeyedBLAKE2b: Sendable {
    private let key: SymmetricKey
    /// `sodium_init()` once per process (a static's initialiser runs once).
    private static let ready: Bool = sodium_init() >= 0

    /// The shortest and longest codes it makes, in bytes.
    public static let outputRange = 16...64

    /// A keyed hash under `key` (16 to 64 bytes).
    ///
    /// - Throws: ``CryptoError/Code/invalidParameter`` for a key of another length.
    public init(key: SymmetricKey) throws {
        guard (16...64).contains(key.byteCount) else {
            throw CryptoError(.invalidParameter, "a BLAKE2b key is 16 to 64 bytes")
        }
        precondition(Self.ready, "libsodium could not start")
        self.key = key
    }

    /// Writes the code of `message` into `output`, whose length (16 to 64 bytes) is the code's.
    public func authenticationCode(for message: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) {
        precondition(Self.outputRange.contains(output.count), "a BLAKE2b code is 16 to 64 bytes")
        let result = key.withUnsafeBytes { key in
            crypto_generichash(
                output.baseAddress!.assumingMemoryBound(to: UInt8.self), output.count,
                message.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(message.count),
                key.baseAddress!.assumingMemoryBound(to: UInt8.self), key.count)
        }
        // Fails only for lengths out of range, checked above.
        precondition(result == 0, "crypto_generichash failed")
    }

    /// The `count`-byte code of `message`.
    public func authenticationCode(for message: some ContiguousBytes, count: Int = 32) -> Data {
        var output = Data(count: count)
        message.withUnsafeBytes { message in
            output.withUnsafeMutableBytes { output in authenticationCode(for: message, into: output) }
        }
        return output
    }
}
