public import Foundation

/// JSON Web Encryption in JSON serialization (RFC 7516 §7.2) with the algorithms Spark's key
/// store uses: `PBES2-HS512+A256KW` (a passcode) or `A256KW` (a key) for key management and
/// `A256GCM` for content (RFC 7518 §4.8, §4.4, §5.3).
///
/// Encryption writes the flattened form with every parameter in the protected header. Decryption
/// reads the flattened form and the general form with one recipient, and takes hostile input:
/// sizes are capped, `p2c` is capped, unknown algorithms and `crit`/`zip` are refused, and a
/// wrong passcode or altered blob is ``CryptoError/Code/authenticationFailure``.
///
/// ```swift
/// let blob = try JWE.encrypt(managementKey, password: passcode)
/// let key = try JWE.decrypt(blob, password: passcode)
/// ```
public enum JWE {
    /// Key management algorithms (`alg`).
    public enum KeyManagement: String, Sendable, Codable {
        /// PBES2 with HMAC-SHA-512 and A256KW (RFC 7518 §4.8).
        case pbes2HS512A256KW = "PBES2-HS512+A256KW"
        /// AES-256 key wrap (RFC 7518 §4.4).
        case a256KW = "A256KW"
    }

    /// The default PBES2 iteration count for new blobs.
    public static let defaultIterations = 600_000
    /// The default cap on `p2c` when decrypting (about a few seconds of PBKDF2 here).
    public static let defaultMaximumIterations = 5_000_000
    /// The lowest `p2c` accepted when decrypting (RFC 7518 §4.8.1.2 recommends at least 1000).
    public static let minimumDecryptIterations = 1000
    /// The largest serialized JWE accepted, in bytes.
    public static let maximumEncodedSize = 1024 * 1024
    /// The largest protected header accepted, in bytes of JSON.
    public static let maximumHeaderSize = 4 * 1024

    /// The parameters of a JWE's header that SparkCrypto reads.
    public struct Header: Sendable, Equatable, Codable {
        /// `alg`.
        public var algorithm: String?
        /// `enc`.
        public var encryption: String?
        /// `p2s`, base64url.
        public var pbes2Salt: String?
        /// `p2c`.
        public var pbes2Count: Int?
        /// `kid`.
        public var keyID: String?
        /// `cty`.
        public var contentType: String?
        /// `zip`: never accepted.
        public var compression: String?
        /// `crit`: never accepted.
        public var critical: [String]?
        /// `spark-oprf`: how the key-encryption key of an OPRF-hardened passcode blob is derived.
        /// Read from the protected header only (a copy elsewhere is ignored).
        public var oprf: OPRFParameters?

        enum CodingKeys: String, CodingKey {
            case algorithm = "alg", encryption = "enc", pbes2Salt = "p2s", pbes2Count = "p2c", keyID = "kid"
            case contentType = "cty", compression = "zip", critical = "crit", oprf = "spark-oprf"
        }

        /// An empty header.
        public init() {}

        /// The union of two headers; a parameter present in both is an error (RFC 7516 §7.2.1).
        func merged(with other: Header?) throws -> Header {
            guard let other else { return self }
            var result = self
            func take<T>(_ path: WritableKeyPath<Header, T?>, _ name: String) throws {
                guard let value = other[keyPath: path] else { return }
                guard result[keyPath: path] == nil else {
                    throw CryptoError(.malformedInput, "JWE header parameter '\(name)' appears twice")
                }
                result[keyPath: path] = value
            }
            try take(\.algorithm, "alg")
            try take(\.encryption, "enc")
            try take(\.pbes2Salt, "p2s")
            try take(\.pbes2Count, "p2c")
            try take(\.keyID, "kid")
            try take(\.contentType, "cty")
            try take(\.compression, "zip")
            try take(\.critical, "crit")
            return result
        }
    }

    /// The private `spark-oprf` header parameter (RFC 7516 §4.3) of a passcode blob whose
    /// key-encryption key comes from PBKDF2 and an OPRF evaluation (`docs/FORMATS.md`).
    public struct OPRFParameters: Sendable, Equatable, Codable {
        /// The OPRF suite and mode, `VOPRF-P256-SHA256`.
        public var suite: String
        /// The domain's passcode key id the evaluation used.
        public var keyID: String
        /// The user's OPRF public key under it, base64url (pinned: a later evaluation must prove
        /// it used this key).
        public var publicKey: String
        /// The PBKDF2 salt, base64url.
        public var salt: String
        /// The PBKDF2 iterations.
        public var iterations: Int

