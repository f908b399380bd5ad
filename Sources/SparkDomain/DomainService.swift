public import Foundation

/// The whole contract between an endpoint (the SDK) and the domain (the service). Every type it
/// uses is `Codable` and `Sendable`, and no call depends on process memory, so the same contract
/// be served over the network (``RemoteDomain``). Calls that act for a user carry that user's
/// token and the calling endpoint's id, which must be registered to that user (the exceptions:
/// ``validate(token:)`` and ``registerEndpoint(token:registration:)``, which come before).
public protocol DomainService: Sendable {
    /// The domain's id; tokens for this domain name it as their audience.
    var domainID: String { get }

    /// The domain's policy.
    func policy() async throws -> DomainPolicy

    /// Validates a token and returns who it proves the caller is.
    func validate(token: String) async throws -> VerifiedIdentity

    // MARK: Test auth (Spark's sandbox)

    /// A token for any user id, signed by the domain's test issuer. Refused with
    /// ``DomainError/Code/userAuthenticationRequired`` when the domain requires user
    /// authentication.
    func testToken(userID: String) async throws -> IssuedToken

    // MARK: The sign-up and login assistant

    /// Creates an account that must be activated with the code sent by email.
    func signUp(_ request: SignUpRequest) async throws
    /// Activates an account with the code from its activation email.
    func activate(userName: String, code: String) async throws
    /// Sends a new activation code, replacing the old one.
    func resendActivationCode(userName: String) async throws
    /// Logs an activated account in: an id token and a refresh token.
    func logIn(userName: String, password: String) async throws -> IssuedToken
    /// A new id token (and a new refresh token; the old one stops working).
    func refresh(refreshToken: String) async throws -> IssuedToken
    /// Revokes a refresh token (logging out).
    func revoke(refreshToken: String) async throws
    /// Emails a password-reset code if an account has this address; says nothing either way.
    func requestPasswordReset(email: String) async throws
    /// Sets a new password with the emailed code; existing refresh tokens stop working.
    func resetPassword(email: String, code: String, newPassword: String) async throws

    // MARK: Endpoints

    /// Registers this device as one of the token's user's endpoints, or reports why it cannot
    /// be yet (another device holds the profile, or the user has the maximum of endpoints).
    func registerEndpoint(token: String, registration: EndpointRegistration) async throws -> RegistrationOutcome
    /// The user's registered endpoints.
    func endpoints(token: String, endpointID: String) async throws -> [EndpointInfo]
    /// Gives one of the user's endpoints (`target`) a nickname (at most 64 characters).
    func setEndpointNickname(token: String, endpointID: String, target: String, nickname: String) async throws
    /// Removes one of the user's endpoints (`target`, this one included); it learns on its next
    /// call. Removing another endpoint takes `signature`, by this endpoint's MLS key over
    /// ``EndpointRemoval/signedBytes(user:remover:target:)``, and this endpoint must be approved
    /// from the user's oldest (``DeviceApprovalGraph/approvedFromOldest``): a stolen token evicts
    /// no device (the operator can remove any).
    func deregisterEndpoint(token: String, endpointID: String, target: String, signature: Data?) async throws
    /// Publishes this endpoint's credential (its MLS key, signed by the user's identity key),
    /// listed in ``EndpointInfo/credential`` for the user's other devices to approve it by.
    func publishEndpointCredential(token: String, endpointID: String, credential: Data) async throws
    /// Keeps an approval of the user's endpoint `target`, signed by this endpoint, listed in
    /// ``EndpointInfo/approvals`` (an approval by an endpoint since removed is not listed).
    func approveEndpoint(token: String, endpointID: String, target: String, approval: Data) async throws
    /// Confirms that `endpointID` is still registered and marks it seen; throws
    /// ``DomainError/Code/endpointRemoved`` with the reason when it is not.
    func checkIn(token: String, endpointID: String) async throws -> EndpointInfo

