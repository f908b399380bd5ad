import Foundation
import SparkCrypto

/// An MLS cipher suite (RFC 9420 §17.1). SparkMLS implements suite 1,
/// `MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519`, suite 3,
/// `MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519`, and the post-quantum
/// `MLS_128_MLKEM768X25519_AES128GCM_SHA256_Ed25519` of draft-ietf-mls-pq-ciphersuites-06 (KEM
/// X-Wing, KDF HKDF-SHA256, AES-128-GCM, SHA-256, Ed25519) at the private-use code point
/// ``xWingPrivateUseCodePoint`` until IANA assigns one; others are refused as `unsupported`.
public struct MLSCipherSuite: Hashable, Sendable, CustomStringConvertible {
    /// The IANA code point.
    public let rawValue: UInt16

    /// `MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519`, suite 1.
    public static let x25519AES128GCMSHA256Ed25519 = MLSCipherSuite(checked: 1)

    /// `MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519`, suite 3.
    public static let x25519ChaCha20Poly1305SHA256Ed25519 = MLSCipherSuite(checked: 3)

    /// The code point of `MLS_128_MLKEM768X25519_AES128GCM_SHA256_Ed25519` here: 0xF768, in the
    /// range RFC 9420 §17.1 keeps for private use (0xF000 to 0xFFFF), until IANA assigns one
    /// (then groups move to the assigned point by a ReInit; docs/MLS.md).
    public static let xWingPrivateUseCodePoint: UInt16 = 0xF768

    /// `MLS_128_MLKEM768X25519_AES128GCM_SHA256_Ed25519` (draft-ietf-mls-pq-ciphersuites-06):
    /// suite 1 with X-Wing (ML-KEM-768 and X25519) as its KEM.
    public static let xWingAES128GCMSHA256Ed25519 = MLSCipherSuite(checked: xWingPrivateUseCodePoint)

    /// The suites this implementation can run.
    public static let supported: [MLSCipherSuite] = [
        .x25519AES128GCMSHA256Ed25519, .x25519ChaCha20Poly1305SHA256Ed25519, .xWingAES128GCMSHA256Ed25519,
    ]

    /// The suite with code point `rawValue`, or `unsupported`.
    public init(rawValue: UInt16) throws {
        guard rawValue == 1 || rawValue == 3 || rawValue == Self.xWingPrivateUseCodePoint else {
            throw MLSError(.unsupported, "cipher suite \(rawValue) is not implemented (1, 3 and 0xF768 are)")
        }
        self.rawValue = rawValue
    }

    private init(checked rawValue: UInt16) { self.rawValue = rawValue }

    /// The suite's registered name.
    public var description: String {
        switch rawValue {
        case 3: "MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519"
        case Self.xWingPrivateUseCodePoint: "MLS_128_MLKEM768X25519_AES128GCM_SHA256_Ed25519"
        default: "MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519"
        }
    }

    /// Whether the suite's KEM is post-quantum (X-Wing).
    public var isPostQuantum: Bool { rawValue == Self.xWingPrivateUseCodePoint }

    var isChaCha: Bool { rawValue == 3 }
    var hpke: HPKE.Suite {
        isPostQuantum ? HPKE.Suite(kem: .xWing, aead: .aes128GCM) : isChaCha ? .x25519SHA256ChaChaPoly : .x25519SHA256AES128GCM
    }
    /// `KDF.Nh`.
    var hashLength: Int { 32 }
    /// `AEAD.Nk`.
    var keyLength: Int { isChaCha ? 32 : 16 }
    /// `AEAD.Nn`.
    var nonceLength: Int { 12 }
}

/// The labelled functions of RFC 9420 §5 for one suite.
extension MLSCipherSuite {
    func hash(_ data: some ContiguousBytes) -> Data { SHA256.hash(data) }

    func extract(salt: some ContiguousBytes, ikm: some ContiguousBytes) -> SecureBytes {
        HKDF.extract(salt: salt, inputKeyMaterial: ikm, hash: .sha256)
    }

    func expand(_ secret: some ContiguousBytes, info: some ContiguousBytes, length: Int) -> SecureBytes {
        // Lengths here are fixed by the suite (at most 255 · Nh), so expansion cannot fail.
        try! HKDF.expand(pseudoRandomKey: secret, info: info, outputByteCount: length, hash: .sha256)
    }

    /// `ExpandWithLabel(Secret, Label, Context, Length)`.
    func expandWithLabel(_ secret: some ContiguousBytes, _ label: String, _ context: some ContiguousBytes, _ length: Int)
        -> SecureBytes
    {
        var writer = TLSWriter()
        writer.u16(UInt16(length))
        writer.opaque(Array(("MLS 1.0 " + label).utf8))
        writer.opaque(context)
        return expand(secret, info: writer.bytes, length: length)
    }

    /// `DeriveSecret(Secret, Label)`.
    func deriveSecret(_ secret: some ContiguousBytes, _ label: String) -> SecureBytes {
        expandWithLabel(secret, label, [UInt8](), hashLength)
    }