        enum CodingKeys: String, CodingKey { case suite, keyID = "kid", publicKey = "pk", salt = "p2s", iterations = "p2c" }

        /// Parameters.
        public init(suite: String, keyID: String, publicKey: String, salt: String, iterations: Int) {
            self.suite = suite
            self.keyID = keyID
            self.publicKey = publicKey
            self.salt = salt
            self.iterations = iterations
        }
    }

    /// The JSON serialization's members (RFC 7516 §7.2), flattened or general.
    struct Serialization: Codable {
        var protected: String?
        var unprotected: Header?
        var header: Header?
        var encryptedKey: String?
        var recipients: [Recipient]?
        var iv: String
        var ciphertext: String
        var tag: String
        var aad: String?

        struct Recipient: Codable {
            var header: Header?
            var encryptedKey: String?
            enum CodingKeys: String, CodingKey { case header, encryptedKey = "encrypted_key" }
        }

        enum CodingKeys: String, CodingKey {
            case protected, unprotected, header, encryptedKey = "encrypted_key", recipients, iv, ciphertext, tag, aad
        }
    }

    // MARK: Encrypting

    /// Encrypts `plaintext` under a passcode with `PBES2-HS512+A256KW` and `A256GCM`, a fresh
    /// 16-byte salt and `iterations` PBKDF2 rounds (at least ``PBKDF2/minimumIterations``).
    public static func encrypt(
        _ plaintext: some ContiguousBytes,
        password: some ContiguousBytes,
        iterations: Int = defaultIterations,
        keyID: String? = nil,
        contentType: String? = nil
    ) throws -> Data {
        guard iterations >= PBKDF2.minimumIterations else {
            throw CryptoError(.weakParameters, "PBES2 needs at least \(PBKDF2.minimumIterations) iterations, got \(iterations)")
        }
        return try encrypt(
            plaintext, password: password, unsafeUncheckedIterations: iterations, keyID: keyID, contentType: contentType)
    }

    /// Encrypts under a passcode with any iteration count, for tests and vectors.
    ///
    /// - Warning: low counts make the passcode cheap to brute-force from the blob.
    public static func encrypt(
        _ plaintext: some ContiguousBytes,
        password: some ContiguousBytes,
        unsafeUncheckedIterations iterations: Int,
        keyID: String? = nil,
        contentType: String? = nil
    ) throws -> Data {
        let salt = SystemRandom.bytes(count: 16)
        var header = Header()
        header.algorithm = KeyManagement.pbes2HS512A256KW.rawValue
        header.encryption = "A256GCM"
        header.pbes2Salt = salt.base64URLEncodedString()
        header.pbes2Count = iterations
        header.keyID = keyID
        header.contentType = contentType
        let kek = try pbes2Key(password: password, salt: salt, iterations: iterations)
        return try seal(plaintext, header: header, kek: kek)
    }

    /// Encrypts `plaintext` under a 256-bit key-encryption key with `A256KW` and `A256GCM`.
    ///
    /// - Parameter oprf: the `spark-oprf` parameters to put in the protected header, if any.
    public static func encrypt(
        _ plaintext: some ContiguousBytes, keyEncryptionKey: SymmetricKey, keyID: String? = nil, contentType: String? = nil,
        oprf: OPRFParameters? = nil
    ) throws -> Data {
        guard keyEncryptionKey.byteCount == 32 else {
            throw CryptoError(.invalidKey, "A256KW needs a 32-byte key, got \(keyEncryptionKey.byteCount)")
        }
        var header = Header()
        header.algorithm = KeyManagement.a256KW.rawValue
        header.encryption = "A256GCM"
        header.keyID = keyID
        header.contentType = contentType
        header.oprf = oprf
        return try seal(plaintext, header: header, kek: keyEncryptionKey)
    }

