public import Foundation
public import SparkCrypto

/// A domain served by `spark-domaind`, over HTTPS: the whole ``DomainService`` contract on the
/// `/v1` wire (`docs/openapi.json`).
///
/// It trusts only its own domain (``DomainTrust``: the CA file `init` made, or a pinned key),
/// keeps connections alive, times requests out, and retries what is safe to retry: idempotent
/// calls after a lost connection, and any call the domain refused before doing anything
/// (503, or 429 with a short `Retry-After`), with exponential backoff and jitter. A longer
/// `Retry-After` reaches the caller as the error's `retryAfter`. Errors keep the domain's code,
/// so a 401 is ``DomainError/Code/tokenExpired`` or ``DomainError/Code/invalidToken`` as in
/// process, which the SDK answers by asking its token manager for a new token.
///
/// ```swift
/// let domain = try RemoteDomain(
///     url: URL(string: "https://chat.example.com:8443")!, domainID: "example",
///     trust: .certificateAuthority(path: "/etc/spark/ca.pem"))
/// ```
public final class RemoteDomain: DomainService {
    /// The domain's id.
    public let domainID: String
    /// Where it is served (the first of ``urls``).
    public var url: URL { urls[0] }
    /// Every instance serving it, in the order tried.
    public let urls: [URL]
    let client: WireClient

    /// A client of the domain at `url` (`https://HOST:PORT`; `http://` only to a loopback
    /// address with ``DomainTrust/plainLoopback``).
    public convenience init(url: URL, domainID: String, trust: DomainTrust) throws {
        try self.init(urls: [url], domainID: domainID, trust: trust)
    }

    /// A client of a domain that several `spark-domaind` instances serve (one database behind
    /// them): calls go to the first until it fails to connect or answers 503, then to the next,
    /// and so on round. Every URL is trusted the same way.
    public init(urls: [URL], domainID: String, trust: DomainTrust) throws {
        self.urls = urls
        self.domainID = domainID
        client = try WireClient(urls: urls, trust: trust)
    }

    /// A client whose calls may take `requestTimeout` (15 s otherwise): the package's tests give
    /// a daemon under a sanitizer on a loaded machine longer.
    package init(url: URL, domainID: String, trust: DomainTrust, requestTimeout: Duration) throws {
        urls = [url]
        self.domainID = domainID
        client = try WireClient(urls: [url], trust: trust, requestTimeout: requestTimeout)
    }

    /// Whether the last request reached the domain (any answer, errors included), or nil
    /// before the first.
    public var isReachable: Bool? { client.isReachable }

    // MARK: Policy and tokens

    /// `GET /v1/policy`: the domain's policy.
    public func policy() async throws -> DomainPolicy {
        try await client.call(.policy, Wire.Empty())
    }

    /// `GET /v1/me`: validates the token into its user.
    public func validate(token: String) async throws -> VerifiedIdentity {
        try await client.call(.validate, Wire.Empty(), token: token)
    }

    /// `POST /v1/test-tokens`: a test token for any user id (sandbox domains).
    public func testToken(userID: String) async throws -> IssuedToken {
        try await client.call(.testToken, Wire.UserID(userID: userID))
    }

    // MARK: Accounts

    /// `POST /v1/accounts/sign-up`: creates an account to activate.
    public func signUp(_ request: SignUpRequest) async throws {
        let _: Wire.Empty = try await client.call(.signUp, request)
    }

    /// `POST /v1/accounts/activate`: activates an account with its code.
    public func activate(userName: String, code: String) async throws {
        let _: Wire.Empty = try await client.call(.activate, Wire.Activation(userName: userName, code: code))
    }

    /// `POST /v1/accounts/resend-activation`: sends a new activation code.
    public func resendActivationCode(userName: String) async throws {
        let _: Wire.Empty = try await client.call(.resendActivationCode, Wire.UserName(userName: userName))
    }

