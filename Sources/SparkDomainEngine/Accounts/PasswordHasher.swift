import Foundation
import SparkCrypto
import SparkDomain

/// Slow salted password hashes: PBKDF2-HMAC-SHA-256 with a 16-byte random salt and, by
/// default, 600,000 iterations (OWASP's 2023 figure for PBKDF2-HMAC-SHA-256), compared in
/// constant time. The parameters are stored with each hash
/// (`pbkdf2-sha256$<iterations>$<salt>$<hash>`, base64url), so they can rise later without
/// invalidating existing accounts.
package struct PasswordHasher: Sendable {
    /// OWASP's recommended iteration count, and the floor without the unsafe escape hatch.
    package static let owaspIterations = DomainPolicy.owaspPasswordIterations

    /// The iteration count for new hashes.
    package let iterations: Int

    /// A hasher at OWASP's parameters.
    package init() { iterations = Self.owaspIterations }

    /// A hasher with a low iteration count, for tests only.
    ///
    /// - Warning: passwords hashed this way are cheap to brute-force from a stolen database.
    package init(unsafeIterations iterations: Int) { self.iterations = iterations }

    /// Hashes a new password.
    package func hash(_ password: String) throws -> String {
        let salt = SystemRandom.bytes(count: 16)
        let derived = try derive(password, salt: salt, iterations: iterations)
        return "pbkdf2-sha256$\(iterations)$\(salt.base64URLEncodedString())$\(derived.base64URLEncodedString())"
    }

    /// Whether `password` matches `stored`, compared in constant time. A malformed record never
    /// matches.
    package func verify(_ password: String, against stored: String) -> Bool {
        let parts = stored.split(separator: "$")
        guard parts.count == 4, parts[0] == "pbkdf2-sha256", let iterations = Int(parts[1]),
            (1...10_000_000).contains(iterations),
            let salt = try? Data(base64URLEncoded: parts[2]), let expected = try? SecureBytes(base64URLEncoded: parts[3]),
            let derived = try? derive(password, salt: salt, iterations: iterations)
        else { return false }
        return derived == expected
    }

    /// Spends the same time as a real check, for a user that does not exist, so that timing does
    /// not tell which user names exist.
    package func verifyDummy(_ password: String) {
        _ = try? derive(password, salt: Data(count: 16), iterations: iterations)
    }

    private func derive(_ password: String, salt: Data, iterations: Int) throws -> SecureBytes {
        try PBKDF2.deriveKey(
            fromPassword: Data(password.utf8), salt: salt, hash: .sha256, outputByteCount: 32, unsafeUncheckedRounds: iterations)
    }
}
