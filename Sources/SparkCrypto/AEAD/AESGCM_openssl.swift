internal import COpenSSL
import Foundation
import SparkLock

/// The OpenSSL EVP backend of ``AESGCM``.
enum OpenSSLAESGCM {
    /// Explicitly fetched ciphers, kept for the life of the process. `EVP_aes_256_gcm()` would make
    /// every `EVP_CipherInit_ex` look the implementation up again in the provider store (locks and
    /// a hash lookup), which cost about a fifth of a 16 KiB seal here.
    private static let ciphers = FetchedCiphers()

    private static func cipher(for key: SymmetricKey) -> OpaquePointer {
        switch key.byteCount {
        case 16: ciphers.aes128
        case 24: ciphers.aes192
        default: ciphers.aes256
        }
    }

    /// A cipher context keyed with `key` and set to `nonce`, taken from the key's pool of keyed
    /// contexts (or made and keyed now). Give it back with `finish(_:key:succeeded:)`.
    private static func context(encrypting: Bool, key: SymmetricKey, nonce: Data) throws -> KeyedContext {
        try nonce.withUnsafeBytes { nonce in try context(encrypting: encrypting, key: key, nonce: nonce) }
    }

    /// ``context(encrypting:key:nonce:)`` with the nonce in place (no copy of it made).
    private static func context(encrypting: Bool, key: SymmetricKey, nonce: UnsafeRawBufferPointer) throws -> KeyedContext {
        let enc: Int32 = encrypting ? 1 : 0
        let keyed: KeyedContext
        if let pooled = key.cipherContexts.take() {
            keyed = pooled
        } else {
            guard let context = EVP_CIPHER_CTX_new() else { throw OpenSSL.failure("EVP_CIPHER_CTX_new") }
            keyed = KeyedContext(pointer: context, ivLength: 12)
            do {
                try OpenSSL.check(EVP_CipherInit_ex(context, cipher(for: key), nil, nil, nil, enc), "EVP_CipherInit_ex")
                try key.withUnsafeBytes { key in
                    try OpenSSL.check(EVP_CipherInit_ex(context, nil, nil, key.bytePointer, nil, enc), "EVP_CipherInit_ex(key)")
                }
            } catch {
                EVP_CIPHER_CTX_free(context)
                throw error
            }
        }
        do {
            if keyed.ivLength != nonce.count {
                try OpenSSL.check(
                    EVP_CIPHER_CTX_ctrl(keyed.pointer, EVP_CTRL_GCM_SET_IVLEN, Int32(nonce.count), nil), "GCM_SET_IVLEN")
                keyed.ivLength = nonce.count
            }
            try OpenSSL.check(EVP_CipherInit_ex(keyed.pointer, nil, nil, nil, nonce.bytePointer, enc), "EVP_CipherInit_ex(iv)")
            return keyed
        } catch {
            EVP_CIPHER_CTX_free(keyed.pointer)
            throw error
        }
    }

    /// Returns a context to its key's pool after a successful operation; frees it otherwise.
    private static func finish(_ keyed: KeyedContext, key: SymmetricKey, succeeded: Bool) {
        if !succeeded || !key.cipherContexts.give(keyed) { EVP_CIPHER_CTX_free(keyed.pointer) }
    }

    private static func addAAD(_ context: OpaquePointer, _ aad: some ContiguousBytes) throws {
        try aad.withUnsafeBytes { aad in
            guard aad.count > 0 else { return }
            var written: Int32 = 0
            try OpenSSL.check(EVP_CipherUpdate(context, nil, &written, aad.bytePointer, Int32(aad.count)), "GCM AAD")
        }
    }

