import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkLock
import SparkSDK
import SparkTestSupport
import Synchronization
import Testing

/// Forwards to a real domain and counts the token-minting calls, to prove single flight; a
/// test may also look at the domain right after a membership change returns.
final class CountingDomain: DomainService {
    let inner: EmbeddedDomain
    let testTokens = Atomic<Int>(0)
    let refreshes = Atomic<Int>(0)
    /// Calls of `validate(token:)`: the service validates each token it is handed.
    let validations = Atomic<Int>(0)
    /// Runs with the chat id after `createChat`, `updateMembers` and `postCommit` return, before
    /// the caller goes on.
    let afterMembershipChange = Locked<(@Sendable (String) async -> Void)?>(nil)
    init(_ inner: EmbeddedDomain) { self.inner = inner }
    var domainID: String { inner.domainID }
    func policy() async throws -> DomainPolicy { try await inner.policy() }
    func validate(token: String) async throws -> VerifiedIdentity {
        validations.add(1, ordering: .relaxed)
        return try await inner.validate(token: token)
    }
    func testToken(userID: String) async throws -> IssuedToken {
        testTokens.add(1, ordering: .relaxed)
        try await Task.sleep(for: .milliseconds(20))  // long enough for callers to pile up
        return try await inner.testToken(userID: userID)
    }
    func signUp(_ request: SignUpRequest) async throws { try await inner.signUp(request) }
    func activate(userName: String, code: String) async throws { try await inner.activate(userName: userName, code: code) }
    func resendActivationCode(userName: String) async throws { try await inner.resendActivationCode(userName: userName) }
    func logIn(userName: String, password: String) async throws -> IssuedToken {
        try await inner.logIn(userName: userName, password: password)
    }
    func refresh(refreshToken: String) async throws -> IssuedToken {
        refreshes.add(1, ordering: .relaxed)
        return try await inner.refresh(refreshToken: refreshToken)
    }
    func revoke(refreshToken: String) async throws { try await inner.revoke(refreshToken: refreshToken) }
    func requestPasswordReset(email: String) async throws { try await inner.requestPasswordReset(email: email) }
    func resetPassword(email: String, code: String, newPassword: String) async throws {
        try await inner.resetPassword(email: email, code: code, newPassword: newPassword)
    }
    func registerEndpoint(token: String, registration: EndpointRegistration) async throws -> RegistrationOutcome {
        try await inner.registerEndpoint(token: token, registration: registration)
    }
    func endpoints(token: String, endpointID: String) async throws -> [EndpointInfo] {
        try await inner.endpoints(token: token, endpointID: endpointID)
    }
    func setEndpointNickname(token: String, endpointID: String, target: String, nickname: String) async throws {
        try await inner.setEndpointNickname(token: token, endpointID: endpointID, target: target, nickname: nickname)
    }
    func deregisterEndpoint(token: String, endpointID: String, target: String, signature: Data?) async throws {
        try await inner.deregisterEndpoint(token: token, endpointID: endpointID, target: target, signature: signature)
    }
    func publishEndpointCredential(token: String, endpointID: String, credential: Data) async throws {
        try await inner.publishEndpointCredential(token: token, endpointID: endpointID, credential: credential)
    }
    func approveEndpoint(token: String, endpointID: String, target: String, approval: Data) async throws {
        try await inner.approveEndpoint(token: token, endpointID: endpointID, target: target, approval: approval)
    }
    func checkIn(token: String, endpointID: String) async throws -> EndpointInfo {
        try await inner.checkIn(token: token, endpointID: endpointID)
    }
    func fetchKeyBlob(token: String, endpointID: String, name: String) async throws -> BlobFetch {
        try await inner.fetchKeyBlob(token: token, endpointID: endpointID, name: name)
    }
    func putKeyBlob(
        token: String, endpointID: String, name: String, data: Data, expectedVersion: Int?, proof: KeyBlobProof?
    ) async throws -> Int {
        try await inner.putKeyBlob(
            token: token, endpointID: endpointID, name: name, data: data, expectedVersion: expectedVersion, proof: proof)
    }
    func putKeyBlobs(token: String, endpointID: String, writes: [KeyBlobWrite], proof: KeyBlobProof?) async throws -> [Int] {
        try await inner.putKeyBlobs(token: token, endpointID: endpointID, writes: writes, proof: proof)
    }
    func evaluatePasscode(token: String, endpointID: String, blindedElement: Data, keyID: String?) async throws
        -> PasscodeEvaluation
    {
        try await inner.evaluatePasscode(token: token, endpointID: endpointID, blindedElement: blindedElement, keyID: keyID)
    }
    func proveUnlock(token: String, endpointID: String, challenge: Data, signature: Data) async throws {
        try await inner.proveUnlock(token: token, endpointID: endpointID, challenge: challenge, signature: signature)
    }
    func retirePasscodeKeys(token: String, endpointID: String, challenge: Data, signature: Data, version: Int) async throws {
        try await inner.retirePasscodeKeys(
            token: token, endpointID: endpointID, challenge: challenge, signature: signature, version: version)
    }
    func publishIdentity(token: String, endpointID: String, identity: PublishedIdentity) async throws {
        try await inner.publishIdentity(token: token, endpointID: endpointID, identity: identity)
    }
    func identity(token: String, endpointID: String, userID: String) async throws -> PublishedIdentity? {
        try await inner.identity(token: token, endpointID: endpointID, userID: userID)
    }
    func resetIdentity(token: String, endpointID: String, signature: Data?) async throws -> IdentityResetOutcome {
        try await inner.resetIdentity(token: token, endpointID: endpointID, signature: signature)
    }
    func cancelIdentityReset(token: String, endpointID: String) async throws {
        try await inner.cancelIdentityReset(token: token, endpointID: endpointID)
    }
    func pendingIdentityReset(token: String, endpointID: String, userID: String) async throws -> PendingIdentityReset? {
        try await inner.pendingIdentityReset(token: token, endpointID: endpointID, userID: userID)
    }
    func postCommit(
        token: String, endpointID: String, chatID: String, epoch: Int64, commit: Data, welcome: Data?, add: [String],
        remove: [String], replacingRefused: Bool
    ) async throws -> Int64 {
        let epoch = try await inner.postCommit(
            token: token, endpointID: endpointID, chatID: chatID, epoch: epoch, commit: commit, welcome: welcome, add: add,
            remove: remove, replacingRefused: replacingRefused)
        await afterMembershipChange.withLock { $0 }?(chatID)
        return epoch
    }
    func publishKeyPackages(token: String, endpointID: String, keyPackages: [Data], lastResort: Data?) async throws -> Int {
        try await inner.publishKeyPackages(token: token, endpointID: endpointID, keyPackages: keyPackages, lastResort: lastResort)
    }
    func claimKeyPackages(token: String, endpointID: String, userID: String, suite: UInt16) async throws
        -> [ClaimedKeyPackage]
    {
        try await inner.claimKeyPackages(token: token, endpointID: endpointID, userID: userID, suite: suite)
    }
    func keyPackageCount(token: String, endpointID: String, suite: UInt16) async throws -> Int {
        try await inner.keyPackageCount(token: token, endpointID: endpointID, suite: suite)
    }
    func identityKeyVersion(token: String, endpointID: String) async throws -> Int {
        try await inner.identityKeyVersion(token: token, endpointID: endpointID)
    }
    func transparencyKeys(token: String, endpointID: String) async throws -> TransparencyKeys {
        try await inner.transparencyKeys(token: token, endpointID: endpointID)
    }
    func identityProof(token: String, endpointID: String, userID: String, since: UInt64?, auditor: Data?) async throws
        -> IdentityProof
    {
        try await inner.identityProof(token: token, endpointID: endpointID, userID: userID, since: since, auditor: auditor)
    }
    func transparencyHeads(token: String, endpointID: String, since: UInt64?) async throws -> TransparencyHeads {
        try await inner.transparencyHeads(token: token, endpointID: endpointID, since: since)
    }
    func createChat(
        token: String, endpointID: String, chatID: String, participants: [String], posts: [ChatPost]
    ) async throws -> ChatInfo {
        let info = try await inner.createChat(
            token: token, endpointID: endpointID, chatID: chatID, participants: participants, posts: posts)
        await afterMembershipChange.withLock { $0 }?(chatID)
        return info
    }
    func updateMembers(
        token: String, endpointID: String, chatID: String, add: [String], remove: [String], posts: [ChatPost]
    ) async throws -> ChatInfo {
        let info = try await inner.updateMembers(
            token: token, endpointID: endpointID, chatID: chatID, add: add, remove: remove, posts: posts)
        await afterMembershipChange.withLock { $0 }?(chatID)
        return info
    }
    func post(
        token: String, endpointID: String, chatID: String, kind: MailboxKind, payload: Data, recipient: String?, clientID: String?
    ) async throws -> PostReceipt {
        try await inner.post(
            token: token, endpointID: endpointID, chatID: chatID, kind: kind, payload: payload, recipient: recipient,
            clientID: clientID)
    }
    func readMailbox(token: String, endpointID: String, after cursor: Int64, limit: Int, wait: Duration) async throws
        -> [MailboxEntry]
    {
        try await inner.readMailbox(token: token, endpointID: endpointID, after: cursor, limit: limit, wait: wait)
    }
    func chat(token: String, endpointID: String, chatID: String) async throws -> ChatInfo {
        try await inner.chat(token: token, endpointID: endpointID, chatID: chatID)
    }
    func userStatus(token: String, endpointID: String) async throws -> UserStatus {
        try await inner.userStatus(token: token, endpointID: endpointID)
    }
    func dismissInfraction(token: String, endpointID: String, id: Int64) async throws {
        try await inner.dismissInfraction(token: token, endpointID: endpointID, id: id)
    }
    func report(
        token: String, endpointID: String, chatID: String, user: String, reason: String, messages: [ReportedMessage]
    ) async throws -> Int64 {
        try await inner.report(
            token: token, endpointID: endpointID, chatID: chatID, user: user, reason: reason, messages: messages)
    }
    func createBlob(token: String, endpointID: String, chatID: String, blobID: String, size: Int64) async throws
        -> BlobStatus
    {
        try await inner.createBlob(token: token, endpointID: endpointID, chatID: chatID, blobID: blobID, size: size)
    }
    func uploadBlob(token: String, endpointID: String, blobID: String, offset: Int64, bytes: Data) async throws
        -> BlobStatus
    {
        try await inner.uploadBlob(token: token, endpointID: endpointID, blobID: blobID, offset: offset, bytes: bytes)
    }
    func blobStatus(token: String, endpointID: String, blobID: String) async throws -> BlobStatus {
        try await inner.blobStatus(token: token, endpointID: endpointID, blobID: blobID)
    }
    func downloadBlob(token: String, endpointID: String, blobID: String, offset: Int64, length: Int) async throws -> Data {
        try await inner.downloadBlob(token: token, endpointID: endpointID, blobID: blobID, offset: offset, length: length)
    }
    func deleteBlob(token: String, endpointID: String, blobID: String) async throws {
        try await inner.deleteBlob(token: token, endpointID: endpointID, blobID: blobID)
    }
    func setBlocked(token: String, endpointID: String, userID: String, blocked: Bool) async throws {
        try await inner.setBlocked(token: token, endpointID: endpointID, userID: userID, blocked: blocked)
    }
    func blockedUsers(token: String, endpointID: String) async throws -> [String] {
        try await inner.blockedUsers(token: token, endpointID: endpointID)
    }
}

