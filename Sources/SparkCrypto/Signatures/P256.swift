internal import COpenSSL
public import Foundation

/// NIST P-256 ECDSA with SHA-256 verification, as JOSE's `ES256` carries it (RFC 7518 §3.4).
public enum P256 {
    /// A P-256 public key.
    public struct PublicKey: Sendable, Hashable {
        let key: EVPKey
        /// The 32-byte big-endian x coordinate.
        public let x: Data
        /// The 32-byte big-endian y coordinate.
        public let y: Data

        /// A key from its affine coordinates. Points not on the curve are refused.
        public init(x: some ContiguousBytes, y: some ContiguousBytes) throws {
            let x = x.withUnsafeBytes { Data($0) }
            let y = y.withUnsafeBytes { Data($0) }
            guard x.count == 32, y.count == 32 else {
                throw CryptoError(.invalidKey, "P-256 coordinates are 32 bytes each, got \(x.count) and \(y.count)")
            }
            let point = [0x04] + Array(x) + Array(y)
            let spki = DER.sequence(DER.p256AlgorithmIdentifier, DER.bitString(point))
            key = try EVPKey.subjectPublicKeyInfo(Data(spki))
            self.x = x
            self.y = y
        }

        /// Whether `signature` (raw `r ‖ s`, 64 bytes, IEEE P1363) is a valid ECDSA-SHA-256
        /// signature of `message` by this key.
        public func isValidSignature(_ signature: some ContiguousBytes, for message: some ContiguousBytes) -> Bool {
            guard let der = Self.derSignature(fromRaw: signature) else { return false }
            return key.verify(signature: der, message: message, digest: EVP_sha256())
        }

        /// Converts `r ‖ s` to a DER ECDSA-Sig-Value, or nil when the length is wrong.
        static func derSignature(fromRaw signature: some ContiguousBytes) -> Data? {
            signature.withUnsafeBytes { raw -> Data? in
                guard raw.count == 64 else { return nil }
                let r = DER.unsignedInteger(raw[0..<32])
                let s = DER.unsignedInteger(raw[32..<64])
                return Data(DER.sequence(r, s))
            }
        }

        /// Keys are equal when their coordinates are.
        public static func == (lhs: PublicKey, rhs: PublicKey) -> Bool { lhs.x == rhs.x && lhs.y == rhs.y }
        /// Hashes the coordinates.
        public func hash(into hasher: inout Hasher) {
            hasher.combine(x)
            hasher.combine(y)
        }
    }
}
