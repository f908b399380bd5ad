import Foundation
import SparkCrypto
package import SparkDomain
import SparkStore

/// The sign-up and login assistant (SmartFoxServer's Sign Up and Login Assistants): accounts,
/// activation, login with throttling, refresh tokens and password recovery, all in the domain
/// file.
///
/// What it never tells a caller: whether an email address has an account (sign-up, reset and
/// its code all answer the same for known and unknown addresses), and whether a name has a
/// pending, active or no account (resend and activation answer the same). User names are public
/// (they are user ids), so sign-up does say a name is taken. No path does slow work for one
/// kind of caller and not the other: a password is hashed for every sign-up, verified (or a
/// dummy) for every login, and a reset's new password is hashed only after its code matched.
extension DomainEngine {
    private enum CodePurpose: String {
        case activation, reset
        /// Requests for a reset mail, counted per address like guesses.
        case resetRequest = "reset-request"
    }

    var passwordHasher: PasswordHasher {
        get throws {
            let iterations = try currentPolicy().passwordIterations
            return iterations == PasswordHasher.owaspIterations ? PasswordHasher() : PasswordHasher(unsafeIterations: iterations)
        }
    }

    /// The one answer to a code that does not work, for every reason and every caller.
    static let invalidCode =
        "that code is not valid (wrong, expired, already used, or the account is already active); request a new one if it keeps failing"

    /// Creates an inactive account after checking every field, and emails its activation code.
    /// An address that already has an account gets a notice instead, and the caller the same
    /// answer as for a new one.
    package func signUp(_ request: SignUpRequest) async throws {
        try AccountPolicy.checkUserName(request.userName)
        try AccountPolicy.checkEmail(request.email)
        try AccountPolicy.checkPassword(request.password, userName: request.userName)
        try AccountPolicy.checkCountry(request.country)
        try AccountPolicy.checkAge(request.age)
        let email = request.email.lowercased()
        // Hash before taking the write lock: it is deliberately slow, and done for every caller.
        let hash = try passwordHasher.hash(request.password)
        let code = Self.makeCode()
        let policy = try currentPolicy()
        let now = clock.now()
        let created = try await storage {
            try await store.write { db -> Bool in
                if try db.scalar("SELECT 1 FROM accounts WHERE user_name = ?", [request.userName], as: Int.self) != nil
                    || Self.principalHeld(db, request.userName, byOtherThan: self.accountsIssuer.issuer)
                {
                    // Also a name another issuer's user holds: the account would not be that user.
                    throw DomainError(.nameTaken, "the user name '\(request.userName)' is taken")
                }
                if try db.scalar("SELECT 1 FROM accounts WHERE email = ?", [email], as: Int.self) != nil { return false }
                try db.execute(
                    "INSERT INTO accounts(user_name, email, password_hash, country, age, activated, created_at) VALUES (?, ?, ?, ?, ?, 0, ?)",
                    [request.userName, email, hash, request.country, request.age, now.timeIntervalSince1970])
                try self.storeCode(
                    db, code, user: request.userName, purpose: .activation, lifetime: policy.activationCodeLifetime,
                    policy: policy)
                return true
            }
        }
        if created {
            try await mailer.send(Self.activationMail(to: email, user: request.userName, code: code, now: now, domain: domainID))
        } else {
            try await mailer.send(
                Mail(
                    to: email, subject: "Someone tried to sign up to \(domainID) with your address",
                    body: "An account already uses this address, so no new one was made.\nIf that was you, log in, or recover "
                        + "your password. If not, you can ignore this message.", sentAt: now))
        }
    }

    /// Emails a new activation code, replacing the pending one, when `userName` is an account
    /// waiting for activation; the answer is the same for any name.
    package func resendActivationCode(userName: String) async throws {
        let policy = try currentPolicy()
        let code = Self.makeCode()
        let email = try await storage {
            try await store.write { db -> String? in
                guard let row = try db.row("SELECT email, activated FROM accounts WHERE user_name = ?", [userName]),
                    try !row.get(1, as: Bool.self)
                else { return nil }
                try self.storeCode(
                    db, code, user: userName, purpose: .activation, lifetime: policy.activationCodeLifetime, policy: policy)
                return try row.get(0, as: String.self)
            }
        }
        guard let email else { return }
        try await mailer.send(Self.activationMail(to: email, user: userName, code: code, now: clock.now(), domain: domainID))
    }

