internal import COpenSSL
public import Foundation

/// RSA signature verification with SHA-256: RSASSA-PKCS1-v1_5 as JOSE's `RS256` (RFC 7518 §3.3)
/// and RSASSA-PSS as its `PS256` (§3.5).
public enum RSA {
    /// The smallest modulus accepted, per RFC 7518 §3.3.
    public static let minimumModulusBits = 2048
    /// The largest modulus accepted, to bound the cost of a hostile key.
    public static let maximumModulusBits = 8192

    /// An RSA public key.
    public struct PublicKey: Sendable, Hashable {
        let key: EVPKey
        /// The big-endian modulus.
        public let modulus: Data
        /// The big-endian public exponent.
        public let exponent: Data

        /// A key from its modulus and exponent (big-endian, as JWK's `n` and `e`).
        ///
        /// - Throws: ``CryptoError/Code/invalidKey`` for moduli outside
        ///   ``RSA/minimumModulusBits``...``RSA/maximumModulusBits`` or a bad exponent.
        public init(modulus: some ContiguousBytes, exponent: some ContiguousBytes) throws {
            let n = Data(modulus.withUnsafeBytes { Array($0).drop { $0 == 0 } })
            let e = Data(exponent.withUnsafeBytes { Array($0).drop { $0 == 0 } })
            let bits = n.isEmpty ? 0 : n.count * 8 - n[n.startIndex].leadingZeroBitCount
            guard bits >= RSA.minimumModulusBits, bits <= RSA.maximumModulusBits else {
                throw CryptoError(
                    .invalidKey,
                    "an RSA modulus must be \(RSA.minimumModulusBits)...\(RSA.maximumModulusBits) bits, got \(bits)")
            }
            guard !e.isEmpty, e.count <= 8, e.last! & 1 == 1, !(e.count == 1 && e[e.startIndex] < 3) else {
                throw CryptoError(.invalidKey, "an RSA public exponent must be an odd number of at most 64 bits, at least 3")
            }
            let rsaKey = DER.sequence(DER.unsignedInteger(n), DER.unsignedInteger(e))
            let spki = DER.sequence(DER.rsaAlgorithmIdentifier, DER.bitString(rsaKey))
            key = try EVPKey.subjectPublicKeyInfo(Data(spki))
            self.modulus = n
            self.exponent = e
        }

        /// The modulus size in bits.
        public var modulusBits: Int { Int(EVP_PKEY_get_bits(key.pointer)) }

        /// Whether `signature` is a valid RSASSA-PKCS1-v1_5 SHA-256 signature of `message`.
        public func isValidSignature(_ signature: some ContiguousBytes, for message: some ContiguousBytes) -> Bool {
            guard signature.withUnsafeBytes({ $0.count }) == (modulusBits + 7) / 8 else { return false }
            return key.verify(signature: signature, message: message, digest: EVP_sha256())
        }

        /// Whether `signature` is a valid RSASSA-PSS signature of `message` with SHA-256, MGF1
        /// SHA-256 and a 32-byte salt, as JOSE's `PS256` (RFC 7518 §3.5).
        public func isValidPSSSignature(_ signature: some ContiguousBytes, for message: some ContiguousBytes) -> Bool {
            guard signature.withUnsafeBytes({ $0.count }) == (modulusBits + 7) / 8 else { return false }
            return key.verify(signature: signature, message: message, digest: EVP_sha256(), pss: true)
        }

        /// Keys are equal when modulus and exponent are.
        public static func == (lhs: PublicKey, rhs: PublicKey) -> Bool {
            lhs.modulus == rhs.modulus && lhs.exponent == rhs.exponent
        }
        /// Hashes modulus and exponent.
        public func hash(into hasher: inout Hasher) {
            hasher.combine(modulus)
            hasher.combine(exponent)
        }
    }
}
