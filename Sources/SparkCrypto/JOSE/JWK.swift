public import Foundation

/// A JSON Web Key (RFC 7517) of the kinds SparkCrypto uses: OKP Ed25519 and X25519 (RFC 8037),
/// EC P-256 and RSA public keys (RFC 7518 §6), and symmetric `oct` keys.
///
/// Binary members are decoded strictly when the JSON is read; private members (`d`, `k`) are kept
/// in ``SecureBytes`` and never printed.
public struct JWK: Sendable, Equatable, Codable, CustomStringConvertible {
    /// The key type, `kty`.
    public enum KeyType: String, Sendable, Codable {
        /// Octet key pair (RFC 8037).
        case okp = "OKP"
        /// Elliptic curve (RFC 7518 §6.2).
        case ec = "EC"
        /// RSA (RFC 7518 §6.3).
        case rsa = "RSA"
        /// Symmetric octet sequence (RFC 7518 §6.4).
        case oct
    }

    /// `kty`.
    public var keyType: KeyType
    /// `crv`: `Ed25519`, `X25519` or `P-256`.
    public var curve: String?
    /// `x`: the public key (OKP) or x coordinate (EC).
    public var x: Data?
    /// `y`: the y coordinate (EC).
    public var y: Data?
    /// `n`: the RSA modulus.
    public var n: Data?
    /// `e`: the RSA public exponent.
    public var e: Data?
    /// `d`: the private key (OKP, EC, RSA).
    public var d: SecureBytes?
    /// `k`: the symmetric key value.
    public var k: SecureBytes?
    /// `kid`: an identifier, used only to look a key up.
    public var keyID: String?
    /// `alg`: the one algorithm this key may be used with, when set.
    public var algorithm: String?
    /// `use`: `sig` or `enc`.
    public var use: String?

    /// The largest JWK accepted, in bytes of JSON.
    public static let maximumEncodedSize = 16 * 1024

    enum CodingKeys: String, CodingKey {
        case keyType = "kty"
        case curve = "crv"
        case x, y, n, e, d, k
        case keyID = "kid"
        case algorithm = "alg"
        case use
    }

    /// A bare key of the given type; the typed initializers below are usually what you want.
    public init(keyType: KeyType) { self.keyType = keyType }

    /// Decodes a JWK with strict base64url members. Unknown `kty` values are refused.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        keyType = try container.decode(KeyType.self, forKey: .keyType)
        curve = try container.decodeIfPresent(String.self, forKey: .curve)
        keyID = try container.decodeIfPresent(String.self, forKey: .keyID)
        algorithm = try container.decodeIfPresent(String.self, forKey: .algorithm)
        use = try container.decodeIfPresent(String.self, forKey: .use)
        func binary(_ key: CodingKeys) throws -> Data? {
            guard let text = try container.decodeIfPresent(String.self, forKey: key) else { return nil }
            return try Data(base64URLEncoded: text)
        }
        x = try binary(.x)
        y = try binary(.y)
        n = try binary(.n)
        e = try binary(.e)
        d = try container.decodeIfPresent(String.self, forKey: .d).map { try SecureBytes(base64URLEncoded: $0) }
        k = try container.decodeIfPresent(String.self, forKey: .k).map { try SecureBytes(base64URLEncoded: $0) }
    }

    /// Encodes with base64url members.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(keyType, forKey: .keyType)
        try container.encodeIfPresent(curve, forKey: .curve)
        try container.encodeIfPresent(x?.base64URLEncodedString(), forKey: .x)
        try container.encodeIfPresent(y?.base64URLEncodedString(), forKey: .y)
        try container.encodeIfPresent(n?.base64URLEncodedString(), forKey: .n)
        try container.encodeIfPresent(e?.base64URLEncodedString(), forKey: .e)
        try container.encodeIfPresent(d?.base64URLEncodedString(), forKey: .d)
        try container.encodeIfPresent(k?.base64URLEncodedString(), forKey: .k)
        try container.encodeIfPresent(keyID, forKey: .keyID)
        try container.encodeIfPresent(algorithm, forKey: .algorithm)
        try container.encodeIfPresent(use, forKey: .use)
    }

    /// Parses one JWK from JSON, with a size cap.
    public init(json: Data) throws {
        guard json.count <= Self.maximumEncodedSize else {
            throw CryptoError(.limitExceeded, "a JWK is limited to \(Self.maximumEncodedSize) bytes")
        }
        self = try JOSEJSON.decode(JWK.self, from: json, what: "JWK")
    }

    /// The JWK as compact JSON with sorted keys.
    public func jsonData() throws -> Data { try JOSEJSON.encode(self) }

    /// Whether the key holds private material.
    public var isPrivate: Bool { d != nil || k != nil }

    /// The key without its private members.
    public var publicKey: JWK {
        var copy = self
        copy.d = nil
        copy.k = nil
        return copy
    }

    /// Shows the type, curve and id, never key material.
    public var description: String {
        "JWK(kty: \(keyType.rawValue), crv: \(curve ?? "-"), kid: \(keyID ?? "-"), private: \(isPrivate))"
    }

    /// The RFC 7638 thumbprint: SHA-256 over the required public members in lexical order.
    public func thumbprint() throws -> Data {
        func member(_ name: String, _ value: String) -> String { "\"\(name)\":\"\(value)\"" }
        let members: [String]
        switch keyType {
        case .okp:
            guard let curve, let x else { throw CryptoError(.invalidKey, "an OKP JWK needs crv and x") }
            members = [member("crv", curve), member("kty", "OKP"), member("x", x.base64URLEncodedString())]
        case .ec:
            guard let curve, let x, let y else { throw CryptoError(.invalidKey, "an EC JWK needs crv, x and y") }
            members = [
                member("crv", curve), member("kty", "EC"), member("x", x.base64URLEncodedString()),
                member("y", y.base64URLEncodedString()),
            ]
        case .rsa:
            guard let n, let e else { throw CryptoError(.invalidKey, "an RSA JWK needs n and e") }
            members = [member("e", e.base64URLEncodedString()), member("kty", "RSA"), member("n", n.base64URLEncodedString())]
        case .oct:
            guard let k else { throw CryptoError(.invalidKey, "an oct JWK needs k") }
            members = [member("k", k.base64URLEncodedString()), member("kty", "oct")]
        }
        return SHA256.hash(Data(("{" + members.joined(separator: ",") + "}").utf8))
    }
}

