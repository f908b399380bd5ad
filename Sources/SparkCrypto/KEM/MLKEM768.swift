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

    /// A decapsulation key, kept as its 64-byte seed `d ‖ z` and the expanded key, both in wiped
    /// memory.
    public struct PrivateKey: Sendable, CustomStringConvertible {
        /// `d ‖ z`.
        public let seed: SecureBytes
        let expanded: SecureBytes
        /// The matching encapsulation key.
        public let publicKey: PublicKey

        /// A fresh key from the system's generator.
        public init() throws { try self.init(seed: SecureBytes(randomCount: MLKEM768.seedByteCount)) }

        /// The key ML-KEM.KeyGen_internal makes from `seed` = `d ‖ z` (64 bytes).
        public init(seed: SecureBytes) throws {
            guard seed.count == MLKEM768.seedByteCount else {
                throw CryptoError(.invalidKey, "an ML-KEM-768 seed is 64 bytes (d ‖ z), got \(seed.count)")
            }
            var encapsulationKey = Data(count: MLKEM768.publicKeyByteCount)
            let expanded = try SecureBytes(count: MLKEM768.expandedPrivateKeyByteCount) { dk in
                let status = seed.withUnsafeBytes { seed in
                    encapsulationKey.withUnsafeMutableBytes { ek in
                        spark_mlkem768_keygen_derand(
                            ek.mutableBytePointer, dk.mutableBytePointer, seed.bytePointer, seed.bytePointer + 32)
                    }
                }
                try MLKEM768.check(status, "key generation")
            }
            self.seed = seed
            self.expanded = expanded
            publicKey = try PublicKey(rawRepresentation: encapsulationKey)
        }

        /// A key in FIPS 203's expanded form (2,400 bytes), after its hash check (§7.3). Its seed
        /// is unknown, so ``seed`` is empty.
        public init(expandedRepresentation dk: some ContiguousBytes) throws {
            let key = SecureBytes(dk)
            guard key.count == MLKEM768.expandedPrivateKeyByteCount else {
                throw CryptoError(.invalidKey, "an expanded ML-KEM-768 key is 2,400 bytes, got \(key.count)")
            }
            try MLKEM768.check(key.withUnsafeBytes { spark_mlkem768_check_dk($0.bytePointer) }, "the key's hash check")
            seed = SecureBytes(zeroes: 0)
            expanded = key
            publicKey = try PublicKey(rawRepresentation: key.withUnsafeBytes { Data($0[1152..<(1152 + 1184)]) })
        }

        /// The expanded key (2,400 bytes), in wiped memory.
        public var expandedRepresentation: SecureBytes { expanded }

        /// The shared secret `ciphertext` carries; a ciphertext that was not made for this key
        /// gives an unrelated secret (implicit rejection), never an error.
        public func decapsulate(_ ciphertext: some ContiguousBytes) throws -> SecureBytes {
            let count = ciphertext.withUnsafeBytes { $0.count }
            guard count == MLKEM768.ciphertextByteCount else {
                throw CryptoError(.malformedInput, "an ML-KEM-768 ciphertext is 1,088 bytes, got \(count)")
            }
            return try SecureBytes(count: MLKEM768.sharedSecretByteCount) { shared in
                let status = ciphertext.withUnsafeBytes { ct in
                    expanded.withUnsafeBytes { dk in
                        spark_mlkem768_decaps(shared.mutableBytePointer, ct.bytePointer, dk.bytePointer)
                    }
                }
                try MLKEM768.check(status, "decapsulation")
            }
        }

        /// Never shows the key.
        public var description: String { "MLKEM768.PrivateKey" }
    }

    /// An encapsulation key, checked as FIPS 203 §7.2 asks (every coefficient below q).
    public struct PublicKey: Sendable, Hashable {
        /// The 1,184 bytes.
        public let rawRepresentation: Data

        /// The key from its bytes.
        ///
        /// - Throws: ``CryptoError/Code/invalidKey`` for a wrong length or a coefficient not below q.
        public init(rawRepresentation: some ContiguousBytes) throws {
            let bytes = rawRepresentation.withUnsafeBytes { Data($0) }
            guard bytes.count == MLKEM768.publicKeyByteCount else {
                throw CryptoError(.invalidKey, "an ML-KEM-768 encapsulation key is 1,184 bytes, got \(bytes.count)")
            }
            guard bytes.withUnsafeBytes({ spark_mlkem768_check_ek($0.bytePointer) }) == 0 else {
                throw CryptoError(.invalidKey, "an ML-KEM-768 encapsulation key holds a coefficient not below q")
            }
            self.rawRepresentation = bytes
        }

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
                    rawRepresentation.withUnsafeBytes { ek in
                        m.withUnsafeBytes { m in
                            spark_mlkem768_encaps_derand(
                                ct.mutableBytePointer, shared.mutableBytePointer, ek.bytePointer, m.bytePointer)
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