    /// `DeriveTreeSecret(Secret, Label, Generation, Length)`.
    func deriveTreeSecret(_ secret: some ContiguousBytes, _ label: String, _ generation: UInt32, _ length: Int)
        -> SecureBytes
    {
        var context = TLSWriter()
        context.u32(generation)
        return expandWithLabel(secret, label, context.bytes, length)
    }

    /// `RefHash(label, value)`.
    func refHash(_ label: String, _ value: some ContiguousBytes) -> Data {
        var writer = TLSWriter()
        writer.opaque(Array(label.utf8))
        writer.opaque(value)
        return hash(writer.bytes)
    }

    /// `MAC(key, data)`: HMAC-SHA256.
    func mac(key: some ContiguousBytes, _ data: some ContiguousBytes) -> Data {
        HMAC.authenticationCode(for: data, using: key, hash: .sha256)
    }

    func verifyMAC(key: some ContiguousBytes, _ data: some ContiguousBytes, tag: Data) -> Bool {
        HMAC.isValidAuthenticationCode(tag, for: data, using: key, hash: .sha256) && tag.count == hashLength
    }

    /// `SignContent`: what a signature with `label` covers.
    func signContent(_ label: String, _ content: some ContiguousBytes) -> [UInt8] {
        var writer = TLSWriter()
        writer.opaque(Array(("MLS 1.0 " + label).utf8))
        writer.opaque(content)
        return writer.bytes
    }

    /// `SignWithLabel(SignatureKey, Label, Content)`.
    func signWithLabel(_ key: Ed25519.PrivateKey, _ label: String, _ content: some ContiguousBytes) throws -> Data {
        try key.signature(for: signContent(label, content))
    }

    /// `VerifyWithLabel(VerificationKey, Label, Content, SignatureValue)`.
    func verifyWithLabel(_ publicKey: Data, _ label: String, _ content: some ContiguousBytes, _ signature: Data) -> Bool {
        guard let key = try? Ed25519.PublicKey(rawRepresentation: publicKey) else { return false }
        return key.isValidSignature(signature, for: signContent(label, content))
    }

    func signaturePrivateKey(_ raw: some ContiguousBytes) throws -> Ed25519.PrivateKey {
        do { return try Ed25519.PrivateKey(rawRepresentation: raw) } catch {
            throw MLSError(.malformed, "not an Ed25519 private key")
        }
    }

    func hpkePublicKey(_ raw: Data) throws -> MLSHPKEPublicKey {
        if isPostQuantum {
            do { return .xWing(try XWing.PublicKey(rawRepresentation: raw)) } catch {
                throw MLSError(.invalid, "not an X-Wing public key (\(raw.count) bytes, or an ML-KEM coefficient not below q)")
            }
        }
        do { return .x25519(try X25519.PublicKey(rawRepresentation: raw)) } catch {
            throw MLSError(.invalid, "not an X25519 public key (\(raw.count) bytes)")
        }
    }

    /// An X25519 public key is any 32 bytes (RFC 7748 §5); a low-order one fails at use. An
    /// X-Wing key is 1,216 bytes whose ML-KEM half has every coefficient below q (FIPS 203 §7.2).
    func checkHPKEPublicKey(_ raw: Data) throws {
        if isPostQuantum {
            guard XWing.PublicKey.isWellFormed(raw) else {
                throw MLSError(.invalid, "not an X-Wing public key (\(raw.count) bytes, or an ML-KEM coefficient not below q)")
            }
            return
        }
        guard raw.count == 32 else { throw MLSError(.invalid, "an X25519 public key is 32 bytes, not \(raw.count)") }
    }

    func hpkePrivateKey(_ raw: some ContiguousBytes) throws -> MLSHPKEPrivateKey {
        if isPostQuantum {
            do { return .xWing(try XWing.PrivateKey(seed: SecureBytes(raw))) } catch {
                throw MLSError(.malformed, "not an X-Wing private key")
            }
        }
        do { return .x25519(try X25519.PrivateKey(rawRepresentation: raw)) } catch {
            throw MLSError(.malformed, "not an X25519 private key")
        }
    }

    /// An HPKE context to `publicKey` for `info`, its randomness from `random` (32 bytes for
    /// DHKEM's ephemeral, 64 for X-Wing's encapsulation).
    func hpkeSender(to publicKey: MLSHPKEPublicKey, info: some ContiguousBytes, random: inout some MLSRandomSource) throws
        -> HPKE.Sender
    {
        switch publicKey {
        case .x25519(let key):
            return try HPKE.Sender(
                suite: hpke, recipient: key, info: info,
                unsafeEphemeral: try X25519.PrivateKey(rawRepresentation: random.secret(count: 32)))
        case .xWing(let key):
            return try HPKE.Sender(suite: hpke, recipient: key, info: info, unsafeRandomness: random.secret(count: 64))
        }
    }

