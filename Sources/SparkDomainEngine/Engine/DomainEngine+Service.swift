package import Foundation
package import SparkDomain

/// The embedded domain's side of ``DomainService``: each call names its caller by a token and an
/// endpoint id, resolved once (``DomainEngine/caller(token:endpointID:)``) before the engine's own
/// method, which takes the ``DomainEngine/Caller`` and never sees the token. `spark-domaind`
/// resolves the caller the same way in its route table (`DomainRoutes`).
extension DomainEngine {
    /// ``DomainService/registerEndpoint(token:registration:)``, for the user the token names.
    package func registerEndpoint(token: String, registration: EndpointRegistration) async throws -> RegistrationOutcome {
        try await registerEndpoint(as: validate(token: token), registration: registration)
    }

    /// ``DomainService/createBlob(token:endpointID:chatID:blobID:size:)``, for the caller the token and endpoint name.
    package func createBlob(token: String, endpointID: String, chatID: String, blobID: String, size: Int64) async throws
        -> BlobStatus
    {
        try await createBlob(as: caller(token: token, endpointID: endpointID), chatID: chatID, blobID: blobID, size: size)
    }

    /// ``DomainService/uploadBlob(token:endpointID:blobID:offset:bytes:)``, for the caller the token and endpoint name.
    package func uploadBlob(token: String, endpointID: String, blobID: String, offset: Int64, bytes: Data) async throws
        -> BlobStatus
    {
        try await uploadBlob(as: caller(token: token, endpointID: endpointID), blobID: blobID, offset: offset, bytes: bytes)
    }

    /// ``DomainService/blobStatus(token:endpointID:blobID:)``, for the caller the token and endpoint name.
    package func blobStatus(token: String, endpointID: String, blobID: String) async throws -> BlobStatus {
        try await blobStatus(as: caller(token: token, endpointID: endpointID), blobID: blobID)
    }

    /// ``DomainService/downloadBlob(token:endpointID:blobID:offset:length:)``, for the caller the token and endpoint name.
    package func downloadBlob(token: String, endpointID: String, blobID: String, offset: Int64, length: Int) async throws -> Data
    {
        try await downloadBlob(as: caller(token: token, endpointID: endpointID), blobID: blobID, offset: offset, length: length)
    }

    /// ``DomainService/deleteBlob(token:endpointID:blobID:)``, for the caller the token and endpoint name.
    package func deleteBlob(token: String, endpointID: String, blobID: String) async throws {
        try await deleteBlob(as: caller(token: token, endpointID: endpointID), blobID: blobID)
    }

    /// ``DomainService/setBlocked(token:endpointID:userID:blocked:)``, for the caller the token and endpoint name.
    package func setBlocked(token: String, endpointID: String, userID target: String, blocked: Bool) async throws {
        try await setBlocked(as: caller(token: token, endpointID: endpointID), userID: target, blocked: blocked)
    }

    /// ``DomainService/blockedUsers(token:endpointID:)``, for the caller the token and endpoint name.
    package func blockedUsers(token: String, endpointID: String) async throws -> [String] {
        try await blockedUsers(as: caller(token: token, endpointID: endpointID))
    }

    /// ``DomainService/postCommit(token:endpointID:chatID:epoch:commit:welcome:add:remove:replacingRefused:)``, for the caller the token and endpoint name.
    package func postCommit(
        token: String, endpointID: String, chatID: String, epoch: Int64, commit: Data, welcome: Data?, add: [String],
        remove: [String], replacingRefused: Bool
    ) async throws -> Int64 {
        try await postCommit(
            as: caller(token: token, endpointID: endpointID), chatID: chatID, epoch: epoch, commit: commit, welcome: welcome,
            add: add, remove: remove, replacingRefused: replacingRefused)
    }

    /// ``DomainService/createChat(token:endpointID:chatID:participants:posts:)``, for the caller the token and endpoint name.
    package func createChat(token: String, endpointID: String, chatID: String, participants: [String], posts: [ChatPost])
        async throws -> ChatInfo
    {
        try await createChat(
            as: caller(token: token, endpointID: endpointID), chatID: chatID, participants: participants, posts: posts)
    }

    /// ``DomainService/updateMembers(token:endpointID:chatID:add:remove:posts:)``, for the caller the token and endpoint name.
    package func updateMembers(
        token: String, endpointID: String, chatID: String, add: [String], remove: [String], posts: [ChatPost]
    ) async throws -> ChatInfo {
        try await updateMembers(
            as: caller(token: token, endpointID: endpointID), chatID: chatID, add: add, remove: remove, posts: posts)
    }

    /// ``DomainService/post(token:endpointID:chatID:kind:payload:recipient:clientID:)``, for the caller the token and endpoint name.
    package func post(
        token: String, endpointID: String, chatID: String, kind: MailboxKind, payload: Data, recipient: String?, clientID: String?
    ) async throws -> PostReceipt {
        try await post(
            as: caller(token: token, endpointID: endpointID), chatID: chatID, kind: kind, payload: payload, recipient: recipient,
            clientID: clientID)
    }