    /// `POST /v1/accounts/log-in`: logs an account in.
    public func logIn(userName: String, password: String) async throws -> IssuedToken {
        try await client.call(.logIn, Wire.LogIn(userName: userName, password: password))
    }

    /// `POST /v1/accounts/refresh`: a new id token for a refresh token.
    public func refresh(refreshToken: String) async throws -> IssuedToken {
        try await client.call(.refresh, Wire.RefreshToken(refreshToken: refreshToken))
    }

    /// `POST /v1/accounts/revoke`: revokes a refresh token.
    public func revoke(refreshToken: String) async throws {
        let _: Wire.Empty = try await client.call(.revoke, Wire.RefreshToken(refreshToken: refreshToken))
    }

    /// `POST /v1/accounts/request-reset`: emails a reset code if an account has the address.
    public func requestPasswordReset(email: String) async throws {
        let _: Wire.Empty = try await client.call(.requestPasswordReset, Wire.Email(email: email))
    }

    /// `POST /v1/accounts/reset-password`: sets a new password with the emailed code.
    public func resetPassword(email: String, code: String, newPassword: String) async throws {
        let _: Wire.Empty = try await client.call(
            .resetPassword, Wire.PasswordReset(email: email, code: code, newPassword: newPassword))
    }

    // MARK: Endpoints

    /// `POST /v1/endpoints/register`: registers this device as an endpoint.
    public func registerEndpoint(token: String, registration: EndpointRegistration) async throws -> RegistrationOutcome {
        try await client.call(.registerEndpoint, registration, token: token)
    }

    /// `GET /v1/endpoints`: the user's endpoints.
    public func endpoints(token: String, endpointID: String) async throws -> [EndpointInfo] {
        let list: Wire.Endpoints = try await client.call(.endpoints, Wire.Empty(), token: token, endpoint: endpointID)
        return list.endpoints
    }

    /// `POST /v1/endpoints/nickname`: renames one of the user's endpoints.
    public func setEndpointNickname(token: String, endpointID: String, target: String, nickname: String) async throws {
        let _: Wire.Empty = try await client.call(
            .setEndpointNickname, Wire.Nickname(target: target, nickname: nickname), token: token, endpoint: endpointID)
    }

    /// `POST /v1/endpoints/deregister`: removes one of the user's endpoints.
    public func deregisterEndpoint(token: String, endpointID: String, target: String, signature: Data?) async throws {
        let _: Wire.Empty = try await client.call(
            .deregisterEndpoint, Wire.Removal(target: target, signature: signature), token: token, endpoint: endpointID)
    }

    /// `POST /v1/endpoints/credential`: publishes this endpoint's credential.
    public func publishEndpointCredential(token: String, endpointID: String, credential: Data) async throws {
        let _: Wire.Empty = try await client.call(
            .publishEndpointCredential, Wire.Credential(credential: credential), token: token, endpoint: endpointID)
    }

    /// `POST /v1/endpoints/approve`: keeps an approval of one of the user's endpoints.
    public func approveEndpoint(token: String, endpointID: String, target: String, approval: Data) async throws {
        let _: Wire.Empty = try await client.call(
            .approveEndpoint, Wire.Approval(target: target, approval: approval), token: token, endpoint: endpointID)
    }

    /// `POST /v1/endpoints/check-in`: confirms the endpoint is registered and marks it seen.
    public func checkIn(token: String, endpointID: String) async throws -> EndpointInfo {
        try await client.call(.checkIn, Wire.Empty(), token: token, endpoint: endpointID)
    }

    // MARK: Keys and identities

    /// `POST /v1/key-blobs/fetch`: reads a key blob.
    public func fetchKeyBlob(token: String, endpointID: String, name: String) async throws -> BlobFetch {
        try await client.call(.fetchKeyBlob, Wire.BlobName(name: name), token: token, endpoint: endpointID)
    }