    // MARK: Key store and identity directory

    /// The domain's key-transparency keys: the VRF key that hides the log's labels and the key
    /// that signs its tree heads.
    func transparencyKeys(token: String, endpointID: String) async throws -> TransparencyKeys
    /// `userID`'s identity as the transparency log holds it: the latest signed head, the
    /// consistency proof from the head of `since` entries the caller holds, and the search proof
    /// of the user's latest logged value (``IdentityProof/verify(userID:keys:previous:)``).
    func identityProof(token: String, endpointID: String, userID: String, since: UInt64?, auditor: Data?) async throws
        -> IdentityProof
    /// The latest signed tree head, its consistency proof from the head of `since` entries, and
    /// that head as the domain signed it.
    func transparencyHeads(token: String, endpointID: String, since: UInt64?) async throws -> TransparencyHeads

    /// Reads one of the user's key blobs (useless without the passcode and an evaluation).
    func fetchKeyBlob(token: String, endpointID: String, name: String) async throws -> BlobFetch
    /// Writes a key blob if its current version is `expectedVersion` (nil: it must not exist
    /// yet); returns the new version. A lost race is ``DomainError/Code/conflict``. Once the user
    /// has published an identity, `proof` (the identity key's signature over this write) is
    /// required: without it, or with a bad one, ``DomainError/Code/invalidProof``.
    func putKeyBlob(token: String, endpointID: String, name: String, data: Data, expectedVersion: Int?, proof: KeyBlobProof?)
        async throws -> Int
    /// Writes several key blobs at once, each with compare-and-swap: all or none (a passcode
    /// change re-wraps both blobs). Returns the new versions in order. `proof` as for
    /// ``putKeyBlob(token:endpointID:name:data:expectedVersion:proof:)``, over all the writes.
    func putKeyBlobs(token: String, endpointID: String, writes: [KeyBlobWrite], proof: KeyBlobProof?) async throws -> [Int]
    /// One passcode attempt: the domain's OPRF evaluations of the blinded, stretched passcode
    /// under the user's key `keyID` (nil: the current one) and, if that is not current, under the
    /// current key too. Attempts not followed by a proof are limited per user per hour.
    func evaluatePasscode(token: String, endpointID: String, blindedElement: Data, keyID: String?) async throws
        -> PasscodeEvaluation
    /// Proves the keys were unlocked: an Ed25519 signature by the published identity key over
    /// the challenge of one of this endpoint's passcode attempts. Each challenge works once. An
    /// endpoint waiting to take the profile over becomes the active one.
    func proveUnlock(token: String, endpointID: String, challenge: Data, signature: Data) async throws
    /// Proves the unlock as ``proveUnlock(token:endpointID:challenge:signature:)`` does, with the
    /// signature over ``passcodeRetireMessage(userID:endpointID:challenge:version:)``, and makes
    /// `version` (the user's current passcode key version, or the next) the current one: the
    /// domain then evaluates passcodes under no older version, so a backup made before a passcode
    /// change opens nothing, even with the old passcode.
    func retirePasscodeKeys(token: String, endpointID: String, challenge: Data, signature: Data, version: Int) async throws
    /// Publishes the user's public identity (signed by its own signing key).
    func publishIdentity(token: String, endpointID: String, identity: PublishedIdentity) async throws
    /// Looks up a user's published identity.
    func identity(token: String, endpointID: String, userID: String) async throws -> PublishedIdentity?
    /// Resets the user's identity: at once with `signature` (the current identity key's, over
    /// ``identityResetMessage(userID:endpointID:keyVersion:)``), otherwise after the policy's
    /// delay, which the first request starts and a request after it completes. Completing
    /// forgets the keys and identity and deregisters every other endpoint of the user.
    func resetIdentity(token: String, endpointID: String, signature: Data?) async throws -> IdentityResetOutcome
    /// Cancels the user's pending identity reset (from any of their endpoints).
    func cancelIdentityReset(token: String, endpointID: String) async throws
    /// A user's pending identity reset, if any (their devices and contacts look).
    func pendingIdentityReset(token: String, endpointID: String, userID: String) async throws -> PendingIdentityReset?
    /// Stores KeyPackages of the caller's endpoint for others to add it to chats: one-time
    /// ones (at most 100 kept; a repeat of one already kept is
    /// not kept twice) and, when given, a last-resort one that replaces the previous. Returns
    /// how many one-time ones the endpoint has now.
    func publishKeyPackages(token: String, endpointID: String, keyPackages: [Data], lastResort: Data?) async throws -> Int
    /// One KeyPackage for each registered endpoint of `userID` that has one: of MLS cipher suite
    /// `suite` where the endpoint has one, else of suite 1 (none of suite 1 under
    /// ``DomainPolicy/requirePostQuantum``); a one-time one, which is then gone, or else the
    /// last-resort one.
    func claimKeyPackages(token: String, endpointID: String, userID: String, suite: UInt16) async throws
        -> [ClaimedKeyPackage]
    /// How many one-time KeyPackages of MLS cipher suite `suite` the caller's endpoint has left (it
    /// publishes more when low).
    func keyPackageCount(token: String, endpointID: String, suite: UInt16) async throws -> Int
    /// The highest identity key version the user ever published (0 if none); a new identity
    /// must be published with a higher one.
    func identityKeyVersion(token: String, endpointID: String) async throws -> Int