    /// ``DomainService/postMessages(token:endpointID:chatID:messages:)``, for the caller the token and endpoint name.
    package func postMessages(token: String, endpointID: String, chatID: String, messages: [MessagePost]) async throws
        -> PostBatchReceipt
    {
        try await postMessages(as: caller(token: token, endpointID: endpointID), chatID: chatID, messages: messages)
    }

    /// ``DomainService/readMailbox(token:endpointID:after:limit:wait:)``, for the caller the token and endpoint name.
    package func readMailbox(token: String, endpointID: String, after cursor: Int64, limit: Int, wait: Duration) async throws
        -> [MailboxEntry]
    {
        try await readMailbox(as: caller(token: token, endpointID: endpointID), after: cursor, limit: limit, wait: wait)
    }

    /// ``DomainService/chat(token:endpointID:chatID:)``, for the caller the token and endpoint name.
    package func chat(token: String, endpointID: String, chatID: String) async throws -> ChatInfo {
        try await chat(as: caller(token: token, endpointID: endpointID), chatID: chatID)
    }

    /// ``DomainService/endpoints(token:endpointID:)``, for the caller the token and endpoint name.
    package func endpoints(token: String, endpointID: String) async throws -> [EndpointInfo] {
        try await endpoints(as: caller(token: token, endpointID: endpointID))
    }

    /// ``DomainService/setEndpointNickname(token:endpointID:target:nickname:)``, for the caller the token and endpoint name.
    package func setEndpointNickname(token: String, endpointID: String, target: String, nickname: String) async throws {
        try await setEndpointNickname(as: caller(token: token, endpointID: endpointID), target: target, nickname: nickname)
    }

    /// ``DomainService/deregisterEndpoint(token:endpointID:target:signature:)``, for the caller the token and endpoint name.
    package func deregisterEndpoint(token: String, endpointID: String, target: String, signature: Data?) async throws {
        try await deregisterEndpoint(as: caller(token: token, endpointID: endpointID), target: target, signature: signature)
    }

    /// ``DomainService/publishEndpointCredential(token:endpointID:credential:)``, for the caller the token and endpoint name.
    package func publishEndpointCredential(token: String, endpointID: String, credential: Data) async throws {
        try await publishEndpointCredential(as: caller(token: token, endpointID: endpointID), credential: credential)
    }

    /// ``DomainService/approveEndpoint(token:endpointID:target:approval:)``, for the caller the token and endpoint name.
    package func approveEndpoint(token: String, endpointID: String, target: String, approval: Data) async throws {
        try await approveEndpoint(as: caller(token: token, endpointID: endpointID), target: target, approval: approval)
    }

    /// ``DomainService/checkIn(token:endpointID:)``, for the caller the token and endpoint name.
    package func checkIn(token: String, endpointID: String) async throws -> EndpointInfo {
        try await checkIn(as: caller(token: token, endpointID: endpointID))
    }

    /// ``DomainService/putKeyBlob(token:endpointID:name:data:expectedVersion:proof:)``, for the caller the token and endpoint name.
    package func putKeyBlob(
        token: String, endpointID: String, name: String, data: Data, expectedVersion: Int?, proof: KeyBlobProof?
    ) async throws -> Int {
        try await putKeyBlob(
            as: caller(token: token, endpointID: endpointID), name: name, data: data, expectedVersion: expectedVersion,
            proof: proof)
    }

    /// ``DomainService/putKeyBlobs(token:endpointID:writes:proof:)``, for the caller the token and endpoint name.
    package func putKeyBlobs(token: String, endpointID: String, writes: [KeyBlobWrite], proof: KeyBlobProof?) async throws
        -> [Int]
    {
        try await putKeyBlobs(as: caller(token: token, endpointID: endpointID), writes: writes, proof: proof)
    }

    /// ``DomainService/publishIdentity(token:endpointID:identity:)``, for the caller the token and endpoint name.
    package func publishIdentity(token: String, endpointID: String, identity: PublishedIdentity) async throws {
        try await publishIdentity(as: caller(token: token, endpointID: endpointID), identity: identity)
    }

    /// ``DomainService/identity(token:endpointID:userID:)``, for the caller the token and endpoint name.
    package func identity(token: String, endpointID: String, userID: String) async throws -> PublishedIdentity? {
        try await identity(as: caller(token: token, endpointID: endpointID), userID: userID)
    }

    /// ``DomainService/identityKeyVersion(token:endpointID:)``, for the caller the token and endpoint name.
    package func identityKeyVersion(token: String, endpointID: String) async throws -> Int {
        try await identityKeyVersion(as: caller(token: token, endpointID: endpointID))
    }

    /// ``DomainService/publishKeyPackages(token:endpointID:keyPackages:lastResort:)``, for the caller the token and endpoint name.
    package func publishKeyPackages(token: String, endpointID: String, keyPackages: [Data], lastResort: Data?) async throws -> Int
    {
        try await publishKeyPackages(
            as: caller(token: token, endpointID: endpointID), keyPackages: keyPackages, lastResort: lastResort)
    }

