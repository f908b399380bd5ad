internal import CSparkKEM
public import Foundation

/// ML-KEM-768 (FIPS 203): a key-encapsulation mechanism whose security rests on module lattices,
/// so a recording of today's key exchange stays closed to a future quantum computer.
///
/// The implementation is the project's own C (`Sources/CSparkKEM`), written from the standard,
/// constant time by construction and checked under valgrind with its secrets undefined
/// (`scripts/check-kem-ct.sh`), and held to NIST's, Wycheproof's and C2SP's vectors and to
/// OpenSSL's ML-KEM through pyca/cryptography (docs/CRYPTO.md, "ML-KEM-768 and X-Wing, and what proves them").
public enum MLKEM768 {
    /// An encapsulation key's length.
    public static let publicKeyByteCount = Int(SPARK_MLKEM768_EK_BYTES)
    /// A decapsulation key's length in FIPS 203's expanded form.
    public static let expandedPrivateKeyByteCount = Int(SPARK_MLKEM768_DK_BYTES)
    /// A ciphertext's length.
    public static let ciphertextByteCount = Int(SPARK_MLKEM768_CT_BYTES)
    /// A shared secret's length.
    public static let sharedSecretByteCount = Int(SPARK_MLKEM_SS_BYTES)
    /// A private key's seed length (`d ‖ z`).
    public static let seedByteCount = 64

    /// A decapsulation key, kept as its 64-byte seed `d ‖ z` and expanded (ŝ decoded, with the
    /// public key's matrix and hash, as OpenSSL's key objects keep them), both in wiped memory.
    public struct PrivateKey: Sendable, CustomStringConvertible {
        /// `d ‖ z` (empty for a key imported in its expanded form).
        public let seed: SecureBytes
        /// The C library's expanded key (`struct spark_mlkem768_private`).
        let state: SecureBytes
        /// The matching encapsulation key.
        public let publicKey: PublicKey

        /// A fresh key from the system's generator.
        public init() throws { try self.init(seed: SecureBytes(randomCount: MLKEM768.seedByteCount)) }

        /// The key ML-KEM.KeyGen_internal makes from `seed` = `d ‖ z` (64 bytes).
        public init(seed: SecureBytes) throws {
            guard seed.count == MLKEM768.seedByteCount else {
                throw CryptoError(.invalidKey, "an ML-KEM-768 seed is 64 bytes (d ‖ z), got \(seed.count)")
            }
            let state = try SecureBytes(count: Int(SPARK_MLKEM768_PRIVATE_STATE_BYTES)) { key in
                let status = seed.withUnsafeBytes { seed in
                    spark_mlkem768_private_from_seed(
                        OpaquePointer(key.baseAddress!), seed.bytePointer, seed.bytePointer + 32)
                }
                try MLKEM768.check(status, "key generation")
            }
            self.seed = seed
            self.state = state
            publicKey = PublicKey(privateState: state)
        }

        /// A key in FIPS 203's expanded form (2,400 bytes), after its hash check (§7.3). Its seed
        /// is unknown, so ``seed`` is empty.
        public init(expandedRepresentation dk: some ContiguousBytes) throws {
            let key = SecureBytes(dk)
            guard key.count == MLKEM768.expandedPrivateKeyByteCount else {
                throw CryptoError(.invalidKey, "an expanded ML-KEM-768 key is 2,400 bytes, got \(key.count)")
            }
            let state = try SecureBytes(count: Int(SPARK_MLKEM768_PRIVATE_STATE_BYTES)) { state in
                let status = key.withUnsafeBytes { dk in
                    spark_mlkem768_private_from_bytes(OpaquePointer(state.baseAddress!), dk.bytePointer)
                }
                try MLKEM768.check(status, "the key's hash check")
            }
            seed = SecureBytes(zeroes: 0)
            self.state = state
            publicKey = PublicKey(privateState: state)
        }

        /// The expanded key in FIPS 203's form (2,400 bytes), in wiped memory.
        public var expandedRepresentation: SecureBytes {
            SecureBytes(count: MLKEM768.expandedPrivateKeyByteCount) { dk in
                state.withUnsafeBytes { state in
                    spark_mlkem768_private_to_bytes(dk.mutableBytePointer, OpaquePointer(state.baseAddress!))
                }
            }
        }

