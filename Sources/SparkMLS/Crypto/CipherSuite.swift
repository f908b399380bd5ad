import Foundation
import SparkCrypto

/// An MLS cipher suite (RFC 9420 §17.1). SparkMLS implements suite 1,
/// `MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519`, and suite 3,
/// `MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519`; others are refused as `unsupported`.
public struct MLSCipherSuite: Hashable, Sendable, CustomStringConvertible {
    /// The IANA code point.
    public let rawValue: UInt16

    /// `MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519`, suite 1.
    public static let x25519AES128GCMSHA256Ed25519 = MLSCipherSuite(checked: 1)

    /// `MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519`, suite 3.
    public static let x25519ChaCha20Poly1305SHA256Ed25519 = MLSCipherSuite(checked: 3)

    /// The suites this implementation can run.
    public static let supported: [MLSCipherSuite] = [.x25519AES128GCMSHA256Ed25519, .x25519ChaCha20Poly1305SHA256Ed25519]

    /// The suite with code point `rawValue`, or `unsupported`.
    public init(rawValue: UInt16) throws {
        guard rawValue == 1 || rawValue == 3 else {
            throw MLSError(.unsupported, "cipher suite \(rawValue) is not implemented (1 and 3 are)")
        }
        self.rawValue = rawValue
    }

    private init(checked rawValue: UInt16) { self.rawValue = rawValue }

    /// The suite's registered name.
    public var description: String {
        isChaCha
            ? "MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519" : "MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519"
    }

    var isChaCha: Bool { rawValue == 3 }
    var hpke: HPKE.Suite { isChaCha ? .x25519SHA256ChaChaPoly : .x25519SHA256AES128GCM }
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

    func hpkePublicKey(_ raw: Data) throws -> X25519.PublicKey {
        do { return try X25519.PublicKey(rawRepresentation: raw) } catch {
            throw MLSError(.invalid, "not an X25519 public key (\(raw.count) bytes)")
        }
    }

    /// An X25519 public key is any 32 bytes (RFC 7748 §5); a low-order one fails at use.
    func checkHPKEPublicKey(_ raw: Data) throws {
        guard raw.count == 32 else { throw MLSError(.invalid, "an X25519 public key is 32 bytes, not \(raw.count)") }
    }

    func hpkePrivateKey(_ raw: some ContiguousBytes) throws -> X25519.PrivateKey {
        do { return try X25519.PrivateKey(rawRepresentation: raw) } catch {
            throw MLSError(.malformed, "not an X25519 private key")
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
        _ publicKey: X25519.PublicKey, _ label: String, _ context: some ContiguousBytes, _ plaintext: some ContiguousBytes,
        random: inout some MLSRandomSource
    ) throws -> HPKECiphertext {
        let ephemeral = try X25519.PrivateKey(rawRepresentation: random.secret(count: 32))
        var sender = try HPKE.Sender(
            suite: hpke, recipient: publicKey, info: encryptContext(label, context), unsafeEphemeral: ephemeral)
        return HPKECiphertext(kemOutput: sender.encapsulatedKey, ciphertext: try sender.seal(plaintext, authenticating: Data()))
    }

    /// `DecryptWithLabel(PrivateKey, Label, Context, KEMOutput, Ciphertext)`.
    func decryptWithLabel(
        _ privateKey: X25519.PrivateKey, _ label: String, _ context: some ContiguousBytes, _ ciphertext: HPKECiphertext
    ) throws -> SecureBytes {
        do {
            return try HPKE.openBase(
                suite: hpke, privateKey: privateKey, encapsulatedKey: ciphertext.kemOutput,
                info: encryptContext(label, context), authenticating: Data(), ciphertext: ciphertext.ciphertext)
        } catch {
            throw MLSError(.authentication, "an HPKE ciphertext (\(label)) does not open with this key")
        }
    }

    /// `KEM.DeriveKeyPair(secret)`.
    func deriveKeyPair(_ secret: some ContiguousBytes) -> X25519.PrivateKey {
        // DeriveKeyPair of X25519 takes any input and always yields a valid scalar.
        try! HPKE.deriveKeyPair(suite: hpke, inputKeyMaterial: secret)
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