    /// Activates an account. Every failure is the same ``DomainError/Code/codeInvalid`` (or
    /// ``DomainError/Code/tooManyAttempts`` past ``DomainPolicy/codeAttemptsPerHour`` guesses
    /// at this name this hour, however many codes were sent).
    package func activate(userName: String, code: String) async throws {
        let policy = try currentPolicy()
        try await storage {
            // The guess and its consequences commit together; a wrong code's spent try must be
            // saved even though the call fails, so the error is returned, not thrown.
            let failure = try await store.write { db -> DomainError? in
                let activated = try db.scalar("SELECT activated FROM accounts WHERE user_name = ?", [userName], as: Bool.self)
                let user = activated == false ? userName : nil
                if let failure = try self.checkCode(db, code, key: userName, user: user, purpose: .activation, policy: policy) {
                    return failure
                }
                try db.execute("UPDATE accounts SET activated = 1 WHERE user_name = ?", [userName])
                return nil
            }
            if let failure { throw failure }
        }
    }

    /// Logs in: the same error and the same work whether the name or the password is wrong.
    /// Each attempt is counted before it is judged, in one transaction with the lock check, so
    /// parallel guesses cannot slip past the lock: from ``DomainPolicy/loginAttemptsBeforeThrottle``
    /// failures on, each further one locks the name for a while.
    package func logIn(userName: String, password: String) async throws -> IssuedToken {
        let policy = try currentPolicy()
        let now = clock.now()
        let (account, lock) = try await storage {
            try await store.write { db -> ((hash: String, activated: Bool, email: String)?, Int) in
                let attempts = try db.row("SELECT failures, locked_until FROM login_attempts WHERE user_name = ?", [userName])
                if let lockedUntil = try attempts?.get(1, as: Double.self), lockedUntil > now.timeIntervalSince1970 {
                    throw DomainError(
                        .tooManyAttempts, "too many failed logins; try again later",
                        retryAfter: Int((lockedUntil - now.timeIntervalSince1970).rounded(.up)))
                }
                // Counted as a failure now; a right password clears it below.
                let failures = (try attempts?.get(0, as: Int.self) ?? 0) + 1
                var lock = 0
                if failures >= policy.loginAttemptsBeforeThrottle {
                    lock = min(900, 30 << min(failures - policy.loginAttemptsBeforeThrottle, 5))
                }
                try db.execute(
                    """
                    INSERT INTO login_attempts(user_name, failures, locked_until) VALUES (?, ?, ?)
                    ON CONFLICT(user_name) DO UPDATE SET failures = excluded.failures, locked_until = excluded.locked_until
                    """, [userName, failures, now.timeIntervalSince1970 + Double(lock)])
                guard let row = try db.row("SELECT password_hash, activated, email FROM accounts WHERE user_name = ?", [userName])
                else { return (nil, lock) }
                return ((try row.get(0, as: String.self), try row.get(1, as: Bool.self), try row.get(2, as: String.self)), lock)
            }
        }
        let hasher = try passwordHasher
        // The same slow work whether or not the account exists, and the same error.
        let matches: Bool
        if let account {
            matches = hasher.verify(password, against: account.hash)
        } else {
            hasher.verifyDummy(password)
            matches = false
        }
        guard matches, let account else {
            if lock > 0 { throw DomainError(.tooManyAttempts, "too many failed logins; try again later", retryAfter: lock) }
            throw DomainError(.invalidCredentials, "the user name or password is incorrect")
        }
        try await storage {
            try await store.write { db in try db.execute("DELETE FROM login_attempts WHERE user_name = ?", [userName]) }
        }
        guard account.activated else {
            throw DomainError(.notActivated, "'\(userName)' has not been activated; enter the code sent to its email")
        }
        return try await issueAccountTokens(userName: userName, email: account.email, family: nil, policy: policy, now: now)
    }