        /// The shared secret `ciphertext` carries; a ciphertext that was not made for this key
        /// gives an unrelated secret (implicit rejection), never an error.
        public func decapsulate(_ ciphertext: some ContiguousBytes) throws -> SecureBytes {
            let count = ciphertext.withUnsafeBytes { $0.count }
            guard count == MLKEM768.ciphertextByteCount else {
                throw CryptoError(.malformedInput, "an ML-KEM-768 ciphertext is 1,088 bytes, got \(count)")
            }
            return try SecureBytes(count: MLKEM768.sharedSecretByteCount) { shared in
                let status = ciphertext.withUnsafeBytes { ct in
                    state.withUnsafeBytes { key in
                        spark_mlkem768_decaps_expanded(
                            shared.mutableBytePointer, ct.bytePointer, OpaquePointer(key.baseAddress!))
                    }
                }
                try MLKEM768.check(status, "decapsulation")
            }
        }

        /// Never shows the key.
        public var description: String { "MLKEM768.PrivateKey" }
    }

    /// An encapsulation key, checked as FIPS 203 §7.2 asks (every coefficient below q), and
    /// expanded once (its matrix sampled, its hash taken) for every encapsulation to it.
    public struct PublicKey: Sendable, Hashable {
        /// The 1,184 bytes.
        public let rawRepresentation: Data
        /// The C library's expanded key (`struct spark_mlkem768_public`).
        let state: Data

        /// The key from its bytes.
        ///
        /// - Throws: ``CryptoError/Code/invalidKey`` for a wrong length or a coefficient not below q.
        public init(rawRepresentation: some ContiguousBytes) throws {
            let bytes = rawRepresentation.withUnsafeBytes { Data($0) }
            guard bytes.count == MLKEM768.publicKeyByteCount else {
                throw CryptoError(.invalidKey, "an ML-KEM-768 encapsulation key is 1,184 bytes, got \(bytes.count)")
            }
            var state = Data(count: Int(SPARK_MLKEM768_PUBLIC_STATE_BYTES))
            let status = state.withUnsafeMutableBytes { key in
                bytes.withUnsafeBytes { ek in spark_mlkem768_public_from_bytes(OpaquePointer(key.baseAddress!), ek.bytePointer) }
            }
            guard status != SPARK_KEM_INVALID else {
                throw CryptoError(.invalidKey, "an ML-KEM-768 encapsulation key holds a coefficient not below q")
            }
            try MLKEM768.check(status, "the encapsulation key's expansion")
            self.rawRepresentation = bytes
            self.state = state
        }

        /// The public part of an expanded private key (its first bytes).
        init(privateState: SecureBytes) {
            state = privateState.withUnsafeBytes { Data($0.prefix(Int(SPARK_MLKEM768_PUBLIC_STATE_BYTES))) }
            rawRepresentation = state.withUnsafeBytes { key in
                Data(bytes: spark_mlkem768_public_bytes(OpaquePointer(key.baseAddress!)), count: MLKEM768.publicKeyByteCount)
            }
        }

        /// Keys are equal when their bytes are.
        public static func == (lhs: PublicKey, rhs: PublicKey) -> Bool { lhs.rawRepresentation == rhs.rawRepresentation }

        /// Hashes the key's bytes.
        public func hash(into hasher: inout Hasher) { hasher.combine(rawRepresentation) }

        /// A fresh shared secret and the ciphertext that carries it to the key's holder.
        public func encapsulate() throws -> (sharedSecret: SecureBytes, ciphertext: Data) {
            try encapsulate(unsafeRandomness: SecureBytes(randomCount: 32))
        }

        /// ``encapsulate()`` with its 32 random bytes `m` given: for test vectors only (the same
        /// `m` twice gives the same secret twice).
        public func encapsulate(unsafeRandomness m: SecureBytes) throws -> (sharedSecret: SecureBytes, ciphertext: Data) {
            guard m.count == 32 else { throw CryptoError(.invalidParameter, "ML-KEM's m is 32 bytes, got \(m.count)") }
            var ciphertext = Data(count: MLKEM768.ciphertextByteCount)
            let shared = try SecureBytes(count: MLKEM768.sharedSecretByteCount) { shared in
                let status = ciphertext.withUnsafeMutableBytes { ct in
                    state.withUnsafeBytes { key in
                        m.withUnsafeBytes { m in
                            spark_mlkem768_encaps_expanded(
                                ct.mutableBytePointer, shared.mutableBytePointer, OpaquePointer(key.baseAddress!),
                                m.bytePointer)
                        }
                    }
                }
                try MLKEM768.check(status, "encapsulation")
            }
            return (shared, ciphertext)
        }
    }

    static func check(_ status: Int32, _ step: String) throws {
        switch status {
        case 0: return
        case SPARK_KEM_INVALID: throw CryptoError(.invalidKey, "ML-KEM-768 \(step) refused the key")
        default: throw CryptoError(.libraryFailure, "ML-KEM-768 \(step) failed in OpenSSL")
        }
    }
}
