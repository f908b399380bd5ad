package import Foundation

/// The bodies of the `/v1` wire: one plain `Codable` type per request and response that is not
/// a contract type already. `docs/openapi.json` describes each; ``WireSchema`` generates it.
package enum Wire {
    /// A body with no fields (`{}`): the answer of calls that return nothing.
    package struct Empty: Codable, Sendable, Equatable {
        /// The empty body.
        package init() {}

        private enum NoKeys: CodingKey {}

        /// Decodes an object (`{}`; a field in it is refused by the strict check), not an array,
        /// a string, a number or null.
        package init(from decoder: any Decoder) throws { _ = try decoder.container(keyedBy: NoKeys.self) }
    }

    /// A user id.
    package struct UserID: Codable, Sendable, Equatable {
        /// The user id.
        package var userID: String
        /// A body naming `userID`.
        package init(userID: String) { self.userID = userID }
    }

    /// A claim of a user's KeyPackages of an MLS cipher suite (1 when absent).
    package struct KeyPackageClaim: Codable, Sendable, Equatable {
        /// The user whose devices' KeyPackages are claimed.
        package var userID: String
        /// The suite asked for.
        package var suite: UInt16?
        /// A claim of `userID`'s KeyPackages of `suite`.
        package init(userID: String, suite: UInt16?) { (self.userID, self.suite) = (userID, suite) }
    }

    /// An MLS cipher suite (1 when absent).
    package struct KeyPackageSuite: Codable, Sendable, Equatable {
        /// The suite.
        package var suite: UInt16?
        /// A body naming `suite`.
        package init(suite: UInt16?) { self.suite = suite }
    }

    /// An account's user name.
    package struct UserName: Codable, Sendable, Equatable {
        /// The user name.
        package var userName: String
        /// A body naming `userName`.
        package init(userName: String) { self.userName = userName }
    }

    /// An activation.
    package struct Activation: Codable, Sendable, Equatable {
        /// The user name.
        package var userName: String
        /// The emailed code.
        package var code: String
        /// The activation of `userName` with `code`.
        package init(userName: String, code: String) {
            self.userName = userName
            self.code = code
        }
    }

    /// A login.
    package struct LogIn: Codable, Sendable, Equatable {
        /// The user name.
        package var userName: String
        /// The password.
        package var password: String
        /// A login of `userName`.
        package init(userName: String, password: String) {
            self.userName = userName
            self.password = password
        }
    }

    /// A refresh token.
    package struct RefreshToken: Codable, Sendable, Equatable {
        /// The refresh token.
        package var refreshToken: String
        /// A body carrying `refreshToken`.
        package init(refreshToken: String) { self.refreshToken = refreshToken }
    }

    /// An email address.
    package struct Email: Codable, Sendable, Equatable {
        /// The address.
        package var email: String
        /// A body naming `email`.
        package init(email: String) { self.email = email }
    }

    /// A password reset.
    package struct PasswordReset: Codable, Sendable, Equatable {
        /// The account's email address.
        package var email: String
        /// The emailed code.
        package var code: String
        /// The new password.
        package var newPassword: String
        /// A reset of `email`'s password.
        package init(email: String, code: String, newPassword: String) {
            self.email = email
            self.code = code
            self.newPassword = newPassword
        }
    }

    /// Another endpoint of the caller's user.
    package struct Target: Codable, Sendable, Equatable {
        /// The endpoint id.
        package var target: String
        /// A body naming `target`.
        package init(target: String) { self.target = target }
    }

    /// A nickname for one of the user's endpoints.
    package struct Nickname: Codable, Sendable, Equatable {
        /// The endpoint id.
        package var target: String
        /// The nickname.
        package var nickname: String
        /// `target`'s new nickname.
        package init(target: String, nickname: String) {
            self.target = target
            self.nickname = nickname
        }
    }

    /// A removal of one of the user's endpoints.
    package struct Removal: Codable, Sendable, Equatable {
        /// The endpoint to remove.
        package var target: String
        /// The removing endpoint's signature, for another endpoint.
        package var signature: Data?
        /// `target`'s removal.
        package init(target: String, signature: Data?) {
            self.target = target
            self.signature = signature
        }
    }

    /// An endpoint's credential.
    package struct Credential: Codable, Sendable, Equatable {
        /// The credential's bytes.
        package var credential: Data
        /// A body carrying `credential`.
        package init(credential: Data) { self.credential = credential }
    }

    /// An approval of one of the user's endpoints.
    package struct Approval: Codable, Sendable, Equatable {
        /// The approved endpoint.
        package var target: String
        /// The signed approval.
        package var approval: Data
        /// `target`'s approval.
        package init(target: String, approval: Data) {
            self.target = target
            self.approval = approval
        }
    }

    /// The endpoint list.
    package struct Endpoints: Codable, Sendable, Equatable {
        /// The endpoints, oldest first.
        package var endpoints: [EndpointInfo]
        /// A list.
        package init(endpoints: [EndpointInfo]) { self.endpoints = endpoints }
    }

    /// A key blob's name.
    package struct BlobName: Codable, Sendable, Equatable {
        /// The name.
        package var name: String
        /// A body naming blob `name`.
        package init(name: String) { self.name = name }
    }

    /// A key blob write.
    package struct PutBlob: Codable, Sendable, Equatable {
        /// The name.
        package var name: String
        /// The new contents.
        package var data: Data
        /// The version it replaces (absent: it must not exist yet).
        package var expectedVersion: Int?
        /// The identity key's consent (required once the user has published an identity).
        package var proof: KeyBlobProof?
        /// A write of blob `name`.
        package init(name: String, data: Data, expectedVersion: Int?, proof: KeyBlobProof? = nil) {
            self.name = name
            self.data = data
            self.expectedVersion = expectedVersion
            self.proof = proof
        }
    }

    /// A version number.
    package struct Version: Codable, Sendable, Equatable {
        /// The version.
        package var version: Int
        /// A body carrying `version`.
        package init(version: Int) { self.version = version }
    }

    /// Several blob writes.
    package struct PutBlobs: Codable, Sendable, Equatable {
        /// The writes, all or none.
        package var writes: [KeyBlobWrite]
        /// The identity key's consent (required once the user has published an identity).
        package var proof: KeyBlobProof?
        /// A request.
        package init(writes: [KeyBlobWrite], proof: KeyBlobProof? = nil) {
            self.writes = writes
            self.proof = proof
        }
    }

    /// The new versions of several blobs.
    package struct Versions: Codable, Sendable, Equatable {
        /// In the order of the writes.
        package var versions: [Int]
        /// An answer.
        package init(versions: [Int]) { self.versions = versions }
    }

    /// A passcode attempt: the blinded, stretched passcode.
    package struct BlindedPasscode: Codable, Sendable, Equatable {
        /// The blinded element (a compressed P-256 point).
        package var blindedElement: Data
        /// The passcode key the backup was made with; nil for the current one.
        package var keyID: String?
        /// A request.
        package init(blindedElement: Data, keyID: String?) {
            self.blindedElement = blindedElement
            self.keyID = keyID
        }
    }

    /// A reset request, signed by the current identity key or not.
    package struct ResetRequest: Codable, Sendable, Equatable {
        /// The signature over ``identityResetMessage(userID:endpointID:keyVersion:)``, if any.
        package var signature: Data?
        /// A request.
        package init(signature: Data?) { self.signature = signature }
    }

    /// A pending reset, or none.
    package struct PendingReset: Codable, Sendable, Equatable {
        /// The reset, if one is pending.
        package var pending: PendingIdentityReset?
        /// An answer.
        package init(pending: PendingIdentityReset?) { self.pending = pending }
    }

    /// An unlock proof.
    package struct UnlockProof: Codable, Sendable, Equatable {
        /// The challenge from the management blob's fetch.
        package var challenge: Data
        /// The identity key's signature over ``unlockProofMessage(userID:endpointID:challenge:)``.
        package var signature: Data
        /// A proof.
        package init(challenge: Data, signature: Data) {
            self.challenge = challenge
            self.signature = signature
        }
    }

    /// A proof of unlock that also retires the user's older passcode key versions.
    package struct PasscodeRetirement: Codable, Sendable, Equatable {
        /// The challenge of one of this endpoint's passcode attempts.
        package var challenge: Data
        /// The identity key's signature over ``passcodeRetireMessage(userID:endpointID:challenge:version:)``.
        package var signature: Data
        /// The version that becomes current.
        package var version: Int
        /// A body.
        package init(challenge: Data, signature: Data, version: Int) {
            self.challenge = challenge
            self.signature = signature
            self.version = version
        }
    }

    /// A commit to order.
    package struct PostCommit: Codable, Sendable, Equatable {
        /// The chat.
        package var chatID: String
        /// The epoch the commit was made in.
        package var epoch: Int64
        /// The commit (an `MLSMessage`).
        package var commit: Data
        /// The Welcome for the added members, if any.
        package var welcome: Data?
        /// Users the commit adds.
        package var add: [String]
        /// Users the commit removes.
        package var remove: [String]
        /// True when the commit replaces the commits ordered since `epoch`, which the members
        /// refused (an admin's only); absent otherwise.
        package var replacingRefused: Bool?
        /// A body.
        package init(
            chatID: String, epoch: Int64, commit: Data, welcome: Data?, add: [String], remove: [String],
            replacingRefused: Bool? = nil
        ) {
            self.chatID = chatID
            self.epoch = epoch
            self.commit = commit
            self.welcome = welcome
            self.add = add
            self.remove = remove
            self.replacingRefused = replacingRefused
        }
    }

    /// An epoch.
    package struct Epoch: Codable, Sendable, Equatable {
        /// The epoch.
        package var epoch: Int64
        /// A body carrying `epoch`.
        package init(epoch: Int64) { self.epoch = epoch }
    }

    /// KeyPackages to keep for the caller's endpoint.
    package struct PublishKeyPackages: Codable, Sendable, Equatable {
        /// One-time KeyPackages.
        package var keyPackages: [Data]
        /// A last-resort KeyPackage, replacing the previous.
        package var lastResort: Data?
        /// A body.
        package init(keyPackages: [Data], lastResort: Data?) {
            self.keyPackages = keyPackages
            self.lastResort = lastResort
        }
    }

    /// A count.
    package struct Count: Codable, Sendable, Equatable {
        /// The count.
        package var count: Int
        /// A body carrying `count`.
        package init(count: Int) { self.count = count }
    }

    /// KeyPackages handed out.
    package struct ClaimedKeyPackages: Codable, Sendable, Equatable {
        /// One per endpoint that had one.
        package var keyPackages: [ClaimedKeyPackage]
        /// A body.
        package init(keyPackages: [ClaimedKeyPackage]) { self.keyPackages = keyPackages }
    }

    /// A published identity, or none.
    package struct Identity: Codable, Sendable, Equatable {
        /// The identity, absent when the user has none.
        package var identity: PublishedIdentity?
        /// A body carrying `identity`.
        package init(identity: PublishedIdentity?) { self.identity = identity }
    }

    /// A user and the size of the transparency log's head the reader holds.
    package struct IdentityProofQuery: Codable, Sendable, Equatable {
        /// The user id.
        package var userID: String
        /// The size of the reader's head (absent: none yet).
        package var since: Int64?
        /// The auditor whose co-signed head the reader requires (P-256 `x ‖ y`, hex; absent: none).
        package var auditor: String?
        /// A query.
        package init(userID: String, since: Int64?, auditor: String?) {
            self.userID = userID
            self.since = since
            self.auditor = auditor
        }
    }

    /// The size of the transparency log's head the reader holds.
    package struct HeadsQuery: Codable, Sendable, Equatable {
        /// The size of the reader's head (absent: none yet).
        package var since: Int64?
        /// A query.
        package init(since: Int64?) { self.since = since }
    }

    /// An identity proof, in its binary encoding (``TransparencyCodec``).
    package struct EncodedProof: Codable, Sendable, Equatable {
        /// The proof.
        package var proof: Data
        /// A body carrying `proof`.
        package init(proof: Data) { self.proof = proof }
    }

    /// Signed tree heads and a consistency proof, each in its binary encoding (``TransparencyCodec``).
    package struct EncodedHeads: Codable, Sendable, Equatable {
        /// The latest head.
        package var latest: Data
        /// The consistency proof from the reader's head.
        package var consistency: Data
        /// The head at the reader's size, if an epoch ended there.
        package var at: Data?
        /// A body.
        package init(latest: Data, consistency: Data, at: Data?) {
            (self.latest, self.consistency, self.at) = (latest, consistency, at)
        }
    }

    /// Where an auditor reads the log from.
    package struct UpdatesQuery: Codable, Sendable, Equatable {
        /// The last position already read (-1: none).
        package var after: Int64
        /// The most updates to return (1 to 1,000 anonymously, to 10,000 for a registered auditor).
        package var limit: Int
        /// A registered auditor's key (base64url of its 64 bytes), with ``at`` and ``signature``.
        package var auditor: String?
        /// When the auditor signed the request (ms since 1970).
        package var at: Int64?
        /// The auditor's signature over ``TransparencyAudit/updatesRequestBytes(after:limit:at:)`` (base64url).
        package var signature: String?
        /// A query.
        package init(after: Int64, limit: Int, auditor: String? = nil, at: Int64? = nil, signature: String? = nil) {
            self.after = after
            self.limit = limit
            self.auditor = auditor
            self.at = at
            self.signature = signature
        }
    }

    /// Updates and the latest head, in their binary encodings (``TransparencyAudit``).
    package struct EncodedUpdates: Codable, Sendable, Equatable {
        /// The updates.
        package var updates: Data
        /// The latest head (absent before the first epoch).
        package var head: Data?
        /// An answer.
        package init(updates: Data, head: Data?) {
            self.updates = updates
            self.head = head
        }
    }

    /// An auditor's co-signature of the head of `size` entries.
    package struct Audit: Codable, Sendable, Equatable {
        /// The head's size.
        package var size: Int64
        /// The auditor's P-256 key, `x ‖ y`.
        package var auditorKey: Data
        /// Its signature (raw `r ‖ s`).
        package var signature: Data
        /// A co-signature.
        package init(size: Int64, auditorKey: Data, signature: Data) {
            (self.size, self.auditorKey, self.signature) = (size, auditorKey, signature)
        }
    }

    /// A new chat.
    package struct CreateChat: Codable, Sendable, Equatable {
        /// The chat id the creator chose.
        package var chatID: String
        /// The other members.
        package var participants: [String]
        /// Keys and events that go out with the chat.
        package var posts: [ChatPost]
        /// A new chat.
        package init(chatID: String, participants: [String], posts: [ChatPost]) {
            self.chatID = chatID
            self.participants = participants
            self.posts = posts
        }
    }

    /// A membership change.
    package struct UpdateMembers: Codable, Sendable, Equatable {
        /// The chat.
        package var chatID: String
        /// Users to add.
        package var add: [String]
        /// Users to remove.
        package var remove: [String]
        /// Keys and events that go out with the change.
        package var posts: [ChatPost]
        /// A change.
        package init(chatID: String, add: [String], remove: [String], posts: [ChatPost]) {
            self.chatID = chatID
            self.add = add
            self.remove = remove
            self.posts = posts
        }
    }

    /// A post.
    package struct Post: Codable, Sendable, Equatable {
        /// The chat.
        package var chatID: String
        /// What it is.
        package var kind: MailboxKind
        /// The ciphertext.
        package var payload: Data
        /// The one member it is for (chat keys), absent for everyone.
        package var recipient: String?
        /// The sender's id for it, which makes a retry idempotent.
        package var clientID: String?
        /// A post.
        package init(chatID: String, kind: MailboxKind, payload: Data, recipient: String?, clientID: String?) {
            self.chatID = chatID
            self.kind = kind
            self.payload = payload
            self.recipient = recipient
            self.clientID = clientID
        }
    }

    /// A sender's messages to post as one.
    package struct PostMessages: Codable, Sendable, Equatable {
        /// The chat.
        package var chatID: String
        /// The messages, in the order they are to be numbered.
        package var messages: [MessagePost]
        /// A batch of messages.
        package init(chatID: String, messages: [MessagePost]) {
            self.chatID = chatID
            self.messages = messages
        }
    }

    /// A mailbox read.
    package struct MailboxQuery: Codable, Sendable, Equatable {
        /// The last sequence number already read.
        package var after: Int64
        /// The most entries to return (1 to 1,000).
        package var limit: Int
        /// Seconds to wait for an entry when there is none (0 to 30).
        package var wait: Int
        /// A read.
        package init(after: Int64, limit: Int, wait: Int) {
            self.after = after
            self.limit = limit
            self.wait = wait
        }
    }

    /// Mailbox entries.
    package struct Entries: Codable, Sendable, Equatable {
        /// The entries, oldest first.
        package var entries: [MailboxEntry]
        /// A body carrying `entries`.
        package init(entries: [MailboxEntry]) { self.entries = entries }
    }

    /// A chat id.
    package struct ChatID: Codable, Sendable, Equatable {
        /// The chat.
        package var chatID: String
        /// A body naming `chatID`.
        package init(chatID: String) { self.chatID = chatID }
    }

    /// `POST /v1/reports`.
    package struct ReportRequest: Codable, Sendable, Equatable {
        /// The chat.
        package var chatID: String
        /// The reported user.
        package var userID: String
        /// Why.
        package var reason: String
        /// The revealed messages.
        package var messages: [ReportedMessage]
        /// A report.
        package init(chatID: String, userID: String, reason: String, messages: [ReportedMessage]) {
            self.chatID = chatID
            self.userID = userID
            self.reason = reason
            self.messages = messages
        }
    }

    /// `POST /v1/blobs/create`.
    package struct CreateBlob: Codable, Sendable, Equatable {
        /// The chat.
        package var chatID: String
        /// The blob's id.
        package var blobID: String
        /// Its size in bytes.
        package var size: Int64
        /// A body starting blob `blobID` of `size` bytes in `chatID`.
        package init(chatID: String, blobID: String, size: Int64) {
            self.chatID = chatID
            self.blobID = blobID
            self.size = size
        }
    }

    /// A body or query naming one blob.
    package struct BlobID: Codable, Sendable, Equatable {
        /// The blob's id.
        package var blobID: String
        /// Names `blobID`.
        package init(blobID: String) { self.blobID = blobID }
    }

    /// The query of an upload: the blob and where its part goes.
    package struct BlobPart: Codable, Sendable, Equatable {
        /// The blob's id.
        package var blobID: String
        /// Where the part goes.
        package var offset: Int64
        /// The part of `blobID` at `offset`.
        package init(blobID: String, offset: Int64) {
            self.blobID = blobID
            self.offset = offset
        }
    }

    /// `POST /v1/blocks/set`.
    package struct SetBlocked: Codable, Sendable, Equatable {
        /// The user blocked or unblocked.
        package var userID: String
        /// Whether they are blocked from now on.
        package var blocked: Bool
        /// A body blocking (or unblocking) `userID`.
        package init(userID: String, blocked: Bool) {
            self.userID = userID
            self.blocked = blocked
        }
    }

    /// `GET /v1/blocks`'s answer.
    package struct BlockedUsers: Codable, Sendable, Equatable {
        /// The users, sorted.
        package var users: [String]
        /// A body listing `users`.
        package init(users: [String]) { self.users = users }
    }

    /// A report's id.
    package struct ReportID: Codable, Sendable, Equatable {
        /// The id.
        package var id: Int64
        /// A body naming report `id`.
        package init(id: Int64) { self.id = id }
    }

    /// `GET /v1/admin/reports`.
    package struct ReportsQuery: Codable, Sendable, Equatable {
        /// The most reports, newest first.
        package var limit: Int
        /// A query.
        package init(limit: Int) { self.limit = limit }
    }

    /// The reports.
    package struct Reports: Codable, Sendable, Equatable {
        /// Newest first.
        package var reports: [Report]
        /// A list.
        package init(reports: [Report]) { self.reports = reports }
    }

    /// An infraction id.
    package struct InfractionID: Codable, Sendable, Equatable {
        /// The infraction.
        package var id: Int64
        /// A body naming infraction `id`.
        package init(id: Int64) { self.id = id }
    }

    // MARK: Operators

    /// The accounts of the sign-up assistant.
    package struct Accounts: Codable, Sendable, Equatable {
        /// The accounts.
        package var accounts: [AccountSummary]
        /// A list.
        package init(accounts: [AccountSummary]) { self.accounts = accounts }
    }

    /// The users with endpoints.
    package struct EndpointUsers: Codable, Sendable, Equatable {
        /// The users and how many endpoints each has.
        package var users: [EndpointUser]
        /// A list.
        package init(users: [EndpointUser]) { self.users = users }
    }

    /// An endpoint id.
    package struct EndpointID: Codable, Sendable, Equatable {
        /// The endpoint.
        package var endpointID: String
        /// A body naming `endpointID`.
        package init(endpointID: String) { self.endpointID = endpointID }
    }

    /// An infraction to issue, or a ban.
    package struct Sanction: Codable, Sendable, Equatable {
        /// The user.
        package var userID: String
        /// Why.
        package var reason: String
        /// A sanction of `userID`.
        package init(userID: String, reason: String) {
            self.userID = userID
            self.reason = reason
        }
    }

    /// A timeout.
    package struct TimeOut: Codable, Sendable, Equatable {
        /// The user.
        package var userID: String
        /// How long, in seconds.
        package var seconds: Int
        /// Why.
        package var reason: String
        /// A timeout of `userID`.
        package init(userID: String, seconds: Int, reason: String) {
            self.userID = userID
            self.seconds = seconds
            self.reason = reason
        }
    }

    /// An outbox read.
    package struct OutboxQuery: Codable, Sendable, Equatable {
        /// Only mail to this address (absent: all).
        package var recipient: String?
        /// The most mails, newest first.
        package var limit: Int
        /// A read.
        package init(recipient: String?, limit: Int) {
            self.recipient = recipient
            self.limit = limit
        }
    }

    /// Mail the domain sent.
    package struct Mails: Codable, Sendable, Equatable {
        /// The mail, newest first.
        package var mails: [Mail]
        /// A list.
        package init(mails: [Mail]) { self.mails = mails }
    }

    /// The trusted external issuers.
    package struct Issuers: Codable, Sendable, Equatable {
        /// The issuers.
        package var issuers: [ExternalIssuer]
        /// A list.
        package init(issuers: [ExternalIssuer]) { self.issuers = issuers }
    }

    /// An external issuer to trust, with its keys.
    package struct AddIssuer: Codable, Sendable, Equatable {
        /// Its `iss`.
        package var issuer: String
        /// The audience its tokens must name.
        package var audience: String
        /// Its JWKS document (JSON text).
        package var jwks: String
        /// An issuer.
        package init(issuer: String, audience: String, jwks: String) {
            self.issuer = issuer
            self.audience = audience
            self.jwks = jwks
        }
    }

    /// An OpenID provider to trust by discovery.
    package struct DiscoverIssuer: Codable, Sendable, Equatable {
        /// Its issuer URL.
        package var issuer: String
        /// The client id its ID tokens name.
        package var audience: String
        /// The claim that is the user id.
        package var userClaim: String
        /// Its CA (PEM), when not in the machine's store.
        package var caPEM: String?
        /// A body.
        package init(issuer: String, audience: String, userClaim: String, caPEM: String?) {
            self.issuer = issuer
            self.audience = audience
            self.userClaim = userClaim
            self.caPEM = caPEM
        }
    }

    /// An issuer's name.
    package struct IssuerName: Codable, Sendable, Equatable {
        /// Its `iss`.
        package var issuer: String
        /// A body naming `issuer`.
        package init(issuer: String) { self.issuer = issuer }
    }

    /// The registered auditors.
    package struct Auditors: Codable, Sendable, Equatable {
        /// The auditors.
        package var auditors: [RegisteredAuditor]
        /// A list.
        package init(auditors: [RegisteredAuditor]) { self.auditors = auditors }
    }

    /// An auditor to register.
    package struct AddAuditor: Codable, Sendable, Equatable {
        /// Its P-256 key, 64 bytes.
        package var auditorKey: Data
        /// The operator's name for it.
        package var name: String
        /// A body registering `auditorKey` as `name`.
        package init(auditorKey: Data, name: String) {
            self.auditorKey = auditorKey
            self.name = name
        }
    }

    /// An auditor's key.
    package struct AuditorKey: Codable, Sendable, Equatable {
        /// Its P-256 key, 64 bytes.
        package var auditorKey: Data
        /// A body naming `auditorKey`.
        package init(auditorKey: Data) { self.auditorKey = auditorKey }
    }

    /// Which of the domain's own issuers.
    package struct IssuerKind: Codable, Sendable, Equatable {
        /// `test` or `accounts`.
        package var kind: String
        /// A body naming `kind`.
        package init(kind: String) { self.kind = kind }
    }
}
