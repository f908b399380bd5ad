internal import CSQLite
import Foundation

/// A prepared statement; the only owner of its `sqlite3_stmt`, finalized in `deinit`.
final class Statement {
    private let handle: OpaquePointer
    private unowned let database: Database
    let sql: String
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

    func bind(_ arguments: [any DatabaseValueConvertible]) throws {
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
    func step() throws -> Bool {
        let result = sqlite3_step(handle)
        switch result {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw database.error(result, sql: sql)
        }
    }

    func reset() {
        sqlite3_reset(handle)
    }

    func row() -> Row {
        let count = sqlite3_column_count(handle)
        var values: [DatabaseValue] = []
        values.reserveCapacity(Int(count))
        for column in 0..<count {
            switch sqlite3_column_type(handle, column) {
            case SQLITE_INTEGER: values.append(.integer(sqlite3_column_int64(handle, column)))
            case SQLITE_FLOAT: values.append(.real(sqlite3_column_double(handle, column)))
            case SQLITE_TEXT:
                let text = sqlite3_column_text(handle, column).map { String(cString: $0) } ?? ""
                values.append(.text(text))
            case SQLITE_BLOB:
                // > The pointer returned by sqlite3_column_blob() is valid until the next step,
                // > reset or finalize; the bytes are copied here.
                let count = Int(sqlite3_column_bytes(handle, column))
                if count > 0, let bytes = sqlite3_column_blob(handle, column) {
                    values.append(.blob(Data(bytes: bytes, count: count)))
                } else {
                    values.append(.blob(Data()))
                }
            default: values.append(.null)
            }
        }
        return Row(columns: columnNames, values: values)
    }
}