    /// `POST /v1/key-blobs/put`: writes a key blob if its version is the expected one.
    public func putKeyBlob(
        token: String, endpointID: String, name: String, data: Data, expectedVersion: Int?, proof: KeyBlobProof?
    ) async throws -> Int {
        let version: Wire.Version = try await client.call(
            .putKeyBlob, Wire.PutBlob(name: name, data: data, expectedVersion: expectedVersion, proof: proof), token: token,
            endpoint: endpointID)
        return version.version
    }

    /// `POST /v1/key-blobs/put-all`: writes several key blobs at once.
    public func putKeyBlobs(token: String, endpointID: String, writes: [KeyBlobWrite], proof: KeyBlobProof?) async throws
        -> [Int]
    {
        let versions: Wire.Versions = try await client.call(
            .putKeyBlobs, Wire.PutBlobs(writes: writes, proof: proof), token: token, endpoint: endpointID)
        return versions.versions
    }

    /// `POST /v1/passcodes/evaluate`: one counted passcode attempt.
    public func evaluatePasscode(token: String, endpointID: String, blindedElement: Data, keyID: String?) async throws
        -> PasscodeEvaluation
    {
        try await client.call(
            .evaluatePasscode, Wire.BlindedPasscode(blindedElement: blindedElement, keyID: keyID), token: token,
            endpoint: endpointID)
    }

    /// `POST /v1/key-blobs/retire-passcode-keys`: proves the unlock and retires older passcode keys.
    public func retirePasscodeKeys(token: String, endpointID: String, challenge: Data, signature: Data, version: Int)
        async throws
    {
        let _: Wire.Empty = try await client.call(
            .retirePasscodeKeys, Wire.PasscodeRetirement(challenge: challenge, signature: signature, version: version),
            token: token, endpoint: endpointID)
    }

    /// `POST /v1/key-blobs/prove-unlock`: proves the keys were unlocked.
    public func proveUnlock(token: String, endpointID: String, challenge: Data, signature: Data) async throws {
        let _: Wire.Empty = try await client.call(
            .proveUnlock, Wire.UnlockProof(challenge: challenge, signature: signature), token: token, endpoint: endpointID)
    }

    /// `POST /v1/identities/publish`: publishes the user's public identity.
    public func publishIdentity(token: String, endpointID: String, identity: PublishedIdentity) async throws {
        let _: Wire.Empty = try await client.call(.publishIdentity, identity, token: token, endpoint: endpointID)
    }

    /// `GET /v1/identities`: a user's published identity.
    public func identity(token: String, endpointID: String, userID: String) async throws -> PublishedIdentity? {
        let found: Wire.Identity = try await client.call(
            .identity, Wire.UserID(userID: userID), token: token, endpoint: endpointID)
        return found.identity
    }

    /// `GET /v1/transparency/keys`: the domain's key-transparency keys.
    public func transparencyKeys(token: String, endpointID: String) async throws -> TransparencyKeys {
        try await client.call(.transparencyKeys, Wire.Empty(), token: token, endpoint: endpointID)
    }

    /// `GET /v1/transparency/identity`: a user's identity as the log holds it, with its proofs.
    public func identityProof(token: String, endpointID: String, userID: String, since: UInt64?, auditor: Data?) async throws
        -> IdentityProof
    {
        let found: Wire.EncodedProof = try await client.call(
            .identityProof,
            Wire.IdentityProofQuery(
                userID: userID, since: since.map { Int64(clamping: $0) },
                auditor: auditor.map { $0.base64URLEncodedString() }), token: token,
            endpoint: endpointID)
        do {
            return try TransparencyCodec.decodeProof(found.proof)
        } catch {
            throw DomainError(.invalidProof, "the domain's identity proof is malformed: \(error)")
        }
    }

