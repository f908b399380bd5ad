import Foundation
import SparkCrypto
import SparkDomain

/// How a passcode becomes the management blob's key-encryption key, with the domain's OPRF
/// in the middle so that no guess can be tested without asking the domain (`docs/FORMATS.md`):
///
/// ```
/// x   = PBKDF2-HMAC-SHA-512(passcode, "spark-passcode-v1" ‖ 0x00 ‖ p2s, p2c, 32)
/// y   = VOPRF-P256-SHA256(userKey, x)          the domain's evaluation, blinded (RFC 9497)
/// KEK = HKDF-SHA-256(ikm = y ‖ x, salt = p2s, info = "spark-passcode-kek-v1" ‖ 0x00 ‖ userID, 32)
/// ```
///
/// Each evaluation is one counted attempt at the domain; its challenge is signed once the keys
/// open, which makes the attempt right.
struct PasscodeProtection {
    /// The `suite` of the `spark-oprf` header.
    static let suite = "VOPRF-P256-SHA256"

    let domain: any DomainService
    let caller: BBMKeyManager.Caller

    /// One attempt's outcome: the key-encryption keys and the challenge to prove.
    struct Attempt {
        /// The KEK under the key asked for, and that key's header parameters.
        let key: SymmetricKey
        let parameters: JWE.OPRFParameters
        /// Under the domain's current key, when it is not the one asked for (a rotation).
        let current: (key: SymmetricKey, parameters: JWE.OPRFParameters)?
        let challenge: Data
        let attemptsLeft: Int
    }

    /// `x`: the stretched passcode.
    static func stretch(_ passcode: String, salt: Data, iterations: Int) throws -> SecureBytes {
        try PBKDF2.deriveKey(
            fromPassword: Data(passcode.utf8), salt: Data("spark-passcode-v1".utf8) + [0] + salt, hash: .sha512,
            outputByteCount: 32, unsafeUncheckedRounds: iterations)
    }

    /// The KEK from the OPRF output `y` and the stretched passcode `x`.
    static func keyEncryptionKey(output: SecureBytes, stretched: SecureBytes, salt: Data, userID: String) throws -> SymmetricKey {
        var material = output
        material.append(stretched)
        return SymmetricKey(
            secureBytes: try HKDF.deriveKey(
                inputKeyMaterial: material, salt: salt, info: Data("spark-passcode-kek-v1".utf8) + [0] + Data(userID.utf8),
                outputByteCount: 32, hash: .sha256))
    }

    /// Stretches, blinds, asks the domain (one counted attempt) and finalizes. With `pinned`
    /// (the backup's public key), an evaluation under any other key is refused before the
    /// passcode is judged.
    func attempt(passcode: String, salt: Data, iterations: Int, keyID: String?, pinned: Data?) async throws -> Attempt {
        let stretched = try Self.stretch(passcode, salt: salt, iterations: iterations)
        let oprf = OPRF.passcodeHardening
        let blinded = try oprf.blind(stretched)
        let answer = try await KeyManagementError.refusing {
            try await domain.evaluatePasscode(
                token: caller.token, endpointID: caller.endpointID, blindedElement: blinded.element, keyID: keyID)
        }
        func derive(_ evaluation: PasscodeEvaluation.Evaluation) throws -> (SymmetricKey, JWE.OPRFParameters) {
            let output: SecureBytes
            do {
                output = try oprf.finalize(
                    [blinded], .init(elements: [evaluation.element], proof: evaluation.proof), publicKey: evaluation.publicKey)[0]
            } catch {
                throw KeyManagementError(
                    .domainKeyMismatch, "the domain's passcode evaluation does not prove which key made it: \(error)")
            }
            let parameters = JWE.OPRFParameters(
                suite: Self.suite, keyID: evaluation.keyID, publicKey: evaluation.publicKey.base64URLEncodedString(),
                salt: salt.base64URLEncodedString(), iterations: iterations)
            return (
                try Self.keyEncryptionKey(output: output, stretched: stretched, salt: salt, userID: caller.userID), parameters
            )
        }
        if let pinned, answer.requested.publicKey != pinned {
            throw KeyManagementError(
                .domainKeyMismatch,
                "the domain evaluated the passcode with a key other than the one this backup was made with; the passcode was not checked"
            )
        }
        let (key, parameters) = try derive(answer.requested)
        let current = try answer.current.map { try derive($0) }
        return Attempt(
            key: key, parameters: parameters, current: current.map { (key: $0.0, parameters: $0.1) }, challenge: answer.challenge,
            attemptsLeft: answer.attemptsLeft)
    }

    /// An attempt for a blob made before the OPRF (PBES2 alone): it is counted like any other,
    /// and its challenge proves the unlock.
    func countedLegacyAttempt() async throws -> Attempt {
        let blinded = try OPRF.passcodeHardening.blind(SecureBytes(randomCount: 32))
        let answer = try await KeyManagementError.refusing {
            try await domain.evaluatePasscode(
                token: caller.token, endpointID: caller.endpointID, blindedElement: blinded.element, keyID: nil)
        }
        let unused = JWE.OPRFParameters(suite: Self.suite, keyID: "", publicKey: "", salt: "", iterations: 0)
        return Attempt(
            key: SymmetricKey(size: .bits256), parameters: unused, current: nil, challenge: answer.challenge,
            attemptsLeft: answer.attemptsLeft)
    }

}