    /// The HPKE context of `encapsulatedKey` for `privateKey`.
    func hpkeRecipient(_ privateKey: MLSHPKEPrivateKey, encapsulatedKey: some ContiguousBytes, info: some ContiguousBytes)
        throws -> HPKE.Recipient
    {
        switch privateKey {
        case .x25519(let key): try HPKE.Recipient(suite: hpke, privateKey: key, encapsulatedKey: encapsulatedKey, info: info)
        case .xWing(let key): try HPKE.Recipient(suite: hpke, privateKey: key, encapsulatedKey: encapsulatedKey, info: info)
        }
    }

    private func encryptContext(_ label: String, _ context: some ContiguousBytes) -> [UInt8] {
        var writer = TLSWriter()
        writer.opaque(Array(("MLS 1.0 " + label).utf8))
        writer.opaque(context)
        return writer.bytes
    }

    /// `EncryptWithLabel(PublicKey, Label, Context, Plaintext)`.
    func encryptWithLabel(
        _ publicKey: MLSHPKEPublicKey, _ label: String, _ context: some ContiguousBytes, _ plaintext: some ContiguousBytes,
        random: inout some MLSRandomSource
    ) throws -> HPKECiphertext {
        var sender = try hpkeSender(to: publicKey, info: encryptContext(label, context), random: &random)
        return HPKECiphertext(kemOutput: sender.encapsulatedKey, ciphertext: try sender.seal(plaintext, authenticating: Data()))
    }

    /// `DecryptWithLabel(PrivateKey, Label, Context, KEMOutput, Ciphertext)`.
    func decryptWithLabel(
        _ privateKey: MLSHPKEPrivateKey, _ label: String, _ context: some ContiguousBytes, _ ciphertext: HPKECiphertext
    ) throws -> SecureBytes {
        do {
            var recipient = try hpkeRecipient(
                privateKey, encapsulatedKey: ciphertext.kemOutput, info: encryptContext(label, context))
            return try recipient.open(ciphertext.ciphertext, authenticating: Data())
        } catch {
            throw MLSError(.authentication, "an HPKE ciphertext (\(label)) does not open with this key")
        }
    }

    /// `KEM.DeriveKeyPair(secret)`.
    func deriveKeyPair(_ secret: some ContiguousBytes) -> MLSHPKEPrivateKey {
        // DeriveKeyPair of X25519 takes any input and always yields a valid scalar; X-Wing's
        // takes any input to a 32-byte seed, and every seed is a key.
        if isPostQuantum { return .xWing(try! HPKE.deriveXWingKeyPair(inputKeyMaterial: secret)) }
        return .x25519(try! HPKE.deriveKeyPair(suite: hpke, inputKeyMaterial: secret))
    }

    func seal(key: SecureBytes, nonce: some ContiguousBytes, aad: some ContiguousBytes, _ plaintext: some ContiguousBytes)
        throws -> Data
    {
        if isChaCha {
            return try ChaChaPoly.seal(plaintext, using: SymmetricKey(secureBytes: key), nonce: nonce, authenticating: aad)
        }
        let box = try AESGCM.seal(
            plaintext, using: SymmetricKey(secureBytes: key), nonce: AESGCM.Nonce(nonce), authenticating: aad)
        return box.ciphertext + box.tag
    }

    func open(key: SecureBytes, nonce: some ContiguousBytes, aad: some ContiguousBytes, _ ciphertext: Data) throws
        -> SecureBytes
    {
        guard ciphertext.count >= AESGCM.tagByteCount else {
            throw MLSError(.authentication, "an AEAD ciphertext is at least 16 bytes")
        }
        do {
            if isChaCha {
                return try ChaChaPoly.open(ciphertext, using: SymmetricKey(secureBytes: key), nonce: nonce, authenticating: aad)
            }
            let box = try AESGCM.SealedBox(
                nonce: AESGCM.Nonce(nonce), ciphertext: ciphertext.dropLast(AESGCM.tagByteCount),
                tag: ciphertext.suffix(AESGCM.tagByteCount))
            return try AESGCM.open(box, using: SymmetricKey(secureBytes: key), authenticating: aad)
        } catch {
            throw MLSError(.authentication, "an AEAD ciphertext does not open")
        }
    }
}

/// A public key of a suite's KEM (X25519 or X-Wing).
enum MLSHPKEPublicKey: Sendable {
    case x25519(X25519.PublicKey)
    case xWing(XWing.PublicKey)

    /// The key as MLS carries it (`HPKEPublicKey`).
    var rawRepresentation: Data {
        switch self {
        case .x25519(let key): key.rawRepresentation
        case .xWing(let key): key.rawRepresentation
        }
    }
}

/// A private key of a suite's KEM: X25519's scalar, or X-Wing's seed.
enum MLSHPKEPrivateKey: Sendable {
    case x25519(X25519.PrivateKey)
    case xWing(XWing.PrivateKey)

    /// The key as the group's state keeps it (X25519's scalar, X-Wing's 32-byte seed).
    var rawRepresentation: SecureBytes {
        switch self {
        case .x25519(let key): key.rawRepresentation
        case .xWing(let key): key.seed
        }
    }

    /// The matching public key.
    var publicKey: MLSHPKEPublicKey {
        switch self {
        case .x25519(let key): .x25519(key.publicKey)
        case .xWing(let key): .xWing(key.publicKey)
        }
    }
}