    // MARK: Chats and mailboxes

    /// Creates a chat whose members are the caller (an admin) and `participants`; `posts` (chat
    /// keys and events, as ``post(token:endpointID:chatID:kind:payload:recipient:clientID:)``
    /// takes them) reach the members' mailboxes right after the membership entry, in the same
    /// transaction.
    func createChat(token: String, endpointID: String, chatID: String, participants: [String], posts: [ChatPost]) async throws
        -> ChatInfo
    /// Adds and removes members: admins may do both; anyone may remove themselves (leave).
    /// `posts` (chat keys for the members after the change, events) go out with the change,
    /// in the same transaction.
    func updateMembers(
        token: String, endpointID: String, chatID: String, add: [String], remove: [String], posts: [ChatPost]
    ) async throws -> ChatInfo
    /// Posts to a chat: the entry reaches every member's mailbox (or only `recipient`'s, for a
    /// chat key). Messages get the chat's next number and are refused while the sender is timed
    /// out or banned. `clientID` makes a retried post idempotent.
    func post(
        token: String, endpointID: String, chatID: String, kind: MailboxKind, payload: Data, recipient: String?, clientID: String?
    ) async throws -> PostReceipt
    /// Posts a sender's messages (``MailboxKind/message``) to a chat in the order given, as one:
    /// each is numbered after the one before it, in one transaction. The first one refused (a
    /// commit overtook its epoch, a limit) ends the batch: the answer holds the receipts of the
    /// ones before it and that refusal, and the ones after it were not tried. A message whose
    /// `clientID` was posted before is answered with its first receipt. At most 64 messages.
    func postMessages(token: String, endpointID: String, chatID: String, messages: [MessagePost]) async throws
        -> PostBatchReceipt
    /// Orders an MLS commit (MLS's Delivery Service): accepted only while the chat is at `epoch`,
    /// so exactly one commit wins each epoch (a loser gets ``DomainError/Code/conflict``,
    /// processes the winner and tries again); a repeat of the accepted one is answered as it was.
    /// The commit goes to every member before and after, `welcome` to the users in `add`, and
    /// `add`/`remove` change the members as ``updateMembers(token:endpointID:chatID:add:remove:posts:)``
    /// does (admins only, but anyone may remove themselves). Returns the chat's new epoch.
    ///
    /// With `replacingRefused`, the commit takes the place of every commit ordered since `epoch`
    /// (one that every member refused leaves the chat stuck at `epoch`): only an admin may, and
    /// only over commits no admin made. The chat's epoch becomes `epoch + 1`.
    func postCommit(
        token: String, endpointID: String, chatID: String, epoch: Int64, commit: Data, welcome: Data?, add: [String],
        remove: [String], replacingRefused: Bool
    ) async throws -> Int64
    /// Reads the caller's mailbox after `cursor`, oldest first. With a `wait` (at most
    /// ``maximumMailboxWait``), an empty mailbox is a long-poll: the call returns as soon as an
    /// entry for this user arrives, or empty when the wait ends or the task is cancelled.
    func readMailbox(token: String, endpointID: String, after cursor: Int64, limit: Int, wait: Duration) async throws
        -> [MailboxEntry]
    /// The chat's members, for a member.
    func chat(token: String, endpointID: String, chatID: String) async throws -> ChatInfo