    /// Exchanges a refresh token for new tokens (OAuth 2.1's rotation): the old one is spent,
    /// and a spent one shown again ends its whole family, every token descended from the same
    /// login, since either the user or a thief holds a copy.
    package func refresh(refreshToken: String) async throws -> IssuedToken {
        let policy = try currentPolicy()
        let now = clock.now()
        let tokenHash = Self.refreshTokenHash(refreshToken)
        let outcome = try await storage {
            try await store.write { db -> Result<(String, String, Data), DomainError> in
                guard
                    let row = try db.row(
                        """
                        SELECT r.user_name, r.expires_at, a.email, r.family, r.used FROM refresh_tokens r
                        JOIN accounts a USING (user_name) WHERE r.token_hash = ?
                        """, [tokenHash])
                else { return .failure(DomainError(.invalidToken, "the refresh token is not valid; log in again")) }
                let family = try row.get(3, as: Data?.self) ?? tokenHash
                if try row.get(4, as: Int.self) != 0 {
                    // Reuse: end the family. The deletion commits though the call fails.
                    try db.execute("DELETE FROM refresh_tokens WHERE family = ? OR token_hash = ?", [family, family])
                    return .failure(
                        DomainError(
                            .invalidToken, "the refresh token was already used; every session it led to has ended. Log in again"))
                }
                guard try row.get(1, as: Double.self) > now.timeIntervalSince1970 else {
                    try db.execute("DELETE FROM refresh_tokens WHERE token_hash = ?", [tokenHash])
                    return .failure(DomainError(.tokenExpired, "the refresh token has expired; log in again"))
                }
                try db.execute("UPDATE refresh_tokens SET used = 1 WHERE token_hash = ?", [tokenHash])
                return .success((try row.get(0, as: String.self), try row.get(2, as: String.self), family))
            }
        }
        let (userName, email, family) = try outcome.get()
        return try await issueAccountTokens(userName: userName, email: email, family: family, policy: policy, now: now)
    }

    /// Revokes a refresh token and the family it belongs to (logging out that session).
    package func revoke(refreshToken: String) async throws {
        let tokenHash = Self.refreshTokenHash(refreshToken)
        try await storage {
            try await store.write { db in
                let family = try db.scalar("SELECT family FROM refresh_tokens WHERE token_hash = ?", [tokenHash], as: Data.self)
                try db.execute("DELETE FROM refresh_tokens WHERE token_hash = ?", [tokenHash])
                if let family {
                    try db.execute("DELETE FROM refresh_tokens WHERE family = ? OR token_hash = ?", [family, family])
                }
            }
        }
    }

    /// Emails a reset code when an account uses `email`: the same answer, and the same
    /// transaction, either way. Requests are counted per address (at most
    /// ``DomainPolicy/codeAttemptsPerHour`` mails an hour); past that, no mail and the same answer.
    package func requestPasswordReset(email: String) async throws {
        let policy = try currentPolicy()
        let code = Self.makeCode()
        let address = email.lowercased()
        let now = clock.now().timeIntervalSince1970
        let userName = try await storage {
            try await store.write { db -> String? in
                let recent =
                    try db.scalar(
                        "SELECT count(*) FROM code_guesses WHERE user_id = ? AND purpose = ? AND guessed_at > ?",
                        [address, CodePurpose.resetRequest.rawValue, now - 3600], as: Int.self) ?? 0
                try db.execute(
                    "INSERT INTO code_guesses(user_id, purpose, guessed_at) VALUES (?, ?, ?)",
                    [address, CodePurpose.resetRequest.rawValue, now])
                guard recent < policy.codeAttemptsPerHour,
                    let userName = try db.scalar("SELECT user_name FROM accounts WHERE email = ?", [address], as: String.self)
                else { return nil }
                try self.storeCode(db, code, user: userName, purpose: .reset, lifetime: policy.resetCodeLifetime, policy: policy)
                return userName
            }
        }
        // No account, no mail, and no difference in the answer.
        guard let userName else { return }
        try await mailer.send(
            Mail(
                to: address, subject: "Your \(domainID) password reset code",
                body: "A password reset was requested for \(userName).\nYour reset code is \(code). It expires in "
                    + "\(policy.resetCodeLifetime / 60) minutes.\nIf you did not ask for this, ignore this message.",
                sentAt: clock.now()))
    }

