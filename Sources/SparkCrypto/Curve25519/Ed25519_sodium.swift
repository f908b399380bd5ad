internal import CSodium
import Foundation

/// Ed25519 on libsodium: the backend of ``Ed25519``. libsodium signs and verifies about twice as
/// fast as OpenSSL 3.0 (measured by `spark-bench`'s `ed25519-sign` and `ed25519-verify` rows).
///
/// What libsodium 1.0.18's `crypto_sign_verify_detached` refuses by itself (each pinned by
/// `Ed25519SodiumTests`, which calls it without any check of ours): an `S` that is not below the
/// group order, an `R` of small order, and a public key that is non-canonical or of small order;
/// a non-canonical `R` never equals the canonical encoding it recomputes. OpenSSL 3.0 refused
/// none of the small-order cases, so ``Ed25519`` checked `R` itself; that check is gone. What
/// stays ours is the key check where a key comes in (``Ed25519/PublicKey/init(rawRepresentation:)``):
/// a weak key is refused there with a clear error, not only as a false at each verification.
enum Sodium {
    /// `sodium_init()` once per process; thread-safe (Swift runs a static's initialiser once).
    private static let ready: Bool = sodium_init() >= 0

    static func requireReady() {
        // sodium_init fails only when the system has no source of randomness, where no key made
        // after it could be trusted.
        precondition(ready, "libsodium failed to initialise (sodium_init)")
    }

    /// libsodium's secret key: the 32-byte seed followed by the 32-byte public key.
    static func keyPair(seed: some ContiguousBytes) throws -> (secretKey: SecureBytes, publicKey: Data) {
        requireReady()
        var publicKey = Data(count: Int(crypto_sign_PUBLICKEYBYTES))
        let secretKey = try SecureBytes(count: Int(crypto_sign_SECRETKEYBYTES)) { secret in
            let result = publicKey.withUnsafeMutableBytes { output in
                seed.withUnsafeBytes { seed in
                    crypto_sign_seed_keypair(
                        output.mutableBytePointer, secret.mutableBytePointer,
                        seed.bytePointer)
                }
            }
            guard result == 0 else { throw CryptoError(.invalidKey, "crypto_sign_seed_keypair failed") }
        }
        return (secretKey, publicKey)
    }

    /// A detached signature of `message` by `secretKey` (64 bytes).
    static func sign(_ message: some ContiguousBytes, secretKey: SecureBytes) -> Data {
        requireReady()
        var signature = Data(count: Int(crypto_sign_BYTES))
        let result = signature.withUnsafeMutableBytes { output in
            message.withUnsafeBytes { message in
                secretKey.withUnsafeBytes { secret in
                    crypto_sign_detached(
                        output.mutableBytePointer, nil, message.bytePointer,
                        UInt64(message.count), secret.bytePointer)
                }
            }
        }
        // > crypto_sign_detached: returns 0 (it has no failure path for a well-formed secret key).
        precondition(result == 0, "crypto_sign_detached failed")
        return signature
    }

    /// libsodium's verification alone, without ``Ed25519``'s own checks.
    static func verify(signature: some ContiguousBytes, message: some ContiguousBytes, publicKey: Data) -> Bool {
        requireReady()
        guard publicKey.count == Int(crypto_sign_PUBLICKEYBYTES) else { return false }
        return signature.withUnsafeBytes { signature in
            guard signature.count == Int(crypto_sign_BYTES) else { return false }
            return message.withUnsafeBytes { message in
                publicKey.withUnsafeBytes { key in
                    crypto_sign_verify_detached(
                        signature.bytePointer, message.bytePointer,
                        UInt64(message.count), key.bytePointer) == 0
                }
            }
        }
    }
}
