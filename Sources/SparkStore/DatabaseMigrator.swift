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

    /// An empty migrator.
    public init() {}

    /// Adds a migration after those already registered.
    public mutating func register(_ identifier: String, _ body: @escaping @Sendable (Database) throws -> Void) {
        precondition(!migrations.contains { $0.identifier == identifier }, "migration \(identifier) registered twice")
        migrations.append(Migration(identifier: identifier, body: body))
    }

    /// Applies every migration not yet recorded, each in its own immediate transaction, so two
    /// processes migrating at once apply each step exactly once.
    public func migrate(_ queue: DatabaseQueue) throws {
        try queue.write { db in
            try db.execute(
                "CREATE TABLE IF NOT EXISTS spark_migrations (identifier TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
        }
        let known = Set(migrations.map(\.identifier))
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
