public import Foundation
import SparkCrypto

/// The number two users compare to know that each holds the other's real identity key, as
/// Signal's safety numbers: 60 digits, the same on both sides, derived from both users' ids and
/// identity keys (so a domain that substituted either key shows a different number).
///
/// Each user's half is Signal's numeric fingerprint: SHA-512 over `0x0000 ‖ key ‖ userID`, then
/// 5,200 more rounds of SHA-512 over `previous ‖ key`; the first 30 bytes in six chunks of five,
/// each as a big-endian integer modulo 100,000 in five digits. The lower half comes first. The
/// key is the raw 32-byte Ed25519 identity key (`docs/FORMATS.md`).
///
/// ```swift
/// let number = try await access.safetyNumber(with: "bob")
/// print(number)   // "30035 44776 92869 39689 …" — read it out to bob, or compare in person
/// try await access.confirmSafetyNumber(number, of: "bob")
/// ```
public struct SafetyNumber: Sendable, Hashable, CustomStringConvertible {
    /// Signal's count of hash rounds (more than 112 bits of second-preimage resistance).
    public static let iterations = 5200

    /// The 60 digits.
    public let digits: String

    /// The number of the pair (`local`, `remote`): the same whichever of the two computes it.
    public init(
        localUser: String, localKey: Data, remoteUser: String, remoteKey: Data, iterations: Int = SafetyNumber.iterations
    ) {
        let local = Self.displayable(Self.fingerprint(userID: localUser, key: localKey, iterations: iterations))
        let remote = Self.displayable(Self.fingerprint(userID: remoteUser, key: remoteKey, iterations: iterations))
        digits = local <= remote ? local + remote : remote + local
    }

    /// The number the user typed or read, whitespace ignored; nil unless it is 60 digits.
    public init?(digits text: String) {
        let digits = text.filter { !$0.isWhitespace }
        guard digits.count == 60, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        self.digits = digits
    }

    /// Twelve groups of five digits, as apps show them.
    public var groups: [String] {
        stride(from: 0, to: digits.count, by: 5).map { start in
            let from = digits.index(digits.startIndex, offsetBy: start)
            return String(digits[from..<digits.index(from, offsetBy: 5)])
        }
    }

    /// The groups separated by spaces.
    public var description: String { groups.joined(separator: " ") }

    /// One user's 64-byte fingerprint hash.
    static func fingerprint(userID: String, key: Data, iterations: Int) -> Data {
        var hash = Data([0, 0]) + key + Data(userID.utf8)
        for _ in 0..<iterations { hash = SHA512.hash(hash + key) }
        return hash
    }

    /// The 30 digits of a fingerprint.
    static func displayable(_ fingerprint: Data) -> String {
        let bytes = [UInt8](fingerprint.prefix(30))
        return stride(from: 0, to: 30, by: 5).map { start in
            let chunk = bytes[start..<start + 5].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let text = String(chunk % 100_000)
            return String(repeating: "0", count: 5 - text.count) + text
        }.joined()
    }
}
