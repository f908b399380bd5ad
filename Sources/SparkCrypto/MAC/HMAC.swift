internal import COpenSSL
internal import COpenSSLRuntime
public import Foundation

/// HMAC (RFC 2104) with SHA-256 or SHA-512.
public enum HMAC {
    /// Returns the full-length authentication code of `message` under `key`.
    public static func authenticationCode(
        for message: some ContiguousBytes,
        using key: some ContiguousBytes,
        hash: HashFunction
    ) -> Data {
        var mac = Data(count: hash.digestCount)
        var length = 0
        let result = key.withUnsafeBytes { key in
            message.withUnsafeBytes { message in
                mac.withUnsafeMutableBytes { output in
                    // The MAC fetched once and a context kept per thread (COpenSSLRuntime), or,
                    // when no context could be made, OpenSSL's one-shot HMAC.
                    let kept = spark_hmac(
                        hash.runtimeIndex, key.baseAddress, key.count, message.baseAddress, message.count,
                        output.mutableBytePointer, output.count, &length)
                    guard kept < 0 else { return kept == 1 }
                    var oneShotLength: UInt32 = 0
                    let done =
                        COpenSSL.HMAC(
                            hash.evp, key.bytePointer, Int32(key.count), message.bytePointer, message.count,
                            output.mutableBytePointer, &oneShotLength) != nil
                    length = Int(oneShotLength)
                    return done
                }
            }
        }
        // HMAC over memory only fails on allocation failure.
        precondition(result && length == hash.digestCount, "HMAC failed: \(OpenSSL.drainErrors())")
        return mac
    }

    /// Checks `mac` against the code of `message` in constant time. A truncated `mac` (at least
    /// 16 bytes) is compared against the same-length prefix, as RFC 2104 §5 allows.
    public static func isValidAuthenticationCode(
        _ mac: some ContiguousBytes,
        for message: some ContiguousBytes,
        using key: some ContiguousBytes,
        hash: HashFunction
    ) -> Bool {
        let expected = authenticationCode(for: message, using: key, hash: hash)
        return mac.withUnsafeBytes { given in
            guard given.count >= 16, given.count <= expected.count else { return false }
            return expected.withUnsafeBytes { CRYPTO_memcmp($0.baseAddress, given.baseAddress, given.count) == 0 }
        }
    }
}
