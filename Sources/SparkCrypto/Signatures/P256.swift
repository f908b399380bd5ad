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

extension P256 {
    /// A P-256 ECDSA signing key (SHA-256, signatures as raw `r ‖ s`), for the key transparency
    /// suite `KT_128_SHA256_P256`'s tree heads.
    public struct SigningKey: Sendable {
        let key: EVPKey
        let scalar: SecureBytes
        /// The public key.
        public let publicKey: PublicKey

        /// A fresh random key.
        public init() throws {
            let scalar = try PrimeCurve.p256.compute { scratch in try scratch.secretBytes(try scratch.randomScalar(), count: 32) }
            try self.init(rawRepresentation: scalar)
        }

        /// A key from its 32-byte big-endian scalar (1 … n-1).
        public init(rawRepresentation: some ContiguousBytes) throws {
            let scalar = SecureBytes(rawRepresentation)
            guard scalar.count == 32 else { throw CryptoError(.invalidKey, "a P-256 private key is 32 bytes") }
            let (x, y) = try PrimeCurve.p256.compute { scratch -> (Data, Data) in
                let d = try scalar.withUnsafeBytes { try scratch.number($0) }
                guard !scratch.isZero(d), scratch.isReduced(d, scratch.curve.order) else {
                    throw CryptoError(.invalidKey, "a P-256 private key is a scalar from 1 to n-1")
                }
                let point = try scratch.coordinates(try scratch.multiplyGenerator(d))
                return (try scratch.bytes(point.x, count: 32), try scratch.bytes(point.y, count: 32))
            }
            // RFC 5915 ECPrivateKey, with the curve and the public key.
            let der = scalar.withUnsafeBytes { d in
                DER.sequence(
                    [0x02, 0x01, 0x01], DER.tlv(0x04, Array(d)),
                    DER.tlv(0xA0, [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]),
                    DER.tlv(0xA1, DER.bitString([0x04] + Array(x) + Array(y))))
            }
            let pointer: OpaquePointer? = der.withUnsafeBytes { buffer in
                var cursor: UnsafePointer<UInt8>? = buffer.bytePointer
                return d2i_PrivateKey(EVP_PKEY_EC, nil, &cursor, buffer.count)
            }
            guard let pointer else {
                OpenSSL.clearErrors()
                throw CryptoError(.invalidKey, "OpenSSL refused the P-256 private key")
            }
            key = EVPKey(taking: pointer)
            self.scalar = scalar
            publicKey = try PublicKey(x: x, y: y)
        }

        /// The 32-byte scalar (keep it secret).
        public var rawRepresentation: SecureBytes { scalar }

        /// An ECDSA-SHA-256 signature of `message`, raw `r ‖ s` (64 bytes).
        public func signature(for message: some ContiguousBytes) throws -> Data {
            guard let context = EVP_MD_CTX_new() else { throw OpenSSL.failure("EVP_MD_CTX_new") }
            defer { EVP_MD_CTX_free(context) }
            try OpenSSL.check(EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key.pointer), "EVP_DigestSignInit")
            var length = 80
            var der = Data(count: length)
            try message.withUnsafeBytes { message in
                try der.withUnsafeMutableBytes { output in
                    try OpenSSL.check(
                        EVP_DigestSign(context, output.mutableBytePointer, &length, message.bytePointer, message.count),
                        "EVP_DigestSign")
                }
            }
            guard let raw = Self.rawSignature(fromDER: der.prefix(length)) else {
                throw OpenSSL.failure("ECDSA signature encoding")
            }
            return raw
        }

        /// `r ‖ s` from a DER ECDSA-Sig-Value (two positive INTEGERs of at most 33 bytes).
        static func rawSignature(fromDER der: Data) -> Data? {
            let bytes = [UInt8](der)
            guard bytes.count >= 8, bytes[0] == 0x30, Int(bytes[1]) == bytes.count - 2 else { return nil }
            var index = 2
            var raw = Data()
            for _ in 0..<2 {
                guard index + 2 <= bytes.count, bytes[index] == 0x02 else { return nil }
                let count = Int(bytes[index + 1])
                guard count >= 1, count <= 33, index + 2 + count <= bytes.count else { return nil }
                let magnitude = bytes[(index + 2)..<(index + 2 + count)].drop { $0 == 0 }
                guard magnitude.count <= 32 else { return nil }
                raw.append(Data(repeating: 0, count: 32 - magnitude.count))
                raw.append(contentsOf: magnitude)
                index += 2 + count
            }
            return index == bytes.count ? raw : nil
        }
    }
}
