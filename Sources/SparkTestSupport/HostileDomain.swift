public import Foundation
public import SparkDomain
public import SparkLock

/// A domain under a test's control: it forwards every call to a real one, except where the test
/// told it to lie. It plays the domain (or whoever can write its data) attacking its users: it
/// substitutes identity keys, rewrites what a mailbox read returns (reorders, replays, withholds,
/// renumbers, forges) and alters what is posted. The hostile-domain tests use it to show that
/// each attack is refused or detected, and that the chat recovers once it behaves.
public final class HostileDomain: DomainService {
    /// The domain that tells the truth.
    public let inner: any DomainService
    /// Identities answered instead of the published ones, by user id.
    public let substitutedIdentities = Locked<[String: PublishedIdentity]>([:])
    /// KeyPackages handed out instead of the published ones, by user id (the attacker's own
    /// devices, passed off as the user's).
    public let substitutedKeyPackages = Locked<[String: [ClaimedKeyPackage]]>([:])
    /// Users whose post-quantum KeyPackages the domain withholds, handing out their classic
    /// ones instead (a downgrade of their chats to classic MLS).
    public let withheldPostQuantum = Locked<Set<String>>([])
    /// How many of the next commits the domain takes and then loses the answer of (the caller
    /// sees the domain as unavailable, as when the connection drops after the commit).
    public let loseCommitAnswers = Locked(0)
    /// Rewrites each identity proof (given the reading endpoint, the user read, the size of the
    /// head the reader holds and the true proof): a key the log does not hold, another head, a
    /// forked or rewritten log.
    public let proofRewrite = Locked<(@Sendable (String, String, UInt64?, IdentityProof) throws -> IdentityProof)?>(nil)
    /// Awaited before each identity proof is asked of the real domain (given the reading
    /// endpoint, the user read and the size of the head the reader holds): a test holds one
    /// lookup's proof in flight while others run.
    public let proofPause = Locked<(@Sendable (String, String, UInt64?) async -> Void)?>(nil)
    /// Rewrites each answer of tree heads (given the reading endpoint, the size asked about and
    /// the true heads).
    public let headsRewrite = Locked<(@Sendable (String, UInt64?, TransparencyHeads) throws -> TransparencyHeads)?>(nil)
    /// Rewrites each mailbox read of a user (given the user id and the true entries).
    public let mailboxRewrite = Locked<(@Sendable (String, [MailboxEntry]) -> [MailboxEntry])?>(nil)
    /// Users whose long-polls never wake: a read with a wait answers nothing when the wait ends
    /// (or when the reader gives it up), whatever arrived meanwhile; a read without one answers
    /// as usual. A domain that is slow to tell, so that a device learns of a commit only when it
    /// asks.
    public let blindLongPolls = Locked<Set<String>>([])
    /// How many blind long-polls began.
    public let blindLongPollsBegun = Locked(0)
    /// Rewrites each post's payload (given the chat, the kind and the true payload).
    public let postRewrite = Locked<(@Sendable (String, MailboxKind, Data) -> Data)?>(nil)
    /// Everything endpoints posted, in order, as the domain sees it: what an attacker holding the
    /// domain's data has (posts, commits and Welcomes, and the posts that go with a chat's
    /// creation or a membership change).
    public let posted = Locked<[(chatID: String, kind: MailboxKind, payload: Data)]>([])
    /// While true, a batch of messages waits before it reaches the domain (a post in flight).
    public let messageBatchesHeld = Locked(false)
    /// The size of each batch of messages posted, in order.
    public let messageBatches = Locked<[Int]>([])
    /// Rewrites the domain's answer to a batch of messages.
    public let messageBatchAnswer = Locked<(@Sendable (PostBatchReceipt) -> PostBatchReceipt)?>(nil)

    /// Rewrites the bytes of each blob read (given the blob's id, the offset and the true bytes):
    /// a swapped or truncated attachment.
    public let blobRewrite = Locked<(@Sendable (String, Int64, Data) -> Data)?>(nil)
    /// When above zero, every this-many-th blob upload or read loses its connection: an upload is
    /// stored and its answer lost, a read is not answered.
    public let dropEveryBlobCall = Locked(0)
    /// The blob uploads and reads so far.
    public let blobCalls = Locked(0)
    /// The bytes of every blob upload that reached the domain, retries included.
    public let uploadedBlobBytes = Locked(0)

