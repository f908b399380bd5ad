public import Foundation

/// Ed25519 signatures (RFC 8032), as JOSE's `EdDSA` (RFC 8037), on libsodium (`Ed25519_sodium.swift`).
public enum Ed25519 {
    /// An Ed25519 signing key. Its bytes are reachable only through ``rawRepresentation``.
    public struct PrivateKey: Sendable, CustomStringConvertible {
        /// libsodium's secret key: the seed, then the public key (see `Sodium`).
        let secretKey: SecureBytes
        /// The matching public key.
        public let publicKey: PublicKey

        /// A fresh random key.
        public init() throws {
            try self.init(rawRepresentation: SecureBytes(randomCount: 32))
        }

        /// A key from its 32-byte seed (RFC 8032 §5.1.5).
        public init(rawRepresentation seed: some ContiguousBytes) throws {
            let count = seed.withUnsafeBytes { $0.count }
            guard count == 32 else { throw CryptoError(.invalidKey, "an Ed25519 private key is 32 bytes, got \(count)") }
            let (secretKey, publicKey) = try Sodium.keyPair(seed: seed)
            self.secretKey = secretKey
            // A key derived from a seed is a canonical point of large order (a multiple of the base point).
            self.publicKey = PublicKey(trusted: publicKey)
        }

        /// The 32-byte seed, in wiped memory.
        public var rawRepresentation: SecureBytes { secretKey.slice(0..<32) }

        /// Signs `message`; Ed25519 signatures are deterministic and 64 bytes long.
        public func signature(for message: some ContiguousBytes) throws -> Data {
            Sodium.sign(message, secretKey: secretKey)
        }

        /// Never shows the key.
        public var description: String { "Ed25519.PrivateKey(public: \(publicKey.rawRepresentation.base64URLEncodedString()))" }
    }

    /// The y coordinates (little-endian, the x sign bit clear) of the points whose order
    /// divides 8: 0 (order 4), 1 (the identity), the two of order 8, and p − 1 (order 2). Both
    /// signs of x share a y, so comparing y covers all eight points (libsodium keeps the same
    /// list; these were computed again from the curve equation).
    static let smallOrderY: [Data] = [
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0100000000000000000000000000000000000000000000000000000000000000",
        "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
        "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    ].map { hex in Data(stride(from: 0, to: hex.count, by: 2).map { UInt8(hex.dropFirst($0).prefix(2), radix: 16)! }) }

    /// Whether a 32-byte point encoding is canonical (y < p = 2²⁵⁵ − 19) and not of small order.
    static func isCanonicalPointOfLargeOrder(_ encoding: Data) -> Bool {
        guard encoding.count == 32 else { return false }
        var y = [UInt8](encoding)
        y[31] &= 0x7f
        // y ≥ p exactly when y is p … 2²⁵⁵ − 1: bytes 1 to 30 all 0xff, byte 31 0x7f, byte 0 ≥ 0xed.
        let nonCanonical = y[31] == 0x7f && y[1...30].allSatisfy { $0 == 0xff } && y[0] >= 0xed
        return !nonCanonical && !smallOrderY.contains(Data(y))
    }

    /// An Ed25519 verification key.
    public struct PublicKey: Sendable, Hashable {
        /// The 32-byte encoded point.
        public let rawRepresentation: Data

        /// A key known to be valid (derived from a seed here).
        init(trusted encoding: Data) { rawRepresentation = encoding }

        /// A key from its 32-byte encoding. A non-canonical encoding (y ≥ p) and the eight
        /// points of small order are refused: with the identity as the key, the signature
        /// (R = identity, S = 0) would verify for any message. (libsodium refuses such keys at
        /// each verification too; refusing them here says why, once, where the key comes in.)
        public init(rawRepresentation: some ContiguousBytes) throws {
            let data = rawRepresentation.withUnsafeBytes { Data($0) }
            guard data.count == 32 else { throw CryptoError(.invalidKey, "an Ed25519 public key is 32 bytes, got \(data.count)") }
            guard Ed25519.isCanonicalPointOfLargeOrder(data) else {
                throw CryptoError(.invalidKey, "an Ed25519 public key must be a canonical point of large order")
            }
            self.rawRepresentation = data
        }

        /// Whether `signature` is a valid Ed25519 signature of `message` by this key. Wrong
        /// lengths, non-canonical `S`, malformed `R` and an `R` of small order (a signature
        /// that holds for many messages at once) are all invalid: libsodium refuses each of
        /// them itself (see `Sodium`), so no check of ours is repeated here.
        public func isValidSignature(_ signature: some ContiguousBytes, for message: some ContiguousBytes) -> Bool {
            Sodium.verify(signature: signature, message: message, publicKey: rawRepresentation)
        }

        /// Keys are equal when their encodings are.
        public static func == (lhs: PublicKey, rhs: PublicKey) -> Bool { lhs.rawRepresentation == rhs.rawRepresentation }
        /// Hashes the encoding.
        public func hash(into hasher: inout Hasher) { hasher.combine(rawRepresentation) }
    }
}