    /// Sets a new password with the emailed code and ends the account's sessions. The rules
    /// that do not depend on the account are checked first; the code (capped per address and
    /// hour, compared before any slow work) next; the rule that mentions the user name only once
    /// the code proved the caller reads that mailbox. Known and unknown addresses get the same
    /// answers with the same work.
    package func resetPassword(email: String, code: String, newPassword: String) async throws {
        let address = email.lowercased()
        try AccountPolicy.checkPassword(newPassword)
        let policy = try currentPolicy()
        let userName = try await storage {
            let outcome = try await store.write { db -> Result<String, DomainError> in
                let userName = try db.scalar("SELECT user_name FROM accounts WHERE email = ?", [address], as: String.self)
                if let failure = try self.checkCode(db, code, key: address, user: userName, purpose: .reset, policy: policy) {
                    return .failure(failure)
                }
                // A matched code names an account.
                guard let userName else { return .failure(DomainError(.codeInvalid, Self.invalidCode)) }
                // Thrown, so the transaction rolls back: the code stays for a better password.
                try AccountPolicy.checkPassword(newPassword, omits: userName)
                return .success(userName)
            }
            return try outcome.get()
        }
        let hash = try passwordHasher.hash(newPassword)
        try await storage {
            try await store.write { db in
                try db.execute("UPDATE accounts SET password_hash = ? WHERE user_name = ?", [hash, userName])
                try db.execute("DELETE FROM refresh_tokens WHERE user_name = ?", [userName])
                try db.execute("DELETE FROM login_attempts WHERE user_name = ?", [userName])
            }
        }
    }

    // MARK: Helpers

    private func issueAccountTokens(userName: String, email: String, family: Data?, policy: DomainPolicy, now: Date) async throws
        -> IssuedToken
    {
        let idToken = try accountsIssuer.issue(
            subject: userName, audience: domainID, lifetime: TimeInterval(policy.tokenLifetime), now: now, name: userName,
            email: email)
        let refreshToken = SystemRandom.bytes(count: 32).base64URLEncodedString()
        let tokenHash = Self.refreshTokenHash(refreshToken)
        try await storage {
            try await store.write { db in
                try db.execute(
                    "INSERT INTO refresh_tokens(token_hash, user_name, expires_at, family, used) VALUES (?, ?, ?, ?, 0)",
                    [tokenHash, userName, now.timeIntervalSince1970 + Double(policy.refreshTokenLifetime), family ?? tokenHash])
            }
        }
        return IssuedToken(token: idToken.token, expiresAt: idToken.expiresAt, refreshToken: refreshToken)
    }

    private func storeCode(
        _ db: any DomainStatements, _ code: String, user: String, purpose: CodePurpose, lifetime: Int, policy: DomainPolicy
    ) throws {
        try db.execute(
            """
            INSERT INTO account_codes(user_name, purpose, code_hash, expires_at, attempts_left) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT(user_name, purpose) DO UPDATE SET code_hash = excluded.code_hash, expires_at = excluded.expires_at,
                attempts_left = excluded.attempts_left
            """,
            [
                user, purpose.rawValue, Self.codeHash(code, user: user, purpose: purpose),
                clock.now().timeIntervalSince1970 + Double(lifetime),
                policy.codeAttempts,
            ])
    }