    // MARK: Moderation (the user's side)

    /// The caller's moderation status and infractions.
    func userStatus(token: String, endpointID: String) async throws -> UserStatus
    /// Dismisses one of the caller's infractions.
    func dismissInfraction(token: String, endpointID: String, id: Int64) async throws
    /// Reports `user`, a member of the chat the caller is in, to the operator with the messages
    /// the caller reveals (their plaintext; at most 50, each of `user`'s); returns the report's id.
    func report(token: String, endpointID: String, chatID: String, user: String, reason: String, messages: [ReportedMessage])
        async throws -> Int64

    /// Starts an attachment's blob of `size` bytes (chosen id, 32 lowercase hexadecimal digits)
    /// in a chat the caller is a member of, within the policy's size cap and the user's quota;
    /// a repeat answers where the upload stands.
    func createBlob(token: String, endpointID: String, chatID: String, blobID: String, size: Int64) async throws
        -> BlobStatus
    /// Uploads the part of the caller's blob at `offset` (where the upload stands); a part
    /// already stored is answered as it stands.
    func uploadBlob(token: String, endpointID: String, blobID: String, offset: Int64, bytes: Data) async throws
        -> BlobStatus
    /// Where a blob's upload stands (for its uploader and the chat's members).
    func blobStatus(token: String, endpointID: String, blobID: String) async throws -> BlobStatus
    /// Up to `length` bytes (at most a part) of a whole blob from `offset`, for a member of its
    /// chat.
    func downloadBlob(token: String, endpointID: String, blobID: String, offset: Int64, length: Int) async throws -> Data
    /// Deletes one of the caller's blobs (a recall); one already gone is not an error.
    func deleteBlob(token: String, endpointID: String, blobID: String) async throws

    /// Blocks a user for the caller (or unblocks them): the domain then refuses a chat they start
    /// with the caller, or their adding the caller to one, and the caller's devices drop what
    /// they send. The caller's other devices are told to read the list again.
    func setBlocked(token: String, endpointID: String, userID: String, blocked: Bool) async throws
    /// The users the caller blocked, sorted.
    func blockedUsers(token: String, endpointID: String) async throws -> [String]
}

extension DomainService {
    /// One KeyPackage for each registered endpoint of `userID`, of suite 1.
    public func claimKeyPackages(token: String, endpointID: String, userID: String) async throws -> [ClaimedKeyPackage] {
        try await claimKeyPackages(token: token, endpointID: endpointID, userID: userID, suite: 1)
    }

    /// How many one-time KeyPackages of suite 1 the caller's endpoint has left.
    public func keyPackageCount(token: String, endpointID: String) async throws -> Int {
        try await keyPackageCount(token: token, endpointID: endpointID, suite: 1)
    }

    /// A key-blob write without a proof: what a user without a published identity (a first
    /// device, before it publishes) may do.
    public func putKeyBlob(token: String, endpointID: String, name: String, data: Data, expectedVersion: Int?) async throws
        -> Int
    {
        try await putKeyBlob(
            token: token, endpointID: endpointID, name: name, data: data, expectedVersion: expectedVersion, proof: nil)
    }

