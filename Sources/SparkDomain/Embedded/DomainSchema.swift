import SparkStore

/// The embedded domain's tables. Each issue's capability adds a migration; none is ever edited
/// after it ships.
enum DomainSchema {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.register("v1-identity") { db in
            try db.execute(
                """
                CREATE TABLE domain (
                    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
                    id TEXT NOT NULL,
                    policy TEXT NOT NULL,
                    created_at REAL NOT NULL
                );
                CREATE TABLE issuer_keys (
                    kind TEXT PRIMARY KEY,
                    issuer TEXT NOT NULL,
                    key_id TEXT NOT NULL,
                    private_key BLOB NOT NULL
                );
                CREATE TABLE external_issuers (
                    issuer TEXT PRIMARY KEY,
                    audience TEXT NOT NULL,
                    jwks_path TEXT NOT NULL
                );
                CREATE TABLE accounts (
                    user_name TEXT PRIMARY KEY,
                    email TEXT NOT NULL UNIQUE,
                    password_hash TEXT NOT NULL,
                    country TEXT NOT NULL,
                    age INTEGER NOT NULL,
                    activated INTEGER NOT NULL DEFAULT 0,
                    created_at REAL NOT NULL
                );
                CREATE TABLE account_codes (
                    user_name TEXT NOT NULL REFERENCES accounts(user_name) ON DELETE CASCADE,
                    purpose TEXT NOT NULL,
                    code_hash BLOB NOT NULL,
                    expires_at REAL NOT NULL,
                    attempts_left INTEGER NOT NULL,
                    PRIMARY KEY (user_name, purpose)
                );
                CREATE TABLE refresh_tokens (
                    token_hash BLOB PRIMARY KEY,
                    user_name TEXT NOT NULL REFERENCES accounts(user_name) ON DELETE CASCADE,
                    expires_at REAL NOT NULL
                );
                CREATE TABLE login_attempts (
                    user_name TEXT PRIMARY KEY,
                    failures INTEGER NOT NULL,
                    locked_until REAL NOT NULL
                );
                CREATE TABLE outbox (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    recipient TEXT NOT NULL,
                    subject TEXT NOT NULL,
                    body TEXT NOT NULL,
                    sent_at REAL NOT NULL
                );
                """)
        }
        return migrator
    }
}