/// Records what the delegate was told.
final class RecordingDelegate: BBMTokenManagerDelegate {
    let events = Locked<[String]>([])
    func localAuthDataChanged(_ account: BBMAuthenticatedAccount?, error: (any Error)?) {
        events.withLock { $0.append(account.map { "in:\($0.accountId)" } ?? (error == nil ? "out" : "out:error")) }
    }
    var recorded: [String] { events.withLock { $0 } }
}

struct Harness {
    let directory: URL
    let clock = TestClock(Date())
    let domain: EmbeddedDomain
    let counting: CountingDomain

    init(_ directory: URL, policy: DomainPolicy = DomainPolicy(passwordIterations: 1000)) throws {
        self.directory = directory
        domain = try EmbeddedDomain.create(
            at: directory.appendingPathComponent("domain.sqlite").path, domainID: "sdk-test", policy: policy,
            clock: clock.wallClock, allowUnsafePasswordHashing: true)
        counting = CountingDomain(domain)
    }

    func store(_ device: String = "device-a") throws -> EndpointStore {
        try EndpointStore(directory: directory.appendingPathComponent(device))
    }
}

@Suite("Token managers")
struct TokenManagerTests {
    @Test func testAuthSignInSilentSignInAndSignOut() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let harness = try Harness(directory)
            let delegate = RecordingDelegate()
            let manager = BBMTestTokenManager(domain: harness.domain, store: try harness.store(), clock: harness.clock.wallClock)
            manager.delegate = delegate
            await #expect(throws: AuthError(.userIDRequired, "")) { try await manager.signIn() }
            let account = try await manager.signIn(userID: "alice")
            #expect(account.accountId == "alice")
            #expect(try await harness.domain.validate(token: account.idToken).userID == "alice")
            #expect(!String(describing: account).contains(account.idToken))

