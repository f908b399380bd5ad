internal import CSodium
import Foundation

/// AES-256-GCM on libsodium, for opening many small values under one key (the endpoint store's
/// sealed columns: a page of messages is fifty of them). The key is expanded once (its round
/// keys and GHASH key, in libsodium's guarded memory, wiped when the key goes) and each open is
/// one call, where OpenSSL's EVP takes five and a keyed context from a locked pool (a 50-byte
/// open: 178 ns against 296 ns for EVP's calls alone, measured here; `store-latest-50` in
/// spark-bench reads fifty).
///
/// libsodium offers AES-GCM only with a 256-bit key and a 12-byte nonce, and only on a CPU with
/// AES-NI and carry-less multiplication; elsewhere ``AESGCM`` opens with OpenSSL, which
/// computes the same function (both are checked against Wycheproof's vectors).
enum SodiumAESGCM {
    /// Whether this CPU runs libsodium's AES-GCM.
    static let available: Bool = {
        Sodium.requireReady()
        return crypto_aead_aes256gcm_is_available() == 1
    }()

    /// Opens `nonce (12) ‖ ciphertext ‖ tag (16)` into `output` under `state`; returns the
    /// plaintext's length. On failure `output` holds nothing of the plaintext.
    static func open(
        combined: UnsafeRawBufferPointer, state: ExpandedKey, aad: UnsafeRawBufferPointer,
        into output: UnsafeMutableRawBufferPointer
    ) throws -> Int {
        let count = combined.count - 12 - AESGCM.tagByteCount
        guard count >= 0, output.count >= count else {
            throw CryptoError(.malformedInput, "an AES-GCM box of \(combined.count) bytes does not fit \(output.count)")
        }
        var written: UInt64 = 0
        // libsodium writes nothing when the tag does not verify; a zero-length output still needs
        // a pointer.
        var empty: UInt8 = 0
        let result = withUnsafeMutablePointer(to: &empty) { empty in
            crypto_aead_aes256gcm_decrypt_afternm(
                count > 0 ? output.mutableBytePointer : empty, &written, nil, combined.bytePointer + 12,
                UInt64(combined.count - 12), aad.count > 0 ? aad.bytePointer : nil, UInt64(aad.count), combined.bytePointer,
                state.pointer)
        }
        guard result == 0, written == UInt64(count) else {
            throw CryptoError(.authenticationFailure, "AES-GCM authentication failed: wrong key or altered data")
        }
        return count
    }

    /// A 256-bit key expanded for libsodium's AES-GCM, in memory libsodium guards and wipes.
    final class ExpandedKey: @unchecked Sendable {
        /// Written once in `init`, then only read (libsodium's calls take it as const).
        let pointer: UnsafeMutablePointer<crypto_aead_aes256gcm_state>

        /// Expands `key` (32 bytes); nil when libsodium cannot (no AES-NI, or no memory).
        init?(_ key: SymmetricKey) {
            guard available, key.byteCount == 32,
                let memory = sodium_malloc(crypto_aead_aes256gcm_statebytes())
            else { return nil }
            let state = memory.bindMemory(to: crypto_aead_aes256gcm_state.self, capacity: 1)
            let expanded = key.withUnsafeBytes { key in crypto_aead_aes256gcm_beforenm(state, key.bytePointer) }
            guard expanded == 0 else {
                sodium_free(memory)
                return nil
            }
            pointer = state
        }

        deinit { sodium_free(UnsafeMutableRawPointer(pointer)) }
    }
}