    static func seal(
        _ plaintext: some ContiguousBytes, key: SymmetricKey, nonce: Data, aad: some ContiguousBytes
    ) throws -> (Data, Data) {
        let keyed = try context(encrypting: true, key: key, nonce: nonce)
        var succeeded = false
        defer { finish(keyed, key: key, succeeded: succeeded) }
        let context = keyed.pointer
        try addAAD(context, aad)
        var ciphertext = Data()
        try plaintext.withUnsafeBytes { input in
            guard input.count <= Int(Int32.max) - 16 else {
                throw CryptoError(.limitExceeded, "AES-GCM input is limited to 2 GiB")
            }
            // GCM is a stream mode: the ciphertext is exactly as long as the plaintext and the
            // final call writes nothing (checked below), so the buffer is sized exactly and never
            // resized, which would copy it.
            ciphertext = Data.uninitialized(count: input.count)
            var written: Int32 = 0
            if input.count > 0 {
                try ciphertext.withUnsafeMutableBytes { output in
                    try OpenSSL.check(
                        EVP_CipherUpdate(context, output.mutableBytePointer, &written, input.bytePointer, Int32(input.count)),
                        "EVP_EncryptUpdate")
                }
                guard Int(written) == input.count else { throw OpenSSL.failure("EVP_EncryptUpdate wrote a short block") }
            }
            var scratch = (UInt64(0), UInt64(0))
            try withUnsafeMutableBytes(of: &scratch) { scratch in
                try OpenSSL.check(EVP_CipherFinal_ex(context, scratch.mutableBytePointer, &written), "EVP_EncryptFinal_ex")
            }
            guard written == 0 else { throw OpenSSL.failure("EVP_EncryptFinal_ex produced trailing bytes") }
        }
        var tag = Data(count: AESGCM.tagByteCount)
        try tag.withUnsafeMutableBytes { tag in
            try OpenSSL.check(
                EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, Int32(tag.count), tag.baseAddress), "GCM_GET_TAG")
        }
        succeeded = true
        return (ciphertext, tag)
    }

    static func open(
        _ ciphertext: Data, key: SymmetricKey, nonce: Data, aad: some ContiguousBytes, tag: Data
    ) throws -> SecureBytes {
        let keyed = try context(encrypting: false, key: key, nonce: nonce)
        var succeeded = false
        defer { finish(keyed, key: key, succeeded: succeeded) }
        let context = keyed.pointer
        try addAAD(context, aad)
        guard ciphertext.count <= Int(Int32.max) - 16 else {
            throw CryptoError(.limitExceeded, "AES-GCM input is limited to 2 GiB")
        }
        var plaintext = try SecureBytes(count: ciphertext.count + 16) { output in
            var written: Int32 = 0
            var total = 0
            try ciphertext.withUnsafeBytes { input in
                if input.count > 0 {
                    try OpenSSL.check(
                        EVP_CipherUpdate(context, output.mutableBytePointer, &written, input.bytePointer, Int32(input.count)),
                        "EVP_DecryptUpdate")
                    total = Int(written)
                }
            }
            var tagCopy = tag
            try tagCopy.withUnsafeMutableBytes { tag in
                try OpenSSL.check(
                    EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, Int32(tag.count), tag.baseAddress), "GCM_SET_TAG")
            }
            // > EVP_DecryptFinal_ex() returns 0 if the decrypt failed (tag mismatch) — EVP_EncryptInit(3).
            guard EVP_CipherFinal_ex(context, output.mutableBytePointer + total, &written) == 1 else {
                OpenSSL.clearErrors()
                throw CryptoError(.authenticationFailure, "AES-GCM authentication failed: wrong key or altered data")
            }
        }
        // GCM never expands in the final call, so the plaintext is exactly the ciphertext's length.
        if plaintext.count != ciphertext.count { plaintext = plaintext.slice(0..<ciphertext.count) }
        succeeded = true
        return plaintext
    }
}

extension OpenSSLAESGCM {
    /// Opens `nonce (12) ‖ ciphertext ‖ tag (16)` into `output` with no copy on the way; returns
    /// the plaintext's length. `output` holds at least the ciphertext's length; on failure it may
    /// hold unauthenticated bytes, which the caller discards.
    static func open(
        combined: UnsafeRawBufferPointer, key: SymmetricKey, aad: UnsafeRawBufferPointer,
        into output: UnsafeMutableRawBufferPointer
    ) throws -> Int {
        let count = combined.count - 12 - AESGCM.tagByteCount
        guard count >= 0, output.count >= count, count <= Int(Int32.max) - 16 else {
            throw CryptoError(.malformedInput, "an AES-GCM box of \(combined.count) bytes does not fit \(output.count)")
        }
        let keyed = try context(encrypting: false, key: key, nonce: UnsafeRawBufferPointer(rebasing: combined.prefix(12)))
        var succeeded = false
        defer { finish(keyed, key: key, succeeded: succeeded) }
        let context = keyed.pointer
        var written: Int32 = 0
        if aad.count > 0 {
            try OpenSSL.check(EVP_CipherUpdate(context, nil, &written, aad.bytePointer, Int32(aad.count)), "GCM AAD")
        }
        var total = 0
        if count > 0 {
            try OpenSSL.check(
                EVP_CipherUpdate(context, output.mutableBytePointer, &written, combined.bytePointer + 12, Int32(count)),
                "EVP_DecryptUpdate")
            total = Int(written)
        }
        var tag = (UInt64(0), UInt64(0))
        try withUnsafeMutableBytes(of: &tag) { tag in
            tag.copyMemory(from: UnsafeRawBufferPointer(rebasing: combined.suffix(AESGCM.tagByteCount)))
            try OpenSSL.check(
                EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, Int32(tag.count), tag.baseAddress), "GCM_SET_TAG")
        }
        var scratch = (UInt64(0), UInt64(0))
        let verified = withUnsafeMutableBytes(of: &scratch) { scratch in
            EVP_CipherFinal_ex(context, scratch.mutableBytePointer, &written) == 1
        }
        guard verified, written == 0 else {
            OpenSSL.clearErrors()
            throw CryptoError(.authenticationFailure, "AES-GCM authentication failed: wrong key or altered data")
        }
        succeeded = true
        return total
    }
}

