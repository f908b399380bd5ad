import CPostgreSQL
import Foundation
import SparkDomain
import SparkStore

/// A failure PostgreSQL reported, or the connection's: its SQLSTATE (empty when the connection
/// itself failed) and message. Never the values bound to a statement, which may be secrets.
struct PostgreSQLError: Error, CustomStringConvertible {
    /// The five-character SQLSTATE, or "" for a connection failure.
    var state: String
    var message: String
    /// The statement that failed, if any.
    var sql: String?

    /// A serialization failure or a deadlock: the transaction may simply run again.
    var isRetryable: Bool { state == "40001" || state == "40P01" }
    /// The server is gone, starting, shutting down or read-only (a standby): another
    /// connection, later or to another host, may succeed.
    var isConnectionLoss: Bool {
        state.isEmpty || state.hasPrefix("08") || state == "57P01" || state == "57P02" || state == "57P03"
            || state == "25006"
    }
    /// Bad data from a caller (a NUL in text, an out-of-range number): the request's fault.
    var isDataException: Bool { state.hasPrefix("22") }

    var description: String {
        let statement = sql.map { " in `\($0.prefix(120))`" } ?? ""
        return state.isEmpty ? "PostgreSQL: \(message)\(statement)" : "PostgreSQL \(state): \(message)\(statement)"
    }
}

/// One libpq connection, used by one thread at a time (the pool hands it out): statements are
/// prepared once per connection and run with binary parameters; results come back as text and
/// are read by their column's type.
final class PostgreSQLConnection: @unchecked Sendable {
    private let connection: OpaquePointer
    /// Prepared statements by SQL and parameter types.
    private var prepared: [PreparedKey: String] = [:]

    private struct PreparedKey: Hashable {
        var sql: String
        var types: [Oid]
    }

    /// Connects with a libpq connection string or URI; throws a connection failure with
    /// libpq's reason (which never includes the password).
    init(conninfo: String) throws {
        guard let connection = PQconnectdb(conninfo) else {
            throw PostgreSQLError(state: "", message: "libpq could not allocate a connection")
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = String(cString: PQerrorMessage(connection)).trimmingCharacters(in: .whitespacesAndNewlines)
            PQfinish(connection)
            throw PostgreSQLError(state: "", message: message)
        }
        self.connection = connection
        // Rows come back as text in UTC with every digit of a double.
        _ = try? simple("SET TIME ZONE 'UTC'; SET extra_float_digits = 3")
        // A commit the domain answered is on the disk: a server whose default is
        // `synchronous_commit = off` would answer before its log is flushed (a crash of the
        // server's machine then loses it). `on`, `local` and the replication modes all wait.
        if (try? run("SELECT current_setting('synchronous_commit')", []).rows.first?.get(0, as: String.self)) == "off" {
            _ = try? simple("SET synchronous_commit = on")
        }
    }

    deinit { PQfinish(connection) }

    /// Whether the connection is still up as far as libpq knows.
    var isHealthy: Bool { PQstatus(connection) == CONNECTION_OK }

    /// Whether a transaction was left open (a failure in the middle of one).
    var isInTransaction: Bool { PQtransactionStatus(connection) != PQTRANS_IDLE }

    /// The socket, for waiting on notifications.
    var socket: Int32 { PQsocket(connection) }

    /// Runs SQL without parameters (several statements allowed), discarding any rows.
    func simple(_ sql: String) throws {
        guard let result = PQexec(connection, sql) else { throw failure(nil, sql: sql) }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else { throw failure(result, sql: sql) }
    }

