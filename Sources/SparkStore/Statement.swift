internal import CSQLite
import Foundation

/// A prepared statement; the only owner of its `sqlite3_stmt`, finalized in `deinit`.
@usableFromInline final class Statement {
    private let handle: OpaquePointer
    private unowned let database: Database
    @usableFromInline let sql: String
    private lazy var columnNames: [String] = (0..<sqlite3_column_count(handle)).map {
        String(cString: sqlite3_column_name(handle, $0))
    }

    init(database: Database, sql: String) throws {
        var handle: OpaquePointer?
        let result = sqlite3_prepare_v3(database.handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &handle, nil)
        guard result == SQLITE_OK, let handle else { throw database.error(result, sql: sql) }
        self.handle = handle
        self.database = database
        self.sql = sql
    }

    deinit { sqlite3_finalize(handle) }

    @usableFromInline func bind(_ arguments: [any DatabaseValueConvertible]) throws {
        let expected = Int(sqlite3_bind_parameter_count(handle))
        guard arguments.count == expected else {
            throw StoreError(.misuse, message: "statement takes \(expected) arguments, got \(arguments.count)", sql: sql)
        }
        sqlite3_clear_bindings(handle)
        for (offset, argument) in arguments.enumerated() {
            let index = Int32(offset + 1)
            let result: Int32
            switch argument.databaseValue {
            case .null: result = sqlite3_bind_null(handle, index)
            case .integer(let value): result = sqlite3_bind_int64(handle, index, value)
            case .real(let value): result = sqlite3_bind_double(handle, index, value)
            case .text(let value): result = sqlite3_bind_text(handle, index, value, -1, spark_SQLITE_TRANSIENT())
            case .blob(let value):
                result = value.withUnsafeBytes {
                    // A zero-length blob needs a non-null pointer to be stored as a blob, not NULL.
                    sqlite3_bind_blob(
                        handle, index, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32($0.count),
                        spark_SQLITE_TRANSIENT())
                }
            }
            guard result == SQLITE_OK else { throw database.error(result, sql: sql) }
        }
    }

    /// Advances; true when a row is available.
    @usableFromInline func step() throws -> Bool {
        let result = sqlite3_step(handle)
        switch result {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw database.error(result, sql: sql)
        }
    }

    @usableFromInline func reset() {
        sqlite3_reset(handle)
    }

    func row() -> Row {
        let count = sqlite3_column_count(handle)
        var values: [DatabaseValue] = []
        values.reserveCapacity(Int(count))
        for column in 0..<count { values.append(value(at: column)) }
        return Row(columns: columnNames, values: values)
    }

    /// The current row's value in `column`, copied out of SQLite.
    @usableFromInline func value(at column: Int32) -> DatabaseValue {
        switch sqlite3_column_type(handle, column) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(handle, column))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(handle, column))
        case SQLITE_TEXT: return .text(sqlite3_column_text(handle, column).map { String(cString: $0) } ?? "")
        case SQLITE_BLOB:
            // > The pointer returned by sqlite3_column_blob() is valid until the next step,
            // > reset or finalize; the bytes are copied here.
            let count = Int(sqlite3_column_bytes(handle, column))
            guard count > 0, let bytes = sqlite3_column_blob(handle, column) else { return .blob(Data()) }
            return .blob(Data(bytes: bytes, count: count))
        default: return .null
        }
    }

    @usableFromInline var columnCount: Int { Int(sqlite3_column_count(handle)) }

    @usableFromInline func columnName(_ column: Int) -> String { columnNames[column] }

    /// The current row's blob in `column` where SQLite holds it (nil when NULL), valid during
    /// `body` only.
    @usableFromInline func withBlob<T>(at column: Int32, _ body: (UnsafeRawBufferPointer) throws -> T) throws -> T? {
        switch sqlite3_column_type(handle, column) {
        case SQLITE_NULL: return nil
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(handle, column))
            guard count > 0, let bytes = sqlite3_column_blob(handle, column) else {
                return try body(UnsafeRawBufferPointer(start: nil, count: 0))
            }
            return try body(UnsafeRawBufferPointer(start: bytes, count: count))
        default:
            throw StoreError(
                .misuse, message: "column \(columnNames[Int(column)]) holds \(value(at: column).typeName), not a blob", sql: sql)
        }
    }
}

/// The current row of a query, read where SQLite holds it (``Database/rows(_:_:reading:)``): no
/// ``Row`` is built, and a blob can be read in place (a sealed value opened straight from
/// SQLite's buffer, never copied). Valid only during the call it is handed to: the statement's
/// next step moves it.
public struct ColumnReader: ~Copyable {
    @usableFromInline let statement: Statement

    @usableFromInline init(statement: Statement) { self.statement = statement }

    /// How many columns the row has.
    @inlinable public var count: Int { statement.columnCount }

    /// The value in `column`, converted as ``Row/get(_:as:)`` converts it; throws when the index
    /// or the stored type is wrong.
    @inlinable public func get<T: DatabaseValueConvertible>(_ column: Int, as type: T.Type = T.self) throws -> T {
        guard column >= 0, column < count else {
            throw StoreError(.misuse, message: "no column at index \(column) (the row has \(count))", sql: statement.sql)
        }
        let value = statement.value(at: Int32(column))
        guard let converted = T.fromDatabaseValue(value) else {
            throw StoreError(
                .misuse, message: "column \(statement.columnName(column)) holds \(value.typeName), not \(T.self)",
                sql: statement.sql)
        }
        return converted
    }

    /// Runs `body` on the blob in `column` where SQLite holds it (valid during `body` only); nil
    /// when the column is NULL. Throws when the index is wrong or the value is not a blob.
    @inlinable public func withBlob<T>(_ column: Int, _ body: (UnsafeRawBufferPointer) throws -> T) throws -> T? {
        guard column >= 0, column < count else {
            throw StoreError(.misuse, message: "no column at index \(column) (the row has \(count))", sql: statement.sql)
        }
        return try statement.withBlob(at: Int32(column), body)
    }
}