    /// When true, the domain takes blocks and lists them back, but does not enforce them (its
    /// own rules never learn of them): a blocked user's new chats and invitations reach the
    /// blocker's devices, which must refuse them themselves.
    public let keepsBlocksToItself = Locked(false)
    private let blockLists = Locked<[String: Set<String>]>([:])

    /// A domain that lies only where told to.
    public init(_ inner: any DomainService) { self.inner = inner }

    /// Whether this blob call loses its connection.
    private func dropsBlobCall() -> Bool {
        let every = dropEveryBlobCall.withLock { $0 }
        let call = blobCalls.withLock { calls in
            calls += 1
            return calls
        }
        return every > 0 && call % every == 0
    }

    /// The real domain's id.
    public var domainID: String { inner.domainID }
    /// The real domain's policy.
    public func policy() async throws -> DomainPolicy { try await inner.policy() }
    /// Forwarded.
    public func validate(token: String) async throws -> VerifiedIdentity { try await inner.validate(token: token) }
    /// Forwarded.
    public func testToken(userID: String) async throws -> IssuedToken { try await inner.testToken(userID: userID) }
    /// Forwarded, or rewritten as the test told it.
    public func signUp(_ request: SignUpRequest) async throws { try await inner.signUp(request) }
    /// Forwarded, or rewritten as the test told it.
    public func activate(userName: String, code: String) async throws { try await inner.activate(userName: userName, code: code) }
    /// Forwarded, or rewritten as the test told it.
    public func resendActivationCode(userName: String) async throws { try await inner.resendActivationCode(userName: userName) }
    /// Forwarded, or rewritten as the test told it.
    public func logIn(userName: String, password: String) async throws -> IssuedToken {
        try await inner.logIn(userName: userName, password: password)
    }
    /// Forwarded, or rewritten as the test told it.
    public func refresh(refreshToken: String) async throws -> IssuedToken {
        try await inner.refresh(refreshToken: refreshToken)
    }
    /// Forwarded, or rewritten as the test told it.
    public func revoke(refreshToken: String) async throws { try await inner.revoke(refreshToken: refreshToken) }
    /// Forwarded, or rewritten as the test told it.
    public func requestPasswordReset(email: String) async throws { try await inner.requestPasswordReset(email: email) }
    /// Forwarded, or rewritten as the test told it.
    public func resetPassword(email: String, code: String, newPassword: String) async throws {
        try await inner.resetPassword(email: email, code: code, newPassword: newPassword)
    }
    /// Forwarded, or rewritten as the test told it.
    public func registerEndpoint(token: String, registration: EndpointRegistration) async throws -> RegistrationOutcome {
        try await inner.registerEndpoint(token: token, registration: registration)
    }
    /// Forwarded, or rewritten as the test told it.
    public func endpoints(token: String, endpointID: String) async throws -> [EndpointInfo] {
        try await inner.endpoints(token: token, endpointID: endpointID)
    }
    /// Forwarded, or rewritten as the test told it.
    public func setEndpointNickname(token: String, endpointID: String, target: String, nickname: String) async throws {
        try await inner.setEndpointNickname(token: token, endpointID: endpointID, target: target, nickname: nickname)
    }
    /// Forwarded, or rewritten as the test told it.
    public func deregisterEndpoint(token: String, endpointID: String, target: String, signature: Data?) async throws {
        try await inner.deregisterEndpoint(token: token, endpointID: endpointID, target: target, signature: signature)
    }
    /// Forwarded, or rewritten as the test told it.
    public func publishEndpointCredential(token: String, endpointID: String, credential: Data) async throws {
        try await inner.publishEndpointCredential(token: token, endpointID: endpointID, credential: credential)
    }
    /// Forwarded, or rewritten as the test told it.
    public func approveEndpoint(token: String, endpointID: String, target: String, approval: Data) async throws {
        try await inner.approveEndpoint(token: token, endpointID: endpointID, target: target, approval: approval)
    }
    /// Forwarded, or rewritten as the test told it.
    public func checkIn(token: String, endpointID: String) async throws -> EndpointInfo {
        try await inner.checkIn(token: token, endpointID: endpointID)
    }
    /// Forwarded, or rewritten as the test told it.
    public func fetchKeyBlob(token: String, endpointID: String, name: String) async throws -> BlobFetch {
        try await inner.fetchKeyBlob(token: token, endpointID: endpointID, name: name)
    }
    /// Forwarded, or rewritten as the test told it.
    public func putKeyBlob(
        token: String, endpointID: String, name: String, data: Data, expectedVersion: Int?, proof: KeyBlobProof?
    ) async throws -> Int {
        try await inner.putKeyBlob(
            token: token, endpointID: endpointID, name: name, data: data, expectedVersion: expectedVersion, proof: proof)
    }
    /// Forwarded, or rewritten as the test told it.
    public func putKeyBlobs(token: String, endpointID: String, writes: [KeyBlobWrite], proof: KeyBlobProof?) async throws
        -> [Int]
    {
        try await inner.putKeyBlobs(token: token, endpointID: endpointID, writes: writes, proof: proof)
    }
    /// Forwarded, or rewritten as the test told it.
    public func evaluatePasscode(token: String, endpointID: String, blindedElement: Data, keyID: String?) async throws
        -> PasscodeEvaluation
    {
        try await inner.evaluatePasscode(token: token, endpointID: endpointID, blindedElement: blindedElement, keyID: keyID)
    }
    /// Forwarded, or rewritten as the test told it.
    public func retirePasscodeKeys(token: String, endpointID: String, challenge: Data, signature: Data, version: Int)
        async throws
    {
        try await inner.retirePasscodeKeys(
            token: token, endpointID: endpointID, challenge: challenge, signature: signature, version: version)
    }
    /// Forwarded, or rewritten as the test told it.
    public func proveUnlock(token: String, endpointID: String, challenge: Data, signature: Data) async throws {
        try await inner.proveUnlock(token: token, endpointID: endpointID, challenge: challenge, signature: signature)
    }
    /// Forwarded, or rewritten as the test told it.
    public func publishIdentity(token: String, endpointID: String, identity: PublishedIdentity) async throws {
        try await inner.publishIdentity(token: token, endpointID: endpointID, identity: identity)
    }
    /// Forwarded, or rewritten as the test told it.
    public func identity(token: String, endpointID: String, userID: String) async throws -> PublishedIdentity? {
        if let substitute = substitutedIdentities.withLock({ $0[userID] }) { return substitute }
        return try await inner.identity(token: token, endpointID: endpointID, userID: userID)
    }
    /// Forwarded, or rewritten as the test told it.
    public func resetIdentity(token: String, endpointID: String, signature: Data?) async throws -> IdentityResetOutcome {
        try await inner.resetIdentity(token: token, endpointID: endpointID, signature: signature)
    }
    /// Forwarded, or rewritten as the test told it.
    public func cancelIdentityReset(token: String, endpointID: String) async throws {
        try await inner.cancelIdentityReset(token: token, endpointID: endpointID)
    }
    /// Forwarded, or rewritten as the test told it.
    public func pendingIdentityReset(token: String, endpointID: String, userID: String) async throws -> PendingIdentityReset? {
        try await inner.pendingIdentityReset(token: token, endpointID: endpointID, userID: userID)
    }
    /// Forwarded, or rewritten as the test told it.
    public func postCommit(
        token: String, endpointID: String, chatID: String, epoch: Int64, commit: Data, welcome: Data?, add: [String],
        remove: [String], replacingRefused: Bool
    ) async throws -> Int64 {
        posted.withLock { log in
            log.append((chatID, .commit, commit))
            if let welcome { log.append((chatID, .welcome, welcome)) }
        }
        let accepted = try await inner.postCommit(
            token: token, endpointID: endpointID, chatID: chatID, epoch: epoch, commit: commit, welcome: welcome, add: add,
            remove: remove, replacingRefused: replacingRefused)
        let lose = loseCommitAnswers.withLock { count -> Bool in
            guard count > 0 else { return false }
            count -= 1
            return true
        }
        if lose { throw DomainError(.unavailable, "the connection dropped before the answer") }
        return accepted
    }
    /// Forwarded, or rewritten as the test told it.
    public func publishKeyPackages(token: String, endpointID: String, keyPackages: [Data], lastResort: Data?) async throws
        -> Int
    {
        try await inner.publishKeyPackages(token: token, endpointID: endpointID, keyPackages: keyPackages, lastResort: lastResort)
    }
    /// Forwarded, or rewritten as the test told it.
    public func claimKeyPackages(token: String, endpointID: String, userID: String, suite: UInt16) async throws
        -> [ClaimedKeyPackage]
    {
        if let substitute = substitutedKeyPackages.withLock({ $0[userID] }) { return substitute }
        // A domain that withholds post-quantum KeyPackages hands out the classic ones instead.
        let asked = withheldPostQuantum.withLock { $0.contains(userID) } ? 1 : suite
        return try await inner.claimKeyPackages(token: token, endpointID: endpointID, userID: userID, suite: asked)
    }
    /// Forwarded, or rewritten as the test told it.
    public func keyPackageCount(token: String, endpointID: String, suite: UInt16) async throws -> Int {
        try await inner.keyPackageCount(token: token, endpointID: endpointID, suite: suite)
    }
    /// Forwarded.
    public func transparencyKeys(token: String, endpointID: String) async throws -> TransparencyKeys {
        try await inner.transparencyKeys(token: token, endpointID: endpointID)
    }
    /// Forwarded, or rewritten as the test told it (``proofRewrite``).
    public func identityProof(token: String, endpointID: String, userID: String, since: UInt64?, auditor: Data?) async throws
        -> IdentityProof
    {
        if let pause = proofPause.withLock({ $0 }) { await pause(endpointID, userID, since) }
        var proof = try await inner.identityProof(
            token: token, endpointID: endpointID, userID: userID, since: since, auditor: auditor)
        // A substituted identity is a key the log does not hold: passed off as the opened value.
        if let substitute = substitutedIdentities.withLock({ $0[userID] }), proof.search.opened != nil {
            proof.search.opened?.value = try IdentityProof.value(of: substitute)
        }
        guard let rewrite = proofRewrite.withLock({ $0 }) else { return proof }
        return try rewrite(endpointID, userID, since, proof)
    }
    /// Forwarded, or rewritten as the test told it (``headsRewrite``).
    public func transparencyHeads(token: String, endpointID: String, since: UInt64?) async throws -> TransparencyHeads {
        let heads = try await inner.transparencyHeads(token: token, endpointID: endpointID, since: since)
        guard let rewrite = headsRewrite.withLock({ $0 }) else { return heads }
        return try rewrite(endpointID, since, heads)
    }
    /// Forwarded, or rewritten as the test told it.
    public func identityKeyVersion(token: String, endpointID: String) async throws -> Int {
        try await inner.identityKeyVersion(token: token, endpointID: endpointID)
    }
    /// Forwarded, or rewritten as the test told it.
    public func createChat(
        token: String, endpointID: String, chatID: String, participants: [String], posts: [ChatPost]
    ) async throws -> ChatInfo {
        posted.withLock { log in log += posts.map { (chatID, $0.kind, $0.payload) } }
        let info = try await inner.createChat(
            token: token, endpointID: endpointID, chatID: chatID, participants: participants, posts: posts)
        return info
    }
    /// Forwarded, or rewritten as the test told it.
    public func updateMembers(
        token: String, endpointID: String, chatID: String, add: [String], remove: [String], posts: [ChatPost]
    ) async throws -> ChatInfo {
        posted.withLock { log in log += posts.map { (chatID, $0.kind, $0.payload) } }
        let info = try await inner.updateMembers(
            token: token, endpointID: endpointID, chatID: chatID, add: add, remove: remove, posts: posts)
        return info
    }
    /// Forwarded, or rewritten as the test told it.
    public func post(
        token: String, endpointID: String, chatID: String, kind: MailboxKind, payload: Data, recipient: String?, clientID: String?
    ) async throws -> PostReceipt {
        let payload = postRewrite.withLock({ $0 })?(chatID, kind, payload) ?? payload
        posted.withLock { $0.append((chatID, kind, payload)) }
        return try await inner.post(
            token: token, endpointID: endpointID, chatID: chatID, kind: kind, payload: payload, recipient: recipient,
            clientID: clientID)
    }
    /// Forwarded, each message rewritten as the test told it.
    public func postMessages(token: String, endpointID: String, chatID: String, messages: [MessagePost]) async throws
        -> PostBatchReceipt
    {
        messageBatches.withLock { $0.append(messages.count) }
        while messageBatchesHeld.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(2)) }
        let rewrite = postRewrite.withLock { $0 }
        let messages = messages.map { message in
            MessagePost(clientID: message.clientID, payload: rewrite?(chatID, .message, message.payload) ?? message.payload)
        }
        posted.withLock { log in log += messages.map { (chatID, .message, $0.payload) } }
        let answer = try await inner.postMessages(token: token, endpointID: endpointID, chatID: chatID, messages: messages)
        return messageBatchAnswer.withLock({ $0 })?(answer) ?? answer
    }
    /// Forwarded, or rewritten as the test told it.
    public func readMailbox(token: String, endpointID: String, after cursor: Int64, limit: Int, wait: Duration) async throws
        -> [MailboxEntry]
    {
        let blind = blindLongPolls.withLock { $0 }
        if wait > .zero, !blind.isEmpty, blind.contains(try await inner.validate(token: token).userID) {
            blindLongPollsBegun.withLock { $0 += 1 }
            try await Task.sleep(for: wait)
            return []
        }
        let entries = try await inner.readMailbox(token: token, endpointID: endpointID, after: cursor, limit: limit, wait: wait)
        guard let rewrite = mailboxRewrite.withLock({ $0 }) else { return entries }
        return rewrite(try await inner.validate(token: token).userID, entries)
    }
    /// Forwarded, or rewritten as the test told it.
    public func chat(token: String, endpointID: String, chatID: String) async throws -> ChatInfo {
        try await inner.chat(token: token, endpointID: endpointID, chatID: chatID)
    }
    /// Forwarded, or rewritten as the test told it.
    public func userStatus(token: String, endpointID: String) async throws -> UserStatus {
        try await inner.userStatus(token: token, endpointID: endpointID)
    }
    /// Forwarded, or rewritten as the test told it.
    public func report(
        token: String, endpointID: String, chatID: String, user: String, reason: String, messages: [ReportedMessage]
    ) async throws -> Int64 {
        try await inner.report(
            token: token, endpointID: endpointID, chatID: chatID, user: user, reason: reason, messages: messages)
    }

    /// Forwarded.
    public func createBlob(token: String, endpointID: String, chatID: String, blobID: String, size: Int64) async throws
        -> BlobStatus
    {
        try await inner.createBlob(token: token, endpointID: endpointID, chatID: chatID, blobID: blobID, size: size)
    }
    /// Forwarded, or its answer lost as the test told it.
    public func uploadBlob(token: String, endpointID: String, blobID: String, offset: Int64, bytes: Data) async throws
        -> BlobStatus
    {
        uploadedBlobBytes.withLock { $0 += bytes.count }
        let status = try await inner.uploadBlob(
            token: token, endpointID: endpointID, blobID: blobID, offset: offset, bytes: bytes)
        if dropsBlobCall() { throw DomainError(.unavailable, "the connection dropped (a test's hostile domain)") }
        return status
    }
    /// Forwarded.
    public func blobStatus(token: String, endpointID: String, blobID: String) async throws -> BlobStatus {
        try await inner.blobStatus(token: token, endpointID: endpointID, blobID: blobID)
    }
    /// Forwarded, rewritten or lost as the test told it.
    public func downloadBlob(token: String, endpointID: String, blobID: String, offset: Int64, length: Int) async throws
        -> Data
    {
        if dropsBlobCall() { throw DomainError(.unavailable, "the connection dropped (a test's hostile domain)") }
        let bytes = try await inner.downloadBlob(
            token: token, endpointID: endpointID, blobID: blobID, offset: offset, length: length)
        return blobRewrite.withLock { $0 }.map { $0(blobID, offset, bytes) } ?? bytes
    }
    /// Forwarded.
    public func deleteBlob(token: String, endpointID: String, blobID: String) async throws {
        try await inner.deleteBlob(token: token, endpointID: endpointID, blobID: blobID)
    }

    /// Forwarded, or, while ``keepsBlocksToItself``, kept here and not enforced.
    public func setBlocked(token: String, endpointID: String, userID: String, blocked: Bool) async throws {
        guard keepsBlocksToItself.withLock({ $0 }) else {
            return try await inner.setBlocked(token: token, endpointID: endpointID, userID: userID, blocked: blocked)
        }
        let user = try await inner.validate(token: token).userID
        blockLists.withLock { lists in
            if blocked { lists[user, default: []].insert(userID) } else { lists[user]?.remove(userID) }
        }
    }
    /// Forwarded, or the list kept here.
    public func blockedUsers(token: String, endpointID: String) async throws -> [String] {
        guard keepsBlocksToItself.withLock({ $0 }) else {
            return try await inner.blockedUsers(token: token, endpointID: endpointID)
        }
        let user = try await inner.validate(token: token).userID
        return blockLists.withLock { $0[user, default: []].sorted() }
    }

    /// Forwarded, or rewritten as the test told it.
    public func dismissInfraction(token: String, endpointID: String, id: Int64) async throws {
        try await inner.dismissInfraction(token: token, endpointID: endpointID, id: id)
    }
}