// MARK: - Typed keys

extension JWK {
    /// An `OKP`/`Ed25519` public JWK.
    public init(_ key: Ed25519.PublicKey, keyID: String? = nil) {
        self.init(keyType: .okp)
        curve = "Ed25519"
        x = key.rawRepresentation
        self.keyID = keyID
    }

    /// An `OKP`/`Ed25519` private JWK (with `d`).
    public init(_ key: Ed25519.PrivateKey, keyID: String? = nil) {
        self.init(key.publicKey, keyID: keyID)
        d = key.rawRepresentation
    }

    /// An `OKP`/`X25519` public JWK.
    public init(_ key: X25519.PublicKey, keyID: String? = nil) {
        self.init(keyType: .okp)
        curve = "X25519"
        x = key.rawRepresentation
        self.keyID = keyID
    }

    /// An `OKP`/`X25519` private JWK (with `d`).
    public init(_ key: X25519.PrivateKey, keyID: String? = nil) {
        self.init(key.publicKey, keyID: keyID)
        d = key.rawRepresentation
    }

    /// An `EC`/`P-256` public JWK.
    public init(_ key: P256.PublicKey, keyID: String? = nil) {
        self.init(keyType: .ec)
        curve = "P-256"
        x = key.x
        y = key.y
        self.keyID = keyID
    }

    /// An `RSA` public JWK.
    public init(_ key: RSA.PublicKey, keyID: String? = nil) {
        self.init(keyType: .rsa)
        n = key.modulus
        e = key.exponent
        self.keyID = keyID
    }

    private func requireCurve(_ type: KeyType, _ name: String) throws {
        guard keyType == type, curve == name else {
            throw CryptoError(
                .invalidKey, "expected a \(type.rawValue) \(name) JWK, got \(keyType.rawValue) \(curve ?? "without crv")")
        }
    }

    /// The Ed25519 public key of an `OKP`/`Ed25519` JWK.
    public func ed25519PublicKey() throws -> Ed25519.PublicKey {
        try requireCurve(.okp, "Ed25519")
        guard let x else { throw CryptoError(.invalidKey, "an Ed25519 JWK needs x") }
        return try Ed25519.PublicKey(rawRepresentation: x)
    }

    /// The Ed25519 private key of an `OKP`/`Ed25519` JWK, checked against its `x`.
    public func ed25519PrivateKey() throws -> Ed25519.PrivateKey {
        try requireCurve(.okp, "Ed25519")
        guard let d else { throw CryptoError(.invalidKey, "an Ed25519 private JWK needs d") }
        let key = try Ed25519.PrivateKey(rawRepresentation: d)
        guard x == nil || x == key.publicKey.rawRepresentation else {
            throw CryptoError(.invalidKey, "the JWK's x does not match its d")
        }
        return key
    }