    private static func seal(_ plaintext: some ContiguousBytes, header: Header, kek: SymmetricKey) throws -> Data {
        let cek = SymmetricKey(size: .bits256)
        let encryptedKey = try AESKeyWrap.wrap(cek, using: kek)
        let protected = try JOSEJSON.encode(header).base64URLEncodedString()
        let box = try AESGCM.seal(plaintext, using: cek, authenticating: Data(protected.utf8))
        let serialization = Serialization(
            protected: protected, encryptedKey: encryptedKey.base64URLEncodedString(),
            iv: box.nonce.bytes.base64URLEncodedString(), ciphertext: box.ciphertext.base64URLEncodedString(),
            tag: box.tag.base64URLEncodedString())
        return try JOSEJSON.encode(serialization)
    }

    // MARK: Decrypting

    /// Decrypts a passcode-protected JWE (`PBES2-HS512+A256KW`, `A256GCM`).
    ///
    /// - Parameter maximumIterations: the largest `p2c` to spend time on; more is refused with
    ///   ``CryptoError/Code/limitExceeded`` before any work is done.
    /// - Throws: ``CryptoError/Code/authenticationFailure`` for a wrong passcode or altered blob.
    public static func decrypt(
        _ json: Data, password: some ContiguousBytes, maximumIterations: Int = defaultMaximumIterations
    ) throws -> SecureBytes {
        let parsed = try Parsed(json)
        guard parsed.keyManagement == .pbes2HS512A256KW else {
            throw CryptoError(.unsupportedAlgorithm, "this JWE uses \(parsed.keyManagement.rawValue), not a passcode")
        }
        let (salt, iterations) = try parsed.pbes2Parameters(maximumIterations: maximumIterations)
        let kek = try pbes2Key(password: password, salt: salt, iterations: iterations)
        return try parsed.open(kek: kek)
    }

    /// Decrypts a key-wrapped JWE (`A256KW`, `A256GCM`).
    ///
    /// - Throws: ``CryptoError/Code/authenticationFailure`` for a wrong key or altered blob.
    public static func decrypt(_ json: Data, keyEncryptionKey: SymmetricKey) throws -> SecureBytes {
        let parsed = try Parsed(json)
        guard parsed.keyManagement == .a256KW else {
            throw CryptoError(.unsupportedAlgorithm, "this JWE uses \(parsed.keyManagement.rawValue), not A256KW")
        }
        return try parsed.open(kek: keyEncryptionKey)
    }

    /// Reads a JWE's combined header without decrypting or checking its algorithms, for example
    /// to see its `p2c` or `kid`. Nothing returned here may be trusted.
    public static func header(of json: Data) throws -> Header { try Parsed.headers(json).header }

    /// The PBES2 key-encryption key (RFC 7518 §4.8.1.1): PBKDF2-HMAC-SHA-512 over
    /// `UTF8(alg) ‖ 0x00 ‖ p2s`, 32 bytes for A256KW.
    static func pbes2Key(password: some ContiguousBytes, salt: Data, iterations: Int) throws -> SymmetricKey {
        let saltInput = Data(KeyManagement.pbes2HS512A256KW.rawValue.utf8) + [0] + salt
        let derived = try PBKDF2.deriveKey(
            fromPassword: password, salt: saltInput, hash: .sha512, outputByteCount: 32, unsafeUncheckedRounds: iterations)
        return SymmetricKey(secureBytes: derived)
    }

    /// A decoded, checked JWE, not yet decrypted.
    struct Parsed {
        let header: Header
        let keyManagement: KeyManagement
        let protected: String
        let encryptedKey: Data
        let box: AESGCM.SealedBox
        let aad: String?

        init(_ json: Data) throws {
            let (serialization, header, encryptedKey) = try Self.headers(json)
            // `headers` has checked that the protected header is present.
            let protected = serialization.protected ?? ""
            if header.critical != nil { throw CryptoError(.unsupportedAlgorithm, "JWE 'crit' extensions are not supported") }
            if header.compression != nil { throw CryptoError(.unsupportedAlgorithm, "compressed JWEs ('zip') are refused") }
            guard let algorithm = header.algorithm, let keyManagement = KeyManagement(rawValue: algorithm) else {
                throw CryptoError(.unsupportedAlgorithm, "JWE alg '\(header.algorithm?.prefix(32) ?? "missing")' is not accepted")
            }
            guard header.encryption == "A256GCM" else {
                throw CryptoError(
                    .unsupportedAlgorithm, "JWE enc '\(header.encryption?.prefix(32) ?? "missing")' is not accepted")
            }
            guard let encryptedKey else { throw CryptoError(.malformedInput, "the JWE has no encrypted_key") }
            self.encryptedKey = try Data(base64URLEncoded: encryptedKey)
            guard self.encryptedKey.count == 40 else {
                throw CryptoError(.malformedInput, "an A256KW-wrapped A256GCM key is 40 bytes, got \(self.encryptedKey.count)")
            }
            let iv = try Data(base64URLEncoded: serialization.iv)
            guard iv.count == 12 else { throw CryptoError(.malformedInput, "an A256GCM IV is 12 bytes, got \(iv.count)") }
            box = try AESGCM.SealedBox(
                nonce: AESGCM.Nonce(iv), ciphertext: Data(base64URLEncoded: serialization.ciphertext),
                tag: Data(base64URLEncoded: serialization.tag))
            if let aad = serialization.aad { _ = try Data(base64URLEncoded: aad) }
            self.header = header
            self.keyManagement = keyManagement
            self.protected = protected
            self.aad = serialization.aad
        }

