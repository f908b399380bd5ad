public import Foundation

/// A value stored in or read from SQLite.
public enum DatabaseValue: Sendable, Hashable {
    /// SQL NULL.
    case null
    /// A 64-bit integer.
    case integer(Int64)
    /// A double.
    case real(Double)
    /// UTF-8 text.
    case text(String)
    /// A blob.
    case blob(Data)
}

/// A Swift type that converts to and from a ``DatabaseValue``.
public protocol DatabaseValueConvertible: Sendable {
    /// The value to bind.
    var databaseValue: DatabaseValue { get }
    /// The Swift value from a stored value, or nil when the stored type does not fit.
    static func fromDatabaseValue(_ value: DatabaseValue) -> Self?
}

extension DatabaseValue: DatabaseValueConvertible {
    /// Itself.
    @inlinable public var databaseValue: DatabaseValue { self }
    /// Itself.
    @inlinable public static func fromDatabaseValue(_ value: DatabaseValue) -> DatabaseValue? { value }
}

extension Int64: DatabaseValueConvertible {
    /// An integer.
    @inlinable public var databaseValue: DatabaseValue { .integer(self) }
    /// From an integer.
    @inlinable public static func fromDatabaseValue(_ value: DatabaseValue) -> Int64? {
        if case .integer(let v) = value { return v }
        return nil
    }
}

extension Int: DatabaseValueConvertible {
    /// An integer.
    @inlinable public var databaseValue: DatabaseValue { .integer(Int64(self)) }
    /// From an integer.
    @inlinable public static func fromDatabaseValue(_ value: DatabaseValue) -> Int? {
        if case .integer(let v) = value { return Int(exactly: v) }
        return nil
    }
}

extension Bool: DatabaseValueConvertible {
    /// 0 or 1.
    @inlinable public var databaseValue: DatabaseValue { .integer(self ? 1 : 0) }
    /// From an integer: zero is false.
    @inlinable public static func fromDatabaseValue(_ value: DatabaseValue) -> Bool? {
        if case .integer(let v) = value { return v != 0 }
        return nil
    }
}

extension Double: DatabaseValueConvertible {
    /// A real.
    @inlinable public var databaseValue: DatabaseValue { .real(self) }
    /// From a real or an integer.
    @inlinable public static func fromDatabaseValue(_ value: DatabaseValue) -> Double? {
        switch value {
        case .real(let v): v
        case .integer(let v): Double(v)
        default: nil
        }
    }
}

extension String: DatabaseValueConvertible {
    /// Text.
    @inlinable public var databaseValue: DatabaseValue { .text(self) }
    /// From text.
    @inlinable public static func fromDatabaseValue(_ value: DatabaseValue) -> String? {
        if case .text(let v) = value { return v }
        return nil
    }
}

extension Data: DatabaseValueConvertible {
    /// A blob.
    @inlinable public var databaseValue: DatabaseValue { .blob(self) }
    /// From a blob (an empty blob may be stored as NULL by SQLite's zero-length handling).
    @inlinable public static func fromDatabaseValue(_ value: DatabaseValue) -> Data? {
        switch value {
        case .blob(let v): v
        default: nil
        }
    }
}

extension Optional: DatabaseValueConvertible where Wrapped: DatabaseValueConvertible {
    /// NULL for nil.
    @inlinable public var databaseValue: DatabaseValue { self?.databaseValue ?? .null }
    /// nil for NULL.
    @inlinable public static func fromDatabaseValue(_ value: DatabaseValue) -> Wrapped?? {
        if case .null = value { return .some(nil) }
        guard let wrapped = Wrapped.fromDatabaseValue(value) else { return nil }
        return .some(wrapped)
    }
}

/// One result row: values by column index or name. Reading a value is inlinable, so that a
/// caller's `get` is specialized for the type it asks for rather than resolved at run time.
public struct Row: Sendable, Hashable {
    /// The column names, in order.
    public let columns: [String]
    /// The values, in column order.
    public let values: [DatabaseValue]

    /// Creates a row.
    public init(columns: [String], values: [DatabaseValue]) {
        self.columns = columns
        self.values = values
    }

    /// The value at `index`, converted; throws when the index or the stored type is wrong.
    @inlinable public func get<T: DatabaseValueConvertible>(_ index: Int, as type: T.Type = T.self) throws -> T {
        guard values.indices.contains(index) else {
            throw StoreError(.misuse, message: "no column at index \(index) (the row has \(values.count))")
        }
        guard let value = T.fromDatabaseValue(values[index]) else {
            throw StoreError(.misuse, message: "column \(columns[index]) holds \(values[index].typeName), not \(T.self)")
        }
        return value
    }

    /// The value of the column named `name`, converted.
    public func get<T: DatabaseValueConvertible>(_ name: String, as type: T.Type = T.self) throws -> T {
        guard let index = columns.firstIndex(of: name) else {
            throw StoreError(.misuse, message: "no column named \(name)")
        }
        return try get(index, as: type)
    }
}

extension DatabaseValue {
    @usableFromInline var typeName: String {
        switch self {
        case .null: "NULL"
        case .integer: "INTEGER"
        case .real: "REAL"
        case .text: "TEXT"
        case .blob: "BLOB"
        }
    }
}