    /// `GET /v1/transparency/updates`: the log's updates after `after` as an auditor sees them,
    /// and the latest signed head (no credential needed).
    public func transparencyUpdates(after: Int64, limit: Int, auditor: P256.SigningKey? = nil) async throws -> (
        updates: [TransparencyAudit.Update], head: TreeHead?
    ) {
        var query = Wire.UpdatesQuery(after: after, limit: limit)
        if let auditor {
            let at = Int64(Date().timeIntervalSince1970 * 1000)
            query.auditor = (auditor.publicKey.x + auditor.publicKey.y).base64URLEncodedString()
            query.at = at
            query.signature = try auditor.signature(
                for: TransparencyAudit.updatesRequestBytes(after: after, limit: limit, at: at)
            ).base64URLEncodedString()
        }
        let found: Wire.EncodedUpdates = try await client.call(.transparencyUpdates, query, token: nil, endpoint: nil)
        do {
            return (try TransparencyAudit.decode(found.updates), try found.head.map(TransparencyCodec.decodeHead))
        } catch {
            throw DomainError(.invalidProof, "the domain's transparency updates are malformed: \(error)")
        }
    }

    /// `POST /v1/transparency/audits`: an auditor's co-signature of the head of `size` entries.
    public func postAudit(size: UInt64, auditorKey: Data, signature: Data) async throws {
        let _: Wire.Empty = try await client.call(
            .postAudit, Wire.Audit(size: Int64(clamping: size), auditorKey: auditorKey, signature: signature), token: nil,
            endpoint: nil)
    }

    /// `GET /v1/transparency/heads`: the latest signed head and its consistency proof from `since`.
    public func transparencyHeads(token: String, endpointID: String, since: UInt64?) async throws -> TransparencyHeads {
        let found: Wire.EncodedHeads = try await client.call(
            .transparencyHeads, Wire.HeadsQuery(since: since.map { Int64(clamping: $0) }), token: token, endpoint: endpointID)
        do {
            return TransparencyHeads(
                latest: try TransparencyCodec.decodeHead(found.latest),
                consistency: try TransparencyCodec.decodeNodes(found.consistency),
                at: try found.at.map(TransparencyCodec.decodeHead))
        } catch {
            throw DomainError(.invalidProof, "the domain's tree heads are malformed: \(error)")
        }
    }

    /// `POST /v1/identities/reset`: resets the user's identity, at once if signed, else after the delay.
    public func resetIdentity(token: String, endpointID: String, signature: Data?) async throws -> IdentityResetOutcome {
        try await client.call(.resetIdentity, Wire.ResetRequest(signature: signature), token: token, endpoint: endpointID)
    }

    /// `POST /v1/identities/reset/cancel`: cancels the user's pending identity reset.
    public func cancelIdentityReset(token: String, endpointID: String) async throws {
        let _: Wire.Empty = try await client.call(.cancelIdentityReset, Wire.Empty(), token: token, endpoint: endpointID)
    }

    /// `GET /v1/identities/reset/pending`: a user's pending identity reset.
    public func pendingIdentityReset(token: String, endpointID: String, userID: String) async throws -> PendingIdentityReset? {
        let found: Wire.PendingReset = try await client.call(
            .pendingIdentityReset, Wire.UserID(userID: userID), token: token, endpoint: endpointID)
        return found.pending
    }

    /// `POST /v1/chats/commit`: orders an MLS commit.
    public func postCommit(
        token: String, endpointID: String, chatID: String, epoch: Int64, commit: Data, welcome: Data?, add: [String],
        remove: [String], replacingRefused: Bool
    ) async throws -> Int64 {
        let answer: Wire.Epoch = try await client.call(
            .postCommit,
            Wire.PostCommit(
                chatID: chatID, epoch: epoch, commit: commit, welcome: welcome, add: add, remove: remove,
                replacingRefused: replacingRefused ? true : nil),
            token: token, endpoint: endpointID)
        return answer.epoch
    }

