public import Foundation

/// JSON Web Signature in compact serialization (RFC 7515 §7.1).
///
/// Verification follows RFC 8725: each key carries the algorithms it may be used with, the
/// header's `alg` must be one of them, `none` and MAC algorithms are never accepted, `kid` only
/// selects a key, and `crit` extensions are refused.
///
/// ```swift
/// let token = try JWS.sign(payload: claims, using: signingKey, keyID: "k1")
/// let verified = try JWS.verify(token, using: [JWS.VerificationKey(jwk: publishedKey)])
/// ```
public enum JWS {
    /// The signature algorithms SparkCrypto verifies (RFC 7518 §3.1, RFC 8037 §3.1).
    public enum Algorithm: String, Sendable, Hashable, Codable, CaseIterable {
        /// Ed25519 (RFC 8037).
        case edDSA = "EdDSA"
        /// ECDSA P-256 SHA-256.
        case es256 = "ES256"
        /// RSASSA-PKCS1-v1_5 SHA-256.
        case rs256 = "RS256"
        /// RSASSA-PSS SHA-256 (an RSA key's JWK must say `alg: PS256`).
        case ps256 = "PS256"
    }

    /// The largest compact JWS accepted, in bytes.
    public static let maximumCompactSize = 64 * 1024
    /// The largest protected header accepted, in bytes of JSON.
    public static let maximumHeaderSize = 4 * 1024

    /// A JOSE header as SparkCrypto reads and writes it.
    public struct Header: Sendable, Equatable, Codable {
        /// `alg`.
        public var algorithm: String
        /// `kid`.
        public var keyID: String?
        /// `typ`, for example `JWT`.
        public var type: String?
        /// `cty`.
        public var contentType: String?
        /// `crit`: never accepted on verification (no extensions are understood).
        public var critical: [String]?

        enum CodingKeys: String, CodingKey {
            case algorithm = "alg", keyID = "kid", type = "typ", contentType = "cty", critical = "crit"
        }

        /// A header with the given members.
        public init(algorithm: String, keyID: String? = nil, type: String? = nil, contentType: String? = nil) {
            self.algorithm = algorithm
            self.keyID = keyID
            self.type = type
            self.contentType = contentType
        }
    }

    /// A public key with the algorithms it is allowed to verify.
    public struct VerificationKey: Sendable {
        enum Backing: Sendable {
            case ed25519(Ed25519.PublicKey)
            case p256(P256.PublicKey)
            case rsa(RSA.PublicKey)
        }

        let backing: Backing
        /// The `kid` used to select this key, if any.
        public let keyID: String?
        /// The algorithm this key verifies (one per key type, as RFC 8725 §3.1 advises).
        public let algorithm: Algorithm

        /// An Ed25519 key for `EdDSA`.
        public init(_ key: Ed25519.PublicKey, keyID: String? = nil) {
            backing = .ed25519(key)
            self.keyID = keyID
            algorithm = .edDSA
        }

        /// A P-256 key for `ES256`.
        public init(_ key: P256.PublicKey, keyID: String? = nil) {
            backing = .p256(key)
            self.keyID = keyID
            algorithm = .es256
        }

        /// An RSA key for `RS256`, or for `PS256` when `pss` (one algorithm per key, RFC 8725 §3.1).
        public init(_ key: RSA.PublicKey, keyID: String? = nil, pss: Bool = false) {
            backing = .rsa(key)
            self.keyID = keyID
            algorithm = pss ? .ps256 : .rs256
        }

        /// A key from a JWK. The algorithm follows from the key type (an RSA key's is `RS256`
        /// unless its `alg` says `PS256`); a JWK `alg` member must name that same algorithm, and a
        /// `use` member must be `sig`.
        ///
        /// - Throws: ``CryptoError/Code/unsupportedAlgorithm`` for a mismatching `alg` or a key
        ///   type that cannot sign (X25519, oct).
        public init(jwk: JWK) throws {
            switch (jwk.keyType, jwk.curve) {
            case (.okp, "Ed25519"): self.init(try jwk.ed25519PublicKey(), keyID: jwk.keyID)
            case (.ec, "P-256"): self.init(try jwk.p256PublicKey(), keyID: jwk.keyID)
            case (.rsa, _): self.init(try jwk.rsaPublicKey(), keyID: jwk.keyID, pss: jwk.algorithm == Algorithm.ps256.rawValue)
            default:
                throw CryptoError(
                    .unsupportedAlgorithm, "a \(jwk.keyType.rawValue) \(jwk.curve ?? "") key cannot verify signatures")
            }
            if let declared = jwk.algorithm, declared != algorithm.rawValue {
                throw CryptoError(
                    .unsupportedAlgorithm, "the JWK says alg \(declared) but its key type only allows \(algorithm.rawValue)")
            }
            if let use = jwk.use, use != "sig" {
                throw CryptoError(.unsupportedAlgorithm, "the JWK's use is '\(use)', not 'sig'")
            }
        }

        /// The public key's bytes (for fingerprints of a set of trusted keys).
        public var publicKeyBytes: Data {
            switch backing {
            case .ed25519(let key): key.rawRepresentation
            case .p256(let key): key.x + key.y
            case .rsa(let key): key.modulus + key.exponent
            }
        }

        func isValidSignature(_ signature: Data, for message: Data) -> Bool {
            switch backing {
            case .ed25519(let key): key.isValidSignature(signature, for: message)
            case .p256(let key): key.isValidSignature(signature, for: message)
            case .rsa(let key):
                algorithm == .ps256
                    ? key.isValidPSSSignature(signature, for: message) : key.isValidSignature(signature, for: message)
            }
        }
    }

