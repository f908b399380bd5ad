/// Applies schema migrations in order, each once, recording them in the `spark_migrations`
/// table. A database that records a migration this code does not know was written by a newer
/// version and is refused rather than silently misread.
///
/// ```swift
/// var migrator = DatabaseMigrator()
/// migrator.register("v1") { db in try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY)") }
/// try migrator.migrate(queue)
/// ```
public struct DatabaseMigrator: Sendable {
    /// One named step.
    public struct Migration: Sendable {
        /// The unique name recorded once applied.
        public let identifier: String
        /// The schema change.
        public let body: @Sendable (Database) throws -> Void
    }

    /// The registered migrations, in order.
    public private(set) var migrations: [Migration] = []

    /// Names that shipped and were renamed since: a database recording the old name is updated
    /// to the new one before anything else, so it opens as if it had recorded the new name.
    public private(set) var renames: [(old: String, new: String)] = []

    /// An empty migrator.
    public init() {}

    /// Adds a migration after those already registered.
    public mutating func register(_ identifier: String, _ body: @escaping @Sendable (Database) throws -> Void) {
        precondition(!migrations.contains { $0.identifier == identifier }, "migration \(identifier) registered twice")
        migrations.append(Migration(identifier: identifier, body: body))
    }

    /// Records that the migration registered as `new` shipped as `old`: a database that applied it
    /// under its old name is not given it again, and is not refused as newer. `new` must be
    /// registered; `old` must not be (a name means one migration, ever).
    public mutating func rename(_ old: String, to new: String) {
        precondition(!renames.contains { $0.old == old || $0.new == new }, "migration \(old) renamed twice")
        renames.append((old, new))
    }

    /// The migrations up to `identifier` (included): what a store of the version that ended there
    /// applied. For tests that make such a store.
    public func prefix(through identifier: String) -> DatabaseMigrator {
        guard let end = migrations.firstIndex(where: { $0.identifier == identifier }) else {
            preconditionFailure("no migration \(identifier)")
        }
        var prefix = self
        prefix.migrations = Array(migrations[...end])
        let kept = Set(prefix.migrations.map(\.identifier))
        prefix.renames = renames.filter { kept.contains($0.new) }
        return prefix
    }

    /// Applies every migration not yet recorded, each in its own immediate transaction, so two
    /// processes migrating at once apply each step exactly once. Renamed migrations are recorded
    /// under their new names first, in one transaction.
    public func migrate(_ queue: DatabaseQueue) throws {
        let known = Set(migrations.map(\.identifier))
        precondition(renames.allSatisfy { known.contains($0.new) && !known.contains($0.old) }, "a rename names no migration")
        try queue.write { db in
            try db.execute(
                "CREATE TABLE IF NOT EXISTS spark_migrations (identifier TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
            for (old, new) in renames {
                try db.execute("UPDATE spark_migrations SET identifier = ? WHERE identifier = ?", [new, old])
            }
        }
        let applied = try appliedIdentifiers(queue)
        if let unknown = applied.first(where: { !known.contains($0) }) {
            throw StoreError(
                .schemaTooNew, message: "\(queue.path) has migration '\(unknown)' from a newer version of this software")
        }
        for migration in migrations {
            try queue.write { db in
                let done = try db.scalar(
                    "SELECT 1 FROM spark_migrations WHERE identifier = ?", [migration.identifier], as: Int.self)
                guard done == nil else { return }
                try migration.body(db)
                try db.execute(
                    "INSERT INTO spark_migrations(identifier, applied_at) VALUES (?, julianday('now'))", [migration.identifier])
            }
        }
    }

    /// The identifiers already applied to the database, in the order they were applied.
    public func appliedIdentifiers(_ queue: DatabaseQueue) throws -> [String] {
        try queue.read { db in
            try db.rows("SELECT identifier FROM spark_migrations ORDER BY rowid").map { try $0.get(0, as: String.self) }
        }
    }
}
