import SparkDomain
import SparkDomainEngine
import SparkStore

/// The domain's tables in PostgreSQL: `DomainMigrations`, the one list both stores apply, written
/// out in PostgreSQL's types by its type map (`BIGINT` for SQLite's integers and booleans,
/// `DOUBLE PRECISION` for its reals, `BYTEA` for its blobs, identity columns for
/// `AUTOINCREMENT`). A test compares the two schemas' tables and columns.
enum PostgreSQLSchema {
    /// Each migration's name and its script for PostgreSQL.
    static let migrations: [(identifier: String, sql: String)] = DomainMigrations.all.map {
        ($0.identifier, DomainMigrations.script($0.statements, for: .postgres))
    }

    /// The advisory lock instances hold while migrating, so each step is applied once.
    static let migrationLock: Int64 = 0x5350_4152_4B4D_4947  // "SPARKMIG"

    /// Applies every migration not yet recorded, each in its own transaction; refuses a database
    /// that records one this code does not know (a newer version wrote it).
    static func migrate(_ connection: PostgreSQLConnection) throws {
        _ = try connection.run("SELECT pg_advisory_lock($1)", [.integer(migrationLock)])
        defer { _ = try? connection.run("SELECT pg_advisory_unlock($1)", [.integer(migrationLock)]) }
        try connection.simple(
            "CREATE TABLE IF NOT EXISTS spark_migrations (identifier TEXT PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)")
        let applied = try connection.run("SELECT identifier FROM spark_migrations", []).rows.map {
            try $0.get(0, as: String.self)
        }
        let known = Set(migrations.map(\.identifier))
        if let unknown = applied.first(where: { !known.contains($0) }) {
            throw DomainError(.unavailable, "the database has migration '\(unknown)' from a newer version of this software")
        }
        for migration in migrations where !applied.contains(migration.identifier) {
            try connection.simple("BEGIN")
            do {
                // A migration for SQLite alone is recorded here with nothing to run.
                if !migration.sql.isEmpty { try connection.simple(migration.sql) }
                _ = try connection.run(
                    "INSERT INTO spark_migrations(identifier, applied_at) VALUES ($1, extract(epoch from now()))",
                    [.text(migration.identifier)])
                try connection.simple("COMMIT")
            } catch {
                try? connection.simple("ROLLBACK")
                throw error
            }
        }
    }
}