    /// Several key-blob writes without a proof (see ``putKeyBlob(token:endpointID:name:data:expectedVersion:)``).
    public func putKeyBlobs(token: String, endpointID: String, writes: [KeyBlobWrite]) async throws -> [Int] {
        try await putKeyBlobs(token: token, endpointID: endpointID, writes: writes, proof: nil)
    }

    /// Posts the messages one at a time, in order, until one is refused: the batch's answer for
    /// a domain that has no batch of its own.
    public func postMessages(token: String, endpointID: String, chatID: String, messages: [MessagePost]) async throws
        -> PostBatchReceipt
    {
        var batch = PostBatchReceipt(receipts: [], refusal: nil)
        for message in messages {
            do {
                batch.receipts.append(
                    try await post(
                        token: token, endpointID: endpointID, chatID: chatID, kind: .message, payload: message.payload,
                        recipient: nil, clientID: message.clientID))
            } catch let refusal as DomainError {
                batch.refusal = refusal
                break
            }
        }
        return batch
    }

    /// Orders a commit for the chat's current epoch (see
    /// ``postCommit(token:endpointID:chatID:epoch:commit:welcome:add:remove:replacingRefused:)``).
    public func postCommit(
        token: String, endpointID: String, chatID: String, epoch: Int64, commit: Data, welcome: Data?, add: [String],
        remove: [String]
    ) async throws -> Int64 {
        try await postCommit(
            token: token, endpointID: endpointID, chatID: chatID, epoch: epoch, commit: commit, welcome: welcome, add: add,
            remove: remove, replacingRefused: false)
    }

    /// Removes this endpoint (`target` is `endpointID`), or asks without a signature (refused for
    /// another endpoint).
    public func deregisterEndpoint(token: String, endpointID: String, target: String) async throws {
        try await deregisterEndpoint(token: token, endpointID: endpointID, target: target, signature: nil)
    }

    /// Changes the members with no posts of their own.
    public func updateMembers(token: String, endpointID: String, chatID: String, add: [String], remove: [String]) async throws
        -> ChatInfo
    {
        try await updateMembers(token: token, endpointID: endpointID, chatID: chatID, add: add, remove: remove, posts: [])
    }

    /// Creates a chat with no posts of its own.
    public func createChat(token: String, endpointID: String, chatID: String, participants: [String]) async throws -> ChatInfo {
        try await createChat(token: token, endpointID: endpointID, chatID: chatID, participants: participants, posts: [])
    }

    /// Reads the mailbox without waiting.
    public func readMailbox(token: String, endpointID: String, after cursor: Int64, limit: Int) async throws
        -> [MailboxEntry]
    {
        try await readMailbox(token: token, endpointID: endpointID, after: cursor, limit: limit, wait: .zero)
    }
}

/// The longest a mailbox read may wait for an entry (a long-poll).
public let maximumMailboxWait = Duration.seconds(30)

/// What a new account needs (SmartFoxServer's sign-up assistant fields).
public struct SignUpRequest: Sendable, Codable, Equatable, CustomStringConvertible {
    /// The user name, which becomes the user id.
    public var userName: String
    /// The password (checked against ``AccountPolicy/checkPassword(_:userName:)``).
    public var password: String
    /// Where activation and recovery codes are sent.
    public var email: String
    /// An ISO 3166-1 alpha-2 country code.
    public var country: String
    /// The user's age.
    public var age: Int

    /// A request with every field.
    public init(userName: String, password: String, email: String, country: String, age: Int) {
        self.userName = userName
        self.password = password
        self.email = email
        self.country = country
        self.age = age
    }

    /// Never shows the password.
    public var description: String { "SignUpRequest(userName: \(userName), email: \(email), country: \(country), age: \(age))" }
}

