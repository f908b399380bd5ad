import Foundation
internal import COpenSSL

/// The OpenSSL EVP backend of ``AESGCM``.
enum OpenSSLAESGCM {
    private static func cipher(for key: SymmetricKey) -> OpaquePointer {
        switch key.byteCount {
        case 16: EVP_aes_128_gcm()
        case 24: EVP_aes_192_gcm()
        default: EVP_aes_256_gcm()
        }
    }

    /// A cipher context with key and IV set, freed by the caller's `defer`.
    private static func makeContext(encrypting: Bool, key: SymmetricKey, nonce: Data) throws -> OpaquePointer {
        guard let context = EVP_CIPHER_CTX_new() else { throw OpenSSL.failure("EVP_CIPHER_CTX_new") }
        do {
            let enc: Int32 = encrypting ? 1 : 0
            try OpenSSL.check(EVP_CipherInit_ex(context, cipher(for: key), nil, nil, nil, enc), "EVP_CipherInit_ex")
            try OpenSSL.check(
                EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_IVLEN, Int32(nonce.count), nil), "GCM_SET_IVLEN")
            try key.withUnsafeBytes { key in
                try nonce.withUnsafeBytes { iv in
                    try OpenSSL.check(
                        EVP_CipherInit_ex(context, nil, nil, key.bytePointer, iv.bytePointer, enc), "EVP_CipherInit_ex(key)")
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
            try OpenSSL.check(EVP_CipherUpdate(context, nil, &written, aad.bytePointer, Int32(aad.count)), "GCM AAD")
        }
    }

    static func seal(
        _ plaintext: some ContiguousBytes, key: SymmetricKey, nonce: Data, aad: some ContiguousBytes
    ) throws -> (Data, Data) {
        let context = try makeContext(encrypting: true, key: key, nonce: nonce)
        defer { EVP_CIPHER_CTX_free(context) }
        try addAAD(context, aad)
        var ciphertext = Data()
        try plaintext.withUnsafeBytes { input in
            guard input.count <= Int(Int32.max) - 16 else {
                throw CryptoError(.limitExceeded, "AES-GCM input is limited to 2 GiB")
            }
            ciphertext = Data(count: input.count + 16)
            var written: Int32 = 0
            var total = 0
            try ciphertext.withUnsafeMutableBytes { output in
                if input.count > 0 {
                    try OpenSSL.check(
                        EVP_CipherUpdate(context, output.mutableBytePointer, &written, input.bytePointer, Int32(input.count)),
                        "EVP_EncryptUpdate")
                    total = Int(written)
                }
                try OpenSSL.check(EVP_CipherFinal_ex(context, output.mutableBytePointer + total, &written), "EVP_EncryptFinal_ex")
                total += Int(written)
            }
            ciphertext.count = total
        }
        var tag = Data(count: AESGCM.tagByteCount)
        try tag.withUnsafeMutableBytes { tag in
            try OpenSSL.check(
                EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, Int32(tag.count), tag.baseAddress), "GCM_GET_TAG")
        }
        return (ciphertext, tag)
    }

    static func open(
        _ ciphertext: Data, key: SymmetricKey, nonce: Data, aad: some ContiguousBytes, tag: Data
    ) throws -> SecureBytes {
        let context = try makeContext(encrypting: false, key: key, nonce: nonce)
        defer { EVP_CIPHER_CTX_free(context) }
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
        return plaintext
    }
}
