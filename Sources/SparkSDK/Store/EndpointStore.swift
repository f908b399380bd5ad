public import Foundation
import SparkStore

/// This device's local database: one SQLite file in the data directory (created 0600, the
/// directory 0700). It holds the cached credentials for silent sign-in now; later capabilities
/// add registration, keys, chats and messages through their own migrations.
public final class EndpointStore: Sendable {
    /// The data directory.
    public let directory: URL
    let queue: DatabaseQueue

    /// Opens (creating if needed) the store in `directory`.
    public init(directory: URL) throws {
        self.directory = directory
        do {
            queue = try DatabaseQueue(path: directory.appendingPathComponent("endpoint.sqlite").path)
            try Self.migrator.migrate(queue)
        } catch {
            throw AuthError(.storageFailure, "cannot open the endpoint store in \(directory.path): \(error)")
        }
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.register("v1-credentials") { db in
            try db.execute(
                """
                CREATE TABLE credentials (
                    provider TEXT PRIMARY KEY,
                    credential BLOB NOT NULL,
                    updated_at REAL NOT NULL
                )
                """)
        }
        return migrator
    }

    /// Runs store work, turning SparkStore errors into ``AuthError/Code/storageFailure``.
    @discardableResult
    func run<T: Sendable>(_ what: String, _ body: (Database) throws -> T) throws -> T {
        do {
            return try queue.write(body)
        } catch {
            throw AuthError(.storageFailure, "the endpoint store could not \(what): \(error)")
        }
    }
}

/// What a token manager keeps for silent sign-in: the account and the secret that refreshes it.
struct StoredCredential: Sendable, Equatable, Codable {
    var account: BBMAuthenticatedAccount
    /// The accounts assistant's refresh token, or test auth's user id; nil for custom tokens.
    var refreshSecret: String?
}

extension EndpointStore {
    func credential(for provider: String) throws -> StoredCredential? {
        let data = try run("read credentials") { db in
            try db.scalar("SELECT credential FROM credentials WHERE provider = ?", [provider], as: Data.self)
        }
        guard let data else { return nil }
        // A credential this version cannot read is treated as absent: the user signs in again.
        return try? JSONDecoder().decode(StoredCredential.self, from: data)
    }

    func saveCredential(_ credential: StoredCredential, for provider: String, now: Date) throws {
        let data = try JSONEncoder().encode(credential)
        try run("save credentials") { db in
            try db.execute(
                """
                INSERT INTO credentials(provider, credential, updated_at) VALUES (?, ?, ?)
                ON CONFLICT(provider) DO UPDATE SET credential = excluded.credential, updated_at = excluded.updated_at
                """, [provider, data, now.timeIntervalSince1970])
        }
    }

    func removeCredential(for provider: String) throws {
        try run("remove credentials") { db in try db.execute("DELETE FROM credentials WHERE provider = ?", [provider]) }
    }
}
