public import Foundation

/// ECVRF-P256-SHA256-TAI (RFC 9381 §5.5, suite string `0x01`), the verifiable random function
/// of key transparency's `KT_128_SHA256_P256` suite: the log proves that a label's index is the
/// VRF output of the user id under its key, and anyone with the public key checks the proof, yet
/// nobody without the private key can tell from an index which user it belongs to.
///
/// Built on OpenSSL's P-256 arithmetic (``PrimeCurve``): encode-to-curve by try-and-increment,
/// nonces by RFC 6979 (HMAC-SHA-256), proofs of 81 bytes (`Gamma ‖ c ‖ s`), outputs of 32.
/// Checked against RFC 9381 Appendix B.1's vectors.
///
/// ```swift
/// let key = try ECVRF.PrivateKey()
/// let (proof, index) = try key.prove(Data("alice".utf8))
/// let verified = try key.publicKey.verify(proof, for: Data("alice".utf8))   // == index
/// ```
public enum ECVRF {
    /// The suite string of ECVRF-P256-SHA256-TAI.
    static let suite: UInt8 = 0x01
    /// Bytes of a proof: a compressed point, a 16-byte challenge and a 32-byte scalar.
    public static let proofByteCount = 33 + 16 + 32
    /// Bytes of an output (SHA-256).
    public static let outputByteCount = 32

    /// A VRF private key: a P-256 scalar.
    public struct PrivateKey: Sendable {
        let secret: SecureBytes
        /// The public key.
        public let publicKey: PublicKey

        /// A fresh random key.
        public init() throws {
            let (secret, point) = try PrimeCurve.p256.compute { scratch in
                let x = try scratch.randomScalar()
                return (try scratch.secretBytes(x, count: 32), try scratch.encode(try scratch.multiplyGenerator(x)))
            }
            self.secret = secret
            publicKey = PublicKey(compressed: point)
        }

        /// A key from its 32-byte big-endian scalar (1 … n-1).
        ///
        /// - Throws: ``CryptoError/Code/invalidKey`` for another length or a scalar out of range.
        public init(rawRepresentation: some ContiguousBytes) throws {
            let bytes = SecureBytes(rawRepresentation)
            guard bytes.count == 32 else { throw CryptoError(.invalidKey, "a VRF private key is 32 bytes, got \(bytes.count)") }
            let point = try PrimeCurve.p256.compute { scratch -> Data in
                let x = try bytes.withUnsafeBytes { try scratch.number($0) }
                guard !scratch.isZero(x), scratch.isReduced(x, scratch.curve.order) else {
                    throw CryptoError(.invalidKey, "a VRF private key is a scalar from 1 to n-1")
                }
                return try scratch.encode(try scratch.multiplyGenerator(x))
            }
            secret = bytes
            publicKey = PublicKey(compressed: point)
        }

        /// The 32-byte scalar (keep it secret).
        public var rawRepresentation: SecureBytes { secret }

        /// The proof that `output` is the VRF of `alpha` (RFC 9381 §5.1), and that output.
        public func prove(_ alpha: some ContiguousBytes) throws -> (proof: Data, output: Data) {
            let alpha = alpha.withUnsafeBytes { Data($0) }
            let proof = try PrimeCurve.p256.compute { scratch -> Data in
                let order = scratch.curve.order
                let x = try secret.withUnsafeBytes { try scratch.number($0) }
                let h = try ECVRF.encodeToCurve(publicKey.compressed, alpha, scratch)
                let hString = try scratch.encode(h)
                let gamma = try scratch.multiply(h, by: x)
                let k = try ECVRF.nonce(secret: secret, hString: hString, scratch)
                let u = try scratch.multiplyGenerator(k)
                let v = try scratch.multiply(h, by: k)
                let c = ECVRF.challenge(
                    [publicKey.compressed, hString, try scratch.encode(gamma), try scratch.encode(u), try scratch.encode(v)])
                let s = try scratch.add(k, try scratch.multiply(try scratch.number(c), x, order), order)
                return try scratch.encode(gamma) + c + (try scratch.bytes(s, count: 32))
            }
            return (proof, try ECVRF.output(of: proof))
        }
    }

    /// A VRF public key: a compressed P-256 point.
    public struct PublicKey: Sendable, Hashable {
        /// The SEC1 compressed point (33 bytes).
        public let compressed: Data

        init(compressed: Data) { self.compressed = compressed }

        /// A key from its 33-byte compressed point, checked to be on the curve and not the
        /// identity (RFC 9381 §5.4.5's validation; P-256 has no small subgroup).
        public init(compressedRepresentation: some ContiguousBytes) throws {
            let data = compressedRepresentation.withUnsafeBytes { Data($0) }
            _ = try PrimeCurve.p256.compute { scratch in
                do {
                    return try scratch.decode(data)
                } catch {
                    throw CryptoError(.invalidKey, "a VRF public key is a compressed P-256 point")
                }
            }
            compressed = data
        }

