import Foundation

/// The domain's schema, one list for both stores: each migration's statements in SQLite's
/// spelling, with a type map for PostgreSQL (``postgres(_:)``), and the few statements only one
/// of them takes. `SQLiteDomainStore` (through `DomainSchema`) and `PostgreSQLDomainStore` apply
/// the same migrations by the same names in the same order; a test compares the tables and columns
/// the two end with. None is ever edited after it ships: a change is a new migration.
package enum DomainMigrations {
    /// Which database a migration is written out for.
    package enum Dialect: Sendable {
        case sqlite
        case postgres
    }

    /// One statement (or several, separated by `;`).
    package enum Statement: Sendable {
        /// For both, in SQLite's spelling (PostgreSQL's through the type map).
        case both(String)
        /// For SQLite alone.
        case sqlite(String)
        /// For PostgreSQL alone, in its own spelling.
        case postgres(String)
    }

    /// Every migration, oldest first.
    package static let all: [(identifier: String, statements: [Statement])] = [
        (
            "v1-identity",
            [
                .both(
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
                    )
                    """)
            ]
        ),
        (
            "v2-endpoints-keys",
            [
                .both(
                    """
                    CREATE TABLE endpoints (
                        endpoint_id TEXT PRIMARY KEY,
                        user_id TEXT NOT NULL,
                        registration_id INTEGER NOT NULL,
                        description TEXT NOT NULL,
                        nickname TEXT NOT NULL,
                        active INTEGER NOT NULL,
                        created_at REAL NOT NULL,
                        last_seen REAL NOT NULL,
                        removed_reason TEXT
                    );
                    CREATE INDEX endpoints_by_user ON endpoints(user_id);
                    CREATE TABLE key_blobs (
                        user_id TEXT NOT NULL,
                        name TEXT NOT NULL,
                        data BLOB NOT NULL,
                        version INTEGER NOT NULL,
                        PRIMARY KEY (user_id, name)
                    );
                    CREATE TABLE identities (
                        user_id TEXT PRIMARY KEY,
                        document BLOB NOT NULL,
                        key_version INTEGER NOT NULL
                    );
                    CREATE TABLE unlock_challenges (
                        challenge BLOB PRIMARY KEY,
                        user_id TEXT NOT NULL,
                        endpoint_id TEXT NOT NULL,
                        issued_at REAL NOT NULL,
                        proven INTEGER NOT NULL DEFAULT 0
                    );
                    CREATE INDEX unlock_challenges_by_user ON unlock_challenges(user_id, issued_at)
                    """)
            ]
        ),
        (
            "v3-messaging",
            [
                .both(
                    """
                    CREATE TABLE chat_members (
                        chat_id TEXT NOT NULL,
                        user_id TEXT NOT NULL,
                        is_admin INTEGER NOT NULL,
                        PRIMARY KEY (chat_id, user_id)
                    );
                    CREATE INDEX chat_members_by_user ON chat_members(user_id);
                    CREATE TABLE chats (
                        chat_id TEXT PRIMARY KEY,
                        created_by TEXT NOT NULL,
                        next_message_number INTEGER NOT NULL,
                        created_at REAL NOT NULL
                    );
                    CREATE TABLE mailbox (
                        user_id TEXT NOT NULL,
                        sequence INTEGER NOT NULL,
                        chat_id TEXT NOT NULL,
                        sender TEXT NOT NULL,
                        kind TEXT NOT NULL,
                        message_number INTEGER,
                        payload BLOB NOT NULL,
                        members TEXT,
                        posted_at REAL NOT NULL,
                        PRIMARY KEY (user_id, sequence)
                    ) WITHOUT ROWID;
                    CREATE TABLE mailbox_heads (
                        user_id TEXT PRIMARY KEY,
                        last_sequence INTEGER NOT NULL
                    );
                    CREATE TABLE posted (
                        chat_id TEXT NOT NULL,
                        sender TEXT NOT NULL,
                        client_id TEXT NOT NULL,
                        message_number INTEGER,
                        posted_at REAL NOT NULL,
                        PRIMARY KEY (chat_id, sender, client_id)
                    );
                    CREATE TABLE moderation (
                        user_id TEXT PRIMARY KEY,
                        banned_reason TEXT,
                        timeout_until REAL,
                        timeout_reason TEXT
                    );
                    CREATE TABLE infractions (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        user_id TEXT NOT NULL,
                        reason TEXT NOT NULL,
                        issued_at REAL NOT NULL,
                        dismissed INTEGER NOT NULL DEFAULT 0
                    )
                    """)
            ]
        ),
        (
            "v4-principals",
            [
                // A user id is one issuer's subject: bound to that issuer when first seen.
                .both(
                    """
                    CREATE TABLE principals (
                        user_id TEXT PRIMARY KEY,
                        issuer TEXT NOT NULL,
                        first_seen REAL NOT NULL
                    )
                    """)
            ]
        ),
        (
            "v5-member-order",
            [
                // Members in the order they joined, in a column of their own (no engine's row id):
                // the longest-standing member becomes admin when the last admin leaves.
                .both("ALTER TABLE chat_members ADD COLUMN position INTEGER NOT NULL DEFAULT 0"),
                // SQLite alone: PostgreSQL's databases are new since this shipped, with no rows to order.
                .sqlite("UPDATE chat_members SET position = rowid"),
            ]
        ),
        (
            "v6-issuer-keys",
            [
                // An external issuer's keys in the database, so every instance of a domain sees them
                // (a file beside the database is on one machine only).
                .both("ALTER TABLE external_issuers ADD COLUMN jwks BLOB")
            ]
        ),
        (
            "v7-identity-resets",
            [
                // A reset without the current identity key waits out the policy's delay here, and
                // code guesses are counted per account across re-sent codes.
                .both(
                    """
                    CREATE TABLE identity_resets (
                        user_id TEXT PRIMARY KEY, endpoint_id TEXT NOT NULL, requested_at REAL NOT NULL, effective_at REAL NOT NULL
                    )
                    """),
                .both(
                    """
                    CREATE TABLE code_guesses (user_id TEXT NOT NULL, purpose TEXT NOT NULL, guessed_at REAL NOT NULL)
                    """),
                .both("CREATE INDEX code_guesses_by_user ON code_guesses(user_id, purpose, guessed_at)"),
                .both("ALTER TABLE endpoints ADD COLUMN takeover_pending INTEGER NOT NULL DEFAULT 0"),
                // Refresh tokens rotate within a family; a used one shown again ends the family.
                .both("ALTER TABLE refresh_tokens ADD COLUMN family BLOB"),
                .both("ALTER TABLE refresh_tokens ADD COLUMN used INTEGER NOT NULL DEFAULT 0"),
            ]
        ),
        (
            "v8-key-packages",
            [
                // Each device's MLS KeyPackages: one-time ones (handed out once) and one last-resort.
                .both(
                    """
                    CREATE TABLE key_packages (
                        endpoint_id TEXT NOT NULL, digest BLOB NOT NULL, package BLOB NOT NULL, last_resort INTEGER NOT NULL,
                        published_at REAL NOT NULL, PRIMARY KEY (endpoint_id, digest)
                    )
                    """)
            ]
        ),
        (
            "v9-commit-order",
            [
                // The MLS epoch each chat's commits are ordered up to, the accepted commit's digest
                // (a retry of it is answered, not refused), and the epoch on commit entries.
                .both("ALTER TABLE chats ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0"),
                .both("ALTER TABLE chats ADD COLUMN last_commit BLOB"),
                .both("ALTER TABLE mailbox ADD COLUMN epoch INTEGER"),
            ]
        ),
        (
            "v10-mailbox-retention",
            [
                // How far each endpoint has read its user's mailbox: entries every endpoint of the
                // user read past are deleted, and any older than the retention period.
                .both("ALTER TABLE endpoints ADD COLUMN mailbox_cursor INTEGER NOT NULL DEFAULT 0")
            ]
        ),
        (
            "v11-device-approvals",
            [
                // Each device's credential (its MLS key, signed by the user's identity key) and the
                // approvals its other devices signed for it: opaque to the domain, which keeps and
                // lists them so that the user's devices agree on which of them are approved.
                .both("ALTER TABLE endpoints ADD COLUMN credential BLOB"),
                .both(
                    """
                    CREATE TABLE endpoint_approvals (
                        approved_id TEXT NOT NULL, approver_id TEXT NOT NULL, approval BLOB NOT NULL,
                        PRIMARY KEY (approved_id, approver_id)
                    )
                    """),
            ]
        ),
        (
            "v12-key-package-claims",
            [
                // The one-time KeyPackages each user claimed in the last hour, of which user: past a
                // limit, a claimer gets the last-resort ones, so no one drains another's.
                .both(
                    """
                    CREATE TABLE key_package_claims (claimer TEXT NOT NULL, target TEXT NOT NULL, claimed_at REAL NOT NULL)
                    """),
                .both("CREATE INDEX key_package_claims_by_claimer ON key_package_claims(claimer, claimed_at)"),
            ]
        ),
        (
            "v13-settled-epoch",
            [
                // The epoch after the latest commit an admin made: the commits since, which only
                // non-admins made, are those an admin may replace when the members refused them.
                .both("ALTER TABLE chats ADD COLUMN settled_epoch INTEGER NOT NULL DEFAULT 0"),
                // What was ordered before this version is settled: no commit of it is replaced.
                .both("UPDATE chats SET settled_epoch = epoch"),
            ]
        ),
        (
            "v14-ephemeral-entries",
            [
                // Ephemeral entries (typing, live chat events) live seconds: found by chat and time
                // to be deleted, through an index of them alone.
                .both("CREATE INDEX mailbox_ephemeral ON mailbox(chat_id, posted_at) WHERE kind = 'ephemeral'")
            ]
        ),
        (
            "v15-reports",
            [
                // What users report to the operator, with the messages they reveal (JSON).
                .both(
                    """
                    CREATE TABLE reports (
                        id INTEGER PRIMARY KEY AUTOINCREMENT, reporter TEXT NOT NULL, reported TEXT NOT NULL,
                        chat_id TEXT NOT NULL, reason TEXT NOT NULL, messages TEXT NOT NULL, created_at REAL NOT NULL
                    )
                    """)
            ]
        ),
        (
            "v16-blobs",
            [
                // Attachments' blobs (opaque ciphertext), each in parts of a mebibyte: who uploaded
                // it, the chat whose members read it, its size and how much of it is here.
                .both(
                    """
                    CREATE TABLE blobs (
                        blob_id TEXT PRIMARY KEY, owner TEXT NOT NULL, chat_id TEXT NOT NULL, size INTEGER NOT NULL,
                        received INTEGER NOT NULL, created_at REAL NOT NULL
                    )
                    """),
                .both("CREATE INDEX blobs_by_owner ON blobs(owner)"),
                .both("CREATE INDEX blobs_by_age ON blobs(created_at)"),
                .both(
                    """
                    CREATE TABLE blob_parts (
                        blob_id TEXT NOT NULL, part INTEGER NOT NULL, bytes BLOB NOT NULL, PRIMARY KEY (blob_id, part)
                    )
                    """),
                // PostgreSQL alone: the parts stay out of line and uncompressed (they are ciphertext).
                .postgres("ALTER TABLE blob_parts ALTER COLUMN bytes SET STORAGE EXTERNAL"),
            ]
        ),
        (
            "v17-blocks",
            [
                // The users each user blocked: read by all of the user's devices, and checked when a
                // chat is started or a member added.
                .both(
                    """
                    CREATE TABLE blocks (user_id TEXT NOT NULL, blocked TEXT NOT NULL, blocked_at REAL NOT NULL, PRIMARY KEY (user_id, blocked))
                    """)
            ]
        ),
        (
            "v18-unlock-attempts",
            [
                // An attempt is counted from the index alone (the user's unproven attempts of the
                // last hour), and the user's older ones are deleted as new ones come.
                .both(
                    """
                    CREATE INDEX unlock_challenges_unproven ON unlock_challenges(user_id, proven, issued_at);
                    DROP INDEX unlock_challenges_by_user
                    """)
            ]
        ),
        (
            "v19-mailbox-held",
            [
                // What each sender holds in each user's mailbox, counted up as posts arrive (never
                // down: counted again from the mailbox when it passes the policy's cap).
                .both(
                    """
                    CREATE TABLE mailbox_held (user_id TEXT NOT NULL, sender TEXT NOT NULL, bytes INTEGER NOT NULL, PRIMARY KEY (user_id, sender)) WITHOUT ROWID
                    """)
            ]
        ),
        (
            "v20-issuer-discovery",
            [
                // An OpenID provider trusted by discovery: where its keys come from (fetched by
                // whichever instance claims the fetch, at most once a minute), until when the
                // keys in `jwks` are fresh, the claim that names the user, its CA.
                .both("ALTER TABLE external_issuers ADD COLUMN user_claim TEXT NOT NULL DEFAULT 'sub'"),
                .both("ALTER TABLE external_issuers ADD COLUMN jwks_uri TEXT"),
                .both("ALTER TABLE external_issuers ADD COLUMN ca_pem TEXT"),
                .both("ALTER TABLE external_issuers ADD COLUMN keys_fresh_until REAL"),
                .both("ALTER TABLE external_issuers ADD COLUMN fetch_claimed_at REAL"),
                .both("ALTER TABLE external_issuers ADD COLUMN last_fetch_error TEXT"),
            ]
        ),
        (
            "v21-passcode-key-versions",
            [
                // Each user's passcode key version (absent: 1), bumped by a passcode change; the
                // domain evaluates passcodes under this version or the next, never an older one.
                .both("CREATE TABLE passcode_key_versions (user_id TEXT PRIMARY KEY, version INTEGER NOT NULL)")
            ]
        ),
        (
            "v22-key-transparency",
            [
                // The transparency log: each update of a label (its version, the VRF output that
                // is its prefix-tree key, the commitment's opening, the value), the signed head at
                // the end of each epoch, and what waits for the next epoch. Identities published
                // before the log are queued for its first epoch.
                .both(
                    "CREATE TABLE kt_log (position INTEGER PRIMARY KEY, label BLOB NOT NULL, version INTEGER NOT NULL, vrf_output BLOB NOT NULL, opening BLOB NOT NULL, value BLOB NOT NULL)"
                ),
                .both(
                    "CREATE TABLE kt_heads (size INTEGER PRIMARY KEY, root BLOB NOT NULL, timestamp INTEGER NOT NULL, signature BLOB NOT NULL)"
                ),
                .both(
                    "CREATE TABLE kt_pending (seq INTEGER PRIMARY KEY AUTOINCREMENT, label BLOB NOT NULL, value BLOB NOT NULL)"),
                // Each auditor's latest co-signature (of the head of `size` entries).
                .both(
                    "CREATE TABLE kt_audits (auditor_key BLOB PRIMARY KEY, size INTEGER NOT NULL, signature BLOB NOT NULL)"),
                .sqlite(
                    "INSERT INTO kt_pending(label, value) SELECT CAST('identity:' || user_id AS BLOB), document FROM identities WHERE length(document) > 0 ORDER BY user_id"
                ),
                .postgres(
                    "INSERT INTO kt_pending(label, value) SELECT convert_to('identity:' || user_id, 'UTF8'), document FROM identities WHERE length(document) > 0 ORDER BY user_id"
                ),
            ]
        ),
        (
            "v23-kt-auditors",
            [
                // The auditors the operator registered: only theirs are co-signatures the domain
                // takes. Auditors that co-signed before are registered as such, for the operator
                // to review (`spark-admin transparency auditor list`) and remove.
                .both("CREATE TABLE kt_auditors (auditor_key BLOB PRIMARY KEY, name TEXT NOT NULL, added_at REAL NOT NULL)"),
                .both(
                    "INSERT INTO kt_auditors(auditor_key, name, added_at) SELECT auditor_key, 'co-signed before auditors were registered', 0 FROM kt_audits"
                ),
            ]
        ),
        (
            "v24-posted-clustered",
            [
                // On SQLite the posts' ids are clustered on their key: a post writes one b-tree
                // for them, not two (a page fewer in every synced post). PostgreSQL's tables are
                // heaps with their key's index either way.
                .sqlite(
                    """
                    CREATE TABLE posted_clustered (
                        chat_id TEXT NOT NULL,
                        sender TEXT NOT NULL,
                        client_id TEXT NOT NULL,
                        message_number INTEGER,
                        posted_at REAL NOT NULL,
                        PRIMARY KEY (chat_id, sender, client_id)
                    ) WITHOUT ROWID;
                    INSERT INTO posted_clustered SELECT chat_id, sender, client_id, message_number, posted_at FROM posted;
                    DROP TABLE posted;
                    ALTER TABLE posted_clustered RENAME TO posted
                    """)
            ]
        ),
        (
            "v25-key-package-suites",
            [
                // Each KeyPackage's MLS cipher suite (read from its bytes when published): a
                // device keeps one-time and last-resort KeyPackages of each suite it runs, and a
                // claim asks for a suite. Those published before are all of suite 1.
                .both("ALTER TABLE key_packages ADD COLUMN suite INTEGER NOT NULL DEFAULT 1")
            ]
        ),
    ]

    /// `statement` as `dialect` takes it; nil when it is for the other one.
    package static func sql(_ statement: Statement, for dialect: Dialect) -> String? {
        switch (statement, dialect) {
        case (.both(let sql), .sqlite), (.sqlite(let sql), .sqlite), (.postgres(let sql), .postgres): sql
        case (.both(let sql), .postgres): postgres(sql)
        case (.sqlite, .postgres), (.postgres, .sqlite): nil
        }
    }

    /// A migration's statements for `dialect`, as one script.
    package static func script(_ statements: [Statement], for dialect: Dialect) -> String {
        statements.compactMap { sql($0, for: dialect) }.joined(separator: ";\n")
    }

    /// The type map, SQLite's spelling to PostgreSQL's: an `INTEGER PRIMARY KEY AUTOINCREMENT` is
    /// an identity column, integers and booleans `BIGINT`, reals `DOUBLE PRECISION`, blobs
    /// `BYTEA`; a table `WITHOUT ROWID` (SQLite's clustered table) is a plain one.
    package static func postgres(_ sql: String) -> String {
        let map: [(String, String)] = [
            (#"\bINTEGER PRIMARY KEY AUTOINCREMENT\b"#, "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"),
            (#"\bINTEGER\b"#, "BIGINT"), (#"\bREAL\b"#, "DOUBLE PRECISION"), (#"\bBLOB\b"#, "BYTEA"),
            (#"\)\s*WITHOUT ROWID"#, ")"),
        ]
        return map.reduce(sql) { text, rule in
            text.replacingOccurrences(of: rule.0, with: rule.1, options: .regularExpression)
        }
    }
}