        /// The serialization, its combined header and the encrypted key member, with size caps.
        static func headers(_ json: Data) throws -> (serialization: Serialization, header: Header, encryptedKey: String?) {
            guard json.count <= JWE.maximumEncodedSize else {
                throw CryptoError(.limitExceeded, "a JWE is limited to \(JWE.maximumEncodedSize) bytes")
            }
            let serialization = try JOSEJSON.decode(Serialization.self, from: json, what: "the JWE")
            guard let protected = serialization.protected, !protected.isEmpty else {
                throw CryptoError(.malformedInput, "the JWE has no protected header")
            }
            guard protected.utf8.count <= JWE.maximumHeaderSize * 4 / 3 + 4 else {
                throw CryptoError(.limitExceeded, "a JWE protected header is limited to \(JWE.maximumHeaderSize) bytes")
            }
            let protectedHeader = try JOSEJSON.decode(
                Header.self, from: Data(base64URLEncoded: protected), what: "the JWE protected header")
            var recipientHeader = serialization.header
            var encryptedKey = serialization.encryptedKey
            if let recipients = serialization.recipients {
                guard recipients.count == 1, serialization.header == nil, serialization.encryptedKey == nil else {
                    throw CryptoError(.unsupportedAlgorithm, "only JWEs with exactly one recipient are supported")
                }
                recipientHeader = recipients[0].header
                encryptedKey = recipients[0].encryptedKey
            }
            let header = try protectedHeader.merged(with: serialization.unprotected).merged(with: recipientHeader)
            return (serialization, header, encryptedKey)
        }

        /// Validates `p2s` and `p2c` before any PBKDF2 work is spent.
        func pbes2Parameters(maximumIterations: Int) throws -> (Data, Int) {
            guard let saltText = header.pbes2Salt, let iterations = header.pbes2Count else {
                throw CryptoError(.malformedInput, "a PBES2 JWE needs p2s and p2c")
            }
            let salt = try Data(base64URLEncoded: saltText)
            guard salt.count >= 8, salt.count <= 1024 else {
                throw CryptoError(.malformedInput, "PBES2 salt must be 8...1024 bytes, got \(salt.count)")
            }
            guard iterations >= JWE.minimumDecryptIterations else {
                throw CryptoError(.weakParameters, "PBES2 p2c \(iterations) is below \(JWE.minimumDecryptIterations)")
            }
            guard iterations <= maximumIterations else {
                throw CryptoError(.limitExceeded, "PBES2 p2c \(iterations) is above the cap of \(maximumIterations)")
            }
            return (salt, iterations)
        }

        /// Unwraps the content key and opens the content; any integrity failure is reported as
        /// ``CryptoError/Code/authenticationFailure``.
        func open(kek: SymmetricKey) throws -> SecureBytes {
            let cek = try AESKeyWrap.unwrap(encryptedKey, using: kek)
            guard cek.count == 32 else { throw CryptoError(.authenticationFailure, "the JWE content key has the wrong length") }
            var additional = Data(protected.utf8)
            if let aad { additional += Data(".\(aad)".utf8) }
            do {
                return try AESGCM.open(box, using: SymmetricKey(secureBytes: cek), authenticating: additional)
            } catch let error as CryptoError where error.code == .authenticationFailure {
                throw CryptoError(.authenticationFailure, "the JWE content failed authentication: wrong key or altered data")
            }
        }
    }
}
