import Foundation

/// Every operation of the `/v1` wire: its method, path, who may call it, and the schemas of its
/// request and response. `spark-domaind` routes by this table, ``RemoteDomain`` calls by it, and
/// the OpenAPI document (`docs/openapi.json`, served at `/v1/openapi.json`) is generated from it,
/// so the three cannot disagree.
///
/// Users authenticate with `Authorization: Bearer TOKEN` and name their endpoint in
/// `Spark-Endpoint`; operators send `Authorization: Bearer` with the operator credential.
/// `GET` operations take their fields as query parameters, the others a JSON body. Errors are
/// `{"code","message","retryAfter"}` with the status of ``DomainError/httpStatus``.
package enum DomainOperation: String, CaseIterable, Sendable {
    case policy, validate, testToken
    case signUp, activate, resendActivationCode, logIn, refresh, revoke, requestPasswordReset, resetPassword
    case registerEndpoint, endpoints, setEndpointNickname, deregisterEndpoint, checkIn, publishEndpointCredential,
        approveEndpoint
    case fetchKeyBlob, putKeyBlob, putKeyBlobs, evaluatePasscode, proveUnlock, retirePasscodeKeys, publishIdentity, identity,
        resetIdentity,
        identityKeyVersion
    case cancelIdentityReset, pendingIdentityReset
    case transparencyKeys, identityProof, transparencyHeads, transparencyUpdates, postAudit
    case publishKeyPackages, claimKeyPackages, keyPackageCount
    case createChat, updateMembers, post, postMessages, postCommit, readMailbox, chat, userStatus, dismissInfraction, report
    case createBlob, uploadBlob, blobStatus, downloadBlob, deleteBlob, setBlocked, blockedUsers
    case adminPolicy, adminSetPolicy, adminAccounts, adminEndpoints, adminEndpointUsers, adminIdentity, adminDeregister
    case adminModeration, adminInfraction, adminTimeOut, adminBan, adminUnban, adminOutbox, adminReports
    case adminIssuers, adminTrustIssuer, adminDiscoverIssuer, adminRemoveIssuer, adminIssuerKeys, adminTestToken
    case adminAuditors, adminAddAuditor, adminRemoveAuditor

    /// Who may call an operation.
    package enum Access: Sendable {
        /// Anyone (the calls that come before a token).
        case anyone
        /// A user's token, before the endpoint is registered.
        case user
        /// A user's token and one of that user's registered endpoints.
        case endpoint
        /// The operator credential.
        case `operator`
    }

    /// `GET`, `POST`, or `PUT` (an upload of bytes).
    package var method: String {
        switch request {
        case .none, .query: "GET"
        case .body: "POST"
        case .upload: "PUT"
        }
    }

    /// Whether it answers bytes (`application/octet-stream`, a `206` with `Content-Range`)
    /// rather than JSON.
    package var answersBytes: Bool { self == .downloadBlob }

    /// The operation's path.
    package var path: String { "/v1/" + route.path }

    /// Who may call it.
    package var access: Access { route.access }

    /// One line on what it does.
    package var summary: String { route.summary }

    /// What it takes.
    package var request: Request { route.request }

    /// What it answers, as a schema.
    package var response: WireSchema { route.response }

    /// Whether a repeat after a lost answer is safe to send without asking (reads, and writes
    /// the domain makes idempotent). The client retries only these.
    package var isIdempotent: Bool {
        switch self {
        case .evaluatePasscode, .proveUnlock, .retirePasscodeKeys, .resetIdentity, .signUp, .activate, .resendActivationCode,
            .logIn, .refresh,
            .requestPasswordReset, .resetPassword, .adminInfraction, .testToken, .adminTestToken, .claimKeyPackages:
            false
        default: true
        }
    }

    /// The operation at `method` and `path`, if any.
    package static func matching(method: String, path: String) -> DomainOperation? {
        table[path].flatMap { $0.method == method ? $0 : nil }
    }

    /// Whether some operation has this path (for telling 404 from 405).
    package static func hasPath(_ path: String) -> Bool { table[path] != nil }

    private static let table = Dictionary(uniqueKeysWithValues: allCases.map { ($0.path, $0) })

    /// What an operation takes.
    package enum Request: Sendable {
        /// Nothing.
        case none
        /// Query parameters (a `GET`), each a string or integer field of the request type.
        case query(WireSchema)
        /// A JSON body.
        case body(WireSchema)
        /// Query parameters and bytes: an `application/octet-stream` body (a `PUT`).
        case upload(WireSchema)

        var isQuery: Bool {
            switch self {
            case .query, .none: true
            case .body, .upload: false
            }
        }

        /// The schema of the fields, if any.
        package var schema: WireSchema? {
            switch self {
            case .none: nil
            case .query(let schema), .body(let schema), .upload(let schema): schema
            }
        }
    }

    private struct Route {
        var path: String
        var access: Access
        var summary: String
        var request: Request
        var response: WireSchema
    }

    // swift-format-ignore
    private var route: Route {
        typealias S = WireSchema
        let empty = S.object([])
        switch self {
        case .policy: return Route(path: "policy", access: .anyone, summary: "The domain's policy", request: .none, response: .ref("DomainPolicy"))
        case .validate: return Route(path: "me", access: .user, summary: "Validates the token into its user", request: .none, response: .ref("VerifiedIdentity"))
        case .testToken: return Route(path: "test-tokens", access: .anyone, summary: "A test token for any user id (sandbox domains)", request: .body(.object([("userID", .string, true)])), response: .ref("IssuedToken"))
        case .signUp: return Route(path: "accounts/sign-up", access: .anyone, summary: "Creates an account to activate", request: .body(.ref("SignUpRequest")), response: empty)
        case .activate: return Route(path: "accounts/activate", access: .anyone, summary: "Activates an account with its code", request: .body(.object([("userName", .string, true), ("code", .string, true)])), response: empty)
        case .resendActivationCode: return Route(path: "accounts/resend-activation", access: .anyone, summary: "Sends a new activation code", request: .body(.object([("userName", .string, true)])), response: empty)
        case .logIn: return Route(path: "accounts/log-in", access: .anyone, summary: "Logs an account in", request: .body(.object([("userName", .string, true), ("password", .string, true)])), response: .ref("IssuedToken"))
        case .refresh: return Route(path: "accounts/refresh", access: .anyone, summary: "A new id token for a refresh token", request: .body(.object([("refreshToken", .string, true)])), response: .ref("IssuedToken"))
        case .revoke: return Route(path: "accounts/revoke", access: .anyone, summary: "Revokes a refresh token", request: .body(.object([("refreshToken", .string, true)])), response: empty)
        case .requestPasswordReset: return Route(path: "accounts/request-reset", access: .anyone, summary: "Emails a reset code if an account has the address", request: .body(.object([("email", .string, true)])), response: empty)
        case .resetPassword: return Route(path: "accounts/reset-password", access: .anyone, summary: "Sets a new password with the emailed code", request: .body(.object([("email", .string, true), ("code", .string, true), ("newPassword", .string, true)])), response: empty)
        case .registerEndpoint: return Route(path: "endpoints/register", access: .user, summary: "Registers this device as an endpoint", request: .body(.ref("EndpointRegistration")), response: .ref("RegistrationOutcome"))
        case .endpoints: return Route(path: "endpoints", access: .endpoint, summary: "The user's endpoints", request: .none, response: .object([("endpoints", .array(.ref("EndpointInfo")), true)]))
        case .setEndpointNickname: return Route(path: "endpoints/nickname", access: .endpoint, summary: "Renames one of the user's endpoints", request: .body(.object([("target", .string, true), ("nickname", .string, true)])), response: empty)
        case .publishEndpointCredential: return Route(path: "endpoints/credential", access: .endpoint, summary: "Publishes the endpoint's credential, signed by the user's identity key", request: .body(.object([("credential", .bytes, true)])), response: empty)
        case .approveEndpoint: return Route(path: "endpoints/approve", access: .endpoint, summary: "Keeps an approval of one of the user's endpoints, signed by this one", request: .body(.object([("target", .string, true), ("approval", .bytes, true)])), response: empty)
        case .deregisterEndpoint: return Route(path: "endpoints/deregister", access: .endpoint, summary: "Removes one of the user's endpoints (another takes a signature by an approved device)", request: .body(.object([("target", .string, true), ("signature", .bytes, false)])), response: empty)
        case .checkIn: return Route(path: "endpoints/check-in", access: .endpoint, summary: "Confirms the endpoint is registered and marks it seen", request: .body(empty), response: .ref("EndpointInfo"))
        case .fetchKeyBlob: return Route(path: "key-blobs/fetch", access: .endpoint, summary: "Reads a key blob", request: .body(.object([("name", .string, true)])), response: .ref("BlobFetch"))
        case .putKeyBlob: return Route(path: "key-blobs/put", access: .endpoint, summary: "Writes a key blob if its version is the expected one", request: .body(.object([("name", .string, true), ("data", .bytes, true), ("expectedVersion", .integer, false), ("proof", .ref("KeyBlobProof"), false)])), response: .object([("version", .integer, true)]))
        case .putKeyBlobs: return Route(path: "key-blobs/put-all", access: .endpoint, summary: "Writes several key blobs at once, each if its version is the expected one", request: .body(.object([("writes", .array(.ref("KeyBlobWrite")), true), ("proof", .ref("KeyBlobProof"), false)])), response: .object([("versions", .array(.integer), true)]))
        case .evaluatePasscode: return Route(path: "passcodes/evaluate", access: .endpoint, summary: "One counted passcode attempt: the OPRF evaluation of a blinded passcode", request: .body(.object([("blindedElement", .bytes, true), ("keyID", .string, false)])), response: .ref("PasscodeEvaluation"))
        case .retirePasscodeKeys: return Route(path: "key-blobs/retire-passcode-keys", access: .endpoint, summary: "Proves the keys were unlocked and retires the user's older passcode key versions", request: .body(.object([("challenge", .bytes, true), ("signature", .bytes, true), ("version", .integer, true)])), response: empty)
        case .proveUnlock: return Route(path: "key-blobs/prove-unlock", access: .endpoint, summary: "Proves the keys were unlocked", request: .body(.object([("challenge", .bytes, true), ("signature", .bytes, true)])), response: empty)
        case .publishIdentity: return Route(path: "identities/publish", access: .endpoint, summary: "Publishes the user's public identity", request: .body(.ref("PublishedIdentity")), response: empty)
        case .identity: return Route(path: "identities", access: .endpoint, summary: "A user's published identity", request: .query(.object([("userID", .string, true)])), response: .object([("identity", .ref("PublishedIdentity"), false)]))
        case .resetIdentity: return Route(path: "identities/reset", access: .endpoint, summary: "Resets the user's identity: at once when signed by the current key, else after the reset delay", request: .body(.object([("signature", .bytes, false)])), response: .ref("IdentityResetOutcome"))
        case .cancelIdentityReset: return Route(path: "identities/reset/cancel", access: .endpoint, summary: "Cancels the user's pending identity reset", request: .body(empty), response: empty)
        case .pendingIdentityReset: return Route(path: "identities/reset/pending", access: .endpoint, summary: "A user's pending identity reset", request: .query(.object([("userID", .string, true)])), response: .object([("pending", .ref("PendingIdentityReset"), false)]))
        case .transparencyKeys: return Route(path: "transparency/keys", access: .anyone, summary: "The domain's key-transparency keys: the VRF key and the tree-head key", request: .none, response: .ref("TransparencyKeys"))
        case .identityProof: return Route(path: "transparency/identity", access: .endpoint, summary: "A user's identity as the transparency log holds it: the latest signed head, its consistency proof from the head of `since` entries, the search proof (binary, docs/FORMATS.md)", request: .query(.object([("userID", .string, true), ("since", .integer, false), ("auditor", .string, false)])), response: .object([("proof", .bytes, true)]))
        case .transparencyUpdates: return Route(path: "transparency/updates", access: .anyone, summary: "The transparency log's updates after position `after` (exclusive; -1 from the start) as an auditor sees them (VRF outputs and commitments, binary, docs/FORMATS.md) and the latest signed head: at most 1,000 a request and rate-limited by address, or 10,000 and unlimited for a registered auditor's signed request (`auditor`, `at`, `signature`)", request: .query(.object([("after", .integer, true), ("limit", .integer, true), ("auditor", .string, false), ("at", .integer, false), ("signature", .string, false)])), response: .object([("updates", .bytes, true), ("head", .bytes, false)]))
        case .postAudit: return Route(path: "transparency/audits", access: .anyone, summary: "A registered auditor's co-signature of the signed tree head of `size` entries (others are refused with 403)", request: .body(.object([("size", .integer, true), ("auditorKey", .bytes, true), ("signature", .bytes, true)])), response: empty)
        case .transparencyHeads: return Route(path: "transparency/heads", access: .anyone, summary: "The latest signed tree head, its consistency proof from the head of `since` entries, and that head (binary, docs/FORMATS.md)", request: .query(.object([("since", .integer, false)])), response: .object([("latest", .bytes, true), ("consistency", .bytes, true), ("at", .bytes, false)]))
        case .identityKeyVersion: return Route(path: "identities/key-version", access: .endpoint, summary: "The highest identity key version the user published", request: .none, response: .object([("version", .integer, true)]))
        case .publishKeyPackages: return Route(path: "key-packages/publish", access: .endpoint, summary: "Stores the endpoint's one-time KeyPackages and its last-resort one", request: .body(.object([("keyPackages", .array(.bytes), true), ("lastResort", .bytes, false)])), response: .object([("count", .integer, true)]))
        case .claimKeyPackages: return Route(path: "key-packages/claim", access: .endpoint, summary: "One KeyPackage per endpoint of a user, of the suite asked for (1 unless named) or else of suite 1 (a one-time one is handed out once)", request: .body(.object([("userID", .string, true), ("suite", .integer, false)])), response: .object([("keyPackages", .array(.ref("ClaimedKeyPackage")), true)]))
        case .keyPackageCount: return Route(path: "key-packages/count", access: .endpoint, summary: "How many one-time KeyPackages of a suite (1 unless named) the endpoint has left", request: .query(.object([("suite", .integer, false)])), response: .object([("count", .integer, true)]))
        case .createChat: return Route(path: "chats/create", access: .endpoint, summary: "Creates a chat (a repeat with the same members is the same chat)", request: .body(.object([("chatID", .string, true), ("participants", .array(.string), true), ("posts", .array(.ref("ChatPost")), true)])), response: .ref("ChatInfo"))
        case .updateMembers: return Route(path: "chats/members", access: .endpoint, summary: "Adds and removes members (a change that changes nothing is not made again)", request: .body(.object([("chatID", .string, true), ("add", .array(.string), true), ("remove", .array(.string), true), ("posts", .array(.ref("ChatPost")), true)])), response: .ref("ChatInfo"))
        case .post: return Route(path: "chats/post", access: .endpoint, summary: "Posts to a chat (a repeat with the same clientID is the same post)", request: .body(.object([("chatID", .string, true), ("kind", .ref("MailboxKind"), true), ("payload", .bytes, true), ("recipient", .string, false), ("clientID", .string, false)])), response: .ref("PostReceipt"))
        case .postMessages: return Route(path: "chats/post-messages", access: .endpoint, summary: "Posts a sender's messages in order, as one: the first refused ends the batch (the receipts of the ones before it and that refusal)", request: .body(.object([("chatID", .string, true), ("messages", .array(.ref("MessagePost")), true)])), response: .object([("receipts", .array(.ref("PostReceipt")), true), ("refusal", .ref("Error"), false)]))
        case .postCommit: return Route(path: "chats/commit", access: .endpoint, summary: "Orders an MLS commit: accepted only while the chat is at its epoch (a repeat of the accepted one is the same)", request: .body(.object([("chatID", .string, true), ("epoch", .integer, true), ("commit", .bytes, true), ("welcome", .bytes, false), ("add", .array(.string), true), ("remove", .array(.string), true), ("replacingRefused", .boolean, false)])), response: .object([("epoch", .integer, true)]))
        case .readMailbox: return Route(path: "mailbox", access: .endpoint, summary: "Reads the mailbox; waits up to `wait` seconds for an entry", request: .query(.object([("after", .integer, true), ("limit", .integer, true), ("wait", .integer, true)])), response: .object([("entries", .array(.ref("MailboxEntry")), true)]))
        case .chat: return Route(path: "chats", access: .endpoint, summary: "A chat's members, for a member", request: .query(.object([("chatID", .string, true)])), response: .ref("ChatInfo"))
        case .userStatus: return Route(path: "status", access: .endpoint, summary: "The user's moderation status", request: .none, response: .ref("UserStatus"))
        case .report: return Route(path: "reports", access: .endpoint, summary: "Reports a member of a chat to the operator with messages the caller reveals", request: .body(.object([("chatID", .string, true), ("userID", .string, true), ("reason", .string, true), ("messages", .array(.ref("ReportedMessage")), true)])), response: .object([("id", .integer, true)]))
        case .createBlob: return Route(path: "blobs/create", access: .endpoint, summary: "Starts an attachment's blob in a chat the caller is in, within the size cap and quota (a repeat answers where it stands)", request: .body(.object([("chatID", .string, true), ("blobID", .string, true), ("size", .integer, true)])), response: .ref("BlobStatus"))
        case .uploadBlob: return Route(path: "blobs/upload", access: .endpoint, summary: "Uploads the part of the caller's blob at `offset` as an application/octet-stream body (a part already stored is answered as it stands)", request: .upload(.object([("blobID", .string, true), ("offset", .integer, true)])), response: .ref("BlobStatus"))
        case .blobStatus: return Route(path: "blobs/status", access: .endpoint, summary: "Where a blob's upload stands", request: .query(.object([("blobID", .string, true)])), response: .ref("BlobStatus"))
        case .downloadBlob: return Route(path: "blobs/download", access: .endpoint, summary: "Bytes of a whole blob, for a member of its chat: the `Range` asked (one `bytes=START-END`, at most 1 MiB of it; the first MiB without one), as a 206 with `Content-Range`", request: .query(.object([("blobID", .string, true)])), response: .bytes)
        case .deleteBlob: return Route(path: "blobs/delete", access: .endpoint, summary: "Deletes one of the caller's blobs (a recall)", request: .body(.object([("blobID", .string, true)])), response: empty)
        case .setBlocked: return Route(path: "blocks/set", access: .endpoint, summary: "Blocks a user for the caller, or unblocks them", request: .body(.object([("userID", .string, true), ("blocked", .boolean, true)])), response: empty)
        case .blockedUsers: return Route(path: "blocks", access: .endpoint, summary: "The users the caller blocked", request: .none, response: .object([("users", .array(.string), true)]))
        case .adminReports: return Route(path: "admin/reports", access: .operator, summary: "The reports users made, newest first", request: .query(.object([("limit", .integer, true)])), response: .object([("reports", .array(.ref("Report")), true)]))
        case .dismissInfraction: return Route(path: "infractions/dismiss", access: .endpoint, summary: "Dismisses one of the user's infractions", request: .body(.object([("id", .integer, true)])), response: empty)
        case .adminPolicy: return Route(path: "admin/policy", access: .operator, summary: "The policy", request: .none, response: .ref("DomainPolicy"))
        case .adminSetPolicy: return Route(path: "admin/policy/set", access: .operator, summary: "Replaces the policy", request: .body(.ref("DomainPolicy")), response: empty)
        case .adminAccounts: return Route(path: "admin/accounts", access: .operator, summary: "The sign-up assistant's accounts", request: .none, response: .object([("accounts", .array(.ref("AccountSummary")), true)]))
        case .adminEndpoints: return Route(path: "admin/endpoints", access: .operator, summary: "A user's endpoints", request: .query(.object([("userID", .string, true)])), response: .object([("endpoints", .array(.ref("EndpointInfo")), true)]))
        case .adminEndpointUsers: return Route(path: "admin/endpoint-users", access: .operator, summary: "The users with endpoints", request: .none, response: .object([("users", .array(.ref("EndpointUser")), true)]))
        case .adminIdentity: return Route(path: "admin/identities", access: .operator, summary: "A user's published identity", request: .query(.object([("userID", .string, true)])), response: .object([("identity", .ref("PublishedIdentity"), false)]))
        case .adminDeregister: return Route(path: "admin/endpoints/deregister", access: .operator, summary: "Removes an endpoint", request: .body(.object([("endpointID", .string, true)])), response: empty)
        case .adminModeration: return Route(path: "admin/moderation", access: .operator, summary: "A user's moderation status", request: .query(.object([("userID", .string, true)])), response: .ref("UserStatus"))
        case .adminInfraction: return Route(path: "admin/moderation/infraction", access: .operator, summary: "Issues an infraction", request: .body(.object([("userID", .string, true), ("reason", .string, true)])), response: .ref("Infraction"))
        case .adminTimeOut: return Route(path: "admin/moderation/timeout", access: .operator, summary: "Times a user out", request: .body(.object([("userID", .string, true), ("seconds", .integer, true), ("reason", .string, true)])), response: empty)
        case .adminBan: return Route(path: "admin/moderation/ban", access: .operator, summary: "Bans a user", request: .body(.object([("userID", .string, true), ("reason", .string, true)])), response: empty)
        case .adminUnban: return Route(path: "admin/moderation/unban", access: .operator, summary: "Lifts a ban and any timeout", request: .body(.object([("userID", .string, true)])), response: empty)
        case .adminOutbox: return Route(path: "admin/outbox", access: .operator, summary: "The mail the domain sent", request: .query(.object([("recipient", .string, false), ("limit", .integer, true)])), response: .object([("mails", .array(.ref("Mail")), true)]))
        case .adminIssuers: return Route(path: "admin/issuers", access: .operator, summary: "The trusted external issuers", request: .none, response: .object([("issuers", .array(.ref("ExternalIssuer")), true)]))
        case .adminTrustIssuer: return Route(path: "admin/issuers/trust", access: .operator, summary: "Trusts an external issuer with its JWKS", request: .body(.object([("issuer", .string, true), ("audience", .string, true), ("jwks", .string, true)])), response: empty)
        case .adminDiscoverIssuer: return Route(path: "admin/issuers/discover", access: .operator, summary: "Trusts an OpenID provider by discovery (the domain fetches its keys)", request: .body(.object([("issuer", .string, true), ("audience", .string, true), ("userClaim", .string, true), ("caPEM", .string, false)])), response: .ref("ExternalIssuer"))
        case .adminRemoveIssuer: return Route(path: "admin/issuers/remove", access: .operator, summary: "Stops trusting an external issuer", request: .body(.object([("issuer", .string, true)])), response: empty)
        case .adminIssuerKeys: return Route(path: "admin/issuer-keys", access: .operator, summary: "The public keys of the domain's test or accounts issuer", request: .query(.object([("kind", .string, true)])), response: .ref("JWKSet"))
        case .adminAuditors: return Route(path: "admin/transparency/auditors", access: .operator, summary: "The registered key-transparency auditors (only their co-signatures are taken)", request: .none, response: .object([("auditors", .array(.ref("RegisteredAuditor")), true)]))
        case .adminAddAuditor: return Route(path: "admin/transparency/auditors/add", access: .operator, summary: "Registers a key-transparency auditor (its P-256 key, 64 bytes x ‖ y), or renames one", request: .body(.object([("auditorKey", .bytes, true), ("name", .string, true)])), response: empty)
        case .adminRemoveAuditor: return Route(path: "admin/transparency/auditors/remove", access: .operator, summary: "Removes a key-transparency auditor and its co-signature", request: .body(.object([("auditorKey", .bytes, true)])), response: empty)
        case .adminTestToken: return Route(path: "admin/test-tokens", access: .operator, summary: "A test token for any user id (sandbox domains)", request: .body(.object([("userID", .string, true)])), response: .ref("IssuedToken"))
        }
    }
}
