internal import COpenSSL
internal import COpenSSLRuntime
public import Foundation

/// The SHA-2 hash functions SparkCrypto uses (FIPS 180-4).
public enum HashFunction: Sendable, Hashable, CustomStringConvertible {
    /// SHA-256, 32-byte digests.
    case sha256
    /// SHA-384, 48-byte digests (the OPRF's P384-SHA384 suite).
    case sha384
    /// SHA-512, 64-byte digests.
    case sha512

    /// The digest length in bytes.
    public var digestCount: Int {
        switch self {
        case .sha256: 32
        case .sha384: 48
        case .sha512: 64
        }
    }

    /// The input block length in bytes (`s_in_bytes` in RFC 9380 §5.3.1).
    public var blockCount: Int {
        switch self {
        case .sha256: 64
        case .sha384, .sha512: 128
        }
    }

    /// `SHA-256` or `SHA-512`.
    public var description: String {
        switch self {
        case .sha256: "SHA-256"
        case .sha384: "SHA-384"
        case .sha512: "SHA-512"
        }
    }

    /// OpenSSL's implicitly fetched digest. `EVP_sha256()` returns a static object that is never
    /// freed, so it can be shared freely.
    var evp: OpaquePointer {
        switch self {
        case .sha256: EVP_sha256()
        case .sha384: EVP_sha384()
        case .sha512: EVP_sha512()
        }
    }

    /// The digest's index in `spark_hmac` (COpenSSLRuntime).
    var runtimeIndex: Int32 {
        switch self {
        case .sha256: 0
        case .sha384: 1
        case .sha512: 2
        }
    }

    /// Hashes `data` in one call.
    public func hash(_ data: some ContiguousBytes) -> Data {
        var digest = Data(count: digestCount)
        let result = data.withUnsafeBytes { input in
            digest.withUnsafeMutableBytes { output in
                // SHA-256, the most frequent by far, without a context made and a digest
                // resolved on every call.
                self == .sha256
                    ? spark_sha256(input.baseAddress, input.count, output.mutableBytePointer)
                    : EVP_Digest(input.bytePointer, input.count, output.mutableBytePointer, nil, evp, nil)
            }
        }
        // A one-shot digest of in-memory data only fails on allocation failure.
        precondition(result == 1, "EVP_Digest failed: \(OpenSSL.drainErrors())")
        return digest
    }
}

/// SHA-256 (FIPS 180-4).
public enum SHA256 {
    /// Returns the 32-byte SHA-256 digest of `data`.
    public static func hash(_ data: some ContiguousBytes) -> Data { HashFunction.sha256.hash(data) }
}

/// SHA-512 (FIPS 180-4).
public enum SHA512 {
    /// Returns the 64-byte SHA-512 digest of `data`.
    public static func hash(_ data: some ContiguousBytes) -> Data { HashFunction.sha512.hash(data) }
}

/// A digest computed over data that arrives in pieces (a file streamed in chunks), in constant
/// memory: ``update(_:)`` with each piece in order, then ``finalize()`` once.
public final class IncrementalDigest {
    private let context: OpaquePointer
    private var finished = false
    /// The function's digest length in bytes.
    public let digestCount: Int

    /// A digest of `function`, over nothing yet.
    public init(_ function: HashFunction) {
        // Allocation and initialisation of a digest context fail only when memory does.
        guard let context = EVP_MD_CTX_new() else { preconditionFailure("EVP_MD_CTX_new failed") }
        precondition(EVP_DigestInit_ex(context, function.evp, nil) == 1, "EVP_DigestInit_ex failed")
        self.context = context
        digestCount = function.digestCount
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Adds the next piece.
    public func update(_ data: some ContiguousBytes) {
        precondition(!finished, "an IncrementalDigest is updated after finalize()")
        data.withUnsafeBytes { bytes in
            guard bytes.count > 0 else { return }
            precondition(EVP_DigestUpdate(context, bytes.baseAddress, bytes.count) == 1, "EVP_DigestUpdate failed")
        }
    }

    /// The digest of every piece; the digest takes no more.
    public func finalize() -> Data {
        precondition(!finished, "an IncrementalDigest is finalized twice")
        finished = true
        var digest = Data(count: digestCount)
        digest.withUnsafeMutableBytes { output in
            precondition(
                EVP_DigestFinal_ex(context, output.mutableBytePointer, nil) == 1, "EVP_DigestFinal_ex failed")
        }
        return digest
    }
}
