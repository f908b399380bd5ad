import Foundation
import SparkCrypto
import SparkStore

/// The sign-up and login assistant (SmartFoxServer's Sign Up and Login Assistants): accounts,
/// activation, login with throttling, refresh tokens and password recovery, all in the domain
/// file.
extension DomainEngine {
    private enum CodePurpose: String {
        case activation, reset
    }

    var passwordHasher: PasswordHasher {
        get throws {
            let iterations = try currentPolicy().passwordIterations
            return iterations == PasswordHasher.owaspIterations ? PasswordHasher() : PasswordHasher(unsafeIterations: iterations)
        }
    }

    /// Creates an inactive account after checking every field, and emails its activation code.
    public func signUp(_ request: SignUpRequest) async throws {
        try AccountPolicy.checkUserName(request.userName)
        try AccountPolicy.checkEmail(request.email)
        try AccountPolicy.checkPassword(request.password, userName: request.userName)
        try AccountPolicy.checkCountry(request.country)
        try AccountPolicy.checkAge(request.age)
        let email = request.email.lowercased()
        // Hash before taking the write lock: it is deliberately slow.
        let hash = try passwordHasher.hash(request.password)
        let code = Self.makeCode()
        let policy = try currentPolicy()
        let now = clock.now()
        try storage {
            try store.write { db in
                if try db.scalar("SELECT 1 FROM accounts WHERE user_name = ?", [request.userName], as: Int.self) != nil
                    || db.scalar(
                        "SELECT 1 FROM principals WHERE user_id = ? AND issuer != ?", [request.userName, accountsIssuer.issuer],
                        as: Int.self) != nil
                {
                    // Also a name another issuer's user holds: the account would not be that user.
                    throw DomainError(.nameTaken, "the user name '\(request.userName)' is taken")
                }
                if try db.scalar("SELECT 1 FROM accounts WHERE email = ?", [email], as: Int.self) != nil {
                    throw DomainError(.emailTaken, "an account already uses \(email)")
                }
                try db.execute(
                    "INSERT INTO accounts(user_name, email, password_hash, country, age, activated, created_at) VALUES (?, ?, ?, ?, ?, 0, ?)",
                    [request.userName, email, hash, request.country, request.age, now.timeIntervalSince1970])
                try storeCode(
                    db, code, user: request.userName, purpose: .activation, lifetime: policy.activationCodeLifetime,
                    policy: policy)
            }
        }
        try await mailer.send(Self.activationMail(to: email, user: request.userName, code: code, now: now, domain: domainID))
    }

    /// Emails a new activation code, replacing the pending one.
    public func resendActivationCode(userName: String) async throws {
        let policy = try currentPolicy()
        let code = Self.makeCode()
        let email = try storage {
            try store.write { db -> String in
                guard let row = try db.row("SELECT email, activated FROM accounts WHERE user_name = ?", [userName]) else {
                    throw DomainError(.notFound, "no account named '\(userName)'")
                }
                guard try !row.get(1, as: Bool.self) else {
                    throw DomainError(.alreadyActivated, "'\(userName)' is already active")
                }
                try storeCode(
                    db, code, user: userName, purpose: .activation, lifetime: policy.activationCodeLifetime, policy: policy)
                return try row.get(0, as: String.self)
            }
        }
        try await mailer.send(Self.activationMail(to: email, user: userName, code: code, now: clock.now(), domain: domainID))
    }

    /// Activates an account; a wrong code spends one of its tries.
    public func activate(userName: String, code: String) async throws {
        try storage {
            // The code check and its consequences commit together; a wrong code's spent try
            // must be saved even though the call fails, so the error is returned, not thrown.
            let failure = try store.write { db -> DomainError? in
                guard
                    let activated = try db.scalar("SELECT activated FROM accounts WHERE user_name = ?", [userName], as: Bool.self)
                else { return DomainError(.codeInvalid, "that activation code is not valid") }
                guard !activated else { return DomainError(.alreadyActivated, "'\(userName)' is already active") }
                if let failure = try checkCode(db, code, user: userName, purpose: .activation) { return failure }
                try db.execute("UPDATE accounts SET activated = 1 WHERE user_name = ?", [userName])
                return nil
            }
            if let failure { throw failure }
        }
    }

