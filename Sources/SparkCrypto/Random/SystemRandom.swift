internal import COpenSSL
public import Foundation

/// Cryptographically secure random bytes from OpenSSL's `RAND_bytes`.
public enum SystemRandom {
    /// Returns `count` random bytes.
    public static func bytes(count: Int) -> Data {
        var data = Data(count: count)
        data.withUnsafeMutableBytes { fill($0) }
        return data
    }

    /// Fills `buffer` with random bytes. OpenSSL's DRBG failing means the process has no source
    /// of randomness; continuing would produce predictable keys, so this traps.
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard buffer.count > 0 else { return }
        let result = RAND_bytes(buffer.mutableBytePointer, Int32(buffer.count))
        precondition(result == 1, "RAND_bytes failed: \(OpenSSL.drainErrors())")
    }
}
