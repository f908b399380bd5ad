internal import COpenSSL
import Foundation

/// A NIST prime-order curve (P-256, P-384) on OpenSSL's `EC_GROUP`, with the constants that
/// hash-to-curve (RFC 9380) and the OPRF (RFC 9497) need. Arithmetic happens in an
/// ``ECScratch``, which owns every temporary.
final class PrimeCurve: @unchecked Sendable {
    // @unchecked Sendable: the group and the numbers below are written once in init and only
    // read afterwards; OpenSSL's EC_GROUP and BIGNUM are safe for concurrent read-only use.

    /// `EC_GROUP *`, never freed (the curves are process-wide constants).
    let group: OpaquePointer
    /// The field prime p, the coefficients A and B, and the group order n.
    let p: OpaquePointer
    let a: OpaquePointer
    let b: OpaquePointer
    let order: OpaquePointer
    /// RFC 9380's Z for the simplified SWU map, as an element of the field (Z mod p).
    let z: OpaquePointer
    /// (p + 1) / 4, the square-root exponent (both curves have p ≡ 3 mod 4), and p - 2,
    /// Fermat's inverse.
    let sqrtExponent: OpaquePointer
    let fieldInverseExponent: OpaquePointer
    /// n - 2, the exponent that inverts a scalar.
    let scalarInverseExponent: OpaquePointer
    /// The simplified SWU map's constants: -B / A, and B / (Z A) for its exceptional case.
    let minusBOverA: OpaquePointer
    let bOverZA: OpaquePointer
    /// Bytes of a field element and of a scalar (32 for P-256, 48 for P-384).
    let fieldByteCount: Int
    let scalarByteCount: Int
    /// A SEC1 compressed point: one tag byte and x.
    var elementByteCount: Int { fieldByteCount + 1 }

    /// NIST P-256 (secp256r1), Z = -10.
    static let p256 = PrimeCurve(nid: NID_X9_62_prime256v1, z: 10)
    /// NIST P-384 (secp384r1), Z = -12.
    static let p384 = PrimeCurve(nid: NID_secp384r1, z: 12)

    /// Loads the curve; `z` is the magnitude of RFC 9380's (negative) Z. A failure here is an
    /// OpenSSL build without the NIST curves, which the project cannot run without.
    private init(nid: Int32, z negatedZ: UInt) {
        guard let group = EC_GROUP_new_by_curve_name(nid), let context = BN_CTX_new() else {
            fatalError("OpenSSL has no curve \(nid): \(OpenSSL.drainErrors())")
        }
        defer { BN_CTX_free(context) }
        func number() -> OpaquePointer {
            guard let number = BN_new() else { fatalError("BN_new failed") }
            return number
        }
        self.group = group
        (p, a, b, order, z) = (number(), number(), number(), number(), number())
        (sqrtExponent, fieldInverseExponent, scalarInverseExponent) = (number(), number(), number())
        (minusBOverA, bOverZA) = (number(), number())
        guard EC_GROUP_get_curve(group, p, a, b, context) == 1, let order0 = EC_GROUP_get0_order(group),
            BN_copy(order, order0) != nil,
            BN_set_word(z, UInt(negatedZ)) == 1, BN_sub(z, p, z) == 1,
            BN_copy(sqrtExponent, p) != nil, BN_add_word(sqrtExponent, 1) == 1, BN_rshift(sqrtExponent, sqrtExponent, 2) == 1,
            BN_copy(fieldInverseExponent, p) != nil, BN_sub_word(fieldInverseExponent, 2) == 1,
            BN_copy(scalarInverseExponent, order) != nil, BN_sub_word(scalarInverseExponent, 2) == 1
        else { fatalError("reading curve \(nid) failed: \(OpenSSL.drainErrors())") }
        // Public constants, so the plain (not constant-time) inverse is fine here.
        let scratch = number()
        defer { BN_free(scratch) }
        guard BN_mod_inverse(scratch, a, p, context) != nil, BN_mod_mul(minusBOverA, b, scratch, p, context) == 1,
            BN_sub(minusBOverA, p, minusBOverA) == 1,
            BN_mod_mul(scratch, z, a, p, context) == 1, BN_mod_inverse(scratch, scratch, p, context) != nil,
            BN_mod_mul(bOverZA, b, scratch, p, context) == 1
        else { fatalError("the SWU constants of curve \(nid) failed: \(OpenSSL.drainErrors())") }
        fieldByteCount = (Int(BN_num_bits(p)) + 7) / 8
        scalarByteCount = (Int(BN_num_bits(order)) + 7) / 8
    }

