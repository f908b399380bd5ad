import Foundation
import SparkTestSupport
import Testing

@testable import SparkMLS

/// The MLS working group's vectors, read from `SPARK_MLS_VECTORS_DIR` (default
/// the repository's `Tests/Vectors/mls`). Each file's entries of suites 1 and 3 are
/// checked; the others are counted as unsupported and printed, never as passed.
enum MLSVectors {
    static var directory: URL {
        ProcessInfo.processInfo.environment["SPARK_MLS_VECTORS_DIR"].map { URL(fileURLWithPath: $0) }
            ?? Fixtures.repositoryRoot.appendingPathComponent("Tests/Vectors/mls")
    }

    struct Mismatch: Error, CustomStringConvertible {
        let description: String
    }

    /// Runs `check` on every entry of `file` whose suite is implemented, records an issue for each
    /// entry that fails, prints the tally and returns the number that passed.
    @discardableResult
    static func run(_ file: String, suiteKeyed: Bool = true, _ check: (Entry) throws -> Void) throws -> Int {
        let url = directory.appendingPathComponent("\(file).json")
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [[String: Any]])
        var passed = 0
        var unsupported = 0
        var failed = 0
        for (index, fields) in entries.enumerated() {
            let entry = Entry(fields: fields, index: index, file: file)
            if suiteKeyed, ![1, 3].contains(fields["cipher_suite"] as? Int ?? 0) {
                unsupported += 1
                continue
            }
            do {
                try check(entry)
                passed += 1
            } catch {
                failed += 1
                Issue.record("\(file).json entry \(index): \(error)")
            }
        }
        print("MLS vectors \(file).json: \(passed) passed, \(failed) failed, \(unsupported) unsupported (other suites)")
        #expect(passed > 0, "no entry of \(file).json was checked")
        return passed
    }

    struct Entry {
        let fields: [String: Any]
        let index: Int
        let file: String

        subscript(key: String) -> Any? { fields[key] }

        func hex(_ key: String) -> Data { Data(hex: fields[key] as? String ?? "") }
        func int(_ key: String) -> Int { fields[key] as? Int ?? -1 }
        func string(_ key: String) -> String { fields[key] as? String ?? "" }
        func object(_ key: String) -> Entry { Entry(fields: fields[key] as? [String: Any] ?? [:], index: index, file: file) }
        func objects(_ key: String) -> [Entry] {
            (fields[key] as? [[String: Any]] ?? []).map { Entry(fields: $0, index: index, file: file) }
        }
        var suite: MLSCipherSuite {
            (fields["cipher_suite"] as? Int) == 3 ? .x25519ChaCha20Poly1305SHA256Ed25519 : .x25519AES128GCMSHA256Ed25519
        }
    }

    /// Throws a ``Mismatch`` naming `what` unless `actual == expected`.
    static func expectEqual<T: Equatable>(_ actual: T, _ expected: T, _ what: String) throws {
        guard actual == expected else { throw Mismatch(description: "\(what): got \(actual), expected \(expected)") }
    }

    static func expectTrue(_ condition: Bool, _ what: String) throws {
        guard condition else { throw Mismatch(description: what) }
    }
}

extension Data {
    var hexString: String { map { String(format: "%02x", $0) }.joined() }
}