    /// Checks a code inside a write transaction, the same way whether or not `user` (the
    /// account the code would be for) exists. First the cap: at most
    /// ``DomainPolicy/codeAttemptsPerHour`` guesses at `key` (the name or address the caller
    /// gave) per hour, across re-sent codes; then the guess is counted; only then compared. A
    /// wrong code also spends one of its own tries. Returns the failure, or nil when the code
    /// matched (and is gone).
    private func checkCode(
        _ db: any DomainStatements, _ code: String, key: String, user: String?, purpose: CodePurpose, policy: DomainPolicy
    ) throws -> DomainError? {
        let now = clock.now().timeIntervalSince1970
        let recent = try db.row(
            "SELECT count(*), min(guessed_at) FROM code_guesses WHERE user_id = ? AND purpose = ? AND guessed_at > ?",
            [key, purpose.rawValue, now - 3600])
        if try recent?.get(0, as: Int.self) ?? 0 >= policy.codeAttemptsPerHour {
            let oldest = try recent?.get(1, as: Double.self) ?? now
            return DomainError(
                .tooManyAttempts, "too many codes tried for this account in the last hour; try again later",
                retryAfter: max(1, Int((oldest + 3600 - now).rounded(.up))))
        }
        try db.execute("INSERT INTO code_guesses(user_id, purpose, guessed_at) VALUES (?, ?, ?)", [key, purpose.rawValue, now])
        let row = try user.flatMap {
            try db.row(
                "SELECT code_hash, expires_at, attempts_left FROM account_codes WHERE user_name = ? AND purpose = ?",
                [$0, purpose.rawValue])
        }
        // Compared against something in every case, so no branch skips the work.
        let expected = SecureBytes(try row?.get(0, as: Data.self) ?? Data(count: 32))
        let matches = SecureBytes(Self.codeHash(code, user: user ?? key, purpose: purpose)) == expected
        guard let user, let row else { return DomainError(.codeInvalid, Self.invalidCode) }
        let attemptsLeft = try row.get(2, as: Int.self)
        let live = try row.get(1, as: Double.self) > now && attemptsLeft > 0
        guard live, matches else {
            if !live || attemptsLeft <= 1 {
                try db.execute("DELETE FROM account_codes WHERE user_name = ? AND purpose = ?", [user, purpose.rawValue])
            } else {
                try db.execute(
                    "UPDATE account_codes SET attempts_left = attempts_left - 1 WHERE user_name = ? AND purpose = ?",
                    [user, purpose.rawValue])
            }
            return DomainError(.codeInvalid, Self.invalidCode)
        }
        try db.execute("DELETE FROM account_codes WHERE user_name = ? AND purpose = ?", [user, purpose.rawValue])
        return nil
    }

    /// A uniformly random 6-digit code.
    static func makeCode() -> String {
        while true {
            let bytes = SystemRandom.bytes(count: 4)
            let value = bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            // Rejection sampling keeps the distribution uniform.
            if value < UInt32.max - UInt32.max % 1_000_000 { return String(format: "%06u", value % 1_000_000) }
        }
    }

    private static func codeHash(_ code: String, user: String, purpose: CodePurpose) -> Data {
        SHA256.hash(Data("\(purpose.rawValue)\u{0}\(user)\u{0}\(code)".utf8))
    }

    static func refreshTokenHash(_ token: String) -> Data { SHA256.hash(Data(token.utf8)) }

    static func activationMail(to email: String, user: String, code: String, now: Date, domain: String) -> Mail {
        Mail(
            to: email, subject: "Activate your \(domain) account",
            body: "Welcome, \(user).\nYour activation code is \(code).\nEnter it to activate your account.", sentAt: now)
    }
}

// MARK: The operator's calls (DomainAdministration)

extension DomainEngine {
    /// The accounts of the sign-up assistant.
    package func accounts() throws -> [AccountSummary] {
        try blockingStorage {
            try store.blockingRead { db in
                try db.rows("SELECT user_name, email, country, age, activated FROM accounts ORDER BY user_name").map {
                    AccountSummary(
                        userName: try $0.get(0), email: try $0.get(1), country: try $0.get(2), age: try $0.get(3),
                        activated: try $0.get(4))
                }
            }
        }
    }
}
