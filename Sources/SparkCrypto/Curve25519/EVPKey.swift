internal import COpenSSL
import Foundation

/// The single Swift owner of an `EVP_PKEY`, freed in `deinit`.
// @unchecked Sendable: an EVP_PKEY is immutable after creation and OpenSSL 3 allows concurrent
// signing, verifying and deriving with one key from several threads.
final class EVPKey: @unchecked Sendable {
    let pointer: OpaquePointer

    init(taking pointer: OpaquePointer) { self.pointer = pointer }

    deinit { EVP_PKEY_free(pointer) }

    /// A key from raw private bytes (`EVP_PKEY_new_raw_private_key`).
    static func rawPrivate(type: Int32, _ bytes: some ContiguousBytes) throws -> EVPKey {
        let key = bytes.withUnsafeBytes { EVP_PKEY_new_raw_private_key(type, nil, $0.bytePointer, $0.count) }
        guard let key else { throw OpenSSL.failure("EVP_PKEY_new_raw_private_key") }
        return EVPKey(taking: key)
    }

    /// A key from raw public bytes (`EVP_PKEY_new_raw_public_key`).
    static func rawPublic(type: Int32, _ bytes: some ContiguousBytes) throws -> EVPKey {
        let key = bytes.withUnsafeBytes { EVP_PKEY_new_raw_public_key(type, nil, $0.bytePointer, $0.count) }
        guard let key else {
            OpenSSL.clearErrors()
            throw CryptoError(.invalidKey, "not a valid public key")
        }
        return EVPKey(taking: key)
    }

    /// A public key from DER SubjectPublicKeyInfo (`d2i_PUBKEY`).
    static func subjectPublicKeyInfo(_ der: Data) throws -> EVPKey {
        let key: OpaquePointer? = der.withUnsafeBytes { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.bytePointer
            return d2i_PUBKEY(nil, &cursor, buffer.count)
        }
        guard let key else {
            OpenSSL.clearErrors()
            throw CryptoError(.invalidKey, "not a valid public key encoding")
        }
        return EVPKey(taking: key)
    }

    /// A fresh key pair of the given type.
    static func generate(type: Int32) throws -> EVPKey {
        guard let context = EVP_PKEY_CTX_new_id(type, nil) else { throw OpenSSL.failure("EVP_PKEY_CTX_new_id") }
        defer { EVP_PKEY_CTX_free(context) }
        try OpenSSL.check(EVP_PKEY_keygen_init(context), "EVP_PKEY_keygen_init")
        var key: OpaquePointer?
        try OpenSSL.check(EVP_PKEY_keygen(context, &key), "EVP_PKEY_keygen")
        guard let key else { throw OpenSSL.failure("EVP_PKEY_keygen") }
        return EVPKey(taking: key)
    }

    /// The raw public key bytes of an Ed25519 or X25519 key.
    func rawPublicBytes() throws -> Data {
        var length = 32
        var data = Data(count: length)
        try data.withUnsafeMutableBytes { output in
            try OpenSSL.check(EVP_PKEY_get_raw_public_key(pointer, output.mutableBytePointer, &length), "get_raw_public_key")
        }
        return data.prefix(length)
    }

    /// The raw private key bytes of an Ed25519 or X25519 key, in wiped memory.
    func rawPrivateBytes() throws -> SecureBytes {
        try SecureBytes(count: 32) { output in
            var length = output.count
            try OpenSSL.check(
                EVP_PKEY_get_raw_private_key(pointer, output.mutableBytePointer, &length), "get_raw_private_key")
        }
    }

    /// Verifies a one-shot signature (`EVP_DigestVerify`), with `digest` nil for EdDSA.
    func verify(signature: some ContiguousBytes, message: some ContiguousBytes, digest: OpaquePointer?, pss: Bool = false)
        -> Bool
    {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        var keyContext: OpaquePointer?
        guard EVP_DigestVerifyInit(context, &keyContext, digest, nil, pointer) == 1 else {
            OpenSSL.clearErrors()
            return false
        }
        // RSASSA-PSS as JOSE's PS256 has it (RFC 7518 §3.5): MGF1 with the same digest, a salt as
        // long as the digest.
        if pss {
            guard EVP_PKEY_CTX_set_rsa_padding(keyContext, RSA_PKCS1_PSS_PADDING) == 1,
                EVP_PKEY_CTX_set_rsa_pss_saltlen(keyContext, RSA_PSS_SALTLEN_DIGEST) == 1,
                EVP_PKEY_CTX_set_rsa_mgf1_md(keyContext, digest) == 1
            else {
                OpenSSL.clearErrors()
                return false
            }
        }
        let result = signature.withUnsafeBytes { signature in
            message.withUnsafeBytes { message in
                EVP_DigestVerify(context, signature.bytePointer, signature.count, message.bytePointer, message.count)
            }
        }
        if result != 1 { OpenSSL.clearErrors() }
        return result == 1
    }
}