        /// Verifies `proof` for `alpha` (RFC 9381 §5.3) and returns the VRF output.
        ///
        /// - Throws: ``CryptoError/Code/invalidSignature`` when the proof does not verify,
        ///   ``CryptoError/Code/malformedInput`` when it is not a proof at all.
        public func verify(_ proof: Data, for alpha: some ContiguousBytes) throws -> Data {
            let alpha = alpha.withUnsafeBytes { Data($0) }
            let valid = try PrimeCurve.p256.compute { scratch -> Bool in
                let (gamma, cBytes, s) = try ECVRF.decodeProof(proof, scratch)
                let order = scratch.curve.order
                let y = try scratch.decode(compressed)
                let h = try ECVRF.encodeToCurve(compressed, alpha, scratch)
                let c = try scratch.number(cBytes)
                let minusC = try scratch.subtract(try scratch.number(0), c, order)
                let u = try scratch.add(try scratch.multiplyGenerator(s), try scratch.multiply(y, by: minusC))
                let v = try scratch.add(try scratch.multiply(h, by: s), try scratch.multiply(gamma, by: minusC))
                guard !scratch.isIdentity(u), !scratch.isIdentity(v) else { return false }
                let expected = ECVRF.challenge(
                    [compressed, try scratch.encode(h), try scratch.encode(gamma), try scratch.encode(u), try scratch.encode(v)])
                return expected == cBytes
            }
            guard valid else { throw CryptoError(.invalidSignature, "the VRF proof does not verify") }
            return try ECVRF.output(of: proof)
        }
    }

    /// The output a proof commits to (RFC 9381 §5.2, `ECVRF_proof_to_hash`), without verifying
    /// it: use ``PublicKey/verify(_:for:)``.
    static func output(of proof: Data) throws -> Data {
        try PrimeCurve.p256.compute { scratch in
            let (gamma, _, _) = try decodeProof(proof, scratch)
            // The cofactor of P-256 is 1: cofactor * Gamma is Gamma.
            return SHA256.hash(Data([suite, 0x03]) + (try scratch.encode(gamma)) + Data([0x00]))
        }
    }

    /// `Gamma`, `c` (16 bytes) and `s` from a proof, each checked (§5.4.4).
    static func decodeProof(_ proof: Data, _ scratch: ECScratch) throws -> (OpaquePointer, Data, OpaquePointer) {
        guard proof.count == proofByteCount else {
            throw CryptoError(.malformedInput, "a VRF proof is \(proofByteCount) bytes, got \(proof.count)")
        }
        let bytes = Data(proof)
        let gamma: OpaquePointer
        do {
            gamma = try scratch.decode(bytes.prefix(33))
        } catch {
            throw CryptoError(.malformedInput, "the VRF proof's Gamma is not a point on the curve")
        }
        let s = try scratch.number(bytes.suffix(32))
        guard scratch.isReduced(s, scratch.curve.order) else {
            throw CryptoError(.malformedInput, "the VRF proof's s is not below the group order")
        }
        return (gamma, Data(bytes.dropFirst(33).prefix(16)), s)
    }

    /// `ECVRF_encode_to_curve_try_and_increment` (§5.4.1.1): the first counter whose hash is the
    /// x of a point (taken with an even y, the `0x02` tag).
    static func encodeToCurve(_ publicKey: Data, _ alpha: Data, _ scratch: ECScratch) throws -> OpaquePointer {
        for counter in 0...255 {
            let hash = SHA256.hash(Data([suite, 0x01]) + publicKey + alpha + Data([UInt8(counter), 0x00]))
            if let point = try? scratch.decode(Data([0x02]) + hash) { return point }
        }
        // Each try succeeds with probability about 1/2: 256 failures do not happen.
        throw CryptoError(.invalidParameter, "no counter encodes this input to the curve")
    }

    /// `ECVRF_challenge_generation` (§5.4.3): the first 16 bytes of the hash of the points.
    static func challenge(_ points: [Data]) -> Data {
        var input = Data([suite, 0x02])
        for point in points { input.append(point) }
        input.append(0x00)
        return SHA256.hash(input).prefix(16)
    }

    /// `ECVRF_nonce_generation_RFC6979` (§5.4.2.1): RFC 6979 §3.2 with HMAC-SHA-256, the message
    /// being `h_string`.
    static func nonce(secret: SecureBytes, hString: Data, _ scratch: ECScratch) throws -> OpaquePointer {
        let order = scratch.curve.order
        let h1 = try scratch.reduce(try scratch.number(SHA256.hash(hString)), order)
        let message = try scratch.bytes(h1, count: 32)
        let x = secret.withUnsafeBytes { Data($0) }
        func mac(_ key: Data, _ data: Data) -> Data { HMAC.authenticationCode(for: data, using: key, hash: .sha256) }
        var v = Data(repeating: 0x01, count: 32)
        var k = Data(repeating: 0x00, count: 32)
        k = mac(k, v + [0x00] + x + message)
        v = mac(k, v)
        k = mac(k, v + [0x01] + x + message)
        v = mac(k, v)
        while true {
            v = mac(k, v)
            let candidate = try scratch.number(v)
            if !scratch.isZero(candidate), scratch.isReduced(candidate, order) { return candidate }
            k = mac(k, v + [0x00])
            v = mac(k, v)
        }
    }
}
