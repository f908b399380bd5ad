internal import COpenSSL
public import Foundation

/// HKDF, the HMAC-based extract-and-expand key derivation function (RFC 5869).
public enum HKDF {
    /// Derives `outputByteCount` bytes from input keying material, a salt and context info.
    ///
    /// - Throws: ``CryptoError/Code/invalidParameter`` when `outputByteCount` is not in
    ///   `1...255 * hash.digestCount` (RFC 5869 §2.3).
    public static func deriveKey(
        inputKeyMaterial: some ContiguousBytes,
        salt: some ContiguousBytes,
        info: some ContiguousBytes,
        outputByteCount: Int,
        hash: HashFunction
    ) throws -> SecureBytes {
        guard outputByteCount >= 1, outputByteCount <= 255 * hash.digestCount else {
            throw CryptoError(.invalidParameter, "HKDF output length must be 1...\(255 * hash.digestCount) bytes")
        }
        guard let context = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nil) else { throw OpenSSL.failure("EVP_PKEY_CTX_new_id(HKDF)") }
        defer { EVP_PKEY_CTX_free(context) }
        try OpenSSL.check(EVP_PKEY_derive_init(context), "EVP_PKEY_derive_init")
        try OpenSSL.check(EVP_PKEY_CTX_set_hkdf_md(context, hash.evp), "EVP_PKEY_CTX_set_hkdf_md")
        try inputKeyMaterial.withUnsafeBytes { ikm in
            try OpenSSL.check(EVP_PKEY_CTX_set1_hkdf_key(context, ikm.bytePointer, Int32(ikm.count)), "set1_hkdf_key")
        }
        try salt.withUnsafeBytes { salt in
            try OpenSSL.check(EVP_PKEY_CTX_set1_hkdf_salt(context, salt.bytePointer, Int32(salt.count)), "set1_hkdf_salt")
        }
        try info.withUnsafeBytes { info in
            if info.count > 0 {
                try OpenSSL.check(EVP_PKEY_CTX_add1_hkdf_info(context, info.bytePointer, Int32(info.count)), "add1_hkdf_info")
            }
        }
        return try SecureBytes(count: outputByteCount) { output in
            var length = output.count
            try OpenSSL.check(EVP_PKEY_derive(context, output.mutableBytePointer, &length), "EVP_PKEY_derive(HKDF)")
        }
    }
}