    /// Runs `body` with a scratch space whose numbers and points are freed (and wiped) when it
    /// returns.
    func compute<T>(_ body: (ECScratch) throws -> T) throws -> T {
        let scratch = try ECScratch(curve: self)
        return try withExtendedLifetime(scratch) { try body(scratch) }
    }
}

/// Temporaries for one computation on a ``PrimeCurve``: every `BIGNUM` comes from one `BN_CTX`
/// and every `EC_POINT` is tracked, and all are wiped and freed in `deinit`.
final class ECScratch {
    let curve: PrimeCurve
    /// `BN_CTX *`, started once; `BN_CTX_free` clears and frees every number taken from it.
    private let context: OpaquePointer
    private var points: [OpaquePointer] = []

    init(curve: PrimeCurve) throws {
        self.curve = curve
        guard let context = BN_CTX_new() else { throw OpenSSL.failure("BN_CTX_new") }
        BN_CTX_start(context)
        self.context = context
    }

    deinit {
        for point in points { EC_POINT_clear_free(point) }
        BN_CTX_end(context)
        BN_CTX_free(context)
    }

    // MARK: Numbers

    /// A new number, zero.
    func number() throws -> OpaquePointer {
        // > BN_CTX_get() returns NULL on error; once it has failed, later calls fail too.
        guard let number = BN_CTX_get(context) else { throw OpenSSL.failure("BN_CTX_get") }
        BN_zero_ex(number)
        return number
    }

    /// A number from big-endian bytes.
    func number(_ bytes: some ContiguousBytes) throws -> OpaquePointer {
        let number = try number()
        let result = bytes.withUnsafeBytes { BN_bin2bn($0.bytePointer, Int32($0.count), number) }
        guard result != nil else { throw OpenSSL.failure("BN_bin2bn") }
        return number
    }

    /// A number from a machine word.
    func number(_ word: UInt) throws -> OpaquePointer {
        let number = try number()
        try OpenSSL.check(BN_set_word(number, word), "BN_set_word")
        return number
    }

    /// `value` as exactly `count` big-endian bytes (it must fit).
    func bytes(_ value: OpaquePointer, count: Int) throws -> Data {
        var data = Data(count: count)
        let written = data.withUnsafeMutableBytes { BN_bn2binpad(value, $0.mutableBytePointer, Int32(count)) }
        guard written == Int32(count) else { throw OpenSSL.failure("BN_bn2binpad") }
        return data
    }

    /// `value` as secret big-endian bytes.
    func secretBytes(_ value: OpaquePointer, count: Int) throws -> SecureBytes {
        try SecureBytes(count: count) { output in
            guard BN_bn2binpad(value, output.mutableBytePointer, Int32(count)) == Int32(count) else {
                throw OpenSSL.failure("BN_bn2binpad")
            }
        }
    }

    /// `value mod modulus`, non-negative.
    func reduce(_ value: OpaquePointer, _ modulus: OpaquePointer) throws -> OpaquePointer {
        let result = try number()
        try OpenSSL.check(BN_nnmod(result, value, modulus, context), "BN_nnmod")
        return result
    }

    func add(_ x: OpaquePointer, _ y: OpaquePointer, _ modulus: OpaquePointer) throws -> OpaquePointer {
        let result = try number()
        try OpenSSL.check(BN_mod_add(result, x, y, modulus, context), "BN_mod_add")
        return result
    }

    func subtract(_ x: OpaquePointer, _ y: OpaquePointer, _ modulus: OpaquePointer) throws -> OpaquePointer {
        let result = try number()
        try OpenSSL.check(BN_mod_sub(result, x, y, modulus, context), "BN_mod_sub")
        return result
    }

    func multiply(_ x: OpaquePointer, _ y: OpaquePointer, _ modulus: OpaquePointer) throws -> OpaquePointer {
        let result = try number()
        try OpenSSL.check(BN_mod_mul(result, x, y, modulus, context), "BN_mod_mul")
        return result
    }

    /// `base ^ exponent mod modulus` with OpenSSL's constant-time Montgomery ladder (the
    /// modulus is odd for both curves' p and n).
    func power(_ base: OpaquePointer, _ exponent: OpaquePointer, _ modulus: OpaquePointer) throws -> OpaquePointer {
        let result = try number()
        try OpenSSL.check(BN_mod_exp_mont_consttime(result, base, exponent, modulus, context, nil), "BN_mod_exp_mont_consttime")
        return result
    }

