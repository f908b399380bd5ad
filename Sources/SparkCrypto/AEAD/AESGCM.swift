public import Foundation

/// AES in Galois/Counter Mode (NIST SP 800-38D) with a 128-bit tag.
///
/// SparkCrypto's keys are 256-bit; 128- and 192-bit keys are accepted for interoperability and
/// published vectors. Nonces must never repeat under one key: use ``Nonce/random()``.
///
/// ```swift
/// let key = SymmetricKey(size: .bits256)
/// let box = try AESGCM.seal(plaintext, using: key, authenticating: header)
/// let opened = try AESGCM.open(box, using: key, authenticating: header)
/// ```
public enum AESGCM {
    /// The tag length in bytes.
    public static let tagByteCount = 16

    /// A GCM nonce (IV). Twelve bytes is the standard size.
    public struct Nonce: Sendable, Hashable {
        /// The nonce bytes.
        public let bytes: Data

        /// Wraps existing nonce bytes (1 to 128 bytes, OpenSSL's limit; use 12 unless a format says otherwise).
        public init(_ bytes: some ContiguousBytes) throws {
            let data = bytes.withUnsafeBytes { Data($0) }
            guard (1...128).contains(data.count) else {
                throw CryptoError(.invalidNonce, "an AES-GCM nonce must be 1...128 bytes, got \(data.count)")
            }
            self.bytes = data
        }

        /// A fresh random 12-byte nonce.
        public static func random() -> Nonce {
            var bytes = Data(count: 12)
            bytes.withUnsafeMutableBytes { NonceSource.fill($0) }
            return Nonce(validated: bytes)
        }

        private init(validated bytes: Data) { self.bytes = bytes }
    }

    /// A sealed message: nonce, ciphertext and tag.
    public struct SealedBox: Sendable, Hashable {
        /// The nonce the message was sealed with.
        public let nonce: Nonce
        /// The ciphertext, as long as the plaintext.
        public let ciphertext: Data
        /// The 16-byte authentication tag.
        public let tag: Data

        /// Assembles a box from its parts, for example after decoding a JWE.
        public init(nonce: Nonce, ciphertext: Data, tag: Data) throws {
            guard tag.count == AESGCM.tagByteCount else {
                throw CryptoError(.malformedInput, "an AES-GCM tag must be 16 bytes, got \(tag.count)")
            }
            self.nonce = nonce
            self.ciphertext = ciphertext
            self.tag = tag
        }

        /// Nonce, ciphertext and tag concatenated.
        public var combined: Data { nonce.bytes + ciphertext + tag }

        /// Splits `nonce ‖ ciphertext ‖ tag` with a 12-byte nonce.
        public init(combined: Data) throws {
            guard combined.count >= 12 + AESGCM.tagByteCount else {
                throw CryptoError(.malformedInput, "a combined AES-GCM box is at least 28 bytes, got \(combined.count)")
            }
            let bytes = Data(combined)
            try self.init(
                nonce: Nonce(bytes.prefix(12)),
                ciphertext: bytes.dropFirst(12).dropLast(AESGCM.tagByteCount),
                tag: bytes.suffix(AESGCM.tagByteCount))
        }
    }

    /// Encrypts and authenticates `plaintext`, also authenticating `authenticatedData`.
    public static func seal(
        _ plaintext: some ContiguousBytes,
        using key: SymmetricKey,
        nonce: Nonce = .random(),
        authenticating authenticatedData: some ContiguousBytes = Data()
    ) throws -> SealedBox {
        try checkKey(key)
        let (ciphertext, tag) = try OpenSSLAESGCM.seal(plaintext, key: key, nonce: nonce.bytes, aad: authenticatedData)
        return try SealedBox(nonce: nonce, ciphertext: ciphertext, tag: tag)
    }

    /// Verifies and decrypts a box.
    ///
    /// - Throws: ``CryptoError/Code/authenticationFailure`` when the key, nonce, associated data,
    ///   ciphertext or tag do not match; ``CryptoError/Code/libraryFailure`` for anything else.
    public static func open(
        _ box: SealedBox,
        using key: SymmetricKey,
        authenticating authenticatedData: some ContiguousBytes = Data()
    ) throws -> SecureBytes {
        try checkKey(key)
        return try OpenSSLAESGCM.open(
            box.ciphertext, key: key, nonce: box.nonce.bytes, aad: authenticatedData, tag: box.tag)
    }

    /// Verifies and decrypts `nonce (12) ‖ ciphertext ‖ tag (16)` laid out in one buffer, writing
    /// the plaintext into `output` (at least as long as the ciphertext) without any copy on the
    /// way; returns the plaintext's length. For callers that read many small sealed values at once.
    /// On failure `output` may hold unauthenticated bytes: discard them.
    ///
    /// - Throws: ``CryptoError/Code/authenticationFailure`` as ``open(_:using:authenticating:)``;
    ///   ``CryptoError/Code/malformedInput`` when the buffer is shorter than a nonce and a tag, or
    ///   `output` is shorter than the ciphertext.
    public static func open(
        combined: UnsafeRawBufferPointer, using key: SymmetricKey, authenticating authenticatedData: UnsafeRawBufferPointer,
        into output: UnsafeMutableRawBufferPointer
    ) throws -> Int {
        try checkKey(key)
        // A 256-bit key opens through libsodium where the CPU lets it (one call instead of five;
        // see `SodiumAESGCM`), through OpenSSL otherwise: the same function.
        if key.byteCount == 32, let expanded = key.cipherContexts.expandedKey(key) {
            return try SodiumAESGCM.open(combined: combined, state: expanded, aad: authenticatedData, into: output)
        }
        return try OpenSSLAESGCM.open(combined: combined, key: key, aad: authenticatedData, into: output)
    }

    private static func checkKey(_ key: SymmetricKey) throws {
        guard [16, 24, 32].contains(key.byteCount) else {
            throw CryptoError(.invalidKey, "an AES key must be 16, 24 or 32 bytes, got \(key.byteCount)")
        }
    }
}