/// A domain's rules, set when it is created and changed by its operator.
public struct DomainPolicy: Sendable, Codable, Equatable {
    /// OWASP's recommended PBKDF2-HMAC-SHA-256 iteration count for passwords (2023): the default,
    /// and the floor unless `allowUnsafePasswordHashing` is set.
    public static let owaspPasswordIterations = 600_000

    /// Whether users must prove who they are; when false, test tokens are accepted (sandbox).
    public var userAuthenticationEnabled: Bool
    /// The most endpoints one user may have registered.
    public var maximumEndpoints: Int
    /// Whether one user may have several active endpoints at once; if not, a second device must
    /// take the profile over (device switch).
    public var multipleActiveEndpoints: Bool
    /// PBKDF2 iterations for account passwords.
    public var passwordIterations: Int
    /// How long issued id tokens last, in seconds.
    public var tokenLifetime: Int
    /// How long refresh tokens last, in seconds.
    public var refreshTokenLifetime: Int
    /// How long activation codes last, in seconds.
    public var activationCodeLifetime: Int
    /// How long password-reset codes last, in seconds.
    public var resetCodeLifetime: Int
    /// Wrong tries allowed per activation or reset code.
    public var codeAttempts: Int
    /// Failed logins for one account before each further failure locks it for a while.
    public var loginAttemptsBeforeThrottle: Int
    /// Passcode evaluations per user per hour not followed by a proof of unlock (each one a
    /// passcode guess).
    public var unlockAttemptsPerHour: Int
    /// Seconds a reset of a user's identity (a forgotten passcode, no current key to sign it)
    /// waits before it takes effect, so the user's devices and contacts see it and the user can
    /// cancel it: a stolen token alone can start it, never skip it. Seven days by default.
    public var identityResetDelay: Int
    /// Activation and reset code guesses per account per hour, across re-sent codes.
    public var codeAttemptsPerHour: Int
    /// Seconds a mailbox entry is kept at most (30 days by default). Entries every device of the
    /// user has read past go sooner. A device offline longer misses what was deleted: it cannot
    /// follow its chats' groups past a deleted commit, and is removed and added again by another
    /// device of its user (or, with none, set up again).
    public var mailboxRetention: Int
    /// Posts (messages, events, receipts) one user may make a minute, per instance (600).
    public var postsPerMinute: Int
    /// Bytes one user's posts may write into mailboxes a minute (each post's payload times its
    /// recipients), per instance (64 MiB).
    public var postedBytesPerMinute: Int
    /// Bytes of posts one sender may leave unread in one user's mailbox (32 MiB): past it the
    /// sender's posts that reach that user are refused (``DomainError/Code/tooManyAttempts``,
    /// retry after a minute) until the user's devices read, whatever the minute's budget. So a
    /// chat that adds a user who never reads cannot grow the domain without bound.
    public var unreadBytesPerSender: Int
    /// Commits one user may post a minute, per instance (120).
    public var commitsPerMinute: Int
    /// Chats one user may create an hour, per instance (100).
    public var chatsPerHour: Int
    /// The largest file one attachment may carry, in bytes (100 MiB); its blob is larger by the
    /// encryption's overhead.
    public var maximumAttachmentSize: Int
    /// The bytes of attachments' blobs one user may keep in the domain at once (1 GiB).
    public var attachmentQuota: Int64
    /// Whether only post-quantum MLS is taken (false by default): KeyPackages of the X-Wing suite
    /// only are published and handed out, and a Welcome into a group of another suite is refused.
    /// Set it once every device of the deployment runs post-quantum chats; classic chats then add
    /// no one until they move.
    public var requirePostQuantum: Bool

