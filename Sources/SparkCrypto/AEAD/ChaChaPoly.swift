internal import COpenSSL
public import Foundation

/// ChaCha20-Poly1305 (RFC 8439) with 256-bit keys, 96-bit nonces and 16-byte tags, on OpenSSL's
/// EVP interface. MLS's cipher suite 3 and its HPKE use it.
public enum ChaChaPoly {
    /// The tag's length.
    public static let tagByteCount = 16
    /// The nonce's length.
    public static let nonceByteCount = 12

    /// Encrypts `plaintext` and authenticates it with `authenticatedData`; returns ciphertext ‖ tag.
    public static func seal(
        _ plaintext: some ContiguousBytes, using key: SymmetricKey, nonce: some ContiguousBytes,
        authenticating authenticatedData: some ContiguousBytes
    ) throws -> Data {
        try check(key, nonce)
        let context = try makeContext(encrypting: true, key: key, nonce: nonce)
        defer { EVP_CIPHER_CTX_free(context) }
        try addAAD(context, authenticatedData)
        var output = Data()
        try plaintext.withUnsafeBytes { input in
            guard input.count <= Int(Int32.max) - 16 else {
                throw CryptoError(.limitExceeded, "ChaCha20-Poly1305 input is limited to 2 GiB")
            }
            output = Data(count: input.count + tagByteCount)
            try output.withUnsafeMutableBytes { out in
                var written: Int32 = 0
                if input.count > 0 {
                    try OpenSSL.check(
                        EVP_CipherUpdate(context, out.mutableBytePointer, &written, input.bytePointer, Int32(input.count)),
                        "EVP_EncryptUpdate")
                }
                var final: Int32 = 0
                try OpenSSL.check(
                    EVP_CipherFinal_ex(context, out.mutableBytePointer + Int(written), &final), "EVP_EncryptFinal_ex")
                guard Int(written + final) == input.count else { throw OpenSSL.failure("ChaCha20-Poly1305 wrote a short output") }
                try OpenSSL.check(
                    EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_GET_TAG, Int32(tagByteCount), out.baseAddress! + input.count),
                    "AEAD_GET_TAG")
            }
        }
        return output
    }

    /// Opens ciphertext ‖ tag; a wrong key, nonce, tag or data is `authenticationFailure`.
    public static func open(
        _ sealed: some ContiguousBytes, using key: SymmetricKey, nonce: some ContiguousBytes,
        authenticating authenticatedData: some ContiguousBytes
    ) throws -> SecureBytes {
        try check(key, nonce)
        let bytes = sealed.withUnsafeBytes { Data($0) }
        guard bytes.count >= tagByteCount else {
            throw CryptoError(.authenticationFailure, "a ChaCha20-Poly1305 box is at least 16 bytes")
        }
        let context = try makeContext(encrypting: false, key: key, nonce: nonce)
        defer { EVP_CIPHER_CTX_free(context) }
        try addAAD(context, authenticatedData)
        let ciphertext = bytes.prefix(bytes.count - tagByteCount)
        var tag = [UInt8](bytes.suffix(tagByteCount))
        return try SecureBytes(count: ciphertext.count) { output in
            var written: Int32 = 0
            try ciphertext.withUnsafeBytes { input in
                if input.count > 0 {
                    try OpenSSL.check(
                        EVP_CipherUpdate(context, output.mutableBytePointer, &written, input.bytePointer, Int32(input.count)),
                        "EVP_DecryptUpdate")
                }
            }
            try tag.withUnsafeMutableBytes { tag in
                try OpenSSL.check(
                    EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_TAG, Int32(tag.count), tag.baseAddress), "AEAD_SET_TAG")
            }
            var scratch = (UInt64(0), UInt64(0))
            let verified = withUnsafeMutableBytes(of: &scratch) { scratch in
                var final: Int32 = 0
                return EVP_CipherFinal_ex(context, scratch.mutableBytePointer, &final) == 1 && final == 0
            }
            guard verified else {
                OpenSSL.clearErrors()
                output.initializeMemory(as: UInt8.self, repeating: 0)
                throw CryptoError(.authenticationFailure, "ChaCha20-Poly1305 authentication failed: wrong key or altered data")
            }
        }
    }

    private static func check(_ key: SymmetricKey, _ nonce: some ContiguousBytes) throws {
        guard key.byteCount == 32 else { throw CryptoError(.invalidKey, "a ChaCha20 key is 32 bytes, got \(key.byteCount)") }
        let count = nonce.withUnsafeBytes { $0.count }
        guard count == nonceByteCount else {
            throw CryptoError(.invalidNonce, "a ChaCha20-Poly1305 nonce is 12 bytes, got \(count)")
        }
    }

    private static func makeContext(encrypting: Bool, key: SymmetricKey, nonce: some ContiguousBytes) throws -> OpaquePointer {
        guard let context = EVP_CIPHER_CTX_new() else { throw OpenSSL.failure("EVP_CIPHER_CTX_new") }
        do {
            let enc: Int32 = encrypting ? 1 : 0
            try OpenSSL.check(EVP_CipherInit_ex(context, EVP_chacha20_poly1305(), nil, nil, nil, enc), "EVP_CipherInit_ex")
            try key.withUnsafeBytes { key in
                try nonce.withUnsafeBytes { nonce in
                    try OpenSSL.check(
                        EVP_CipherInit_ex(context, nil, nil, key.bytePointer, nonce.bytePointer, enc), "EVP_CipherInit_ex(key)")
                }
            }
            return context
        } catch {
            EVP_CIPHER_CTX_free(context)
            throw error
        }
    }

    private static func addAAD(_ context: OpaquePointer, _ aad: some ContiguousBytes) throws {
        try aad.withUnsafeBytes { aad in
            guard aad.count > 0 else { return }
            var written: Int32 = 0
            try OpenSSL.check(EVP_CipherUpdate(context, nil, &written, aad.bytePointer, Int32(aad.count)), "AEAD AAD")
        }
    }
}
