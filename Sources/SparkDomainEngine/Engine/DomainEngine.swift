import Foundation
package import SparkCrypto
package import SparkDomain
import SparkLock
import SparkStore

/// The domain: every rule of the contract, once. It validates each token into one caller
/// (issuer and subject), checks on every call after registration that the endpoint is the
/// caller's and active, checks fields and policy, authorizes, and runs what is allowed as
/// transactions of its ``DomainStore``, which holds state and no rule. The same engine runs in
/// process (``EmbeddedDomain``: the engine over the SQLite file every process on the machine
/// opens) and in `spark-domaind`.
///
/// ```swift
/// let domain = try EmbeddedDomain.openOrCreate(at: path, domainID: "sandbox-1")
/// let token = try await domain.testToken(userID: "alice")
/// let who = try await domain.validate(token: token.token)
/// ```
package final class DomainEngine: DomainService {
    /// The domain's id; the audience of its tokens.
    package let domainID: String
    /// Where the store is, for messages (the embedded domain's database file).
    package let path: String
    /// The domain's state.
    package let store: any DomainStore
    let clock: WallClock
    let mailer: any Mailer
    let testIssuer: TokenIssuer
    let accountsIssuer: TokenIssuer
    let allowUnsafePasswordHashing: Bool
    /// The OPRF secrets that harden passcodes; held by this process, never in the store.
    let passcodeKeys: PasscodeKeys
    /// The key-transparency log (its keys come with the passcode keys).
    package let transparency: TransparencyLog
    let jwksCache = JWKSCache()
    /// When the keys of issuers trusted by discovery are next due to be fetched again.
    let discovery = DiscoverySchedule()
    /// Tokens this process already verified (the signature check is the costly part of every
    /// call; time claims and the issuer's trust are checked on every use).
    let validatedTokens = ValidatedTokenCache()
    /// Principals this process already found bound to their issuer (user id → issuer).
    let knownPrincipals = Locked<[String: String]>([:])
    /// The policy and the token validator as last built here, with the stored rows they were
    /// built from and how long they may be used without reading the rows again (see
    /// `validator()`).
    let settings = Locked(SettingsCache())
    /// How long settings read here are used without reading them again, hearing of no change;
    /// nil when other processes write the file, and this one reads them on every request.
    let settingsLifetime: Duration?
    /// What each user wrote lately, against the policy's limits.
    let usage = UsageLimits()
    /// The posts' group commit: those that arrive together share a transaction (`GroupCommit`).
    package let posts: GroupCommit
    /// The long-polls waiting in this process, woken per user by the posts that reach them.
    package let mailboxWaiters = MailboxWaiters()
    /// When each endpoint's mailbox cursor was last recorded, and where it was (see `pruneMailbox`).
    let prunedAt = Locked<[String: (cursor: Int64, at: TimeInterval)]>([:])
    /// Whether other processes may write the file (the quick start's two devices): then the
    /// first long-poll starts watching it, and a change wakes this process's waiters to look.
    /// `spark-domaind` owns its file and turns this off.
    let sharedWithOtherProcesses: Bool
    /// Made on the first long-poll: one-off callers (spark-admin) never watch the file.
    private let changes = Locked<FileChangeSignal?>(nil)
    /// Tells other processes on the file that a commit put entries in mailboxes (made on first use).
    private let poke = Locked<FileChangeSignal.Poke?>(nil)

    /// The engine over `store`, which must hold a domain (``create(in:domainID:policy:allowUnsafePasswordHashing:)``).
    ///
    /// - Parameters:
    ///   - location: where the store is, for messages and for watching (a file path).
    ///   - passcodeKeys: the OPRF secrets that harden passcodes (``PasscodeKeys``), kept apart
    ///     from the store; every instance of a domain needs the same ones.
    ///   - mailer: where mail goes; the domain's outbox by default.
    ///   - allowUnsafePasswordHashing: accept a policy with fewer than OWASP's password-hash
    ///     iterations (tests only).
    ///   - sharedWithOtherProcesses: whether other processes write the store's file too.
    ///   - beforePostCommit: runs in each posts' transaction before it commits (tests make it
    ///     throw, as a failing commit would).
    package init(
        store: any DomainStore, location: String, passcodeKeys: PasscodeKeys, clock: WallClock = .system,
        mailer: (any Mailer)? = nil, allowUnsafePasswordHashing: Bool = false, sharedWithOtherProcesses: Bool = false,
        beforePostCommit: @escaping @Sendable (any DomainStatements) throws -> Void = { _ in }
    ) throws {
        self.path = location
        posts = GroupCommit(store: store, beforeCommit: beforePostCommit)
        self.passcodeKeys = passcodeKeys
        guard let secrets = passcodeKeys.transparency else {
            throw DomainError(
                .unavailable,
                "the passcode key file has no transparency keys: add them with `spark-domaind passcode-keys DIRECTORY transparency` and give every instance the file"
            )
        }
        transparency = TransparencyLog(
            secrets: secrets, pin: TransparencyHeadPin(path: passcodeKeys.location.map { $0 + ".kt-head" }))
        self.store = store
        self.sharedWithOtherProcesses = sharedWithOtherProcesses
        self.settingsLifetime = sharedWithOtherProcesses ? nil : store.settingsLifetime
        self.clock = clock
        self.mailer = mailer ?? OutboxMailer(store: store)
        self.allowUnsafePasswordHashing = allowUnsafePasswordHashing
        let loaded = try Self.blockingStorage {
            try store.blockingRead { db -> Loaded in
                guard let id = try db.scalar("SELECT id FROM domain WHERE singleton = 1", as: String.self) else {
                    throw DomainError(.unavailable, "\(location) holds no domain; create it first")
                }
                var keys: [String: IssuerKey] = [:]
                for row in try db.rows("SELECT kind, issuer, key_id, private_key FROM issuer_keys") {
                    keys[try row.get(0, as: String.self)] = IssuerKey(
                        issuer: try row.get(1, as: String.self), keyID: try row.get(2, as: String.self),
                        seed: try row.get(3, as: Data.self))
                }
                return Loaded(domainID: id, keys: keys)
            }
        }
        domainID = loaded.domainID
        func issuer(_ kind: String) throws -> TokenIssuer {
            guard let key = loaded.keys[kind] else {
                throw DomainError(.unavailable, "\(location) has no \(kind) issuer key")
            }
            return TokenIssuer(issuer: key.issuer, key: try Ed25519.PrivateKey(rawRepresentation: key.seed), keyID: key.keyID)
        }
        testIssuer = try issuer("test")
        accountsIssuer = try issuer("accounts")
    }

    private struct IssuerKey: Sendable {
        var issuer: String
        var keyID: String
        var seed: Data
    }

    private struct Loaded: Sendable {
        var domainID: String
        var keys: [String: IssuerKey]
    }

    /// Writes a new domain into `store`: its id, policy and fresh issuer keys. Fails with
    /// ``DomainError/Code/conflict`` if the store already holds a domain.
    package static func create(
        in store: any DomainStore, domainID: String, policy: DomainPolicy, allowUnsafePasswordHashing: Bool = false,
        clock: WallClock = .system
    ) throws {
        try policy.validate(allowUnsafePasswordHashing: allowUnsafePasswordHashing)
        guard !domainID.isEmpty, domainID.count <= 128, !domainID.contains(where: { $0.isWhitespace || $0.isNewline }) else {
            throw DomainError(.invalidRequest, "a domain id is 1 to 128 characters without spaces")
        }
        let policyJSON = try JSONEncoder().encode(policy)
        var keys: [(String, String, String, Data)] = []
        for (kind, scheme) in [("test", "spark-test"), ("accounts", "spark-accounts")] {
            let key = try Ed25519.PrivateKey()
            let keyID = try JWK(key.publicKey).thumbprint().base64URLEncodedString()
            keys.append((kind, "\(scheme):\(domainID)", keyID, key.rawRepresentation.unsafeData()))
        }
        let rows = keys
        try blockingStorage {
            try store.blockingWrite { db in
                if try db.scalar("SELECT id FROM domain", as: String.self) != nil {
                    throw DomainError(.conflict, "the store already holds a domain")
                }
                try db.execute(
                    "INSERT INTO domain(singleton, id, policy, created_at) VALUES (1, ?, ?, ?)",
                    [domainID, String(decoding: policyJSON, as: UTF8.self), clock.now().timeIntervalSince1970])
                for (kind, issuer, keyID, seed) in rows {
                    try db.execute(
                        "INSERT INTO issuer_keys(kind, issuer, key_id, private_key) VALUES (?, ?, ?, ?)",
                        [kind, issuer, keyID, seed])
                }
            }
        }
    }

    /// Entries reached these users' mailboxes, committed: wakes their long-polls in this process
    /// and, when other processes share the file, theirs.
    func announceEntries(to users: some Sequence<String>) {
        mailboxWaiters.notify(users)
        pokeOtherProcesses()
    }

    /// Entries one transaction wrote, committed: wakes their users' long-polls here, handing
    /// each whose endpoint is in `usable` the entries where they are what its read would
    /// return (``MailboxWaiters/deliver(_:usable:)``), and, when other processes share the
    /// file, wakes theirs to read.
    func announceEntries(_ appended: AppendedEntries, usable: Set<MailboxWaiters.Endpoint>) {
        mailboxWaiters.deliver(appended, usable: usable)
        pokeOtherProcesses()
    }

    /// Of the endpoints whose long-polls wait here on `users`' mailboxes, those that may read
    /// them, as the mailbox read checks (registered to the user, not removed, not taking the
    /// profile over): called in the transaction that appends, so a removal committed before it
    /// is seen; a long-poll of an endpoint not checked here reads the mailbox when woken.
    func usableWaitingEndpoints(_ db: any DomainStatements, of users: some Sequence<String>) throws
        -> Set<MailboxWaiters.Endpoint>
    {
        try Self.usable(mailboxWaiters.waitingEndpoints(of: users), db)
    }

    /// Tells the other processes that share the embedded file that it changed.
    private func pokeOtherProcesses() {
        guard sharedWithOtherProcesses else { return }
        let poke = poke.withLock { poke in
            if poke == nil { poke = FileChangeSignal.Poke(path: path) }
            return poke
        }
        poke?()
    }

    /// Starts hearing of other processes' commits (once): the store's announcements (other
    /// `spark-domaind` instances on one PostgreSQL database) wake the users they name, and, when
    /// other processes may write the file, each change of it wakes every waiter here to read its
    /// mailbox again.
    func startWatchingOtherProcesses() {
        let (waiters, settings, store) = (mailboxWaiters, settings, store)
        store.listen { announcement in
            switch announcement {
            case .users(let users): waiters.notify(users)
            case .entries(let appended):
                // Committed elsewhere: the waiting endpoints are checked by a read now, on the
                // listener's thread (so announcements are handled in the order they came). A
                // failed check hands nothing: every waiter reads.
                let usable =
                    (try? store.blockingReadEach { db in try Self.usable(waiters.waitingEndpoints(of: appended.users), db) })
                    ?? []
                waiters.deliver(appended, usable: usable)
            case .everyone:
                settings.withLock { $0.changed() }
                waiters.notifyEveryone()
            case .settings: settings.withLock { $0.changed() }
            }
        }
        guard sharedWithOtherProcesses else { return }
        changes.withLock { changes in
            guard changes == nil else { return }
            changes = FileChangeSignal(path: path) { waiters.notifyEveryone() }
        }
    }

    // MARK: Policy and tokens

    /// The domain's policy, read from the store (another process may have changed it).
    package func policy() async throws -> DomainPolicy { try storedPolicy() }

    /// The domain's policy, read from the store now.
    package func storedPolicy() throws -> DomainPolicy {
        let json = try Self.blockingStorage {
            try store.blockingRead { db in try db.scalar("SELECT policy FROM domain", as: String.self) }
        }
        return try policy(json)
    }

    /// The policy for a request: as kept (see ``SettingsCache``) while that stands for the
    /// stored row, read from the store otherwise.
    func currentPolicy() throws -> DomainPolicy {
        if let fresh = settings.withLock({ $0.fresh?.policy }) { return fresh }
        return try storedPolicy()
    }

    /// The policy as this request's token check found it (read, or kept while it stands),
    /// without reading it again.
    func requestPolicy() throws -> DomainPolicy {
        if let policy = settings.withLock({ $0.current?.policy }) { return policy }
        return try currentPolicy()
    }

    /// The policy stored as `json`, decoded once per change of the text (decoding it was a
    /// twentieth of a message's cost).
    private func policy(_ json: String?) throws -> DomainPolicy {
        guard let json else { throw DomainError(.unavailable, "the domain's policy is unreadable") }
        if let known = settings.withLock({ $0.current?.policyJSON == json ? $0.current?.policy : nil }) { return known }
        guard let policy = try? JSONDecoder().decode(DomainPolicy.self, from: Data(json.utf8)) else {
            throw DomainError(.unavailable, "the domain's policy is unreadable")
        }
        settings.withLock { $0.current = Settings(policyJSON: json, policy: policy) }
        return policy
    }

    /// What the token validator is built from: the policy's text and the external issuers' rows.
    /// The validator is built again only when they changed. An issuer whose keys are a file
    /// (`jwks_path`) is not cached here: the file may change under the same rows.
    struct Settings: Sendable {
        var policyJSON: String
        var policy: DomainPolicy
        var issuers: [IssuerRow]? = nil
        var validator: TokenValidator? = nil
    }

    /// The settings last read, and until when they stand for the rows without a read. A change
    /// made here or announced by the store (another instance's, through PostgreSQL's
    /// `NOTIFY`) ends that at once; ``DomainStore/settingsLifetime`` bounds it otherwise.
    struct SettingsCache: Sendable {
        var current: Settings?
        var freshUntil: ContinuousClock.Instant?
        /// Counts the changes heard of, so that rows read before a change are never kept as
        /// fresh after it.
        var generation: UInt64 = 0

        /// The settings, if they may be used without reading the rows.
        var fresh: Settings? {
            guard let freshUntil, ContinuousClock.now < freshUntil, current?.validator != nil else { return nil }
            return current
        }

        mutating func changed() {
            freshUntil = nil
            generation &+= 1
        }

        /// Rows read at `readAt` stand for `lifetime`, unless a change was heard since.
        mutating func markFresh(readAt: ContinuousClock.Instant, generation: UInt64, lifetime: Duration?) {
            guard let lifetime, generation == self.generation else { return }
            freshUntil = readAt + lifetime
        }
    }

    /// The policy or the trusted issuers changed here: read them on the next request.
    func settingsChanged() { settings.withLock { $0.changed() } }

    struct IssuerRow: Sendable, Equatable {
        var issuer: ExternalIssuer
        var jwks: Data?
    }

    /// Validates a token against the domain's issuers: its accounts issuer always, its test
    /// issuer when user authentication is off, and the configured external issuers.
    /// Validates `token` into the caller: its issuer and subject together. A user id is bound
    /// to the issuer that first used it; another issuer's token with the same subject is
    /// refused, so an external issuer's `alice` never acts as the accounts assistant's (or
    /// the test issuer's) `alice`.
    ///
    /// Settings used without reading them again only ever let a token in: a token they refuse
    /// is checked once more against the rows as stored, so an issuer trusted through another
    /// instance a moment ago is trusted here too.
    package func validate(token: String) async throws -> VerifiedIdentity {
        // Keys of providers trusted by discovery that aged past their freshness are fetched again
        // in the background; this request goes on with the keys in hand.
        defer { refreshDueKeys() }
        do {
            return try await validateOnce(token)
        } catch let error as DomainError where error.reason == TokenValidator.unknownKey {
            // A provider trusted by discovery may have rotated its keys: fetch them (at most once
            // a minute per issuer, across instances) and check once more.
            guard let payload = try? JWS.unverifiedPayload(of: token),
                let issuer = try? JSONDecoder().decode(JWTClaims.self, from: payload).issuer,
                await refreshDiscoveredKeys(issuer)
            else { throw error }
            return try await validateOnce(token)
        }
    }

    /// Who makes a call: a user whose token this domain validated, and the endpoint the call
    /// names. Only ``DomainEngine/caller(token:endpointID:)`` makes one, so an engine method that
    /// takes a caller is never reached with a token unchecked. Whether the endpoint is the user's
    /// (registered, not removed, done taking the profile over) each method checks where its
    /// change needs it: inside its own transaction for a change, before its read for a read.
    package struct Caller: Sendable, Hashable {
        /// The user the token proves.
        package let userID: String
        /// The endpoint the call names (`Spark-Endpoint`).
        package let endpointID: String

        fileprivate init(userID: String, endpointID: String) {
            self.userID = userID
            self.endpointID = endpointID
        }
    }

    /// Resolves a call's credential once: validates `token` (``validate(token:)``) into the
    /// caller that names `endpointID`.
    package func caller(token: String, endpointID: String) async throws -> Caller {
        Caller(userID: try await validate(token: token).userID, endpointID: endpointID)
    }

    private func validateOnce(_ token: String) async throws -> VerifiedIdentity {
        let identity: VerifiedIdentity
        if let fresh = settings.withLock({ $0.fresh }), let kept = fresh.validator {
            do {
                identity = try kept.validate(token, cache: validatedTokens)
            } catch {
                // Checked again only if the stored rows are not the ones just used: a refused
                // token costs one signature check, not two.
                let stored = try await storedValidator()
                let unchanged = stored.policyJSON == fresh.policyJSON && stored.issuers == fresh.issuers
                if unchanged { throw error }
                identity = try stored.validator.validate(token, cache: validatedTokens)
            }
        } else {
            identity = try await validator().validate(token, cache: validatedTokens)
        }
        try await bindPrincipal(identity.userID, to: identity.issuer)
        return identity
    }

    /// Checks `token` with the settings in hand, without waiting on the store: the refusal, or nil
    /// when the token passes or only settings read anew could tell (then the request's own
    /// ``validate(token:)`` decides). For the server's check of a request's head before its body
    /// is read: it never blocks. With settings older than their lifetime, what a change of them
    /// could turn into an acceptance (an issuer not trusted yet, test tokens refused, an issuer's
    /// keys unavailable, another audience) is left to the full check; a token that is malformed,
    /// expired or not signed by its issuer's keys is refused whatever their age.
    package func precheck(token: String) -> DomainError? { precheckUser(token: token).refusal }

    /// ``precheck(token:)`` with the token's user when it passed (`issuer` and user id, for the
    /// server's per-user body budget); nil when it was left to the full check.
    package func precheckUser(token: String) -> (refusal: DomainError?, user: String?) {
        let (validator, fresh) = settings.withLock { ($0.current?.validator, $0.fresh != nil) }
        guard let validator else { return (nil, nil) }
        do {
            let identity = try validator.validate(token, cache: validatedTokens)
            return (nil, identity.issuer + "\n" + identity.userID)
        } catch let error as DomainError {
            let settingsDecide =
                [.userAuthenticationRequired, .unavailable, .wrongAudience].contains(error.code)
                || error.reason == TokenValidator.untrustedIssuer || error.reason == TokenValidator.unknownKey
            return (fresh || !settingsDecide ? error : nil, nil)
        } catch {
            return (DomainError(.invalidToken, "the token is not valid"), nil)
        }
    }

    /// Binds `userID` to `issuer` if it is free; refuses it if another issuer holds it.
    func bindPrincipal(_ userID: String, to issuer: String) async throws {
        if knownPrincipals.withLock({ $0[userID] }) == issuer { return }
        let holder = try await Self.storage {
            try await store.write { db -> String in
                if let holder = try db.scalar("SELECT issuer FROM principals WHERE user_id = ?", [userID], as: String.self) {
                    return holder
                }
                try db.execute(
                    "INSERT INTO principals(user_id, issuer, first_seen) VALUES (?, ?, ?)",
                    [userID, issuer, self.clock.now().timeIntervalSince1970])
                return issuer
            }
        }
        guard holder == issuer else {
            throw DomainError(
                .forbidden, "the user id '\(userID)' belongs to another issuer on this domain (\(holder)), not to \(issuer)")
        }
        knownPrincipals.withLock { $0[userID] = issuer }
    }

    /// Whether an issuer other than `issuer` holds the user id `userID` (in the transaction).
    static func principalHeld(_ db: any DomainStatements, _ userID: String, byOtherThan issuer: String) throws -> Bool {
        try db.scalar("SELECT 1 FROM principals WHERE user_id = ? AND issuer != ?", [userID, issuer], as: Int.self) != nil
    }

    /// The issuer a user id is bound to, if any.
    func principalIssuer(of userID: String) async throws -> String? {
        try await Self.storage {
            try await store.read { db in
                try db.scalar("SELECT issuer FROM principals WHERE user_id = ?", [userID], as: String.self)
            }
        }
    }

    /// The validator as the stored rows say now: read, and kept for ``settingsLifetime``.
    func validator() async throws -> TokenValidator { try await storedValidator().validator }

    /// ``validator()``, with the stored rows it stands for.
    private func storedValidator() async throws -> (validator: TokenValidator, policyJSON: String?, issuers: [IssuerRow]) {
        let (generation, readAt) = (settings.withLock { $0.generation }, ContinuousClock.now)
        let (json, rows) = try await Self.storage {
            try await store.read { db in
                (
                    try db.scalar("SELECT policy FROM domain", as: String.self),
                    try Self.issuerRows(db)
                )
            }
        }
        let policy = try policy(json)
        let known = settings.withLock { cache -> TokenValidator? in
            guard let current = cache.current, current.policyJSON == json, current.issuers == rows,
                let validator = current.validator
            else { return nil }
            cache.markFresh(readAt: readAt, generation: generation, lifetime: settingsLifetime)
            return validator
        }
        if let known { return (known, json, rows) }
        var issuers = [accountsIssuer.trusted(audience: domainID, kind: .accounts)]
        let test = testIssuer.trusted(audience: domainID, kind: .test)
        issuers.append(test)
        // An issuer whose keys cannot be loaded fails its own tokens only, with the reason.
        var unavailable: [String: String] = [:]
        for row in rows {
            let external = row.issuer
            do {
                let keys =
                    try row.jwks.map { try jwksCache.keys(in: $0, source: "the stored JWKS of \(external.issuer)") }
                    ?? jwksCache.keys(at: external.jwksPath)
                issuers.append(
                    TrustedIssuer(
                        issuer: external.issuer, audience: external.audience, keys: keys, kind: .external,
                        userClaim: external.userClaim, discovered: external.jwksURI != nil))
                if let freshUntil = external.keysFreshUntil { discovery.due(external.issuer, at: freshUntil) }
            } catch let error as DomainError {
                unavailable[external.issuer] = error.reason
            }
        }
        var validator = TokenValidator(
            issuers: issuers, leeway: 30, clock: clock,
            refuseTestTokens: policy.userAuthenticationEnabled ? test.issuer : nil)
        validator.unavailableIssuers = unavailable
        if let json, rows.allSatisfy({ $0.jwks != nil }) {
            settings.withLock {
                $0.current = Settings(policyJSON: json, policy: policy, issuers: rows, validator: validator)
                $0.markFresh(readAt: readAt, generation: generation, lifetime: settingsLifetime)
            }
            // Another instance's change must end the freshness at once.
            if settingsLifetime != nil { startWatchingOtherProcesses() }
        }
        return (validator, json, rows)
    }

    /// A sandbox token for any user id, signed by the test issuer (Spark used unsigned tokens;
    /// these are signed so that nothing else can mint them).
    package func testToken(userID: String) async throws -> IssuedToken {
        let policy = try currentPolicy()
        guard !policy.userAuthenticationEnabled else {
            throw DomainError(.userAuthenticationRequired, "domain \(domainID) requires user authentication; test tokens are off")
        }
        if let problem = UserIDs.problem(userID, maximumLength: TokenValidator.maximumSubjectLength) {
            throw DomainError(.invalidRequest, problem)
        }
        // A name another issuer holds (a real account, an app's user) is not the sandbox's.
        if let holder = try await principalIssuer(of: userID), holder != testIssuer.issuer {
            throw DomainError(.forbidden, "the user id '\(userID)' belongs to another issuer on this domain (\(holder))")
        }
        return try testIssuer.issue(
            subject: userID, audience: domainID, lifetime: TimeInterval(policy.tokenLifetime), now: clock.now())
    }

    /// The public keys of the test issuer, for relying parties that verify its tokens.
    package var testIssuerJWKS: JWKSet { testIssuer.jwks }
    /// The `iss` of test tokens.
    package var testIssuerName: String { testIssuer.issuer }
    /// The public keys of the accounts issuer.
    package var accountsIssuerJWKS: JWKSet { accountsIssuer.jwks }
    /// The `iss` of tokens from the sign-up and login assistant.
    package var accountsIssuerName: String { accountsIssuer.issuer }

    /// Runs storage work, turning SparkStore's errors into ``DomainError/Code/storageFailure``
    /// (domain errors thrown inside pass through).
    @discardableResult
    static func blockingStorage<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch { throw domainError(error) }
    }

    /// What the engine says of a storage failure: a domain error as it is, a file too new as
    /// unavailable, anything else a storage failure.
    private static func domainError(_ error: any Error) -> DomainError {
        switch error {
        case let error as DomainError: error
        case let error as StoreError where error.code == .schemaTooNew:
            DomainError(.unavailable, "the domain file was written by a newer version: \(error.message)")
        default: DomainError(.storageFailure, "domain storage failed: \(error)")
        }
    }

    @discardableResult
    func blockingStorage<T>(_ body: () throws -> T) throws -> T { try Self.blockingStorage(body) }

    /// ``blockingStorage(_:)`` for a transaction run on the store's threads.
    @discardableResult
    static func storage<T>(_ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch { throw domainError(error) }
    }

    @discardableResult
    func storage<T>(_ body: () async throws -> T) async throws -> T { try await Self.storage(body) }
}

/// The default mailer: the domain's outbox table.
struct OutboxMailer: Mailer {
    let store: any DomainStore

    func send(_ mail: Mail) async throws {
        try await DomainEngine.storage {
            try await store.write { db in
                try db.execute(
                    "INSERT INTO outbox(recipient, subject, body, sent_at) VALUES (?, ?, ?, ?)",
                    [mail.to, mail.subject, mail.body, mail.sentAt.timeIntervalSince1970])
            }
        }
    }
}
