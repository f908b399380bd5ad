internal import COpenSSL
public import Foundation

/// PBKDF2 with HMAC-SHA-256 or HMAC-SHA-512 (RFC 8018 §5.2), through OpenSSL's
/// `PKCS5_PBKDF2_HMAC`.
public enum PBKDF2 {
    /// The lowest iteration count accepted without the unsafe escape hatch. OWASP's 2023 advice
    /// is 600,000 for HMAC-SHA-256 and 210,000 for HMAC-SHA-512; the floor is set at the lower.
    public static let minimumIterations = 210_000

    /// The largest iteration count accepted at all: more would take minutes and is treated as a
    /// denial-of-service attempt when it comes from stored or received data.
    public static let maximumIterations = 10_000_000

    /// Derives a key from a password. Refuses iteration counts below ``minimumIterations``.
    ///
    /// - Throws: ``CryptoError/Code/weakParameters`` for a low count, or
    ///   ``CryptoError/Code/invalidParameter`` for a bad length or count.
    public static func deriveKey(
        fromPassword password: some ContiguousBytes,
        salt: some ContiguousBytes,
        hash: HashFunction,
        outputByteCount: Int,
        rounds: Int
    ) throws -> SecureBytes {
        guard rounds >= minimumIterations else {
            throw CryptoError(.weakParameters, "PBKDF2 needs at least \(minimumIterations) iterations, got \(rounds)")
        }
        return try derive(password: password, salt: salt, hash: hash, outputByteCount: outputByteCount, rounds: rounds)
    }

    /// Derives a key with any positive iteration count, for published test vectors and
    /// interoperability with existing data.
    ///
    /// - Warning: low counts make passwords cheap to brute-force. Never use this for new secrets.
    public static func deriveKey(
        fromPassword password: some ContiguousBytes,
        salt: some ContiguousBytes,
        hash: HashFunction,
        outputByteCount: Int,
        unsafeUncheckedRounds rounds: Int
    ) throws -> SecureBytes {
        try derive(password: password, salt: salt, hash: hash, outputByteCount: outputByteCount, rounds: rounds)
    }

    private static func derive(
        password: some ContiguousBytes,
        salt: some ContiguousBytes,
        hash: HashFunction,
        outputByteCount: Int,
        rounds: Int
    ) throws -> SecureBytes {
        guard rounds >= 1, rounds <= maximumIterations else {
            throw CryptoError(.invalidParameter, "PBKDF2 iteration count must be 1...\(maximumIterations), got \(rounds)")
        }
        guard outputByteCount >= 1, outputByteCount <= 1 << 20 else {
            throw CryptoError(.invalidParameter, "PBKDF2 output length must be 1...\(1 << 20) bytes")
        }
        return try password.withUnsafeBytes { password in
            try salt.withUnsafeBytes { salt in
                try SecureBytes(count: outputByteCount) { output in
                    let result = password.bytePointer.withMemoryRebound(to: CChar.self, capacity: max(password.count, 1)) {
                        PKCS5_PBKDF2_HMAC(
                            $0, Int32(password.count), salt.bytePointer, Int32(salt.count), Int32(rounds),
                            hash.evp, Int32(output.count), output.mutableBytePointer)
                    }
                    try OpenSSL.check(result, "PKCS5_PBKDF2_HMAC")
                }
            }
        }
    }
}
