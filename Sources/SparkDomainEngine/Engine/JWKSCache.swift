import Foundation
import SparkCrypto
import SparkDomain
import SparkLock

/// External issuers' JWKS files, parsed once and parsed again when their contents change.
/// The file is read on every use (it is small and in the page cache) and compared by digest, so a
/// key rotation written within the same clock tick as the last read is still seen.
final class JWKSCache: Sendable {
    private struct Entry {
        let digest: Data
        let keys: [JWS.VerificationKey]
    }

    private let entries = Locked<[String: Entry]>([:])

    /// The verification keys in the JWKS file at `path`. Keys that cannot verify signatures
    /// (encryption keys, unknown types) are skipped; a file with none is an error.
    func keys(at path: String) throws -> [JWS.VerificationKey] {
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? nil
        guard let size, size <= JWKSet.maximumEncodedSize, let data = FileManager.default.contents(atPath: path) else {
            throw DomainError(
                .unavailable, "the JWKS file \(path) is missing, unreadable or larger than \(JWKSet.maximumEncodedSize) bytes")
        }
        let digest = SHA256.hash(data)
        if let cached = entries.withLock({ $0[path] }), cached.digest == digest { return cached.keys }
        let keys = try Self.parse(data, source: path)
        entries.withLock { $0[path] = Entry(digest: digest, keys: keys) }
        return keys
    }

    /// The verification keys of a JWKS document kept in the database, parsed once per content.
    func keys(in data: Data, source: String) throws -> [JWS.VerificationKey] {
        let digest = SHA256.hash(data)
        let key = "sha256:" + digest.base64EncodedString()
        if let cached = entries.withLock({ $0[key] }) { return cached.keys }
        let keys = try Self.parse(data, source: source)
        entries.withLock { $0[key] = Entry(digest: digest, keys: keys) }
        return keys
    }

    /// The verification keys of a JWKS document.
    static func parse(_ data: Data, source: String) throws -> [JWS.VerificationKey] {
        do {
            return try OpenIDClient.verificationKeys(in: data, source: source)
        } catch let error as DomainError {
            // The operator's document, not a provider's answer: a bad request, not unavailable.
            throw DomainError(.invalidRequest, error.reason)
        }
    }
}