    /// The defaults: sandbox auth, 5 endpoints, several active, OWASP password hashing, one-hour
    /// tokens, 30-day refresh tokens, one-day activation and one-hour reset codes with 5 tries,
    /// throttling after 5 failed logins, mailbox entries kept 30 days at most.
    public init(
        userAuthenticationEnabled: Bool = false, maximumEndpoints: Int = 5, multipleActiveEndpoints: Bool = true,
        passwordIterations: Int = Self.owaspPasswordIterations, tokenLifetime: Int = 3600,
        refreshTokenLifetime: Int = 30 * 86400, activationCodeLifetime: Int = 86400, resetCodeLifetime: Int = 3600,
        codeAttempts: Int = 5, loginAttemptsBeforeThrottle: Int = 5, unlockAttemptsPerHour: Int = 10,
        identityResetDelay: Int = 7 * 86400, codeAttemptsPerHour: Int = 10, mailboxRetention: Int = 30 * 86400,
        postsPerMinute: Int = 600, postedBytesPerMinute: Int = 64 << 20, unreadBytesPerSender: Int = 32 << 20,
        commitsPerMinute: Int = 120, chatsPerHour: Int = 100,
        maximumAttachmentSize: Int = 100 << 20, attachmentQuota: Int64 = 1 << 30, requirePostQuantum: Bool = false
    ) {
        self.userAuthenticationEnabled = userAuthenticationEnabled
        self.maximumEndpoints = maximumEndpoints
        self.multipleActiveEndpoints = multipleActiveEndpoints
        self.passwordIterations = passwordIterations
        self.tokenLifetime = tokenLifetime
        self.refreshTokenLifetime = refreshTokenLifetime
        self.activationCodeLifetime = activationCodeLifetime
        self.resetCodeLifetime = resetCodeLifetime
        self.codeAttempts = codeAttempts
        self.loginAttemptsBeforeThrottle = loginAttemptsBeforeThrottle
        self.unlockAttemptsPerHour = unlockAttemptsPerHour
        self.identityResetDelay = identityResetDelay
        self.codeAttemptsPerHour = codeAttemptsPerHour
        self.mailboxRetention = mailboxRetention
        self.postsPerMinute = postsPerMinute
        self.postedBytesPerMinute = postedBytesPerMinute
        self.unreadBytesPerSender = unreadBytesPerSender
        self.commitsPerMinute = commitsPerMinute
        self.chatsPerHour = chatsPerHour
        self.maximumAttachmentSize = maximumAttachmentSize
        self.attachmentQuota = attachmentQuota
        self.requirePostQuantum = requirePostQuantum
    }

    /// Decodes a stored policy; settings added after it was stored take their defaults.
    public init(from decoder: any Decoder) throws {
        let defaults = DomainPolicy()
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func value<T: Decodable>(_ key: CodingKeys, _ fallback: T) throws -> T {
            try container.decodeIfPresent(T.self, forKey: key) ?? fallback
        }
        userAuthenticationEnabled = try value(.userAuthenticationEnabled, defaults.userAuthenticationEnabled)
        maximumEndpoints = try value(.maximumEndpoints, defaults.maximumEndpoints)
        multipleActiveEndpoints = try value(.multipleActiveEndpoints, defaults.multipleActiveEndpoints)
        passwordIterations = try value(.passwordIterations, defaults.passwordIterations)
        tokenLifetime = try value(.tokenLifetime, defaults.tokenLifetime)
        refreshTokenLifetime = try value(.refreshTokenLifetime, defaults.refreshTokenLifetime)
        activationCodeLifetime = try value(.activationCodeLifetime, defaults.activationCodeLifetime)
        resetCodeLifetime = try value(.resetCodeLifetime, defaults.resetCodeLifetime)
        codeAttempts = try value(.codeAttempts, defaults.codeAttempts)
        loginAttemptsBeforeThrottle = try value(.loginAttemptsBeforeThrottle, defaults.loginAttemptsBeforeThrottle)
        unlockAttemptsPerHour = try value(.unlockAttemptsPerHour, defaults.unlockAttemptsPerHour)
        identityResetDelay = try value(.identityResetDelay, defaults.identityResetDelay)
        codeAttemptsPerHour = try value(.codeAttemptsPerHour, defaults.codeAttemptsPerHour)
        mailboxRetention = try value(.mailboxRetention, defaults.mailboxRetention)
        postsPerMinute = try value(.postsPerMinute, defaults.postsPerMinute)
        postedBytesPerMinute = try value(.postedBytesPerMinute, defaults.postedBytesPerMinute)
        unreadBytesPerSender = try value(.unreadBytesPerSender, defaults.unreadBytesPerSender)
        commitsPerMinute = try value(.commitsPerMinute, defaults.commitsPerMinute)
        chatsPerHour = try value(.chatsPerHour, defaults.chatsPerHour)
        maximumAttachmentSize = try value(.maximumAttachmentSize, defaults.maximumAttachmentSize)
        attachmentQuota = try value(.attachmentQuota, defaults.attachmentQuota)
        requirePostQuantum = try value(.requirePostQuantum, defaults.requirePostQuantum)
    }

