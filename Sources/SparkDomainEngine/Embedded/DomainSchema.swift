import SparkDomain
import SparkStore

/// The embedded domain's tables: `DomainMigrations`, the one list both stores apply, in SQLite's
/// spelling.
enum DomainSchema {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        for migration in DomainMigrations.all {
            migrator.register(migration.identifier) { db in
                for statement in migration.statements {
                    if let sql = DomainMigrations.sql(statement, for: .sqlite) { try db.execute(sql) }
                }
            }
        }
        return migrator
    }
}
