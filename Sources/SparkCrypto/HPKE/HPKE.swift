public import Foundation

/// Hybrid Public Key Encryption (RFC 9180), base mode, for the suites MLS's cipher suites 1 and 3
/// use: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256 and AES-128-GCM or ChaCha20-Poly1305 (or
/// AES-256-GCM), with the exporter; and with the post-quantum KEM X-Wing (`kem_id` 0x647A,
/// ``XWing``) in place of DHKEM, as the X-Wing draft's "Use in HPKE" defines it.
///
/// OpenSSL 3.0 has no HPKE, so this builds it from OpenSSL's X25519, HMAC and AES-GCM. A
/// ``Sender`` encapsulates to a recipient's public key and seals; a ``Recipient`` decapsulates
/// and opens. Sequence numbers advance with each message, so one context seals or opens a
/// stream of messages in order.
public enum HPKE {
    /// The HPKE algorithms: the KEM DHKEM(X25519, HKDF-SHA256) or X-Wing, the KDF HKDF-SHA256.
    public struct Suite: Sendable, Hashable {
        /// The KEMs this implementation offers.
        public enum KEM: UInt16, Sendable {
            /// DHKEM(X25519, HKDF-SHA256), `kem_id` 0x0020.
            case x25519 = 0x0020
            /// X-Wing (ML-KEM-768 and X25519), `kem_id` 0x647A.
            case xWing = 0x647A
        }

        /// The AEAD algorithms this implementation offers.
        public enum AEAD: UInt16, Sendable {
            /// AES-128-GCM, `aead_id` 0x0001.
            case aes128GCM = 0x0001
            /// AES-256-GCM, `aead_id` 0x0002.
            case aes256GCM = 0x0002
            /// ChaCha20-Poly1305, `aead_id` 0x0003.
            case chaCha20Poly1305 = 0x0003

            /// `Nk`, the key length.
            public var keyByteCount: Int { self == .aes128GCM ? 16 : 32 }
            /// `Nn`, the nonce length.
            public var nonceByteCount: Int { 12 }
        }

        /// `kem_id` 0x0020, DHKEM(X25519, HKDF-SHA256).
        public static let kemID: UInt16 = KEM.x25519.rawValue
        /// `kdf_id` 0x0001, HKDF-SHA256.
        public static let kdfID: UInt16 = 0x0001
        /// The KEM.
        public let kem: KEM
        /// The AEAD.
        public let aead: AEAD

        /// A suite of `kem` (DHKEM(X25519, HKDF-SHA256) unless said), HKDF-SHA256 and `aead`.
        public init(kem: KEM = .x25519, aead: AEAD) {
            self.kem = kem
            self.aead = aead
        }

        /// DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM: the suite of MLS's suite 1.
        public static let x25519SHA256AES128GCM = Suite(aead: .aes128GCM)
        /// DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, ChaCha20-Poly1305: the suite of MLS's suite 3.
        public static let x25519SHA256ChaChaPoly = Suite(aead: .chaCha20Poly1305)

        var kemSuiteID: [UInt8] { Array("KEM".utf8) + Suite.bigEndian(kem.rawValue) }
        var suiteID: [UInt8] {
            Array("HPKE".utf8) + Suite.bigEndian(kem.rawValue) + Suite.bigEndian(Suite.kdfID)
                + Suite.bigEndian(aead.rawValue)
        }

