public import Foundation

/// The bodies of the `/v1` wire: one plain `Codable` type per request and response that is not
/// a contract type already. `docs/openapi.json` describes each; ``WireSchema`` generates it.
public enum Wire {
    /// A body with no fields (`{}`): the answer of calls that return nothing.
    public struct Empty: Codable, Sendable, Equatable {
        /// The empty body.
        public init() {}
    }

    /// A user id.
    public struct UserID: Codable, Sendable, Equatable {
        /// The user id.
        public var userID: String
        /// A body naming `userID`.
        public init(userID: String) { self.userID = userID }
    }

    /// An account's user name.
    public struct UserName: Codable, Sendable, Equatable {
        /// The user name.
        public var userName: String
        /// A body naming `userName`.
        public init(userName: String) { self.userName = userName }
    }

    /// An activation.
    public struct Activation: Codable, Sendable, Equatable {
        /// The user name.
        public var userName: String
        /// The emailed code.
        public var code: String
        /// The activation of `userName` with `code`.
        public init(userName: String, code: String) {
            self.userName = userName
            self.code = code
        }
    }

    /// A login.
    public struct LogIn: Codable, Sendable, Equatable {
        /// The user name.
        public var userName: String
        /// The password.
        public var password: String
        /// A login of `userName`.
        public init(userName: String, password: String) {
            self.userName = userName
            self.password = password
        }
    }

    /// A refresh token.
    public struct RefreshToken: Codable, Sendable, Equatable {
        /// The refresh token.
        public var refreshToken: String
        /// A body carrying `refreshToken`.
        public init(refreshToken: String) { self.refreshToken = refreshToken }
    }

    /// An email address.
    public struct Email: Codable, Sendable, Equatable {
        /// The address.
        public var email: String
        /// A body naming `email`.
        public init(email: String) { self.email = email }
    }

    /// A password reset.
    public struct PasswordReset: Codable, Sendable, Equatable {
        /// The account's email address.
        public var email: String
        /// The emailed code.
        public var code: String
        /// The new password.
        public var newPassword: String
        /// A reset of `email`'s password.
        public init(email: String, code: String, newPassword: String) {
            self.email = email
            self.code = code
            self.newPassword = newPassword
        }
    }

    /// Another endpoint of the caller's user.
    public struct Target: Codable, Sendable, Equatable {
        /// The endpoint id.
        public var target: String
        /// A body naming `target`.
        public init(target: String) { self.target = target }
    }

    /// A nickname for one of the user's endpoints.
    public struct Nickname: Codable, Sendable, Equatable {
        /// The endpoint id.
        public var target: String
        /// The nickname.
        public var nickname: String
        /// `target`'s new nickname.
        public init(target: String, nickname: String) {
            self.target = target
            self.nickname = nickname
        }
    }

    /// A removal of one of the user's endpoints.
    public struct Removal: Codable, Sendable, Equatable {
        /// The endpoint to remove.
        public var target: String
        /// The removing endpoint's signature, for another endpoint.
        public var signature: Data?
        /// `target`'s removal.
        public init(target: String, signature: Data?) {
            self.target = target
            self.signature = signature
        }
    }

    /// An endpoint's credential.
    public struct Credential: Codable, Sendable, Equatable {
        /// The credential's bytes.
        public var credential: Data
        /// A body carrying `credential`.
        public init(credential: Data) { self.credential = credential }
    }

    /// An approval of one of the user's endpoints.
    public struct Approval: Codable, Sendable, Equatable {
        /// The approved endpoint.
        public var target: String
        /// The signed approval.
        public var approval: Data
        /// `target`'s approval.
        public init(target: String, approval: Data) {
            self.target = target
            self.approval = approval
        }
    }

    /// The endpoint list.
    public struct Endpoints: Codable, Sendable, Equatable {
        /// The endpoints, oldest first.
        public var endpoints: [EndpointInfo]
        /// A list.
        public init(endpoints: [EndpointInfo]) { self.endpoints = endpoints }
    }

    /// A key blob's name.
    public struct BlobName: Codable, Sendable, Equatable {
        /// The name.
        public var name: String
        /// A body naming blob `name`.
        public init(name: String) { self.name = name }
    }

    /// A key blob write.
    public struct PutBlob: Codable, Sendable, Equatable {
        /// The name.
        public var name: String
        /// The new contents.
        public var data: Data
        /// The version it replaces (absent: it must not exist yet).
        public var expectedVersion: Int?
        /// A write of blob `name`.
        public init(name: String, data: Data, expectedVersion: Int?) {
            self.name = name
            self.data = data
            self.expectedVersion = expectedVersion
        }
    }