    /// The scalar inverse, by Fermat (constant time; the blind is secret).
    func invertScalar(_ x: OpaquePointer) throws -> OpaquePointer {
        try power(x, curve.scalarInverseExponent, curve.order)
    }

    /// A uniformly random scalar in [1, n - 1].
    func randomScalar() throws -> OpaquePointer {
        let scalar = try number()
        repeat {
            try OpenSSL.check(BN_priv_rand_range(scalar, curve.order), "BN_priv_rand_range")
        } while BN_is_zero(scalar) == 1
        return scalar
    }

    func isZero(_ x: OpaquePointer) -> Bool { BN_is_zero(x) == 1 }
    func isOdd(_ x: OpaquePointer) -> Bool { BN_is_odd(x) == 1 }
    func equal(_ x: OpaquePointer, _ y: OpaquePointer) -> Bool { BN_cmp(x, y) == 0 }
    /// Whether `x` is in [0, modulus).
    func isReduced(_ x: OpaquePointer, _ modulus: OpaquePointer) -> Bool { BN_cmp(x, modulus) < 0 }

    // MARK: Points

    /// A new point, the identity.
    func point() throws -> OpaquePointer {
        guard let point = EC_POINT_new(curve.group) else { throw OpenSSL.failure("EC_POINT_new") }
        points.append(point)
        return point
    }

    /// The point (x, y); refused when it is not on the curve.
    func point(x: OpaquePointer, y: OpaquePointer) throws -> OpaquePointer {
        let point = try point()
        guard EC_POINT_set_affine_coordinates(curve.group, point, x, y, context) == 1 else {
            OpenSSL.clearErrors()
            throw CryptoError(.invalidParameter, "the point is not on the curve")
        }
        return point
    }

    /// `scalar · G`.
    func multiplyGenerator(_ scalar: OpaquePointer) throws -> OpaquePointer {
        let result = try point()
        try OpenSSL.check(EC_POINT_mul(curve.group, result, scalar, nil, nil, context), "EC_POINT_mul")
        return result
    }

    /// `scalar · point`.
    func multiply(_ point: OpaquePointer, by scalar: OpaquePointer) throws -> OpaquePointer {
        let result = try self.point()
        try OpenSSL.check(EC_POINT_mul(curve.group, result, nil, point, scalar, context), "EC_POINT_mul")
        return result
    }

    func add(_ first: OpaquePointer, _ second: OpaquePointer) throws -> OpaquePointer {
        let result = try point()
        try OpenSSL.check(EC_POINT_add(curve.group, result, first, second, context), "EC_POINT_add")
        return result
    }

    func isIdentity(_ point: OpaquePointer) -> Bool { EC_POINT_is_at_infinity(curve.group, point) == 1 }

    /// The affine coordinates of a point other than the identity.
    func coordinates(_ point: OpaquePointer) throws -> (x: OpaquePointer, y: OpaquePointer) {
        let (x, y) = (try number(), try number())
        try OpenSSL.check(EC_POINT_get_affine_coordinates(curve.group, point, x, y, context), "EC_POINT_get_affine_coordinates")
        return (x, y)
    }

    /// SEC1 compressed encoding (RFC 9497's SerializeElement). The identity has none.
    func encode(_ point: OpaquePointer) throws -> Data {
        guard !isIdentity(point) else { throw CryptoError(.invalidParameter, "the identity element cannot be serialized") }
        var data = Data(count: curve.elementByteCount)
        let written = data.withUnsafeMutableBytes {
            EC_POINT_point2oct(curve.group, point, POINT_CONVERSION_COMPRESSED, $0.mutableBytePointer, $0.count, context)
        }
        guard written == curve.elementByteCount else { throw OpenSSL.failure("EC_POINT_point2oct") }
        return data
    }

    /// RFC 9497's DeserializeElement: exactly a compressed point on the curve, not the identity.
    func decode(_ data: Data) throws -> OpaquePointer {
        guard data.count == curve.elementByteCount, data.first == 0x02 || data.first == 0x03 else {
            throw CryptoError(
                .malformedInput, "an element is a \(curve.elementByteCount)-byte compressed point, got \(data.count) bytes")
        }
        let point = try point()
        let result = data.withUnsafeBytes { EC_POINT_oct2point(curve.group, point, $0.bytePointer, $0.count, context) }
        guard result == 1, !isIdentity(point) else {
            OpenSSL.clearErrors()
            throw CryptoError(.malformedInput, "the element is not a point on the curve")
        }
        return point
    }
}
