/// The one shape of the project's errors: a code to switch on, and a reason for people.
///
/// Each module names its own codes (`MessagingError.Code`, `DomainError.Code`, …); what they
/// share is written once here, and no error type writes its own: two errors are equal when their
/// codes and qualifiers are (a reason is for people, and may change between releases), they hash
/// by the same, and they read `TypeName.code: reason`, or `TypeName.code(qualifier): reason`.
public protocol CodedError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The error's codes: a closed set a caller may switch on.
    associatedtype Code: Hashable, Sendable, CustomStringConvertible
    /// What went wrong.
    var code: Code { get }
    /// A human-readable explanation, free of secrets.
    var reason: String { get }
    /// What else tells two errors of one code apart, when something does: the domain's code under
    /// an SDK error, a configuration error's key. Nil for most (the default).
    var qualifier: String? { get }
}

extension CodedError {
    /// Nothing beside the code.
    public var qualifier: String? { nil }
    /// Errors are equal when their codes and qualifiers are.
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code && lhs.qualifier == rhs.qualifier }
    /// Hashes the code and the qualifier.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(qualifier)
    }
    /// `TypeName.code: reason`, or `TypeName.code(qualifier): reason`.
    public var description: String { "\(Self.self).\(code)" + (qualifier.map { "(\($0))" } ?? "") + ": \(reason)" }
}