/// The fetched AES-GCM implementations; `EVP_CIPHER_free` is never called because they live as
/// long as the process.
// @unchecked Sendable: fetched EVP_CIPHER objects are immutable and reference-counted by OpenSSL.
private final class FetchedCiphers: @unchecked Sendable {
    let aes128: OpaquePointer
    let aes192: OpaquePointer
    let aes256: OpaquePointer

    init() {
        // Fall back to the implicit fetch if the default provider cannot be queried by name.
        aes128 = EVP_CIPHER_fetch(nil, "AES-128-GCM", nil) ?? EVP_aes_128_gcm()
        aes192 = EVP_CIPHER_fetch(nil, "AES-192-GCM", nil) ?? EVP_aes_192_gcm()
        aes256 = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil) ?? EVP_aes_256_gcm()
    }
}

extension Data {
    /// A buffer of `count` bytes that are about to be overwritten, without zero-filling them first.
    static func uninitialized(count: Int) -> Data {
        guard count > 0, let memory = malloc(count) else { return Data(count: count) }
        return Data(bytesNoCopy: memory, count: count, deallocator: .free)
    }
}

/// An `EVP_CIPHER_CTX` that already holds a key schedule, and the IV length it is set to.
// @unchecked Sendable: owned by one thread at a time, handed over through CipherContextPool.
final class KeyedContext: @unchecked Sendable {
    let pointer: OpaquePointer
    var ivLength: Int

    init(pointer: OpaquePointer, ivLength: Int) {
        self.pointer = pointer
        self.ivLength = ivLength
    }
}

/// A few keyed cipher contexts per ``SymmetricKey``, so that sealing many messages under one key
/// skips the key schedule and GHASH table set-up (about 0.45 µs a call here, a tenth of a
/// 16 KiB seal). Contexts are freed, and OpenSSL wipes their key schedules, when the key goes.
// @unchecked Sendable: a context is used by one thread at a time: it leaves the pool under the
// lock before use and returns under the lock after.
final class CipherContextPool: @unchecked Sendable {
    private let contexts = Locked<[KeyedContext]>([])
    private static let capacity = 4
    /// The key expanded for libsodium's AES-GCM (``SodiumAESGCM``), made at its first open:
    /// `.some(nil)` once it turned out it cannot be.
    private let expanded = Locked<SodiumAESGCM.ExpandedKey??>(nil)

    init() {}

    /// `key` (whose pool this is) expanded for libsodium, made the first time; nil when
    /// libsodium cannot take it (see ``SodiumAESGCM``).
    func expandedKey(_ key: SymmetricKey) -> SodiumAESGCM.ExpandedKey? {
        expanded.withLock { expanded in
            if let known = expanded { return known }
            let made = SodiumAESGCM.ExpandedKey(key)
            expanded = .some(made)
            return made
        }
    }

    func take() -> KeyedContext? { contexts.withLock { $0.popLast() } }

    /// Adds a context back; false when the pool is full and the caller must free it.
    func give(_ context: KeyedContext) -> Bool {
        contexts.withLock { pool in
            guard pool.count < Self.capacity else { return false }
            pool.append(context)
            return true
        }
    }

    deinit {
        for context in contexts.withLock({ $0 }) { EVP_CIPHER_CTX_free(context.pointer) }
    }
}