    /// Runs one statement with `arguments` for its `$n` parameters.
    func run(_ sql: String, _ arguments: [DatabaseValue]) throws -> Outcome {
        var types: [Oid] = []
        var values: [Data?] = []
        var formats: [Int32] = []
        for argument in arguments {
            switch argument {
            case .null:
                types.append(0)
                values.append(nil)
            case .integer(let value):
                types.append(20)  // int8
                values.append(withUnsafeBytes(of: value.bigEndian) { Data($0) })
            case .real(let value):
                types.append(701)  // float8
                values.append(withUnsafeBytes(of: value.bitPattern.bigEndian) { Data($0) })
            case .text(let value):
                types.append(25)  // text, binary: its UTF-8 bytes (a NUL is refused, not cut)
                values.append(Data(value.utf8))
            case .blob(let value):
                types.append(17)  // bytea
                values.append(value)
            }
            formats.append(1)
        }
        let name = try statementName(sql: sql, types: types)
        let result = try withParameters(values) { pointers, lengths in
            PQexecPrepared(connection, name, Int32(arguments.count), pointers, lengths, formats, 0)
        }
        guard let result else { throw failure(nil, sql: sql) }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK:
            return Outcome(rows: [], changed: Self.changed(result))
        case PGRES_TUPLES_OK:
            return Outcome(rows: try Self.rows(result), changed: Self.changed(result))
        default:
            throw failure(result, sql: sql)
        }
    }

    /// What a statement did.
    struct Outcome {
        var rows: [Row]
        var changed: Int
    }

    /// The notifications that arrived, after reading what the socket holds.
    func notifications() throws -> [(channel: String, payload: String)] {
        guard PQconsumeInput(connection) == 1 else { throw failure(nil, sql: nil) }
        var found: [(String, String)] = []
        while let notice = PQnotifies(connection) {
            found.append((String(cString: notice.pointee.relname), String(cString: notice.pointee.extra)))
            PQfreemem(notice)
        }
        return found
    }

    private func statementName(sql: String, types: [Oid]) throws -> String {
        let key = PreparedKey(sql: sql, types: types)
        if let name = prepared[key] { return name }
        let name = "s\(prepared.count)"
        guard let result = PQprepare(connection, name, sql, Int32(types.count), types) else {
            throw failure(nil, sql: sql)
        }
        defer { PQclear(result) }
        guard PQresultStatus(result) == PGRES_COMMAND_OK else { throw failure(result, sql: sql) }
        prepared[key] = name
        return name
    }

    private func withParameters<T>(
        _ values: [Data?], _ body: (UnsafePointer<UnsafePointer<CChar>?>, UnsafePointer<Int32>) throws -> T
    ) throws -> T {
        // One buffer holds every value; libpq reads it only during the call.
        var storage = Data()
        var offsets: [(Int, Int)?] = []
        for value in values {
            if let value {
                offsets.append((storage.count, value.count))
                storage.append(value)
            } else {
                offsets.append(nil)
            }
        }
        storage.append(0)
        let lengths = offsets.map { Int32($0?.1 ?? 0) }
        return try storage.withUnsafeBytes { raw in
            let base = raw.bindMemory(to: CChar.self).baseAddress!
            let pointers: [UnsafePointer<CChar>?] = offsets.map { $0.map { base + $0.0 } }
            return try pointers.withUnsafeBufferPointer { pointers in
                try lengths.withUnsafeBufferPointer { lengths in
                    try body(
                        pointers.baseAddress ?? UnsafePointer(bitPattern: 1)!,
                        lengths.baseAddress ?? UnsafePointer(bitPattern: 4)!)
                }
            }
        }
    }

    private func failure(_ result: OpaquePointer?, sql: String?) -> PostgreSQLError {
        if let result, let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))) {
            let message = PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) } ?? "failed"
            return PostgreSQLError(state: String(cString: state), message: message, sql: sql)
        }
        let message = String(cString: PQerrorMessage(connection)).trimmingCharacters(in: .whitespacesAndNewlines)
        return PostgreSQLError(state: "", message: message.isEmpty ? "the connection failed" : message, sql: sql)
    }

    private static func changed(_ result: OpaquePointer) -> Int {
        Int(String(cString: PQcmdTuples(result))) ?? 0
    }

    /// The rows of a text-format result, each value read by its column's type.
    private static func rows(_ result: OpaquePointer) throws -> [Row] {
        let count = Int(PQntuples(result))
        let width = Int(PQnfields(result))
        let columns = (0..<width).map { String(cString: PQfname(result, Int32($0))) }
        let types = (0..<width).map { PQftype(result, Int32($0)) }
        var rows: [Row] = []
        rows.reserveCapacity(count)
        for index in 0..<count {
            var values: [DatabaseValue] = []
            values.reserveCapacity(width)
            for column in 0..<width {
                if PQgetisnull(result, Int32(index), Int32(column)) == 1 {
                    values.append(.null)
                    continue
                }
                let length = Int(PQgetlength(result, Int32(index), Int32(column)))
                let text = PQgetvalue(result, Int32(index), Int32(column))!
                let bytes = UnsafeRawBufferPointer(start: text, count: length)
                values.append(try value(bytes, type: types[column]))
            }
            rows.append(Row(columns: columns, values: values))
        }
        return rows
    }

    private static func value(_ bytes: UnsafeRawBufferPointer, type: Oid) throws -> DatabaseValue {
        let text = String(decoding: bytes, as: UTF8.self)
        switch type {
        case 16:  // bool
            return .integer(text == "t" ? 1 : 0)
        case 20, 21, 23, 26:  // int8, int2, int4, oid
            guard let value = Int64(text) else { throw PostgreSQLError(state: "", message: "unreadable integer '\(text)'") }
            return .integer(value)
        case 700, 701:  // float4, float8
            guard let value = Double(text) else { throw PostgreSQLError(state: "", message: "unreadable number '\(text)'") }
            return .real(value)
        case 1700:  // numeric (sum of integers): an integer when it is one
            if let value = Int64(text) { return .integer(value) }
            guard let value = Double(text) else { throw PostgreSQLError(state: "", message: "unreadable number '\(text)'") }
            return .real(value)
        case 17:  // bytea, in hex: \x0123…
            guard bytes.count >= 2, bytes[0] == UInt8(ascii: "\\"), bytes[1] == UInt8(ascii: "x"), bytes.count % 2 == 0 else {
                throw PostgreSQLError(state: "", message: "unreadable bytea")
            }
            var data = Data(capacity: (bytes.count - 2) / 2)
            var index = 2
            while index < bytes.count {
                guard let high = hexDigit(bytes[index]), let low = hexDigit(bytes[index + 1]) else {
                    throw PostgreSQLError(state: "", message: "unreadable bytea")
                }
                data.append(high << 4 | low)
                index += 2
            }
            return .blob(data)
        default:
            return .text(text)
        }
    }

    private static func hexDigit(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// `?` placeholders numbered as PostgreSQL wants them (`$1`, `$2`, …), outside quoted text.
    static func numbered(_ sql: String) -> String {
        var out = ""
        out.reserveCapacity(sql.utf8.count + 8)
        var number = 0
        var quote: Character?
        for character in sql {
            if let open = quote {
                if character == open { quote = nil }
                out.append(character)
            } else if character == "'" || character == "\"" {
                quote = character
                out.append(character)
            } else if character == "?" {
                number += 1
                out += "$\(number)"
            } else {
                out.append(character)
            }
        }
        return out
    }
}