    /// ``DomainService/claimKeyPackages(token:endpointID:userID:suite:)``, for the caller the token and endpoint name.
    package func claimKeyPackages(token: String, endpointID: String, userID: String, suite: UInt16) async throws
        -> [ClaimedKeyPackage]
    {
        try await claimKeyPackages(as: caller(token: token, endpointID: endpointID), userID: userID, suite: suite)
    }

    /// ``DomainService/keyPackageCount(token:endpointID:suite:)``, for the caller the token and endpoint name.
    package func keyPackageCount(token: String, endpointID: String, suite: UInt16) async throws -> Int {
        try await keyPackageCount(as: caller(token: token, endpointID: endpointID), suite: suite)
    }

    /// ``DomainService/evaluatePasscode(token:endpointID:blindedElement:keyID:)``, for the caller the token and endpoint name.
    package func evaluatePasscode(token: String, endpointID: String, blindedElement: Data, keyID: String?) async throws
        -> PasscodeEvaluation
    {
        try await evaluatePasscode(as: caller(token: token, endpointID: endpointID), blindedElement: blindedElement, keyID: keyID)
    }

    /// ``DomainService/proveUnlock(token:endpointID:challenge:signature:)``, for the caller the token and endpoint name.
    package func proveUnlock(token: String, endpointID: String, challenge: Data, signature: Data) async throws {
        try await proveUnlock(as: caller(token: token, endpointID: endpointID), challenge: challenge, signature: signature)
    }

    /// ``DomainService/retirePasscodeKeys(token:endpointID:challenge:signature:version:)``, for the caller the token and endpoint name.
    package func retirePasscodeKeys(token: String, endpointID: String, challenge: Data, signature: Data, version: Int)
        async throws
    {
        try await retirePasscodeKeys(
            as: caller(token: token, endpointID: endpointID), challenge: challenge, signature: signature, version: version)
    }

    /// ``DomainService/fetchKeyBlob(token:endpointID:name:)``, for the caller the token and endpoint name.
    package func fetchKeyBlob(token: String, endpointID: String, name: String) async throws -> BlobFetch {
        try await fetchKeyBlob(as: caller(token: token, endpointID: endpointID), name: name)
    }

    /// ``DomainService/resetIdentity(token:endpointID:signature:)``, for the caller the token and endpoint name.
    package func resetIdentity(token: String, endpointID: String, signature: Data?) async throws -> IdentityResetOutcome {
        try await resetIdentity(as: caller(token: token, endpointID: endpointID), signature: signature)
    }

    /// ``DomainService/cancelIdentityReset(token:endpointID:)``, for the caller the token and endpoint name.
    package func cancelIdentityReset(token: String, endpointID: String) async throws {
        try await cancelIdentityReset(as: caller(token: token, endpointID: endpointID))
    }

    /// ``DomainService/pendingIdentityReset(token:endpointID:userID:)``, for the caller the token and endpoint name.
    package func pendingIdentityReset(token: String, endpointID: String, userID: String) async throws -> PendingIdentityReset? {
        try await pendingIdentityReset(as: caller(token: token, endpointID: endpointID), userID: userID)
    }

    /// ``DomainService/userStatus(token:endpointID:)``, for the caller the token and endpoint name.
    package func userStatus(token: String, endpointID: String) async throws -> UserStatus {
        try await userStatus(as: caller(token: token, endpointID: endpointID))
    }

    /// ``DomainService/dismissInfraction(token:endpointID:id:)``, for the caller the token and endpoint name.
    package func dismissInfraction(token: String, endpointID: String, id: Int64) async throws {
        try await dismissInfraction(as: caller(token: token, endpointID: endpointID), id: id)
    }

    /// ``DomainService/report(token:endpointID:chatID:user:reason:messages:)``, for the caller the token and endpoint name.
    package func report(
        token: String, endpointID: String, chatID: String, user reported: String, reason: String, messages: [ReportedMessage]
    ) async throws -> Int64 {
        try await report(
            as: caller(token: token, endpointID: endpointID), chatID: chatID, user: reported, reason: reason, messages: messages)
    }

    /// ``DomainService/transparencyKeys(token:endpointID:)``, for the caller the token and endpoint name.
    package func transparencyKeys(token: String, endpointID: String) async throws -> TransparencyKeys {
        try await transparencyKeys(as: caller(token: token, endpointID: endpointID))
    }

    /// ``DomainService/identityProof(token:endpointID:userID:since:auditor:)``, for the caller the token and endpoint name.
    package func identityProof(token: String, endpointID: String, userID: String, since: UInt64?, auditor: Data?) async throws
        -> IdentityProof
    {
        try await identityProof(as: caller(token: token, endpointID: endpointID), userID: userID, since: since, auditor: auditor)
    }

    /// ``DomainService/transparencyHeads(token:endpointID:since:)``, for the caller the token and endpoint name.
    package func transparencyHeads(token: String, endpointID: String, since: UInt64?) async throws -> TransparencyHeads {
        try await transparencyHeads(as: caller(token: token, endpointID: endpointID), since: since)
    }
}
