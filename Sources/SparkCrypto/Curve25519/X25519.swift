internal import COpenSSL
public import Foundation

/// X25519 Diffie-Hellman (RFC 7748).
public enum X25519 {
    /// An X25519 private key.
    public struct PrivateKey: Sendable, CustomStringConvertible {
        let key: EVPKey
        /// The matching public key.
        public let publicKey: PublicKey

        /// A fresh random key.
        public init() throws {
            key = try EVPKey.generate(type: spark_EVP_PKEY_X25519())
            publicKey = try PublicKey(key: key)
        }

        /// A key from its 32-byte scalar (clamped as RFC 7748 §5 says when used).
        public init(rawRepresentation scalar: some ContiguousBytes) throws {
            let count = scalar.withUnsafeBytes { $0.count }
            guard count == 32 else { throw CryptoError(.invalidKey, "an X25519 private key is 32 bytes, got \(count)") }
            key = try EVPKey.rawPrivate(type: spark_EVP_PKEY_X25519(), scalar)
            publicKey = try PublicKey(key: key)
        }

        /// The 32-byte scalar, in wiped memory.
        public var rawRepresentation: SecureBytes {
            // A key that was created successfully always exports.
            try! key.rawPrivateBytes()
        }

        /// The shared secret with `peer`.
        ///
        /// - Throws: ``CryptoError/Code/invalidKey`` when the result is all zeros, which happens
        ///   exactly for low-order peer points (RFC 7748 §6.1's check).
        public func sharedSecret(with peer: PublicKey) throws -> SecureBytes {
            guard let context = EVP_PKEY_CTX_new(key.pointer, nil) else { throw OpenSSL.failure("EVP_PKEY_CTX_new") }
            defer { EVP_PKEY_CTX_free(context) }
            try OpenSSL.check(EVP_PKEY_derive_init(context), "EVP_PKEY_derive_init")
            try OpenSSL.check(EVP_PKEY_derive_set_peer(context, peer.key.pointer), "EVP_PKEY_derive_set_peer")
            return try SecureBytes(count: 32) { output in
                var length = output.count
                // > OpenSSL's X25519 derive fails when the shared secret is all zeros.
                guard EVP_PKEY_derive(context, output.mutableBytePointer, &length) == 1, length == 32 else {
                    OpenSSL.clearErrors()
                    throw CryptoError(.invalidKey, "X25519 with a low-order public key gives no shared secret")
                }
            }
        }

        /// Never shows the key.
        public var description: String { "X25519.PrivateKey(public: \(publicKey.rawRepresentation.base64URLEncodedString()))" }
    }

    /// An X25519 public key (a u-coordinate).
    public struct PublicKey: Sendable, Hashable {
        let key: EVPKey
        /// The 32-byte u-coordinate.
        public let rawRepresentation: Data

        init(key: EVPKey) throws {
            self.key = key
            rawRepresentation = try key.rawPublicBytes()
        }

        /// A key from its 32-byte encoding.
        public init(rawRepresentation: some ContiguousBytes) throws {
            let data = rawRepresentation.withUnsafeBytes { Data($0) }
            guard data.count == 32 else { throw CryptoError(.invalidKey, "an X25519 public key is 32 bytes, got \(data.count)") }
            key = try EVPKey.rawPublic(type: spark_EVP_PKEY_X25519(), data)
            self.rawRepresentation = data
        }

        /// Keys are equal when their encodings are.
        public static func == (lhs: PublicKey, rhs: PublicKey) -> Bool { lhs.rawRepresentation == rhs.rawRepresentation }
        /// Hashes the encoding.
        public func hash(into hasher: inout Hasher) { hasher.combine(rawRepresentation) }
    }
}