    /// `POST /v1/key-packages/publish`: stores KeyPackages of this endpoint.
    public func publishKeyPackages(token: String, endpointID: String, keyPackages: [Data], lastResort: Data?) async throws
        -> Int
    {
        let answer: Wire.Count = try await client.call(
            .publishKeyPackages, Wire.PublishKeyPackages(keyPackages: keyPackages, lastResort: lastResort), token: token,
            endpoint: endpointID)
        return answer.count
    }

    /// `POST /v1/key-packages/claim`: one KeyPackage per endpoint of a user, of `suite` or else
    /// of suite 1.
    public func claimKeyPackages(token: String, endpointID: String, userID: String, suite: UInt16) async throws
        -> [ClaimedKeyPackage]
    {
        let answer: Wire.ClaimedKeyPackages = try await client.call(
            .claimKeyPackages, Wire.KeyPackageClaim(userID: userID, suite: suite), token: token, endpoint: endpointID)
        return answer.keyPackages
    }

    /// `GET /v1/key-packages/count`: how many one-time KeyPackages of `suite` this endpoint has left.
    public func keyPackageCount(token: String, endpointID: String, suite: UInt16) async throws -> Int {
        let answer: Wire.Count = try await client.call(
            .keyPackageCount, Wire.KeyPackageSuite(suite: suite), token: token, endpoint: endpointID)
        return answer.count
    }

    /// `GET /v1/identities/key-version`: the highest identity key version the user published.
    public func identityKeyVersion(token: String, endpointID: String) async throws -> Int {
        let version: Wire.Version = try await client.call(
            .identityKeyVersion, Wire.Empty(), token: token, endpoint: endpointID)
        return version.version
    }

    // MARK: Chats and mailboxes

    /// `POST /v1/chats/create`: creates a chat (a repeat with the same members is the same chat).
    public func createChat(token: String, endpointID: String, chatID: String, participants: [String], posts: [ChatPost])
        async throws -> ChatInfo
    {
        try await client.call(
            .createChat, Wire.CreateChat(chatID: chatID, participants: participants, posts: posts), token: token,
            endpoint: endpointID)
    }

    /// `POST /v1/chats/members`: adds and removes members (a change that changes nothing is not made again).
    public func updateMembers(
        token: String, endpointID: String, chatID: String, add: [String], remove: [String], posts: [ChatPost]
    ) async throws -> ChatInfo {
        try await client.call(
            .updateMembers, Wire.UpdateMembers(chatID: chatID, add: add, remove: remove, posts: posts), token: token,
            endpoint: endpointID)
    }

    /// `POST /v1/chats/post`: posts to a chat (a repeat with the same clientID is the same post).
    public func post(
        token: String, endpointID: String, chatID: String, kind: MailboxKind, payload: Data, recipient: String?, clientID: String?
    ) async throws -> PostReceipt {
        try await client.call(
            .post, Wire.Post(chatID: chatID, kind: kind, payload: payload, recipient: recipient, clientID: clientID),
            token: token, endpoint: endpointID)
    }

    /// `POST /v1/chats/post-messages`: posts a sender's messages in order, as one.
    public func postMessages(token: String, endpointID: String, chatID: String, messages: [MessagePost]) async throws
        -> PostBatchReceipt
    {
        try await client.call(
            .postMessages, Wire.PostMessages(chatID: chatID, messages: messages), token: token, endpoint: endpointID)
    }

    /// `GET /v1/mailbox`: reads the mailbox; waits up to `wait` seconds for an entry.
    public func readMailbox(token: String, endpointID: String, after cursor: Int64, limit: Int, wait: Duration) async throws
        -> [MailboxEntry]
    {
        guard wait >= .zero, wait <= maximumMailboxWait else {
            throw DomainError(.invalidRequest, "a mailbox wait is 0 to 30 seconds")
        }
        // Whole seconds on the wire; a shorter wait than a second waits a second.
        let seconds = Int(wait.components.seconds) + (wait.components.attoseconds > 0 ? 1 : 0)
        let read: Wire.Entries = try await client.call(
            .readMailbox, Wire.MailboxQuery(after: cursor, limit: limit, wait: min(seconds, 30)), token: token,
            endpoint: endpointID, extraTime: .seconds(seconds))
        return read.entries
    }

