/// The one shape of the project's errors: a code to switch on, and a reason for people.
///
/// Each module names its own codes (`MessagingError.Code`, `DomainError.Code`, …); what they
/// share is written once here: two errors are equal when their codes are (a reason is for
/// people, and may change between releases), they hash by their code, and they read
/// `TypeName.code: reason`. A type whose identity holds more than its code (the domain's code
/// under an SDK error, the key of a configuration error) says so in its own `==` and `hash`.
public protocol CodedError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The error's codes: a closed set a caller may switch on.
    associatedtype Code: Hashable, Sendable, CustomStringConvertible
    /// What went wrong.
    var code: Code { get }
    /// A human-readable explanation, free of secrets.
    var reason: String { get }
}

extension CodedError {
    /// Errors are equal when their codes are.
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    /// Hashes the code.
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
    /// `TypeName.code: reason`.
    public var description: String { "\(Self.self).\(code): \(reason)" }
}