    /// A version number.
    public struct Version: Codable, Sendable, Equatable {
        /// The version.
        public var version: Int
        /// A body carrying `version`.
        public init(version: Int) { self.version = version }
    }

    /// Several blob writes.
    public struct PutBlobs: Codable, Sendable, Equatable {
        /// The writes, all or none.
        public var writes: [KeyBlobWrite]
        /// A request.
        public init(writes: [KeyBlobWrite]) { self.writes = writes }
    }

    /// The new versions of several blobs.
    public struct Versions: Codable, Sendable, Equatable {
        /// In the order of the writes.
        public var versions: [Int]
        /// An answer.
        public init(versions: [Int]) { self.versions = versions }
    }

    /// A passcode attempt: the blinded, stretched passcode.
    public struct BlindedPasscode: Codable, Sendable, Equatable {
        /// The blinded element (a compressed P-256 point).
        public var blindedElement: Data
        /// The passcode key the backup was made with; nil for the current one.
        public var keyID: String?
        /// A request.
        public init(blindedElement: Data, keyID: String?) {
            self.blindedElement = blindedElement
            self.keyID = keyID
        }
    }

    /// A reset request, signed by the current identity key or not.
    public struct ResetRequest: Codable, Sendable, Equatable {
        /// The signature over ``identityResetMessage(userID:endpointID:keyVersion:)``, if any.
        public var signature: Data?
        /// A request.
        public init(signature: Data?) { self.signature = signature }
    }

    /// A pending reset, or none.
    public struct PendingReset: Codable, Sendable, Equatable {
        /// The reset, if one is pending.
        public var pending: PendingIdentityReset?
        /// An answer.
        public init(pending: PendingIdentityReset?) { self.pending = pending }
    }

    /// An unlock proof.
    public struct UnlockProof: Codable, Sendable, Equatable {
        /// The challenge from the management blob's fetch.
        public var challenge: Data
        /// The identity key's signature over ``unlockProofMessage(userID:endpointID:challenge:)``.
        public var signature: Data
        /// A proof.
        public init(challenge: Data, signature: Data) {
            self.challenge = challenge
            self.signature = signature
        }
    }

