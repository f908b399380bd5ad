internal import COpenSSL
public import Foundation

/// The AES Key Wrap algorithm of RFC 3394 (NIST SP 800-38F "KW"), as JOSE's `A256KW` uses it.
public enum AESKeyWrap {
    /// Wraps `keyToWrap` (16 bytes or more, a multiple of 8) under `kek` (16, 24 or 32 bytes).
    /// The result is 8 bytes longer.
    public static func wrap(_ keyToWrap: some ContiguousBytes, using kek: SymmetricKey) throws -> Data {
        let count = keyToWrap.withUnsafeBytes { $0.count }
        guard count >= 16, count % 8 == 0, count <= 4096 else {
            throw CryptoError(.invalidParameter, "key wrap input must be 16...4096 bytes in 8-byte blocks, got \(count)")
        }
        var output = Data(count: count + 8)
        let written = try output.withUnsafeMutableBytes { output in
            try keyToWrap.withUnsafeBytes { input in
                try run(encrypting: true, kek: kek, input: input, output: output)
            }
        }
        precondition(written == count + 8, "AES key wrap wrote \(written) bytes")
        return output
    }

    /// Unwraps a key. Throws ``CryptoError/Code/authenticationFailure`` when the integrity check
    /// fails (wrong key-encryption key or altered data).
    public static func unwrap(_ wrappedKey: some ContiguousBytes, using kek: SymmetricKey) throws -> SecureBytes {
        let count = wrappedKey.withUnsafeBytes { $0.count }
        guard count >= 24, count % 8 == 0, count <= 4104 else {
            throw CryptoError(.malformedInput, "a wrapped key must be 24...4104 bytes in 8-byte blocks, got \(count)")
        }
        var written = 0
        var plaintext = try SecureBytes(count: count) { output in
            written = try wrappedKey.withUnsafeBytes { input in
                try run(encrypting: false, kek: kek, input: input, output: output)
            }
        }
        guard written == count - 8 else {
            throw CryptoError(.authenticationFailure, "AES key unwrap failed its integrity check")
        }
        plaintext = plaintext.slice(0..<written)
        return plaintext
    }

    private static func run(
        encrypting: Bool, kek: SymmetricKey, input: UnsafeRawBufferPointer, output: UnsafeMutableRawBufferPointer
    ) throws -> Int {
        let cipher: OpaquePointer
        switch kek.byteCount {
        case 16: cipher = EVP_aes_128_wrap()
        case 24: cipher = EVP_aes_192_wrap()
        case 32: cipher = EVP_aes_256_wrap()
        default: throw CryptoError(.invalidKey, "a key-encryption key must be 16, 24 or 32 bytes, got \(kek.byteCount)")
        }
        guard let context = EVP_CIPHER_CTX_new() else { throw OpenSSL.failure("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(context) }
        // > The wrap modes must be explicitly allowed with EVP_CIPHER_CTX_FLAG_WRAP_ALLOW — EVP_EncryptInit(3).
        EVP_CIPHER_CTX_set_flags(context, Int32(EVP_CIPHER_CTX_FLAG_WRAP_ALLOW))
        try kek.withUnsafeBytes { key in
            try OpenSSL.check(
                EVP_CipherInit_ex(context, cipher, nil, key.bytePointer, nil, encrypting ? 1 : 0), "EVP_CipherInit_ex(wrap)")
        }
        var written: Int32 = 0
        guard EVP_CipherUpdate(context, output.mutableBytePointer, &written, input.bytePointer, Int32(input.count)) == 1,
            written > 0
        else {
            if encrypting { throw OpenSSL.failure("AES key wrap") }
            OpenSSL.clearErrors()
            throw CryptoError(.authenticationFailure, "AES key unwrap failed its integrity check")
        }
        return Int(written)
    }
}
