internal import COpenSSL
public import Foundation

/// SHAKE128 and SHAKE256 (FIPS 202), OpenSSL's: X-Wing's HPKE key derivation reads SHAKE256,
/// and the ML-KEM tests read C2SP's accumulated vectors from SHAKE128 streams.
///
/// OpenSSL 3.0 squeezes a XOF once: ``finalize(count:)`` returns the whole output at once.
public struct SHAKE: ~Copyable {
    /// The two functions.
    public enum Function: Sendable {
        /// SHAKE128.
        case shake128
        /// SHAKE256.
        case shake256

        var name: String { self == .shake128 ? "SHAKE128" : "SHAKE256" }
    }

    private let context: OpaquePointer

    /// A fresh instance of `function` with nothing absorbed.
    public init(_ function: Function) throws {
        guard let context = EVP_MD_CTX_new() else { throw OpenSSL.failure("EVP_MD_CTX_new") }
        guard let md = EVP_MD_fetch(nil, function.name, nil) else {
            EVP_MD_CTX_free(context)
            throw OpenSSL.failure("EVP_MD_fetch(\(function.name))")
        }
        defer { EVP_MD_free(md) }
        guard EVP_DigestInit_ex2(context, md, nil) == 1 else {
            EVP_MD_CTX_free(context)
            throw OpenSSL.failure("EVP_DigestInit_ex2")
        }
        self.context = context
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Absorbs `bytes`.
    public mutating func update(_ bytes: some ContiguousBytes) throws {
        try bytes.withUnsafeBytes { buffer in
            try OpenSSL.check(EVP_DigestUpdate(context, buffer.bytePointer, buffer.count), "EVP_DigestUpdate")
        }
    }

    /// The first `count` bytes of the output; the instance is spent.
    public consuming func finalize(count: Int) throws -> SecureBytes {
        try SecureBytes(count: count) { output in
            guard count > 0 else { return }
            try OpenSSL.check(EVP_DigestFinalXOF(context, output.mutableBytePointer, count), "EVP_DigestFinalXOF")
        }
    }

    /// `count` bytes of `function` over `bytes`.
    public static func hash(_ function: Function, _ bytes: some ContiguousBytes, count: Int) throws -> SecureBytes {
        var shake = try SHAKE(function)
        try shake.update(bytes)
        return try shake.finalize(count: count)
    }
}
