@_exported public import SparkError

/// An error from SparkStore: SQLite's extended result code and message, and the SQL that failed
/// (never the values bound to it, which may be secrets).
public struct StoreError: CodedError {
    /// What kind of failure this is. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Backing: Hashable, Sendable {
            case sqlite, busy, constraint, corrupt, schemaTooNew, fileAccess, misuse
        }

        private let backing: Backing

        /// Any other SQLite failure; see ``StoreError/resultCode``.
        public static let sqlite = Code(backing: .sqlite)
        /// The database stayed locked by another connection beyond the busy timeout.
        public static let busy = Code(backing: .busy)
        /// A constraint (unique, foreign key, check, not null) was violated.
        public static let constraint = Code(backing: .constraint)
        /// The file is not a database or is damaged.
        public static let corrupt = Code(backing: .corrupt)
        /// The database was migrated by a newer version of the software.
        public static let schemaTooNew = Code(backing: .schemaTooNew)
        /// The file or its directory could not be created or opened.
        public static let fileAccess = Code(backing: .fileAccess)
        /// The API was used wrongly (a bad column index, a value of the wrong type).
        public static let misuse = Code(backing: .misuse)

        /// The code's name.
        public var description: String { String(describing: backing) }
    }

    /// What kind of failure this is.
    public let code: Code
    /// SQLite's extended result code, or 0 when the error did not come from SQLite.
    public let resultCode: Int32
    /// SQLite's message or SparkStore's explanation.
    public let message: String
    /// The SQL statement involved, if any (without bound values).
    public let sql: String?
    /// The file that threw.
    public let file: String
    /// The line that threw.
    public let line: UInt

    /// Creates an error.
    public init(
        _ code: Code, resultCode: Int32 = 0, message: String, sql: String? = nil, file: String = #fileID, line: UInt = #line
    ) {
        self.code = code
        self.resultCode = resultCode
        self.message = message
        self.sql = sql
        self.file = file
        self.line = line
    }

    /// The message, as every coded error names it.
    public var reason: String { message }

    /// `StoreError.<code> (SQLite <n>): <message> in <sql>`.
    public var description: String {
        var text = "StoreError.\(code)"
        if resultCode != 0 { text += " (SQLite \(resultCode))" }
        text += ": \(message)"
        if let sql { text += " in `\(sql)`" }
        return text
    }
}