        func require(_ expected: KEM) throws {
            guard kem == expected else {
                throw CryptoError(.invalidParameter, "an HPKE suite of KEM \(kem) takes keys of that KEM")
            }
        }
        static func bigEndian(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xff)] }
    }

    /// The sending side of one HPKE context: the encapsulated key to send, and sealing.
    public struct Sender: Sendable {
        /// `enc`, the ephemeral public key the recipient needs.
        public let encapsulatedKey: Data
        private var context: Context

        /// Encapsulates a fresh secret to `recipient` and sets up the context for `info`.
        public init(suite: Suite, recipient: X25519.PublicKey, info: some ContiguousBytes) throws {
            try self.init(suite: suite, recipient: recipient, info: info, unsafeEphemeral: X25519.PrivateKey())
        }

        /// Like ``init(suite:recipient:info:)`` with a chosen ephemeral key. For test vectors only:
        /// an ephemeral key used twice gives two messages the same key and nonces.
        public init(
            suite: Suite, recipient: X25519.PublicKey, info: some ContiguousBytes, unsafeEphemeral ephemeral: X25519.PrivateKey
        ) throws {
            try suite.require(.x25519)
            let enc = ephemeral.publicKey.rawRepresentation
            let dh = try ephemeral.sharedSecret(with: recipient)
            let shared = try KEM.extractAndExpand(suite: suite, dh: dh, kemContext: enc + recipient.rawRepresentation)
            encapsulatedKey = enc
            context = try Context(suite: suite, sharedSecret: shared, info: info)
        }

        /// Encapsulates a fresh secret to an X-Wing `recipient` (`Encap()` is X-Wing's
        /// Encapsulate, whose secret is the shared secret) and sets up the context for `info`.
        public init(suite: Suite, recipient: XWing.PublicKey, info: some ContiguousBytes) throws {
            try self.init(suite: suite, recipient: recipient, info: info, unsafeRandomness: SecureBytes(randomCount: 64))
        }

        /// Like ``init(suite:recipient:info:)-(_,XWing.PublicKey,_)`` with X-Wing's 64 bytes of
        /// randomness given: for test vectors only.
        public init(
            suite: Suite, recipient: XWing.PublicKey, info: some ContiguousBytes, unsafeRandomness eseed: SecureBytes
        ) throws {
            try suite.require(.xWing)
            let (shared, enc) = try recipient.encapsulate(unsafeRandomness: eseed)
            encapsulatedKey = enc
            context = try Context(suite: suite, sharedSecret: shared, info: info)
        }

        /// Seals `plaintext` with `authenticatedData` under the next nonce; returns ciphertext ‖ tag.
        public mutating func seal(_ plaintext: some ContiguousBytes, authenticating authenticatedData: some ContiguousBytes)
            throws -> Data
        {
            try context.seal(plaintext, aad: authenticatedData)
        }

        /// The exporter (RFC 9180 §5.3): `length` bytes bound to this context and `exporterContext`.
        public func export(context exporterContext: some ContiguousBytes, length: Int) throws -> SecureBytes {
            try context.export(exporterContext, length: length)
        }
    }

    /// The receiving side of one HPKE context.
    public struct Recipient: Sendable {
        private var context: Context

        /// Decapsulates `encapsulatedKey` with `privateKey` and sets up the context for `info`.
        /// A malformed or low-order `encapsulatedKey` is refused as `invalidKey`.
        public init(
            suite: Suite, privateKey: X25519.PrivateKey, encapsulatedKey: some ContiguousBytes, info: some ContiguousBytes
        ) throws {
            try suite.require(.x25519)
            let enc = encapsulatedKey.withUnsafeBytes { Data($0) }
            let ephemeral = try X25519.PublicKey(rawRepresentation: enc)
            let dh = try privateKey.sharedSecret(with: ephemeral)
            let shared = try KEM.extractAndExpand(
                suite: suite, dh: dh, kemContext: enc + privateKey.publicKey.rawRepresentation)
            context = try Context(suite: suite, sharedSecret: shared, info: info)
        }

        /// Decapsulates `encapsulatedKey` (1,120 bytes) with an X-Wing `privateKey` and sets up
        /// the context for `info`. A ciphertext not made for the key gives an unrelated secret
        /// (ML-KEM's implicit rejection), so the first `open` fails as `authenticationFailure`.
        public init(
            suite: Suite, privateKey: XWing.PrivateKey, encapsulatedKey: some ContiguousBytes, info: some ContiguousBytes
        ) throws {
            try suite.require(.xWing)
            let shared = try privateKey.decapsulate(encapsulatedKey)
            context = try Context(suite: suite, sharedSecret: shared, info: info)
        }

        /// Opens ciphertext ‖ tag under the next nonce; a wrong key, tag or data is
        /// `authenticationFailure` and leaves the sequence number where it was.
        public mutating func open(_ ciphertext: some ContiguousBytes, authenticating authenticatedData: some ContiguousBytes)
            throws -> SecureBytes
        {
            try context.open(ciphertext, aad: authenticatedData)
        }

        /// The exporter (RFC 9180 §5.3), as the sender's.
        public func export(context exporterContext: some ContiguousBytes, length: Int) throws -> SecureBytes {
            try context.export(exporterContext, length: length)
        }
    }

    /// `DeriveKeyPair(ikm)` of X-Wing: the key of the seed SHAKE256(ikm, 32).
    public static func deriveXWingKeyPair(inputKeyMaterial ikm: some ContiguousBytes) throws -> XWing.PrivateKey {
        try XWing.PrivateKey(seed: SHAKE.hash(.shake256, ikm, count: XWing.privateKeyByteCount))
    }

    /// One-shot `SealBase` to an X-Wing key: returns `enc` and ciphertext ‖ tag.
    public static func sealBase(
        suite: Suite, recipient: XWing.PublicKey, info: some ContiguousBytes, authenticating aad: some ContiguousBytes,
        plaintext: some ContiguousBytes
    ) throws -> (encapsulatedKey: Data, ciphertext: Data) {
        var sender = try Sender(suite: suite, recipient: recipient, info: info)
        return (sender.encapsulatedKey, try sender.seal(plaintext, authenticating: aad))
    }

    /// One-shot `OpenBase` with an X-Wing key.
    public static func openBase(
        suite: Suite, privateKey: XWing.PrivateKey, encapsulatedKey: some ContiguousBytes, info: some ContiguousBytes,
        authenticating aad: some ContiguousBytes, ciphertext: some ContiguousBytes
    ) throws -> SecureBytes {
        var recipient = try Recipient(suite: suite, privateKey: privateKey, encapsulatedKey: encapsulatedKey, info: info)
        return try recipient.open(ciphertext, authenticating: aad)
    }

    /// `DeriveKeyPair(ikm)` of DHKEM(X25519, HKDF-SHA256) (RFC 9180 §7.1.3).
    public static func deriveKeyPair(suite: Suite, inputKeyMaterial ikm: some ContiguousBytes) throws -> X25519.PrivateKey {
        try suite.require(.x25519)
        let prk = labeledExtract(suite.kemSuiteID, salt: [], label: "dkp_prk", ikm: ikm)
        let scalar = try labeledExpand(suite.kemSuiteID, prk: prk, label: "sk", info: [], length: 32)
        return try X25519.PrivateKey(rawRepresentation: scalar)
    }

    /// One-shot `SealBase`: returns `enc` and ciphertext ‖ tag.
    public static func sealBase(
        suite: Suite, recipient: X25519.PublicKey, info: some ContiguousBytes, authenticating aad: some ContiguousBytes,
        plaintext: some ContiguousBytes
    ) throws -> (encapsulatedKey: Data, ciphertext: Data) {
        var sender = try Sender(suite: suite, recipient: recipient, info: info)
        return (sender.encapsulatedKey, try sender.seal(plaintext, authenticating: aad))
    }

    /// One-shot `OpenBase`.
    public static func openBase(
        suite: Suite, privateKey: X25519.PrivateKey, encapsulatedKey: some ContiguousBytes, info: some ContiguousBytes,
        authenticating aad: some ContiguousBytes, ciphertext: some ContiguousBytes
    ) throws -> SecureBytes {
        var recipient = try Recipient(suite: suite, privateKey: privateKey, encapsulatedKey: encapsulatedKey, info: info)
        return try recipient.open(ciphertext, authenticating: aad)
    }

    // MARK: - The labelled KDF and the key schedule

    static func labeledExtract(
        _ suiteID: [UInt8], salt: some ContiguousBytes, label: String, ikm: some ContiguousBytes
    ) -> SecureBytes {
        var labeled = SecureBytes(Array("HPKE-v1".utf8) + suiteID + Array(label.utf8))
        labeled.append(ikm)
        return HKDF.extract(salt: salt, inputKeyMaterial: labeled, hash: .sha256)
    }

    static func labeledExpand(
        _ suiteID: [UInt8], prk: some ContiguousBytes, label: String, info: some ContiguousBytes, length: Int
    ) throws -> SecureBytes {
        var labeled = Suite.bigEndian(UInt16(length)) + Array("HPKE-v1".utf8) + suiteID + Array(label.utf8)
        info.withUnsafeBytes { labeled.append(contentsOf: $0) }
        return try HKDF.expand(pseudoRandomKey: prk, info: labeled, outputByteCount: length, hash: .sha256)
    }

    enum KEM {
        static func extractAndExpand(suite: Suite, dh: SecureBytes, kemContext: Data) throws -> SecureBytes {
            let prk = labeledExtract(suite.kemSuiteID, salt: [], label: "eae_prk", ikm: dh)
            return try labeledExpand(suite.kemSuiteID, prk: prk, label: "shared_secret", info: kemContext, length: 32)
        }
    }

    /// The key, base nonce, exporter secret and sequence number of one context (RFC 9180 §5.1).
    struct Context: Sendable {
        let suite: Suite
        let key: SymmetricKey
        let baseNonce: [UInt8]
        let exporterSecret: SecureBytes
        var sequence: UInt64 = 0

        init(suite: Suite, sharedSecret: SecureBytes, info: some ContiguousBytes) throws {
            let id = suite.suiteID
            let pskIDHash = labeledExtract(id, salt: [], label: "psk_id_hash", ikm: [])
            let infoHash = labeledExtract(id, salt: [], label: "info_hash", ikm: info)
            var keyScheduleContext = SecureBytes([0])  // mode_base
            keyScheduleContext.append(pskIDHash)
            keyScheduleContext.append(infoHash)
            let secret = labeledExtract(id, salt: sharedSecret, label: "secret", ikm: [])
            self.suite = suite
            key = SymmetricKey(
                secureBytes: try labeledExpand(
                    id, prk: secret, label: "key", info: keyScheduleContext, length: suite.aead.keyByteCount))
            baseNonce = [UInt8](
                try labeledExpand(
                    id, prk: secret, label: "base_nonce", info: keyScheduleContext, length: suite.aead.nonceByteCount
                ).unsafeData())
            exporterSecret = try labeledExpand(id, prk: secret, label: "exp", info: keyScheduleContext, length: 32)
        }

        func nonceBytes() -> [UInt8] {
            var nonce = baseNonce
            for byte in 0..<8 { nonce[nonce.count - 1 - byte] ^= UInt8((sequence >> (8 * UInt64(byte))) & 0xff) }
            return nonce
        }

        func nonce() throws -> AESGCM.Nonce { try AESGCM.Nonce(nonceBytes()) }

        mutating func seal(_ plaintext: some ContiguousBytes, aad: some ContiguousBytes) throws -> Data {
            guard sequence < UInt64.max else { throw CryptoError(.limitExceeded, "the HPKE context's sequence is spent") }
            let sealed: Data
            if suite.aead == .chaCha20Poly1305 {
                sealed = try ChaChaPoly.seal(plaintext, using: key, nonce: nonceBytes(), authenticating: aad)
            } else {
                let box = try AESGCM.seal(plaintext, using: key, nonce: nonce(), authenticating: aad)
                sealed = box.ciphertext + box.tag
            }
            sequence += 1
            return sealed
        }

        mutating func open(_ ciphertext: some ContiguousBytes, aad: some ContiguousBytes) throws -> SecureBytes {
            guard sequence < UInt64.max else { throw CryptoError(.limitExceeded, "the HPKE context's sequence is spent") }
            let bytes = ciphertext.withUnsafeBytes { Data($0) }
            guard bytes.count >= AESGCM.tagByteCount else {
                throw CryptoError(.authenticationFailure, "an HPKE ciphertext is at least 16 bytes")
            }
            if suite.aead == .chaCha20Poly1305 {
                let plaintext = try ChaChaPoly.open(bytes, using: key, nonce: nonceBytes(), authenticating: aad)
                sequence += 1
                return plaintext
            }
            let box = try AESGCM.SealedBox(
                nonce: nonce(), ciphertext: bytes.dropLast(AESGCM.tagByteCount), tag: bytes.suffix(AESGCM.tagByteCount))
            let plaintext = try AESGCM.open(box, using: key, authenticating: aad)
            sequence += 1
            return plaintext
        }

        func export(_ exporterContext: some ContiguousBytes, length: Int) throws -> SecureBytes {
            guard length <= 255 * 32 else { throw CryptoError(.invalidParameter, "HPKE exports at most 8,160 bytes") }
            return try labeledExpand(suite.suiteID, prk: exporterSecret, label: "sec", info: exporterContext, length: length)
        }
    }
}