    /// Logs in: the same error and the same work whether the name or the password is wrong;
    /// repeated failures lock the name for a while.
    public func logIn(userName: String, password: String) async throws -> IssuedToken {
        let policy = try currentPolicy()
        let now = clock.now()
        let account = try storage {
            try store.read { db -> (hash: String, activated: Bool, email: String)? in
                if let lockedUntil = try db.scalar(
                    "SELECT locked_until FROM login_attempts WHERE user_name = ?", [userName], as: Double.self),
                    lockedUntil > now.timeIntervalSince1970
                {
                    throw DomainError(
                        .tooManyAttempts, "too many failed logins; try again later",
                        retryAfter: Int((lockedUntil - now.timeIntervalSince1970).rounded(.up)))
                }
                guard let row = try db.row("SELECT password_hash, activated, email FROM accounts WHERE user_name = ?", [userName])
                else { return nil }
                return (try row.get(0, as: String.self), try row.get(1, as: Bool.self), try row.get(2, as: String.self))
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
            let retryAfter = try recordFailedLogin(userName, policy: policy, now: now)
            if let retryAfter {
                throw DomainError(.tooManyAttempts, "too many failed logins; try again later", retryAfter: retryAfter)
            }
            throw DomainError(.invalidCredentials, "the user name or password is incorrect")
        }
        guard account.activated else {
            throw DomainError(.notActivated, "'\(userName)' has not been activated; enter the code sent to its email")
        }
        try storage { try store.write { db in try db.execute("DELETE FROM login_attempts WHERE user_name = ?", [userName]) } }
        return try issueAccountTokens(userName: userName, email: account.email, policy: policy, now: now)
    }

    /// Exchanges a refresh token for new tokens; the old refresh token stops working.
    public func refresh(refreshToken: String) async throws -> IssuedToken {
        let policy = try currentPolicy()
        let now = clock.now()
        let tokenHash = Self.refreshTokenHash(refreshToken)
        let (userName, email) = try storage {
            try store.write { db -> (String, String) in
                guard
                    let row = try db.row(
                        """
                        SELECT r.user_name, r.expires_at, a.email FROM refresh_tokens r JOIN accounts a USING (user_name)
                        WHERE r.token_hash = ?
                        """, [tokenHash])
                else { throw DomainError(.invalidToken, "the refresh token is not valid; log in again") }
                try db.execute("DELETE FROM refresh_tokens WHERE token_hash = ?", [tokenHash])
                guard try row.get(1, as: Double.self) > now.timeIntervalSince1970 else {
                    throw DomainError(.tokenExpired, "the refresh token has expired; log in again")
                }
                return (try row.get(0, as: String.self), try row.get(2, as: String.self))
            }
        }
        return try issueAccountTokens(userName: userName, email: email, policy: policy, now: now)
    }

    /// Revokes a refresh token.
    public func revoke(refreshToken: String) async throws {
        try storage {
            try store.write { db in
                try db.execute("DELETE FROM refresh_tokens WHERE token_hash = ?", [Self.refreshTokenHash(refreshToken)])
            }
        }
    }

    /// Emails a reset code when an account uses `email`; the answer is the same either way.
    public func requestPasswordReset(email: String) async throws {
        let policy = try currentPolicy()
        let code = Self.makeCode()
        let address = email.lowercased()
        let userName = try storage {
            try store.write { db -> String? in
                guard let userName = try db.scalar("SELECT user_name FROM accounts WHERE email = ?", [address], as: String.self)
                else { return nil }
                try storeCode(db, code, user: userName, purpose: .reset, lifetime: policy.resetCodeLifetime, policy: policy)
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

    /// Sets a new password with the emailed code and ends the account's other sessions.
    public func resetPassword(email: String, code: String, newPassword: String) async throws {
        let address = email.lowercased()
        let userName = try storage {
            try store.read { db in try db.scalar("SELECT user_name FROM accounts WHERE email = ?", [address], as: String.self) }
        }
        guard let userName else { throw DomainError(.codeInvalid, "that reset code is not valid") }
        try AccountPolicy.checkPassword(newPassword, userName: userName)
        let hash = try passwordHasher.hash(newPassword)
        try storage {
            let failure = try store.write { db -> DomainError? in
                if let failure = try checkCode(db, code, user: userName, purpose: .reset) { return failure }
                try db.execute("UPDATE accounts SET password_hash = ? WHERE user_name = ?", [hash, userName])
                try db.execute("DELETE FROM refresh_tokens WHERE user_name = ?", [userName])
                try db.execute("DELETE FROM login_attempts WHERE user_name = ?", [userName])
                return nil
            }
            if let failure { throw failure }
        }
    }

    // MARK: Helpers

    private func issueAccountTokens(userName: String, email: String, policy: DomainPolicy, now: Date) throws -> IssuedToken {
        let idToken = try accountsIssuer.issue(
            subject: userName, audience: domainID, lifetime: TimeInterval(policy.tokenLifetime), now: now, name: userName,
            email: email)
        let refreshToken = SystemRandom.bytes(count: 32).base64URLEncodedString()
        try storage {
            try store.write { db in
                try db.execute(
                    "INSERT INTO refresh_tokens(token_hash, user_name, expires_at) VALUES (?, ?, ?)",
                    [
                        Self.refreshTokenHash(refreshToken), userName,
                        now.timeIntervalSince1970 + Double(policy.refreshTokenLifetime),
                    ])
            }
        }
        return IssuedToken(token: idToken.token, expiresAt: idToken.expiresAt, refreshToken: refreshToken)
    }

    /// Counts a failed login for `userName` (whether or not it exists) and returns the lock
    /// time when this failure crossed the threshold: 30 s, doubling per further failure, at most
    /// 15 minutes.
    private func recordFailedLogin(_ userName: String, policy: DomainPolicy, now: Date) throws -> Int? {
        try storage {
            try store.write { db -> Int? in
                let failures =
                    (try db.scalar("SELECT failures FROM login_attempts WHERE user_name = ?", [userName], as: Int.self) ?? 0) + 1
                var lock = 0
                if failures >= policy.loginAttemptsBeforeThrottle {
                    lock = min(900, 30 << min(failures - policy.loginAttemptsBeforeThrottle, 5))
                }
                try db.execute(
                    """
                    INSERT INTO login_attempts(user_name, failures, locked_until) VALUES (?, ?, ?)
                    ON CONFLICT(user_name) DO UPDATE SET failures = excluded.failures, locked_until = excluded.locked_until
                    """, [userName, failures, now.timeIntervalSince1970 + Double(lock)])
                return lock > 0 ? lock : nil
            }
        }
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

    /// Checks a code inside a write transaction. A wrong code spends a try; the last try, or an
    /// expired code, deletes it. Returns the failure, or nil when the code matched (and is gone).
    private func checkCode(_ db: any DomainStatements, _ code: String, user: String, purpose: CodePurpose) throws -> DomainError?
    {
        guard
            let row = try db.row(
                "SELECT code_hash, expires_at, attempts_left FROM account_codes WHERE user_name = ? AND purpose = ?",
                [user, purpose.rawValue])
        else { return DomainError(.codeExpired, "there is no \(purpose.rawValue) code pending; request a new one") }
        let attemptsLeft = try row.get(2, as: Int.self)
        guard try row.get(1, as: Double.self) > clock.now().timeIntervalSince1970, attemptsLeft > 0 else {
            try db.execute("DELETE FROM account_codes WHERE user_name = ? AND purpose = ?", [user, purpose.rawValue])
            return DomainError(.codeExpired, "the \(purpose.rawValue) code has expired; request a new one")
        }
        let expected = SecureBytes(try row.get(0, as: Data.self))
        guard SecureBytes(Self.codeHash(code, user: user, purpose: purpose)) == expected else {
            if attemptsLeft <= 1 {
                try db.execute("DELETE FROM account_codes WHERE user_name = ? AND purpose = ?", [user, purpose.rawValue])
                return DomainError(.codeExpired, "wrong code, and no tries are left; request a new one")
            }
            try db.execute(
                "UPDATE account_codes SET attempts_left = attempts_left - 1 WHERE user_name = ? AND purpose = ?",
                [user, purpose.rawValue])
            return DomainError(.codeInvalid, "that \(purpose.rawValue) code is wrong; \(attemptsLeft - 1) tries left")
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