    /// `GET /v1/chats`: a chat's members, for a member.
    public func chat(token: String, endpointID: String, chatID: String) async throws -> ChatInfo {
        try await client.call(.chat, Wire.ChatID(chatID: chatID), token: token, endpoint: endpointID)
    }

    // MARK: Moderation

    /// `GET /v1/status`: the user's moderation status.
    public func userStatus(token: String, endpointID: String) async throws -> UserStatus {
        try await client.call(.userStatus, Wire.Empty(), token: token, endpoint: endpointID)
    }

    /// `POST /v1/reports`: reports a member of a chat.
    public func report(
        token: String, endpointID: String, chatID: String, user: String, reason: String, messages: [ReportedMessage]
    ) async throws -> Int64 {
        let answer: Wire.ReportID = try await client.call(
            .report, Wire.ReportRequest(chatID: chatID, userID: user, reason: reason, messages: messages), token: token,
            endpoint: endpointID)
        return answer.id
    }

    /// `POST /v1/blobs/create`: starts an attachment's blob.
    public func createBlob(token: String, endpointID: String, chatID: String, blobID: String, size: Int64) async throws
        -> BlobStatus
    {
        try await client.call(
            .createBlob, Wire.CreateBlob(chatID: chatID, blobID: blobID, size: size), token: token, endpoint: endpointID)
    }

    /// `PUT /v1/blobs/upload`: uploads one part of a blob.
    public func uploadBlob(token: String, endpointID: String, blobID: String, offset: Int64, bytes: Data) async throws
        -> BlobStatus
    {
        try await client.upload(
            .uploadBlob, Wire.BlobPart(blobID: blobID, offset: offset), bytes: bytes, token: token, endpoint: endpointID)
    }

    /// `GET /v1/blobs/status`: where a blob's upload stands.
    public func blobStatus(token: String, endpointID: String, blobID: String) async throws -> BlobStatus {
        try await client.call(.blobStatus, Wire.BlobID(blobID: blobID), token: token, endpoint: endpointID)
    }

    /// `GET /v1/blobs/download` with a `Range`: bytes of a blob.
    public func downloadBlob(token: String, endpointID: String, blobID: String, offset: Int64, length: Int) async throws
        -> Data
    {
        try await client.download(
            .downloadBlob, Wire.BlobID(blobID: blobID), offset: offset, length: length, token: token, endpoint: endpointID)
    }

    /// `POST /v1/blobs/delete`: deletes one of the caller's blobs.
    public func deleteBlob(token: String, endpointID: String, blobID: String) async throws {
        let _: Wire.Empty = try await client.call(.deleteBlob, Wire.BlobID(blobID: blobID), token: token, endpoint: endpointID)
    }

    /// `POST /v1/blocks/set`: blocks or unblocks a user.
    public func setBlocked(token: String, endpointID: String, userID: String, blocked: Bool) async throws {
        let _: Wire.Empty = try await client.call(
            .setBlocked, Wire.SetBlocked(userID: userID, blocked: blocked), token: token, endpoint: endpointID)
    }

    /// `GET /v1/blocks`: the users the caller blocked.
    public func blockedUsers(token: String, endpointID: String) async throws -> [String] {
        let answer: Wire.BlockedUsers = try await client.call(.blockedUsers, Wire.Empty(), token: token, endpoint: endpointID)
        return answer.users
    }

    /// `POST /v1/infractions/dismiss`: dismisses one of the user's infractions.
    public func dismissInfraction(token: String, endpointID: String, id: Int64) async throws {
        let _: Wire.Empty = try await client.call(
            .dismissInfraction, Wire.InfractionID(id: id), token: token, endpoint: endpointID)
    }
}