            // A restart: a new manager on the same store signs in without asking.
            let restarted = BBMTestTokenManager(
                domain: harness.domain, store: try harness.store(), clock: harness.clock.wallClock)
            #expect(try await restarted.signInSilently()?.idToken == account.idToken)
            #expect(restarted.userIdentifier == "alice")
            // Another device has nothing cached.
            let other = BBMTestTokenManager(domain: harness.domain, store: try harness.store("device-b"))
            #expect(try await other.signInSilently() == nil)

            await manager.signOut()
            #expect(await manager.account == nil)
            await #expect(throws: AuthError(.signedOut, "")) { try await manager.validAccount() }
            #expect(try await BBMTestTokenManager(domain: harness.domain, store: try harness.store()).signInSilently() == nil)
            #expect(delegate.recorded == ["in:alice", "out"])

            let mode =
                try FileManager.default.attributesOfItem(
                    atPath: directory.appendingPathComponent("device-a/endpoint.sqlite").path)[.posixPermissions] as? Int
            #expect(mode == 0o600)
        }
    }

    @Test func refreshHappensBeforeExpiryOnceForAllCallers() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let harness = try Harness(directory)
            let delegate = RecordingDelegate()
            let manager = BBMTestTokenManager(
                domain: harness.counting, store: try harness.store(), leeway: 120, clock: harness.clock.wallClock)
            manager.delegate = delegate
            let first = try await manager.signIn(userID: "alice")
            #expect(try await manager.validAccount() == first, "fresh: no refresh")
            harness.clock.advance(by: 3600 - 100)  // inside the 120 s leeway
            let accounts = try await withThrowingTaskGroup(of: BBMAuthenticatedAccount.self) { group in
                for _ in 0..<20 { group.addTask { try await manager.validAccount() } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(accounts.map(\.idToken)).count == 1, "every caller got the same refreshed token")
            #expect(accounts[0].idToken != first.idToken)
            #expect(harness.counting.testTokens.load(ordering: .relaxed) == 2, "one sign-in and one refresh")
            // The refreshed token was cached: a restart gets it, not the old one.
            let restarted = BBMTestTokenManager(
                domain: harness.domain, store: try harness.store(), clock: harness.clock.wallClock)
            #expect(try await restarted.signInSilently()?.idToken == accounts[0].idToken)
            #expect(delegate.recorded == ["in:alice", "in:alice"])
        }
    }

    @Test func aRejectedTokenIsReplacedOnce() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let harness = try Harness(directory)
            let manager = BBMTestTokenManager(
                domain: harness.counting, store: try harness.store(), clock: harness.clock.wallClock)
            let first = try await manager.signIn(userID: "alice")
            harness.clock.advance(by: 5)
            async let a = manager.tokenRejected(first.idToken)
            async let b = manager.tokenRejected(first.idToken)
            let (one, two) = try await (a, b)
            #expect(one == two && one.idToken != first.idToken)
            // Reporting the old token again returns the current one without another refresh.
            #expect(try await manager.tokenRejected(first.idToken) == one)
            #expect(harness.counting.testTokens.load(ordering: .relaxed) == 2)
        }
    }

    @Test func testAuthStopsWhenTheDomainRequiresUserAuthentication() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let harness = try Harness(directory)
            let delegate = RecordingDelegate()
            let manager = BBMTestTokenManager(domain: harness.domain, store: try harness.store(), clock: harness.clock.wallClock)
            manager.delegate = delegate
            let account = try await manager.signIn(userID: "alice")
            var policy = try await harness.domain.policy()
            policy.userAuthenticationEnabled = true
            try harness.domain.setPolicy(policy)
            await #expect(throws: AuthError(.refused, "", domainCode: .userAuthenticationRequired)) {
                try await manager.tokenRejected(account.idToken)
            }
            #expect(await manager.account == nil, "a final refusal signs the user out")
            #expect(delegate.recorded == ["in:alice", "out:error"])
        }
    }

    @Test func accountsAssistantEndToEnd() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let harness = try Harness(directory)
            let manager = BBMAccountsTokenManager(
                domain: harness.counting, store: try harness.store(), clock: harness.clock.wallClock)
            await #expect(throws: AuthError(.refused, "", domainCode: .passwordTooWeak)) {
                try await manager.signUp(
                    SignUpRequest(userName: "hana", password: "weak", email: "hana@example.com", country: "JP", age: 22))
            }
            try await manager.signUp(
                SignUpRequest(userName: "hana", password: "Maple-Leaf-2024", email: "hana@example.com", country: "JP", age: 22))
            await #expect(throws: AuthError(.refused, "", domainCode: .notActivated)) {
                try await manager.logIn(userName: "hana", password: "Maple-Leaf-2024")
            }
            let code = try #require(
                try harness.domain.outbox(recipient: "hana@example.com").last?.body.firstMatch(of: /(\d{6})/)?.1)
            try await manager.activate(userName: "hana", code: String(code))
            await #expect(throws: AuthError(.credentialsRequired, "")) { try await manager.signIn() }
            let account = try await manager.logIn(userName: "hana", password: "Maple-Leaf-2024")
            #expect(account.accountId == "hana" && account.email == "hana@example.com")

            harness.clock.advance(by: 3600)
            let refreshed = try await manager.validAccount()
            #expect(refreshed.idToken != account.idToken && harness.counting.refreshes.load(ordering: .relaxed) == 1)
            // Silent sign-in on restart uses the rotated refresh token.
            let restarted = BBMAccountsTokenManager(
                domain: harness.domain, store: try harness.store(), clock: harness.clock.wallClock)
            #expect(try await restarted.signInSilently() == refreshed)

            // Password recovery, then the old session's refresh token no longer works.
            try await manager.requestPasswordReset(email: "hana@example.com")
            let reset = try #require(
                try harness.domain.outbox(recipient: "hana@example.com").last?.body.firstMatch(of: /(\d{6})/)?.1)
            try await manager.resetPassword(email: "hana@example.com", code: String(reset), newPassword: "Cherry-Blossom-99")
            harness.clock.advance(by: 3600)
            let delegate = RecordingDelegate()
            restarted.delegate = delegate
            await #expect(throws: AuthError(.refused, "", domainCode: .invalidToken)) { try await restarted.validAccount() }
            #expect(delegate.recorded == ["out:error"])
            let again = try await manager.logIn(userName: "hana", password: "Cherry-Blossom-99")
            await manager.signOut()
            #expect(await manager.account == nil)
            _ = again
        }
    }

    @Test func customTokensFromTheApp() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let harness = try Harness(directory)
            let key = try Ed25519.PrivateKey()
            let issuer = TokenIssuer(issuer: "https://app.example", key: key, keyID: "app-1")
            let jwks = directory.appendingPathComponent("jwks.json")
            try issuer.jwks.jsonData().write(to: jwks)
            try harness.domain.addExternalIssuer(.init(issuer: "https://app.example", audience: "sdk-test", jwksPath: jwks.path))
            let fetches = Atomic<Int>(0)
            let clock = harness.clock
            let manager = BBMCustomTokenManager(store: try harness.store(), clock: clock.wallClock) { _ in
                fetches.add(1, ordering: .relaxed)
                return try issuer.issue(subject: "ivan", audience: "sdk-test", lifetime: 600, now: clock.now).token
            }
            await #expect(throws: AuthError(.malformedToken, "")) { try await manager.signIn(jwtToken: "not.a.jwt") }
            let account = try await manager.signIn()
            #expect(account.accountId == "ivan")
            #expect(try await harness.domain.validate(token: account.idToken).issuerKind == .external)
            clock.advance(by: 590)
            #expect(try await manager.validAccount().idToken != account.idToken)
            #expect(fetches.load(ordering: .relaxed) == 2)
        }
    }
}
