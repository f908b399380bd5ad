@_exported public import SparkError

/// An error thrown by SparkCrypto.
///
/// Modelled on swift-asn1's `ASN1Error`: compare errors by ``code``; the ``reason`` is for people
/// and never contains key material, plaintext or passwords.
public struct CryptoError: CodedError {
    /// What kind of failure this is. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Backing: Hashable, Sendable {
            case authenticationFailure, invalidKey, invalidNonce, invalidParameter, invalidSignature
            case malformedInput, unsupportedAlgorithm, limitExceeded, weakParameters, libraryFailure
        }

        private let backing: Backing

        /// An AEAD tag, key-wrap integrity check or password check failed: wrong key, wrong
        /// passcode or altered data. Distinct from ``libraryFailure``.
        public static let authenticationFailure = Code(backing: .authenticationFailure)
        /// A key has the wrong length or is not a valid key for the algorithm.
        public static let invalidKey = Code(backing: .invalidKey)
        /// A nonce or IV has the wrong length.
        public static let invalidNonce = Code(backing: .invalidNonce)
        /// A parameter is out of range (an output length, a salt, a count).
        public static let invalidParameter = Code(backing: .invalidParameter)
        /// A signature did not verify.
        public static let invalidSignature = Code(backing: .invalidSignature)
        /// An encoded value (base64url, JSON, JOSE object, DER) is malformed.
        public static let malformedInput = Code(backing: .malformedInput)
        /// The algorithm named by the input is not one this key or decoder accepts.
        public static let unsupportedAlgorithm = Code(backing: .unsupportedAlgorithm)
        /// The input exceeds a size or work cap that protects against denial of service.
        public static let limitExceeded = Code(backing: .limitExceeded)
        /// A security parameter is below the floor (for example PBKDF2 iterations).
        public static let weakParameters = Code(backing: .weakParameters)
        /// OpenSSL failed for a reason other than authentication.
        public static let libraryFailure = Code(backing: .libraryFailure)

        /// The code's name.
        public var description: String { String(describing: backing) }
    }

    /// What kind of failure this is.
    public let code: Code
    /// A human-readable explanation, free of secrets.
    public let reason: String
    /// The file that threw.
    public let file: String
    /// The line that threw.
    public let line: UInt

    /// Creates an error with a code and a reason.
    public init(_ code: Code, _ reason: String, file: String = #fileID, line: UInt = #line) {
        self.code = code
        self.reason = reason
        self.file = file
        self.line = line
    }
}
