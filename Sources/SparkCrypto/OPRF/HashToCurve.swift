public import Foundation

/// Hashing to the NIST curves (RFC 9380): `P256_XMD:SHA-256_SSWU_RO_` and
/// `P384_XMD:SHA-384_SSWU_RO_`, the random-oracle encodings the OPRF's `HashToGroup` uses.
///
/// Three steps, each from the RFC: `expand_message_xmd` (§5.3.1) stretches the message under a
/// domain-separation tag; `hash_to_field` (§5.2) reads `L` bytes per field element and reduces
/// them modulo p; the simplified SWU map (§6.6.2) sends each of two elements to a point, and
/// their sum is the result (the cofactor is one).
///
/// - Note: the map branches on whether a square root exists. On the device its input is the
///   PBKDF2-stretched passcode, so a local timing observer learns at most one bit per hashed
///   value, of a value that is itself 600,000 iterations from the passcode; the domain never
///   hashes secrets to the curve.
public enum HashToCurve {
    /// A hash-to-curve suite.
    public struct Suite: Sendable, Hashable, CustomStringConvertible {
        /// RFC 9380's suite id, e.g. `P256_XMD:SHA-256_SSWU_RO_`.
        public let identifier: String
        /// The hash of `expand_message_xmd`.
        public let hash: HashFunction
        /// Bytes read per field element: ceil((ceil(log2(p)) + k) / 8) with k = 128 or 192.
        public let fieldLength: Int
        let curve: PrimeCurve

        /// `P256_XMD:SHA-256_SSWU_RO_` (RFC 9380 §8.2).
        public static let p256 = Suite(identifier: "P256_XMD:SHA-256_SSWU_RO_", hash: .sha256, fieldLength: 48, curve: .p256)
        /// `P384_XMD:SHA-384_SSWU_RO_` (RFC 9380 §8.3).
        public static let p384 = Suite(identifier: "P384_XMD:SHA-384_SSWU_RO_", hash: .sha384, fieldLength: 72, curve: .p384)

        /// The suite id.
        public var description: String { identifier }
        /// Suites are equal when their ids are.
        public static func == (lhs: Suite, rhs: Suite) -> Bool { lhs.identifier == rhs.identifier }
        /// Hashes the id.
        public func hash(into hasher: inout Hasher) { hasher.combine(identifier) }
    }

    /// `expand_message_xmd(msg, DST, len_in_bytes)` (RFC 9380 §5.3.1).
    ///
    /// A tag longer than 255 bytes is first hashed, as §5.3.3 says.
    ///
    /// - Throws: ``CryptoError/Code/invalidParameter`` when `length` is 0 or exceeds 255 hash
    ///   blocks or 65,535 bytes.
    public static func expandMessageXMD(
        _ message: some ContiguousBytes, domain: some ContiguousBytes, length: Int, hash: HashFunction
    ) throws -> SecureBytes {
        var tag = domain.withUnsafeBytes { Data($0) }
        // §5.3.3: a tag longer than 255 bytes is replaced by its hash.
        if tag.count > 255 { tag = hash.hash(Data("H2C-OVERSIZE-DST-".utf8) + tag) }
        let blocks = (length + hash.digestCount - 1) / hash.digestCount
        guard length > 0, blocks <= 255, length <= 65_535 else {
            throw CryptoError(.invalidParameter, "expand_message_xmd cannot produce \(length) bytes with \(hash)")
        }
        let taggedDomain = tag + [UInt8(tag.count)]
        var prime = SecureBytes(zeroes: hash.blockCount)
        prime.append(message.withUnsafeBytes { SecureBytes($0) })
        prime.append([UInt8(length >> 8), UInt8(length & 0xff), 0] + taggedDomain)
        let first = SecureBytes(prime.withUnsafeBytes { hash.hash($0) })
        var output = SecureBytes(zeroes: 0)
        var previous = SecureBytes(zeroes: hash.digestCount)
        for index in 1...blocks {
            var input = SecureBytes(zeroes: 0)
            let mixed = first.withUnsafeBytes { b0 in
                previous.withUnsafeBytes { last in SecureBytes(zip(b0, last).map { $0 ^ $1 }) }
            }
            input.append(index == 1 ? first : mixed)
            input.append([UInt8(index)] + taggedDomain)
            previous = SecureBytes(input.withUnsafeBytes { hash.hash($0) })
            output.append(previous)
        }
        return output.slice(0..<length)
    }

