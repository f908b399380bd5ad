internal import COpenSSL
public import Foundation

/// Ed25519 signatures (RFC 8032), as JOSE's `EdDSA` (RFC 8037).
public enum Ed25519 {
    /// An Ed25519 signing key. Its bytes are reachable only through ``rawRepresentation``.
    public struct PrivateKey: Sendable, CustomStringConvertible {
        let key: EVPKey
        /// The matching public key.
        public let publicKey: PublicKey

        /// A fresh random key.
        public init() throws {
            key = try EVPKey.generate(type: spark_EVP_PKEY_ED25519())
            publicKey = try PublicKey(key: key)
        }

        /// A key from its 32-byte seed (RFC 8032 §5.1.5).
        public init(rawRepresentation seed: some ContiguousBytes) throws {
            let count = seed.withUnsafeBytes { $0.count }
            guard count == 32 else { throw CryptoError(.invalidKey, "an Ed25519 private key is 32 bytes, got \(count)") }
            key = try EVPKey.rawPrivate(type: spark_EVP_PKEY_ED25519(), seed)
            publicKey = try PublicKey(key: key)
        }

        /// The 32-byte seed, in wiped memory.
        public var rawRepresentation: SecureBytes {
            // A key that was created successfully always exports.
            try! key.rawPrivateBytes()
        }

        /// Signs `message`; Ed25519 signatures are deterministic and 64 bytes long.
        public func signature(for message: some ContiguousBytes) throws -> Data {
            guard let context = EVP_MD_CTX_new() else { throw OpenSSL.failure("EVP_MD_CTX_new") }
            defer { EVP_MD_CTX_free(context) }
            try OpenSSL.check(EVP_DigestSignInit(context, nil, nil, nil, key.pointer), "EVP_DigestSignInit")
            var signature = Data(count: 64)
            var length = 64
            try signature.withUnsafeMutableBytes { output in
                try message.withUnsafeBytes { message in
                    try OpenSSL.check(
                        EVP_DigestSign(context, output.mutableBytePointer, &length, message.bytePointer, message.count),
                        "EVP_DigestSign")
                }
            }
            return signature
        }

        /// Never shows the key.
        public var description: String { "Ed25519.PrivateKey(public: \(publicKey.rawRepresentation.base64URLEncodedString()))" }
    }

    /// An Ed25519 verification key.
    public struct PublicKey: Sendable, Hashable {
        let key: EVPKey
        /// The 32-byte encoded point.
        public let rawRepresentation: Data

        init(key: EVPKey) throws {
            self.key = key
            rawRepresentation = try key.rawPublicBytes()
        }

        /// A key from its 32-byte encoding. Encodings that are not points are refused.
        public init(rawRepresentation: some ContiguousBytes) throws {
            let data = rawRepresentation.withUnsafeBytes { Data($0) }
            guard data.count == 32 else { throw CryptoError(.invalidKey, "an Ed25519 public key is 32 bytes, got \(data.count)") }
            key = try EVPKey.rawPublic(type: spark_EVP_PKEY_ED25519(), data)
            self.rawRepresentation = data
        }

        /// Whether `signature` is a valid Ed25519 signature of `message` by this key. Wrong
        /// lengths, non-canonical `S` and malformed `R` are all invalid.
        public func isValidSignature(_ signature: some ContiguousBytes, for message: some ContiguousBytes) -> Bool {
            guard signature.withUnsafeBytes({ $0.count }) == 64 else { return false }
            return key.verify(signature: signature, message: message, digest: nil)
        }

        /// Keys are equal when their encodings are.
        public static func == (lhs: PublicKey, rhs: PublicKey) -> Bool { lhs.rawRepresentation == rhs.rawRepresentation }
        /// Hashes the encoding.
        public func hash(into hasher: inout Hasher) { hasher.combine(rawRepresentation) }
    }
}