    /// The X25519 public key of an `OKP`/`X25519` JWK.
    public func x25519PublicKey() throws -> X25519.PublicKey {
        try requireCurve(.okp, "X25519")
        guard let x else { throw CryptoError(.invalidKey, "an X25519 JWK needs x") }
        return try X25519.PublicKey(rawRepresentation: x)
    }

    /// The X25519 private key of an `OKP`/`X25519` JWK, checked against its `x`.
    public func x25519PrivateKey() throws -> X25519.PrivateKey {
        try requireCurve(.okp, "X25519")
        guard let d else { throw CryptoError(.invalidKey, "an X25519 private JWK needs d") }
        let key = try X25519.PrivateKey(rawRepresentation: d)
        guard x == nil || x == key.publicKey.rawRepresentation else {
            throw CryptoError(.invalidKey, "the JWK's x does not match its d")
        }
        return key
    }

    /// The P-256 public key of an `EC`/`P-256` JWK.
    public func p256PublicKey() throws -> P256.PublicKey {
        try requireCurve(.ec, "P-256")
        guard let x, let y else { throw CryptoError(.invalidKey, "a P-256 JWK needs x and y") }
        return try P256.PublicKey(x: x, y: y)
    }

    /// The RSA public key of an `RSA` JWK.
    public func rsaPublicKey() throws -> RSA.PublicKey {
        guard keyType == .rsa else { throw CryptoError(.invalidKey, "expected an RSA JWK, got \(keyType.rawValue)") }
        guard let n, let e else { throw CryptoError(.invalidKey, "an RSA JWK needs n and e") }
        return try RSA.PublicKey(modulus: n, exponent: e)
    }

    /// The symmetric key of an `oct` JWK.
    public func symmetricKey() throws -> SymmetricKey {
        guard keyType == .oct, let k else { throw CryptoError(.invalidKey, "expected an oct JWK with k") }
        return SymmetricKey(secureBytes: k)
    }
}

/// A JWK Set (RFC 7517 §5).
public struct JWKSet: Sendable, Equatable, Codable {
    /// The keys this set holds.
    public var keys: [JWK]

    /// The largest set accepted, in bytes of JSON, and the most keys.
    public static let maximumEncodedSize = 256 * 1024
    /// The most keys a set may hold.
    public static let maximumKeyCount = 100

    /// A set of the given keys.
    public init(keys: [JWK]) { self.keys = keys }

    /// Parses a set. Members with an unknown `kty` or that fail to decode are ignored, as
    /// RFC 7517 §5 asks; ``ignoredCount`` says how many.
    public init(json: Data) throws {
        guard json.count <= Self.maximumEncodedSize else {
            throw CryptoError(.limitExceeded, "a JWK Set is limited to \(Self.maximumEncodedSize) bytes")
        }
        let lenient = try JOSEJSON.decode(LenientSet.self, from: json, what: "JWK Set")
        guard lenient.keys.count <= Self.maximumKeyCount else {
            throw CryptoError(.limitExceeded, "a JWK Set is limited to \(Self.maximumKeyCount) keys")
        }
        keys = lenient.keys.compactMap(\.key)
        ignoredCount = lenient.keys.count - keys.count
    }

    /// How many members were ignored when the set was parsed.
    public private(set) var ignoredCount = 0

    enum CodingKeys: String, CodingKey { case keys }

    /// The set as compact JSON.
    public func jsonData() throws -> Data { try JOSEJSON.encode(self) }

    private struct LenientSet: Decodable {
        var keys: [LenientKey]
    }

    private struct LenientKey: Decodable {
        var key: JWK?
        init(from decoder: any Decoder) throws { key = try? JWK(from: decoder) }
    }

    /// The keys whose `kid` equals `keyID`.
    public func keys(withID keyID: String) -> [JWK] { keys.filter { $0.keyID == keyID } }
}

/// JSON coding shared by the JOSE types: compact, sorted keys, decoding errors as
/// ``CryptoError/Code/malformedInput`` without echoing the input.
enum JOSEJSON {
    static func decode<T: Decodable>(_ type: T.Type, from data: Data, what: String) throws -> T {
        do {
            return try JSONDecoder().decode(type, from: data)
        } catch let error as CryptoError {
            throw error
        } catch {
            throw CryptoError(.malformedInput, "\(what) is not valid JSON of the expected shape")
        }
    }

    static func encode(_ value: some Encodable) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(value)
    }
}