    /// `hash_to_field(msg, count)` (RFC 9380 §5.2) for this suite's field: each element as
    /// big-endian bytes of the field's length.
    public static func hashToField(
        _ message: some ContiguousBytes, domain: some ContiguousBytes, count: Int, suite: Suite
    ) throws -> [Data] {
        try suite.curve.compute { scratch in
            try fieldElements(
                message, domain: domain, count: count, length: suite.fieldLength, hash: suite.hash, scratch: scratch
            )
            .map { try scratch.bytes($0, count: suite.curve.fieldByteCount) }
        }
    }

    /// `hash_to_curve(msg)`: the affine coordinates of the point, big-endian.
    public static func hash(_ message: some ContiguousBytes, domain: some ContiguousBytes, suite: Suite) throws -> (
        x: Data, y: Data
    ) {
        try suite.curve.compute { scratch in
            let point = try hashToCurve(message, domain: domain, suite: suite, scratch: scratch)
            let (x, y) = try scratch.coordinates(point)
            return (
                try scratch.bytes(x, count: suite.curve.fieldByteCount), try scratch.bytes(y, count: suite.curve.fieldByteCount)
            )
        }
    }

    // MARK: Internals

    /// `hash_to_curve` as a point in `scratch`.
    static func hashToCurve(
        _ message: some ContiguousBytes, domain: some ContiguousBytes, suite: Suite, scratch: ECScratch
    ) throws -> OpaquePointer {
        let u = try fieldElements(
            message, domain: domain, count: 2, length: suite.fieldLength, hash: suite.hash, scratch: scratch)
        return try scratch.add(try mapToCurve(u[0], scratch: scratch), try mapToCurve(u[1], scratch: scratch))
    }

    /// `hash_to_field` with modulus p, or (for the OPRF's HashToScalar) any odd modulus.
    static func fieldElements(
        _ message: some ContiguousBytes, domain: some ContiguousBytes, count: Int, length: Int, hash: HashFunction,
        scratch: ECScratch, modulus: OpaquePointer? = nil
    ) throws -> [OpaquePointer] {
        let uniform = try expandMessageXMD(message, domain: domain, length: count * length, hash: hash)
        return try (0..<count).map { index in
            let slice = uniform.slice(index * length..<(index + 1) * length)
            let value = try slice.withUnsafeBytes { try scratch.number($0) }
            return try scratch.reduce(value, modulus ?? scratch.curve.p)
        }
    }

    /// The simplified SWU map for A ≠ 0, B ≠ 0 (RFC 9380 §6.6.2), with p ≡ 3 mod 4 square roots.
    static func mapToCurve(_ u: OpaquePointer, scratch s: ECScratch) throws -> OpaquePointer {
        let curve = s.curve
        let p = curve.p
        // tv1 = inv0(Z² u⁴ + Z u²)
        let u2 = try s.multiply(u, u, p)
        let zu2 = try s.multiply(curve.z, u2, p)
        let denominator = try s.add(try s.multiply(zu2, zu2, p), zu2, p)
        let tv1 = try s.power(denominator, curve.fieldInverseExponent, p)
        // x1 = (-B / A)(1 + tv1), or B / (Z A) when tv1 = 0
        let x1 = s.isZero(tv1) ? curve.bOverZA : try s.multiply(curve.minusBOverA, try s.add(try s.number(1), tv1, p), p)
        let gx1 = try curveEquation(x1, s)
        // With p ≡ 3 mod 4, g^((p+1)/4) is a square root of g exactly when g is a square: one
        // exponentiation both tests and takes the root.
        let root1 = try s.power(gx1, curve.sqrtExponent, p)
        var x = x1
        var y = root1
        if !s.equal(try s.multiply(root1, root1, p), gx1) {
            x = try s.multiply(zu2, x1, p)
            y = try s.power(try curveEquation(x, s), curve.sqrtExponent, p)
        }
        if s.isOdd(u) != s.isOdd(y) { y = try s.subtract(try s.number(0), y, p) }
        return try s.point(x: x, y: y)
    }

    /// x³ + A x + B.
    private static func curveEquation(_ x: OpaquePointer, _ s: ECScratch) throws -> OpaquePointer {
        let p = s.curve.p
        let x3 = try s.multiply(try s.multiply(x, x, p), x, p)
        return try s.add(try s.add(x3, try s.multiply(s.curve.a, x, p), p), s.curve.b, p)
    }

}
