internal import CSodium
public import Foundation

/// BLAKE2b in its keyed mode (RFC 7693 §2.5), a pseudorandom function, through libsodium's
/// `crypto_generichash`. The key's block is hashed once, when the hash is made: each code then
/// costs one copy of that state and the message's own blocks (where OpenSSL 3.0's one-shot
/// `HMAC()` fetches its digest, under a lock, and hashes the key's pads every time). Search's
/// tokens are made with it.
public final class KeyedBLAKE2b: Sendable {
    /// libsodium's state after the key's block, aligned as its header asks (64 bytes).
    private nonisolated(unsafe) let keyed: UnsafeMutableRawPointer
    private let stateSize: Int
    /// The length of each code, in bytes.
    public let outputCount: Int
    /// `sodium_init()` once per process (a static's initialiser runs once).
    private static let ready: Bool = sodium_init() >= 0

    /// The shortest and longest codes it makes, in bytes.
    public static let outputRange = 16...64

    /// A keyed hash under `key` (16 to 64 bytes) making codes of `outputCount` bytes (16 to 64).
    ///
    /// - Throws: ``CryptoError/Code/invalidParameter`` for a key or an output of another length.
    public init(key: SymmetricKey, outputCount: Int = 32) throws {
        guard (16...64).contains(key.byteCount), Self.outputRange.contains(outputCount) else {
            throw CryptoError(.invalidParameter, "a BLAKE2b key and code are 16 to 64 bytes")
        }
        precondition(Self.ready, "libsodium could not start")
        stateSize = crypto_generichash_blake2b_statebytes()
        keyed = UnsafeMutableRawPointer.allocate(byteCount: stateSize, alignment: 64)
        self.outputCount = outputCount
        let state = OpaquePointer(keyed)
        let result = key.withUnsafeBytes { key in
            crypto_generichash_blake2b_init(state, key.baseAddress!.assumingMemoryBound(to: UInt8.self), key.count, outputCount)
        }
        // Fails only for lengths out of range, checked above.
        precondition(result == 0, "crypto_generichash_init failed")
    }

    deinit {
        // The state holds the key's block.
        sodium_memzero(keyed, stateSize)
        keyed.deallocate()
    }

    /// Writes the code of `message` into `output` (``outputCount`` bytes).
    public func authenticationCode(for message: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) {
        precondition(output.count == outputCount, "the output is not \(outputCount) bytes")
        withUnsafeTemporaryAllocation(byteCount: stateSize, alignment: 64) { copy in
            copy.baseAddress!.copyMemory(from: keyed, byteCount: stateSize)
            let state = OpaquePointer(copy.baseAddress!)
            crypto_generichash_blake2b_update(
                state, message.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(message.count))
            crypto_generichash_blake2b_final(state, output.baseAddress!.assumingMemoryBound(to: UInt8.self), output.count)
        }
    }

    /// The code of `message`.
    public func authenticationCode(for message: some ContiguousBytes) -> Data {
        var output = Data(count: outputCount)
        message.withUnsafeBytes { message in
            output.withUnsafeMutableBytes { output in authenticationCode(for: message, into: output) }
        }
        return output
    }
}