    /// A verified JWS: its header, its payload and the key that verified it.
    public struct Verified: Sendable {
        /// The protected header.
        public let header: Header
        /// The payload bytes.
        public let payload: Data
        /// The algorithm that verified it.
        public let algorithm: Algorithm
        /// The `kid` of the key that verified it, if it had one.
        public let keyID: String?
    }

    /// Signs `payload` with Ed25519 and returns the compact serialization.
    public static func sign(
        payload: some ContiguousBytes, using key: Ed25519.PrivateKey, keyID: String? = nil, type: String? = nil
    ) throws -> String {
        let header = Header(algorithm: Algorithm.edDSA.rawValue, keyID: keyID, type: type)
        let signingInput =
            try JOSEJSON.encode(header).base64URLEncodedString() + "."
            + payload.withUnsafeBytes { Data($0) }.base64URLEncodedString()
        let signature = try key.signature(for: Data(signingInput.utf8))
        return signingInput + "." + signature.base64URLEncodedString()
    }

    /// Parses a compact JWS without verifying it, for example to read `kid` before choosing keys.
    /// Nothing returned here may be trusted.
    public static func unverifiedHeader(of compact: String) throws -> Header {
        try Parsed(compact).header
    }

    /// The payload of a compact JWS without verifying it, for example to read a JWT's `iss` to
    /// choose which issuer's keys to verify with. Nothing returned here may be trusted.
    public static func unverifiedPayload(of compact: String) throws -> Data {
        try Parsed(compact).payload
    }

    /// A compact JWS split and decoded but not verified: read its header and payload (for
    /// example a JWT's `iss`, to choose whose keys to verify with), then ``verify(using:)`` it
    /// without parsing again. Nothing read before verification may be trusted.
    public struct Unverified: Sendable {
        let parsed: Parsed

        /// Splits and decodes `compact`, with the size caps of ``JWS``.
        public init(_ compact: String) throws { parsed = try Parsed(compact) }

        /// The protected header (unverified).
        public var header: Header { parsed.header }
        /// The payload (unverified).
        public var payload: Data { parsed.payload }

        /// Verifies the signature with `keys`; see ``JWS/verify(_:using:)``.
        public func verify(using keys: [VerificationKey]) throws -> Verified { try JWS.verify(parsed, using: keys) }
    }

    /// Verifies a compact JWS against a set of keys and returns its payload.
    ///
    /// The header's `alg` must be one of ``Algorithm``; when the header has a `kid`, only keys
    /// with that `kid` are tried; a key is tried only for its own algorithm.
    ///
    /// - Throws: ``CryptoError/Code/unsupportedAlgorithm`` for `none`, MAC or unknown algorithms
    ///   and for `crit`; ``CryptoError/Code/invalidSignature`` when no allowed key verifies;
    ///   ``CryptoError/Code/malformedInput`` or ``CryptoError/Code/limitExceeded`` for bad input.
    public static func verify(_ compact: String, using keys: [VerificationKey]) throws -> Verified {
        try verify(Parsed(compact), using: keys)
    }

    static func verify(_ parsed: Parsed, using keys: [VerificationKey]) throws -> Verified {
        guard let algorithm = Algorithm(rawValue: parsed.header.algorithm) else {
            throw CryptoError(.unsupportedAlgorithm, "JWS algorithm '\(parsed.header.algorithm.prefix(32))' is not accepted")
        }
        if parsed.header.critical != nil {
            throw CryptoError(.unsupportedAlgorithm, "JWS 'crit' extensions are not supported")
        }
        var candidates = keys.filter { $0.algorithm == algorithm }
        if let keyID = parsed.header.keyID {
            candidates = candidates.filter { $0.keyID == keyID }
        }
        guard !candidates.isEmpty else {
            throw CryptoError(.invalidSignature, "no trusted \(algorithm.rawValue) key matches this JWS")
        }
        for key in candidates where key.isValidSignature(parsed.signature, for: parsed.signingInput) {
            return Verified(header: parsed.header, payload: parsed.payload, algorithm: algorithm, keyID: key.keyID)
        }
        throw CryptoError(.invalidSignature, "the JWS signature does not verify")
    }

    /// A compact JWS split and decoded, not yet verified.
    struct Parsed: Sendable {
        let header: Header
        let payload: Data
        let signature: Data
        let signingInput: Data

        init(_ compact: String) throws {
            guard compact.utf8.count <= JWS.maximumCompactSize else {
                throw CryptoError(.limitExceeded, "a compact JWS is limited to \(JWS.maximumCompactSize) bytes")
            }
            let parts = compact.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
            guard parts.count == 3 else {
                throw CryptoError(.malformedInput, "a compact JWS has 3 parts, this has \(parts.count)")
            }
            guard parts[0].count <= JWS.maximumHeaderSize * 4 / 3 + 4 else {
                throw CryptoError(.limitExceeded, "a JWS header is limited to \(JWS.maximumHeaderSize) bytes")
            }
            let headerJSON = try Data(base64URLEncoded: String(decoding: parts[0], as: UTF8.self))
            header = try JOSEJSON.decode(Header.self, from: headerJSON, what: "the JWS header")
            payload = try Data(base64URLEncoded: String(decoding: parts[1], as: UTF8.self))
            signature = try Data(base64URLEncoded: String(decoding: parts[2], as: UTF8.self))
            signingInput = Data(compact.utf8[..<parts[1].endIndex])
        }
    }
}