    /// Checks the ranges; `allowUnsafePasswordHashing` permits fewer than OWASP's iterations
    /// (tests only).
    public func validate(allowUnsafePasswordHashing: Bool = false) throws {
        func check(_ ok: Bool, _ what: String) throws {
            if !ok { throw DomainError(.invalidRequest, "domain policy: \(what)") }
        }
        try check((1...100).contains(maximumEndpoints), "maximumEndpoints must be 1...100")
        try check(
            allowUnsafePasswordHashing ? passwordIterations >= 1 : passwordIterations >= Self.owaspPasswordIterations,
            "passwordIterations must be at least \(Self.owaspPasswordIterations)")
        try check(passwordIterations <= 10_000_000, "passwordIterations must be at most 10,000,000")
        try check((60...86400).contains(tokenLifetime), "tokenLifetime must be 60...86400 seconds")
        try check((3600...(365 * 86400)).contains(refreshTokenLifetime), "refreshTokenLifetime must be 1 hour...1 year")
        try check((60...(7 * 86400)).contains(activationCodeLifetime), "activationCodeLifetime must be 1 minute...7 days")
        try check((60...86400).contains(resetCodeLifetime), "resetCodeLifetime must be 1 minute...1 day")
        try check((1...20).contains(codeAttempts), "codeAttempts must be 1...20")
        try check((1...100).contains(loginAttemptsBeforeThrottle), "loginAttemptsBeforeThrottle must be 1...100")
        try check((1...1000).contains(unlockAttemptsPerHour), "unlockAttemptsPerHour must be 1...1000")
        try check((0...(90 * 86400)).contains(identityResetDelay), "identityResetDelay must be 0...90 days")
        try check((1...100).contains(codeAttemptsPerHour), "codeAttemptsPerHour must be 1...100")
        try check((3600...(365 * 86400)).contains(mailboxRetention), "mailboxRetention must be 1 hour...1 year")
        try check((1...1_000_000).contains(postsPerMinute), "postsPerMinute must be 1...1,000,000")
        try check(
            ((1 << 20)...(1 << 40)).contains(postedBytesPerMinute), "postedBytesPerMinute must be 1 MiB...1 TiB")
        try check(
            ((1 << 20)...(1 << 40)).contains(unreadBytesPerSender), "unreadBytesPerSender must be 1 MiB...1 TiB")
        try check((1...1_000_000).contains(commitsPerMinute), "commitsPerMinute must be 1...1,000,000")
        try check((1...1_000_000).contains(chatsPerHour), "chatsPerHour must be 1...1,000,000")
        try check((1024...(4 << 30)).contains(maximumAttachmentSize), "maximumAttachmentSize must be 1 KiB...4 GiB")
        try check(
            (Int64(maximumAttachmentSize)...(1 << 40)).contains(attachmentQuota),
            "attachmentQuota must be maximumAttachmentSize...1 TiB")
    }
}
