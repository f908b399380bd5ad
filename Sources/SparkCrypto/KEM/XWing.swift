internal import CSparkKEM
public import Foundation

/// X-Wing (draft-connolly-cfrg-xwing-kem): ML-KEM-768 and X25519 together, so a shared secret
/// stays secret while either holds, combined with SHA3-256 as the draft says. Its private key is
/// a 32-byte seed; its public key `pk_M ‖ pk_X` (1,216 bytes); its ciphertext `ct_M ‖ ct_X`
/// (1,120 bytes). HPKE names it KEM `0x647A` (``HPKE``).
public enum XWing {
    /// A public key's length.
    public static let publicKeyByteCount = Int(SPARK_XWING_PK_BYTES)
    /// A private key's (seed's) length.
    public static let privateKeyByteCount = Int(SPARK_XWING_SK_BYTES)
    /// A ciphertext's length.
    public static let ciphertextByteCount = Int(SPARK_XWING_CT_BYTES)
    /// A shared secret's length.
    public static let sharedSecretByteCount = Int(SPARK_XWING_SS_BYTES)

    /// A decapsulation key: its seed, and the parts the seed expands to (ML-KEM's expanded key,
    /// X25519's scalar), kept so that a decapsulation does not expand it again; all wiped.
    public struct PrivateKey: Sendable, CustomStringConvertible {
        /// The 32-byte seed, X-Wing's private key.
        public let seed: SecureBytes
        /// ML-KEM's expanded key (`struct spark_mlkem768_private`).
        let mlkem: SecureBytes
        let x25519: SecureBytes
        /// The matching public key.
        public let publicKey: PublicKey

        /// A fresh key from the system's generator.
        public init() throws { try self.init(seed: SecureBytes(randomCount: XWing.privateKeyByteCount)) }

        /// The key of `seed` (GenerateKeyPairDerand).
        public init(seed: SecureBytes) throws {
            guard seed.count == XWing.privateKeyByteCount else {
                throw CryptoError(.invalidKey, "an X-Wing private key is a 32-byte seed, got \(seed.count)")
            }
            var publicBytes = Data(count: XWing.publicKeyByteCount)
            var scalar = SecureBytes(zeroes: 32)
            let mlkem = try SecureBytes(count: Int(SPARK_MLKEM768_PRIVATE_STATE_BYTES)) { key in
                let status = publicBytes.withUnsafeMutableBytes { pk in
                    scalar.withUnsafeMutableBytes { sk in
                        seed.withUnsafeBytes { seed in
                            spark_xwing_private_from_seed(
                                OpaquePointer(key.baseAddress!), sk.mutableBytePointer, pk.mutableBytePointer, seed.bytePointer)
                        }
                    }
                }
                try MLKEM768.check(status, "X-Wing key generation")
            }
            self.seed = seed
            self.mlkem = mlkem
            x25519 = scalar
            publicKey = PublicKey(rawRepresentation: publicBytes, mlkem: MLKEM768.PublicKey(privateState: mlkem))
        }

        /// The shared secret `ciphertext` carries (ML-KEM's implicit rejection: a ciphertext not
        /// made for this key gives an unrelated secret, never an error).
        public func decapsulate(_ ciphertext: some ContiguousBytes) throws -> SecureBytes {
            let count = ciphertext.withUnsafeBytes { $0.count }
            guard count == XWing.ciphertextByteCount else {
                throw CryptoError(.malformedInput, "an X-Wing ciphertext is 1,120 bytes, got \(count)")
            }
            return try SecureBytes(count: XWing.sharedSecretByteCount) { shared in
                let status = ciphertext.withUnsafeBytes { ct in
                    mlkem.withUnsafeBytes { key in
                        x25519.withUnsafeBytes { sk in
                            publicKey.x25519.withUnsafeBytes { pk in
                                spark_xwing_decaps_state(
                                    shared.mutableBytePointer, ct.bytePointer, OpaquePointer(key.baseAddress!),
                                    sk.bytePointer, pk.bytePointer)
                            }
                        }
                    }
                }
                try MLKEM768.check(status, "X-Wing decapsulation")
            }
        }

        /// Never shows the key.
        public var description: String { "XWing.PrivateKey" }
    }

    /// A public key, its ML-KEM half checked as FIPS 203 §7.2 asks (and expanded once).
    public struct PublicKey: Sendable, Hashable {
        /// The 1,216 bytes: ML-KEM-768's encapsulation key, then X25519's public key.
        public let rawRepresentation: Data
        let mlkem: MLKEM768.PublicKey
        var x25519: Data { rawRepresentation.suffix(32) }

        /// The key from its bytes.
        ///
        /// - Throws: ``CryptoError/Code/invalidKey`` for a wrong length or an ML-KEM half with a
        ///   coefficient not below q.
        public init(rawRepresentation: some ContiguousBytes) throws {
            let bytes = rawRepresentation.withUnsafeBytes { Data($0) }
            guard bytes.count == XWing.publicKeyByteCount else {
                throw CryptoError(.invalidKey, "an X-Wing public key is 1,216 bytes, got \(bytes.count)")
            }
            mlkem = try MLKEM768.PublicKey(rawRepresentation: bytes.prefix(MLKEM768.publicKeyByteCount))
            self.rawRepresentation = bytes
        }

        init(rawRepresentation: Data, mlkem: MLKEM768.PublicKey) {
            self.rawRepresentation = rawRepresentation
            self.mlkem = mlkem
        }

        /// Keys are equal when their bytes are.
        public static func == (lhs: PublicKey, rhs: PublicKey) -> Bool { lhs.rawRepresentation == rhs.rawRepresentation }

        /// Hashes the key's bytes.
        public func hash(into hasher: inout Hasher) { hasher.combine(rawRepresentation) }

        /// Whether `raw` is a public key's bytes (the length, and the ML-KEM half's coefficients
        /// below q), without expanding it: for checking many keys that may never be used.
        public static func isWellFormed(_ raw: Data) -> Bool {
            raw.count == XWing.publicKeyByteCount
                && raw.withUnsafeBytes { spark_mlkem768_check_ek($0.bytePointer) } == 0
        }

        /// A fresh shared secret and the ciphertext that carries it.
        public func encapsulate() throws -> (sharedSecret: SecureBytes, ciphertext: Data) {
            try encapsulate(unsafeRandomness: SecureBytes(randomCount: 64))
        }

        /// ``encapsulate()`` with its 64 random bytes (`eseed`) given: for test vectors only.
        public func encapsulate(unsafeRandomness eseed: SecureBytes) throws -> (sharedSecret: SecureBytes, ciphertext: Data) {
            guard eseed.count == 64 else {
                throw CryptoError(.invalidParameter, "X-Wing's encapsulation randomness is 64 bytes, got \(eseed.count)")
            }
            var ciphertext = Data(count: XWing.ciphertextByteCount)
            let shared = try SecureBytes(count: XWing.sharedSecretByteCount) { shared in
                let status = ciphertext.withUnsafeMutableBytes { ct in
                    mlkem.state.withUnsafeBytes { key in
                        x25519.withUnsafeBytes { pk in
                            eseed.withUnsafeBytes { eseed in
                                spark_xwing_encaps_expanded(
                                    ct.mutableBytePointer, shared.mutableBytePointer, OpaquePointer(key.baseAddress!),
                                    pk.bytePointer, eseed.bytePointer)
                            }
                        }
                    }
                }
                try MLKEM768.check(status, "X-Wing encapsulation")
            }
            return (shared, ciphertext)
        }
    }
}