    /// A commit to order.
    public struct PostCommit: Codable, Sendable, Equatable {
        /// The chat.
        public var chatID: String
        /// The epoch the commit was made in.
        public var epoch: Int64
        /// The commit (an `MLSMessage`).
        public var commit: Data
        /// The Welcome for the added members, if any.
        public var welcome: Data?
        /// Users the commit adds.
        public var add: [String]
        /// Users the commit removes.
        public var remove: [String]
        /// True when the commit replaces the commits ordered since `epoch`, which the members
        /// refused (an admin's only); absent otherwise.
        public var replacingRefused: Bool?
        /// A body.
        public init(
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
    public struct Epoch: Codable, Sendable, Equatable {
        /// The epoch.
        public var epoch: Int64
        /// A body carrying `epoch`.
        public init(epoch: Int64) { self.epoch = epoch }
    }

    /// KeyPackages to keep for the caller's endpoint.
    public struct PublishKeyPackages: Codable, Sendable, Equatable {
        /// One-time KeyPackages.
        public var keyPackages: [Data]
        /// A last-resort KeyPackage, replacing the previous.
        public var lastResort: Data?
        /// A body.
        public init(keyPackages: [Data], lastResort: Data?) {
            self.keyPackages = keyPackages
            self.lastResort = lastResort
        }
    }

    /// A count.
    public struct Count: Codable, Sendable, Equatable {
        /// The count.
        public var count: Int
        /// A body carrying `count`.
        public init(count: Int) { self.count = count }
    }

    /// KeyPackages handed out.
    public struct ClaimedKeyPackages: Codable, Sendable, Equatable {
        /// One per endpoint that had one.
        public var keyPackages: [ClaimedKeyPackage]
        /// A body.
        public init(keyPackages: [ClaimedKeyPackage]) { self.keyPackages = keyPackages }
    }

    /// A published identity, or none.
    public struct Identity: Codable, Sendable, Equatable {
        /// The identity, absent when the user has none.
        public var identity: PublishedIdentity?
        /// A body carrying `identity`.
        public init(identity: PublishedIdentity?) { self.identity = identity }
    }

    /// A new chat.
    public struct CreateChat: Codable, Sendable, Equatable {
        /// The chat id the creator chose.
        public var chatID: String
        /// The other members.
        public var participants: [String]
        /// Keys and events that go out with the chat.
        public var posts: [ChatPost]
        /// A new chat.
        public init(chatID: String, participants: [String], posts: [ChatPost]) {
            self.chatID = chatID
            self.participants = participants
            self.posts = posts
        }
    }

    /// A membership change.
    public struct UpdateMembers: Codable, Sendable, Equatable {
        /// The chat.
        public var chatID: String
        /// Users to add.
        public var add: [String]
        /// Users to remove.
        public var remove: [String]
        /// Keys and events that go out with the change.
        public var posts: [ChatPost]
        /// A change.
        public init(chatID: String, add: [String], remove: [String], posts: [ChatPost]) {
            self.chatID = chatID
            self.add = add
            self.remove = remove
            self.posts = posts
        }
    }

    /// A post.
    public struct Post: Codable, Sendable, Equatable {
        /// The chat.
        public var chatID: String
        /// What it is.
        public var kind: MailboxKind
        /// The ciphertext.
        public var payload: Data
        /// The one member it is for (chat keys), absent for everyone.
        public var recipient: String?
        /// The sender's id for it, which makes a retry idempotent.
        public var clientID: String?
        /// A post.
        public init(chatID: String, kind: MailboxKind, payload: Data, recipient: String?, clientID: String?) {
            self.chatID = chatID
            self.kind = kind
            self.payload = payload
            self.recipient = recipient
            self.clientID = clientID
        }
    }

    /// A mailbox read.
    public struct MailboxQuery: Codable, Sendable, Equatable {
        /// The last sequence number already read.
        public var after: Int64
        /// The most entries to return (1 to 1,000).
        public var limit: Int
        /// Seconds to wait for an entry when there is none (0 to 30).
        public var wait: Int
        /// A read.
        public init(after: Int64, limit: Int, wait: Int) {
            self.after = after
            self.limit = limit
            self.wait = wait
        }
    }

    /// Mailbox entries.
    public struct Entries: Codable, Sendable, Equatable {
        /// The entries, oldest first.
        public var entries: [MailboxEntry]
        /// A body carrying `entries`.
        public init(entries: [MailboxEntry]) { self.entries = entries }
    }

    /// A chat id.
    public struct ChatID: Codable, Sendable, Equatable {
        /// The chat.
        public var chatID: String
        /// A body naming `chatID`.
        public init(chatID: String) { self.chatID = chatID }
    }

    /// `POST /v1/reports`.
    public struct ReportRequest: Codable, Sendable, Equatable {
        /// The chat.
        public var chatID: String
        /// The reported user.
        public var userID: String
        /// Why.
        public var reason: String
        /// The revealed messages.
        public var messages: [ReportedMessage]
        /// A report.
        public init(chatID: String, userID: String, reason: String, messages: [ReportedMessage]) {
            self.chatID = chatID
            self.userID = userID
            self.reason = reason
            self.messages = messages
        }
    }

    /// `POST /v1/blobs/create`.
    public struct CreateBlob: Codable, Sendable, Equatable {
        /// The chat.
        public var chatID: String
        /// The blob's id.
        public var blobID: String
        /// Its size in bytes.
        public var size: Int64
        /// A body starting blob `blobID` of `size` bytes in `chatID`.
        public init(chatID: String, blobID: String, size: Int64) {
            self.chatID = chatID
            self.blobID = blobID
            self.size = size
        }
    }

    /// A body or query naming one blob.
    public struct BlobID: Codable, Sendable, Equatable {
        /// The blob's id.
        public var blobID: String
        /// Names `blobID`.
        public init(blobID: String) { self.blobID = blobID }
    }

    /// The query of an upload: the blob and where its part goes.
    public struct BlobPart: Codable, Sendable, Equatable {
        /// The blob's id.
        public var blobID: String
        /// Where the part goes.
        public var offset: Int64
        /// The part of `blobID` at `offset`.
        public init(blobID: String, offset: Int64) {
            self.blobID = blobID
            self.offset = offset
        }
    }

    /// `POST /v1/blocks/set`.
    public struct SetBlocked: Codable, Sendable, Equatable {
        /// The user blocked or unblocked.
        public var userID: String
        /// Whether they are blocked from now on.
        public var blocked: Bool
        /// A body blocking (or unblocking) `userID`.
        public init(userID: String, blocked: Bool) {
            self.userID = userID
            self.blocked = blocked
        }
    }

    /// `GET /v1/blocks`'s answer.
    public struct BlockedUsers: Codable, Sendable, Equatable {
        /// The users, sorted.
        public var users: [String]
        /// A body listing `users`.
        public init(users: [String]) { self.users = users }
    }

    /// A report's id.
    public struct ReportID: Codable, Sendable, Equatable {
        /// The id.
        public var id: Int64
        /// A body naming report `id`.
        public init(id: Int64) { self.id = id }
    }

    /// `GET /v1/admin/reports`.
    public struct ReportsQuery: Codable, Sendable, Equatable {
        /// The most reports, newest first.
        public var limit: Int
        /// A query.
        public init(limit: Int) { self.limit = limit }
    }

    /// The reports.
    public struct Reports: Codable, Sendable, Equatable {
        /// Newest first.
        public var reports: [Report]
        /// A list.
        public init(reports: [Report]) { self.reports = reports }
    }

    /// An infraction id.
    public struct InfractionID: Codable, Sendable, Equatable {
        /// The infraction.
        public var id: Int64
        /// A body naming infraction `id`.
        public init(id: Int64) { self.id = id }
    }

    // MARK: Operators

    /// The accounts of the sign-up assistant.
    public struct Accounts: Codable, Sendable, Equatable {
        /// The accounts.
        public var accounts: [AccountSummary]
        /// A list.
        public init(accounts: [AccountSummary]) { self.accounts = accounts }
    }

    /// The users with endpoints.
    public struct EndpointUsers: Codable, Sendable, Equatable {
        /// The users and how many endpoints each has.
        public var users: [EndpointUser]
        /// A list.
        public init(users: [EndpointUser]) { self.users = users }
    }

    /// An endpoint id.
    public struct EndpointID: Codable, Sendable, Equatable {
        /// The endpoint.
        public var endpointID: String
        /// A body naming `endpointID`.
        public init(endpointID: String) { self.endpointID = endpointID }
    }

    /// An infraction to issue, or a ban.
    public struct Sanction: Codable, Sendable, Equatable {
        /// The user.
        public var userID: String
        /// Why.
        public var reason: String
        /// A sanction of `userID`.
        public init(userID: String, reason: String) {
            self.userID = userID
            self.reason = reason
        }
    }

    /// A timeout.
    public struct TimeOut: Codable, Sendable, Equatable {
        /// The user.
        public var userID: String
        /// How long, in seconds.
        public var seconds: Int
        /// Why.
        public var reason: String
        /// A timeout of `userID`.
        public init(userID: String, seconds: Int, reason: String) {
            self.userID = userID
            self.seconds = seconds
            self.reason = reason
        }
    }

    /// An outbox read.
    public struct OutboxQuery: Codable, Sendable, Equatable {
        /// Only mail to this address (absent: all).
        public var recipient: String?
        /// The most mails, newest first.
        public var limit: Int
        /// A read.
        public init(recipient: String?, limit: Int) {
            self.recipient = recipient
            self.limit = limit
        }
    }

    /// Mail the domain sent.
    public struct Mails: Codable, Sendable, Equatable {
        /// The mail, newest first.
        public var mails: [Mail]
        /// A list.
        public init(mails: [Mail]) { self.mails = mails }
    }

    /// The trusted external issuers.
    public struct Issuers: Codable, Sendable, Equatable {
        /// The issuers.
        public var issuers: [ExternalIssuer]
        /// A list.
        public init(issuers: [ExternalIssuer]) { self.issuers = issuers }
    }

    /// An external issuer to trust, with its keys.
    public struct AddIssuer: Codable, Sendable, Equatable {
        /// Its `iss`.
        public var issuer: String
        /// The audience its tokens must name.
        public var audience: String
        /// Its JWKS document (JSON text).
        public var jwks: String
        /// An issuer.
        public init(issuer: String, audience: String, jwks: String) {
            self.issuer = issuer
            self.audience = audience
            self.jwks = jwks
        }
    }

    /// An issuer's name.
    public struct IssuerName: Codable, Sendable, Equatable {
        /// Its `iss`.
        public var issuer: String
        /// A body naming `issuer`.
        public init(issuer: String) { self.issuer = issuer }
    }

    /// Which of the domain's own issuers.
    public struct IssuerKind: Codable, Sendable, Equatable {
        /// `test` or `accounts`.
        public var kind: String
        /// A body naming `kind`.
        public init(kind: String) { self.kind = kind }
    }
}
