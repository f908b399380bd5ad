public import SparkDomain
@_exported public import SparkError

/// An error from messaging. Compare by ``code``.
public struct MessagingError: CodedError {
    /// What went wrong. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        /// Setup has not succeeded, so there are no keys to send or read with; or the service
        /// was stopped, reset or signed out since this `BBMAccess` was made.
        public static let notReady = Code(name: "notReady")
        /// Content and data together exceed 70 KB.
        public static let tooLarge = Code(name: "tooLarge")
        /// No such chat, or this user is no longer in it.
        public static let unknownChat = Code(name: "unknownChat")
        /// A user has no published identity (they never set up a device).
        public static let unknownUser = Code(name: "unknownUser")
        /// Something arrived that is not what it claims: bad signature, wrong chat, replayed
        /// or reordered. It is dropped and nothing is marked.
        public static let forged = Code(name: "forged")
        /// The domain refused; see ``MessagingError/domainCode``.
        public static let refused = Code(name: "refused")
        /// The local store failed.
        public static let storageFailure = Code(name: "storageFailure")
        /// What arrived contradicts what this endpoint stored (a member listed twice, a
        /// message number already taken): it is dropped, and nothing of it is kept.
        public static let conflict = Code(name: "conflict")
        /// A participant's identity key is not trusted (it changed, or is a first contact the
        /// policy holds): nothing is sealed to it until the user accepts it
        /// (``BBMAccess/acceptIdentityChange(of:)``) or confirms the safety number.
        public static let identityUnconfirmed = Code(name: "identityUnconfirmed")
        /// The safety number the user confirmed is not the one of the contact's current key (it
        /// changed meanwhile, or was misread): nothing was marked.
        public static let safetyNumberMismatch = Code(name: "safetyNumberMismatch")
        /// The code the user compared is not the one of this device and the device to approve
        /// (misread, or another device is posing as it): nothing was approved.
        public static let deviceCodeMismatch = Code(name: "deviceCodeMismatch")
        /// What the app asked is not valid: a reaction that is not one emoji, or past the
        /// limit of reactions one user adds to a message.
        public static let invalidArgument = Code(name: "invalidArgument")
        /// The code's name.
        public var description: String { name }
    }

    /// What went wrong.
    public let code: Code
    /// A readable explanation, without message content.
    public let reason: String
    /// The domain's code, when the domain refused.
    public let domainCode: DomainError.Code?

    /// An error.
    public init(_ code: Code, _ reason: String, domainCode: DomainError.Code? = nil) {
        self.code = code
        self.reason = reason
        self.domainCode = domainCode
    }
}
