@_exported public import SparkError

/// Why SparkMLS refused an input or an operation. The group is unchanged whenever one is thrown.
public struct MLSError: CodedError {
    /// The kind of refusal, for programs; ``reason`` says more, for people.
    public enum Code: String, Sendable, Hashable {
        /// The bytes are not a valid encoding (truncated, trailing bytes, a non-minimal length, an
        /// unknown enumeration value).
        case malformed
        /// A signature, MAC, tag or AEAD check failed.
        case authentication
        /// The message belongs to another group, epoch or suite, or comes from a non-member.
        case wrongGroup
        /// A rule of RFC 9420 (§12.2 proposal validation, leaf node validation, parent hashes …)
        /// was broken.
        case invalid
        /// A message key was already used or deleted, or is beyond the out-of-order window.
        case keyUnavailable
        /// The feature or algorithm is not implemented (another cipher suite, X.509 credentials).
        case unsupported
        /// The caller's credential validator refused a credential.
        case credentialRefused
        /// The operation does not apply in this state (for example, committing with no proposals
        /// to commit when a path is not wanted).
        case state
    }

    /// The kind of refusal.
    public let code: Code
    /// What was wrong, in words.
    public let reason: String

    /// An error of `code` with `reason`.
    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }
}

extension MLSError.Code: CustomStringConvertible {
    /// The code's name.
    public var description: String { rawValue }
}
