import Foundation
import Testing

/// The domain engine by area: each table of the domain's database is read and written by the SQL
/// of one area only (docs/ARCHITECTURE.md, "The domain by area"). Another area that needs it
/// calls the owner's functions, inside the same transaction when it must. This test reads the
/// engine's sources and fails on any SQL that names another area's table, and on a file or a
/// table that no area claims.
@Suite("The domain engine: each table belongs to one area")
struct TableOwnershipTests {
    /// Each area: its files (under Sources/SparkDomainEngine) and its tables.
    static let areas: [(area: String, files: [String], tables: [String])] = [
        (
            "policy, tokens and mail", ["Engine/DomainEngine.swift", "Engine/DomainEngine+Policy.swift"],
            ["domain", "issuer_keys", "principals", "outbox"]
        ),
        (
            "accounts", ["Engine/DomainEngine+Accounts.swift"],
            ["accounts", "account_codes", "code_guesses", "login_attempts", "refresh_tokens"]
        ),
        ("issuers", ["Engine/DomainEngine+Discovery.swift"], ["external_issuers"]),
        ("endpoints and identities", ["Engine/DomainEngine+Endpoints.swift"], ["endpoints", "endpoint_approvals", "identities"]),
        (
            "passcodes", ["Engine/DomainEngine+Passcodes.swift"],
            ["key_blobs", "unlock_challenges", "identity_resets", "passcode_key_versions"]
        ),
        ("key packages", ["Engine/DomainEngine+KeyPackages.swift"], ["key_packages", "key_package_claims"]),
        (
            "chats and the mailbox",
            [
                "Engine/DomainEngine+Messaging.swift", "Engine/DomainEngine+Posts.swift", "Engine/DomainEngine+Commits.swift",
                "Engine/GroupCommit.swift", "Messaging/MailboxWaiters.swift",
            ],
            ["chats", "chat_members", "mailbox", "mailbox_heads", "mailbox_held", "posted", "posted_clustered"]
        ),
        (
            "moderation", ["Engine/DomainEngine+Moderation.swift", "Engine/DomainEngine+Blocking.swift"],
            ["moderation", "infractions", "reports", "blocks"]
        ),
        ("blobs", ["Engine/DomainEngine+Blobs.swift"], ["blobs", "blob_parts"]),
        (
            "transparency", ["Transparency/TransparencyLog.swift", "Transparency/TransparencyHeadPin.swift"],
            ["kt_log", "kt_heads", "kt_pending", "kt_audits", "kt_auditors"]
        ),
    ]

    /// Files that name no table: the database's schema and migrations (every table, by design),
    /// and the parts below and beside the areas.
    static let noArea: Set<String> = [
        "Store/DomainMigrations.swift", "Embedded/DomainSchema.swift",
    ]

    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Sources/SparkDomainEngine").standardizedFileURL

    /// The tables a source's SQL names (after FROM, JOIN, INTO, UPDATE or TABLE).
    static func tablesNamed(in text: String, among tables: Set<String>) -> Set<String> {
        var named: Set<String> = []
        let words = text.split(whereSeparator: { !($0.isLetter || $0.isNumber || $0 == "_") }).map(String.init)
        for (index, word) in words.enumerated().dropLast()
        where ["FROM", "JOIN", "INTO", "UPDATE", "TABLE"].contains(word) && tables.contains(words[index + 1]) {
            named.insert(words[index + 1])
        }
        return named
    }

    @Test func eachTableIsNamedByTheSQLOfItsAreaAlone() throws {
        let schema = try String(contentsOf: Self.sources.appendingPathComponent("Store/DomainMigrations.swift"), encoding: .utf8)
        let created = Set(
            schema.components(separatedBy: "CREATE TABLE ").dropFirst().compactMap {
                $0.replacingOccurrences(of: "IF NOT EXISTS ", with: "").split(whereSeparator: { !($0.isLetter || $0 == "_") })
                    .first.map(String.init)
            })
        #expect(created.count > 30)
        let owned = Self.areas.flatMap(\.tables)
        #expect(Set(owned) == created, "every table has one area: \(created.symmetricDifference(owned))")
        #expect(owned.count == Set(owned).count, "no table in two areas")

        let files = try #require(FileManager.default.enumerator(atPath: Self.sources.path)).compactMap { $0 as? String }
            .filter { $0.hasSuffix(".swift") }
        var violations: [String] = []
        for file in files where !Self.noArea.contains(file) {
            let text = try String(contentsOf: Self.sources.appendingPathComponent(file), encoding: .utf8)
            let named = Self.tablesNamed(in: text, among: created)
            let area = Self.areas.first { $0.files.contains(file) }
            let others = named.subtracting(area?.tables ?? [])
            if !others.isEmpty { violations.append("\(file) (\(area?.area ?? "no area")) names \(others.sorted())") }
        }
        #expect(violations.isEmpty, "\(violations.joined(separator: "\n"))")
        // The check sees what it should: the owner's file names its table.
        #expect(
            Self.tablesNamed(in: "SELECT 1 FROM chat_members WHERE chat_id = ?", among: created) == ["chat_members"])
    }
}
