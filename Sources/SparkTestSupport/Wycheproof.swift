public import Foundation

/// Project Wycheproof's JSON test files, read from the repository's `Tests/Vectors/wycheproof/`
/// (or `$SPARK_WYCHEPROOF_DIR`). Each test's `result` is `valid`, `invalid` or
/// `acceptable`.
public enum Wycheproof {
    /// Where the files are looked for.
    public static var directory: URL {
        if let override = ProcessInfo.processInfo.environment["SPARK_WYCHEPROOF_DIR"] {
            return URL(fileURLWithPath: override)
        }
        return Fixtures.repositoryRoot.appendingPathComponent("Tests/Vectors/wycheproof")
    }

    /// A test group: its own fields and its tests.
    public struct Group: @unchecked Sendable {
        // @unchecked Sendable: the JSON dictionaries are read-only after parsing.
        /// The group's fields other than `tests`.
        public let fields: [String: Any]
        /// The tests.
        public let tests: [Test]

        /// A hex field of the group decoded.
        public func hex(_ key: String) -> Data { Data(hex: fields[key] as? String ?? "") }
        /// An integer field of the group.
        public func int(_ key: String) -> Int { fields[key] as? Int ?? -1 }
    }

    /// One test case.
    public struct Test: @unchecked Sendable, CustomStringConvertible {
        // @unchecked Sendable: the JSON dictionary is read-only after parsing.
        /// All fields of the test.
        public let fields: [String: Any]
        /// `tcId`.
        public var id: Int { fields["tcId"] as? Int ?? -1 }
        /// `result`.
        public var result: String { fields["result"] as? String ?? "" }
        /// `flags`.
        public var flags: [String] { fields["flags"] as? [String] ?? [] }
        /// A hex field decoded.
        public func hex(_ key: String) -> Data { Data(hex: fields[key] as? String ?? "") }
        /// An integer field.
        public func int(_ key: String) -> Int { fields[key] as? Int ?? -1 }
        /// `tcId`, `comment` and `flags`, for failure messages.
        public var description: String { "tcId \(id) (\(fields["comment"] as? String ?? "")) \(flags) expected \(result)" }
    }

    /// Loads the groups of `file`.
    public static func groups(_ file: String) throws -> [Group] {
        let data = try Data(contentsOf: directory.appendingPathComponent(file))
        let root = try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
        let groups = root["testGroups"] as? [[String: Any]] ?? []
        return groups.map { group in
            Group(
                fields: group.filter { $0.key != "tests" },
                tests: (group["tests"] as? [[String: Any]] ?? []).map { Test(fields: $0) })
        }
    }

    /// Counts of results seen, so that a test can assert that every category was exercised.
    public struct Tally: CustomStringConvertible, Sendable {
        /// Cases with result `valid` checked.
        public var valid = 0
        /// Cases with result `invalid` checked.
        public var invalid = 0
        /// Cases with result `acceptable` checked.
        public var acceptable = 0
        /// Creates an empty tally.
        public init() {}
        /// Adds one case.
        public mutating func count(_ test: Test) {
            switch test.result {
            case "valid": valid += 1
            case "invalid": invalid += 1
            default: acceptable += 1
            }
        }
        /// `valid/invalid/acceptable` counts.
        public var description: String { "valid \(valid), invalid \(invalid), acceptable \(acceptable)" }
        /// The total.
        public var total: Int { valid + invalid + acceptable }
    }
}
