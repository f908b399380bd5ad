import Foundation
import SparkCrypto
public import SparkDomain
import SparkDomainEngine
import SparkMLS

/// A domain as the conformance suite sees it: the user's contract and the operator's.
public struct DomainUnderTest: Sendable {
    /// The user's side.
    public let service: any DomainService
    /// The operator's side.
    public let admin: any DomainAdministration

    /// A domain under test.
    public init(service: any DomainService, admin: any DomainAdministration) {
        self.service = service
        self.admin = admin
    }
}

/// The whole ``DomainService`` and ``DomainAdministration`` contract as checks any
/// implementation must pass: the embedded domain in process, and `spark-domaind` over TLS
/// through ``RemoteDomain`` (the PostgreSQL store will run the same). Each check starts from a
/// fresh sandbox domain with OWASP-cost password hashing and throws ``ConformanceFailure`` with
/// what differed.
public enum DomainConformance {
    /// One check.
    public struct Check: Sendable, CustomStringConvertible {
        /// Its name (a test argument).
        public let description: String
        let run: @Sendable (DomainUnderTest) async throws -> Void
    }

    /// The names of every check.
    public static var names: [String] { checks.map(\.description) }

    /// Runs the check called `name` on `domain`.
    public static func run(_ name: String, on domain: DomainUnderTest) async throws {
        guard let check = checks.first(where: { $0.description == name }) else {
            throw ConformanceFailure("no conformance check '\(name)'")
        }
        try await check.run(domain)
    }

    static let checks: [Check] = [
        Check(description: "tokens", run: tokens),
        Check(description: "registration", run: registration),
        Check(description: "removed endpoints make no call", run: removedEndpoints),
        Check(description: "a take-over waits for the unlock", run: pendingTakeOver),
        Check(description: "device credentials and approvals", run: deviceApprovals),
        Check(description: "removing a device takes an approved device's signature", run: approvedRemoval),
        Check(description: "key blobs", run: keyBlobs),
        Check(description: "identities", run: identities),
        Check(description: "key packages", run: keyPackages),
        Check(description: "commit ordering", run: commitOrdering),
        Check(description: "an admin replaces commits the members refused", run: refusedCommitReplacement),
        Check(description: "chats and retries", run: chats),
        Check(description: "per-user write limits", run: writeLimits),
        Check(description: "mailboxes and long-polls", run: mailboxes),
        Check(description: "ephemeral entries", run: ephemeralEntries),
        Check(description: "reports", run: reports),
        Check(description: "attachment blobs", run: blobs),
        Check(description: "blocking", run: blocking),
        Check(description: "moderation", run: moderation),
        Check(description: "accounts", run: accounts),
        Check(description: "administration", run: administration),
        Check(description: "isolation between users", run: isolation),
    ]

    // MARK: Helpers

    struct User {
        let id: String
        let token: String
        let endpoint: String
    }

    static func user(_ domain: DomainUnderTest, _ id: String, endpoint: String? = nil) async throws -> User {
        let token = try await domain.service.testToken(userID: id).token
        let endpoint = endpoint ?? "\(id)-1"
        let outcome = try await domain.service.registerEndpoint(
            token: token, registration: EndpointRegistration(endpointID: endpoint, description: "\(id)'s device"))
        guard case .registered = outcome else { throw ConformanceFailure("\(id) could not register: \(outcome)") }
        return User(id: id, token: token, endpoint: endpoint)
    }

    static func expect(_ condition: Bool, _ message: @autoclosure () -> String) throws {
        if !condition { throw ConformanceFailure(message()) }
    }

    static func expectRefused<T>(_ code: DomainError.Code, _ what: String, _ body: () async throws -> T) async throws {
        do {
            let value = try await body()
            throw ConformanceFailure("\(what) was not refused: it returned \(value)")
        } catch let error as DomainError {
            try expect(error.code == code, "\(what) was refused with \(error.code) (\(error.reason)), not \(code)")
        }
    }

    static func identity(_ user: String, version: Int = 1) throws -> (PublishedIdentity, Ed25519.PrivateKey) {
        try Fixtures.publishedIdentity(user, version: version)
    }

    // MARK: Checks

    static func tokens(_ domain: DomainUnderTest) async throws {
        let policy = try await domain.service.policy()
        try expect(!policy.userAuthenticationEnabled, "a conformance domain is a sandbox")
        let token = try await domain.service.testToken(userID: "alice")
        try expect(token.expiresAt > Date(), "a test token expires in the future")
        let who = try await domain.service.validate(token: token.token)
        try expect(who.userID == "alice" && who.issuerKind == .test, "the token proves alice: \(who)")
        try await expectRefused(.invalidToken, "a forged token") { try await domain.service.validate(token: "a.b.c") }
        var tampered = Array(token.token.utf8)
        tampered[tampered.count - 2] = tampered[tampered.count - 2] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        try await expectRefused(.invalidToken, "a token with a changed signature") {
            try await domain.service.validate(token: String(decoding: tampered, as: UTF8.self))
        }
        try await expectRefused(.invalidRequest, "an empty user id") { try await domain.service.testToken(userID: "") }
    }

    static func registration(_ domain: DomainUnderTest) async throws {
        var policy = try await domain.admin.policy()
        policy.maximumEndpoints = 2
        try await domain.admin.setPolicy(policy)
        let alice = try await user(domain, "alice", endpoint: "a1")
        let again = try await domain.service.registerEndpoint(
            token: alice.token, registration: .init(endpointID: "a1", description: "alice's device"))
        guard case .registered(let info) = again, info.registrationID == 1 else {
            throw ConformanceFailure("registering again is the same endpoint: \(again)")
        }
        _ = try await user(domain, "alice", endpoint: "a2")
        let third = try await domain.service.registerEndpoint(
            token: alice.token, registration: .init(endpointID: "a3", description: "third"))
        guard case .full(let endpoints, let maximum) = third else { throw ConformanceFailure("a third endpoint: \(third)") }
        try expect(endpoints.map(\.endpointID) == ["a1", "a2"] && maximum == 2, "the full list: \(endpoints)")
        let replaced = try await domain.service.registerEndpoint(
            token: alice.token, registration: .init(endpointID: "a3", description: "third", replacing: "a1"))
        guard case .registered(let newest) = replaced, newest.registrationID == 3 else {
            throw ConformanceFailure("replacing a1: \(replaced)")
        }
        try await expectRefused(.endpointRemoved, "the replaced endpoint's check-in") {
            try await domain.service.checkIn(token: alice.token, endpointID: "a1")
        }
        let listed = try await domain.service.endpoints(token: alice.token, endpointID: "a3").map(\.endpointID)
        try expect(listed == ["a2", "a3"], "the endpoints after the replacement: \(listed)")
        try await domain.service.setEndpointNickname(token: alice.token, endpointID: "a2", target: "a2", nickname: "phone")
        // A token used from another endpoint (a thief's) renames no other device.
        try await expectRefused(.forbidden, "a rename of another endpoint") {
            try await domain.service.setEndpointNickname(
                token: alice.token, endpointID: "a3", target: "a2", nickname: "unknown")
        }
        let renamed = try await domain.service.endpoints(token: alice.token, endpointID: "a2").first { $0.endpointID == "a2" }
        try expect(renamed?.nickname == "phone", "the nickname: \(String(describing: renamed))")

        // One active endpoint at a time: a second device must take the profile over.
        policy.maximumEndpoints = 5
        policy.multipleActiveEndpoints = false
        try await domain.admin.setPolicy(policy)
        let bob = try await user(domain, "bob", endpoint: "b1")
        let second = try await domain.service.registerEndpoint(
            token: bob.token, registration: .init(endpointID: "b2", description: "new"))
        guard case .deviceSwitchRequired(let active) = second, active.map(\.endpointID) == ["b1"] else {
            throw ConformanceFailure("a second device of bob: \(second)")
        }
        let takeOver = try await domain.service.registerEndpoint(
            token: bob.token, registration: .init(endpointID: "b2", description: "new", takeOver: true))
        guard case .registered = takeOver else { throw ConformanceFailure("taking over: \(takeOver)") }
        try await expectRefused(.endpointRemoved, "the superseded device") {
            try await domain.service.checkIn(token: bob.token, endpointID: "b1")
        }
    }

    /// A thief with the user's token registers an endpoint that takes the profile over: until it
    /// proves it unlocked the keys, it may only unlock; it cannot evict the user's device, post,
    /// read the mailbox, list the devices or write key blobs.
    static func pendingTakeOver(_ domain: DomainUnderTest) async throws {
        var policy = try await domain.service.policy()
        policy.multipleActiveEndpoints = false
        try await domain.admin.setPolicy(policy)
        let carol = try await user(domain, "carol", endpoint: "laptop")
        let dave = try await user(domain, "dave")
        let (identity, _) = try identity("carol")
        try await domain.service.publishIdentity(token: carol.token, endpointID: carol.endpoint, identity: identity)
        let chat = try await domain.service.createChat(
            token: carol.token, endpointID: carol.endpoint, chatID: "c-thief", participants: [dave.id])
        let stolen = try await domain.service.testToken(userID: "carol").token
        let thief = try await domain.service.registerEndpoint(
            token: stolen, registration: .init(endpointID: "thief", description: "a phone", takeOver: true))
        guard case .registered(let pending) = thief, !pending.isActive else {
            throw ConformanceFailure("a take-over of a profile with keys waits: \(thief)")
        }
        let service = domain.service
        try await expectRefused(.forbidden, "evicting the user's laptop") {
            try await service.deregisterEndpoint(token: stolen, endpointID: "thief", target: carol.endpoint)
        }
        try await expectRefused(.forbidden, "posting") {
            try await service.post(
                token: stolen, endpointID: "thief", chatID: chat.chatID, kind: .message, payload: Data("x".utf8), recipient: nil,
                clientID: nil)
        }
        try await expectRefused(.forbidden, "reading the mailbox") {
            try await service.readMailbox(token: stolen, endpointID: "thief", after: 0, limit: 10)
        }
        try await expectRefused(.forbidden, "listing the devices") {
            try await service.endpoints(token: stolen, endpointID: "thief")
        }
        try await expectRefused(.forbidden, "writing a key blob") {
            try await service.putKeyBlob(
                token: stolen, endpointID: "thief", name: "keys", data: Data("x".utf8), expectedVersion: nil)
        }
        // What unlocking needs still answers, and the laptop is untouched.
        let published = try await service.identity(token: stolen, endpointID: "thief", userID: "carol")
        try expect(published == identity, "reading the identity to unlock: \(String(describing: published))")
        _ = try await service.checkIn(token: carol.token, endpointID: carol.endpoint)
        let devices = try await service.endpoints(token: carol.token, endpointID: carol.endpoint).map(\.endpointID)
        try expect(devices.contains(carol.endpoint), "the laptop is still registered: \(devices)")
    }

    /// Each endpoint publishes its own credential and approvals of the user's other endpoints,
    /// opaque to the domain, which lists them with the endpoints: only an endpoint's own, only of
    /// the user's endpoints, bounded, one per approver (the latest), and none by an endpoint since
    /// removed. Each write tells the user's devices.
    static func deviceApprovals(_ domain: DomainUnderTest) async throws {
        let service = domain.service
        let alice = try await user(domain, "alice", endpoint: "laptop")
        let phone = try await user(domain, "alice", endpoint: "phone")
        let bob = try await user(domain, "bob")
        try await service.publishEndpointCredential(token: alice.token, endpointID: "laptop", credential: Data("laptop-1".utf8))
        try await service.publishEndpointCredential(token: phone.token, endpointID: "phone", credential: Data("phone-1".utf8))
        try await service.publishEndpointCredential(token: phone.token, endpointID: "phone", credential: Data("phone-2".utf8))
        try await service.approveEndpoint(token: alice.token, endpointID: "laptop", target: "phone", approval: Data("a".utf8))
        try await service.approveEndpoint(token: alice.token, endpointID: "laptop", target: "phone", approval: Data("b".utf8))
        let listed = try await service.endpoints(token: phone.token, endpointID: "phone")
        try expect(
            listed.map(\.credential) == [Data("laptop-1".utf8), Data("phone-2".utf8)]
                && listed.map(\.approvals) == [[], [Data("b".utf8)]], "the listing: \(listed)")
        let entries = try await service.readMailbox(token: alice.token, endpointID: "laptop", after: 0, limit: 50)
        try expect(entries.filter { $0.kind == .devices }.count >= 3, "each write tells the user's devices: \(entries)")
        try await expectRefused(.notFound, "approving another user's endpoint") {
            try await service.approveEndpoint(
                token: alice.token, endpointID: "laptop", target: bob.endpoint, approval: Data("x".utf8))
        }
        try await expectRefused(.invalidRequest, "approving itself") {
            try await service.approveEndpoint(
                token: alice.token, endpointID: "laptop", target: "laptop", approval: Data("x".utf8))
        }
        for size in [0, 1025] {
            try await expectRefused(.invalidRequest, "a credential of \(size) bytes") {
                try await service.publishEndpointCredential(
                    token: alice.token, endpointID: "laptop", credential: Data(count: size))
            }
            try await expectRefused(.invalidRequest, "an approval of \(size) bytes") {
                try await service.approveEndpoint(
                    token: alice.token, endpointID: "laptop", target: "phone", approval: Data(count: size))
            }
        }
        // The laptop is removed: its approvals are no longer listed, and it approves nothing more.
        try await service.deregisterEndpoint(token: alice.token, endpointID: "laptop", target: "laptop")
        let after = try await service.endpoints(token: phone.token, endpointID: "phone")
        try expect(after.map(\.endpointID) == ["phone"] && after[0].approvals.isEmpty, "after the removal: \(after)")
        try await expectRefused(.endpointRemoved, "an approval by the removed laptop") {
            try await service.approveEndpoint(token: alice.token, endpointID: "laptop", target: "phone", approval: Data("c".utf8))
        }
    }

    /// A stolen token evicts no device: removing another endpoint takes a signature by the MLS
    /// key of an endpoint approved from the user's oldest (by the credentials and approvals the
    /// devices published). A device the thief set up with the identity key is approved by none of
    /// the user's, and a device not yet registered may replace only an unapproved one.
    static func approvedRemoval(_ domain: DomainUnderTest) async throws {
        var policy = try await domain.service.policy()
        policy.maximumEndpoints = 3
        try await domain.admin.setPolicy(policy)
        let service = domain.service
        let token = try await user(domain, "alice", endpoint: "laptop").token
        let (identity, identityKey) = try identity("alice")
        try await service.publishIdentity(token: token, endpointID: "laptop", identity: identity)
        var signers: [String: MLSSigner] = [:]
        for endpoint in ["laptop", "phone", "thief"] {
            if endpoint != "laptop" { _ = try await user(domain, "alice", endpoint: endpoint) }
            let key = try Ed25519.PrivateKey()
            let credential = try DeviceCredential.issue(
                userID: "alice", deviceID: endpoint, signatureKey: key.publicKey.rawRepresentation, identityKeyVersion: 1,
                identityKey: identityKey)
            signers[endpoint] = MLSSigner(credential: credential.mlsCredential, key: key)
            try await service.publishEndpointCredential(token: token, endpointID: endpoint, credential: credential.encoded)
        }
        func signer(_ endpoint: String) throws -> MLSSigner {
            guard let signer = signers[endpoint] else { throw ConformanceFailure("no signer for \(endpoint)") }
            return signer
        }
        func approve(_ target: String, by approver: String, signedBy key: String? = nil) async throws {
            let credential = try DeviceCredential(encoded: try signer(target).credential.identity)
            let approval = try DeviceApproval.sign(approving: credential, by: try signer(key ?? approver), approverID: approver)
            try await service.approveEndpoint(token: token, endpointID: approver, target: target, approval: approval.encoded)
        }
        func signature(_ remover: String, _ target: String, signedBy key: String? = nil) throws -> Data {
            try signer(key ?? remover).signature(
                forStatement: EndpointRemoval.signedBytes(user: "alice", remover: remover, target: target))
        }
        try await approve("phone", by: "laptop")
        // The thief's device posts an approval of itself in the laptop's name, signed by its own key.
        try await approve("thief", by: "phone", signedBy: "thief")
        for (remover, target, signature, what) in [
            ("thief", "laptop", try signature("thief", "laptop"), "the thief's device, signing with its own key"),
            ("laptop", "phone", try signature("laptop", "phone", signedBy: "thief"), "the laptop's id with the thief's key"),
            ("phone", "laptop", nil, "the phone without a signature"),
            ("phone", "laptop", try signature("phone", "thief"), "the phone with a signature for another target"),
        ] as [(String, String, Data?, String)] {
            try await expectRefused(.forbidden, "a removal by \(what)") {
                try await service.deregisterEndpoint(token: token, endpointID: remover, target: target, signature: signature)
            }
        }
        try await expectRefused(.conflict, "a new device replacing the approved laptop") {
            try await service.registerEndpoint(
                token: token, registration: .init(endpointID: "new", description: "new", replacing: "laptop"))
        }
        let listed = try await service.endpoints(token: token, endpointID: "laptop").map(\.endpointID)
        try expect(listed == ["laptop", "phone", "thief"], "every device is still registered: \(listed)")
        // The approved phone removes the thief's device, with its signature.
        try await service.deregisterEndpoint(
            token: token, endpointID: "phone", target: "thief", signature: try signature("phone", "thief"))
        let after = try await service.endpoints(token: token, endpointID: "laptop").map(\.endpointID)
        try expect(after == ["laptop", "phone"], "the thief's device is gone: \(after)")
    }

    static func removedEndpoints(_ domain: DomainUnderTest) async throws {
        let alice = try await user(domain, "alice")
        let other = try await user(domain, "alice", endpoint: "alice-2")
        let bob = try await user(domain, "bob")
        let chat = try await domain.service.createChat(
            token: alice.token, endpointID: alice.endpoint, chatID: "c-removed", participants: ["bob"])
        try await domain.service.deregisterEndpoint(token: alice.token, endpointID: alice.endpoint, target: alice.endpoint)
        let service = domain.service
        let (token, endpoint) = (alice.token, alice.endpoint)
        // Every call after registration checks the endpoint: a removed device reads nothing.
        try await expectRefused(.endpointRemoved, "endpoints") { try await service.endpoints(token: token, endpointID: endpoint) }
        try await expectRefused(.endpointRemoved, "checkIn") { try await service.checkIn(token: token, endpointID: endpoint) }
        try await expectRefused(.endpointRemoved, "identity") {
            try await service.identity(token: token, endpointID: endpoint, userID: bob.id)
        }
        try await expectRefused(.endpointRemoved, "chat") {
            try await service.chat(token: token, endpointID: endpoint, chatID: chat.chatID)
        }
        try await expectRefused(.endpointRemoved, "userStatus") {
            try await service.userStatus(token: token, endpointID: endpoint)
        }
        try await expectRefused(.endpointRemoved, "readMailbox") {
            try await service.readMailbox(token: token, endpointID: endpoint, after: 0, limit: 10)
        }
        try await expectRefused(.endpointRemoved, "post") {
            try await service.post(
                token: token, endpointID: endpoint, chatID: chat.chatID, kind: .message, payload: Data("x".utf8), recipient: nil,
                clientID: nil)
        }
        try await expectRefused(.endpointRemoved, "fetchKeyBlob") {
            try await service.fetchKeyBlob(token: token, endpointID: endpoint, name: KeyBlob.profileName)
        }
        try await expectRefused(.endpointRemoved, "identityKeyVersion") {
            try await service.identityKeyVersion(token: token, endpointID: endpoint)
        }
        try await expectRefused(.endpointRemoved, "setEndpointNickname") {
            try await service.setEndpointNickname(token: token, endpointID: endpoint, target: endpoint, nickname: "x")
        }
        // The other endpoint goes on.
        _ = try await service.checkIn(token: other.token, endpointID: other.endpoint)
    }

    /// One-time KeyPackages are handed out once each, oldest first, then the last-resort one;
    /// only registered endpoints' are; sizes and counts are bounded; a repeat is kept once.
    static func keyPackages(_ domain: DomainUnderTest) async throws {
        let service = domain.service
        let alice = try await user(domain, "alice")
        let laptop = try await user(domain, "bob")
        let phone = try await user(domain, "bob", endpoint: "bob-2")
        let first = Data("kp-1".utf8)
        let second = Data("kp-2".utf8)
        var count = try await service.publishKeyPackages(
            token: laptop.token, endpointID: laptop.endpoint, keyPackages: [first, second], lastResort: Data("kp-last".utf8))
        try expect(count == 2, "two one-time KeyPackages kept, not \(count)")
        // A retried publication keeps nothing twice.
        count = try await service.publishKeyPackages(
            token: laptop.token, endpointID: laptop.endpoint, keyPackages: [first], lastResort: nil)
        try expect(count == 2, "a repeated KeyPackage is kept once: \(count)")
        _ = try await service.publishKeyPackages(
            token: phone.token, endpointID: phone.endpoint, keyPackages: [Data("phone-1".utf8)], lastResort: nil)

        var claimed = try await service.claimKeyPackages(token: alice.token, endpointID: alice.endpoint, userID: "bob")
        try expect(
            claimed == [
                ClaimedKeyPackage(endpointID: "bob-1", keyPackage: first, lastResort: false),
                ClaimedKeyPackage(endpointID: "bob-2", keyPackage: Data("phone-1".utf8), lastResort: false),
            ], "one per device, the oldest one-time one: \(claimed)")
        claimed = try await service.claimKeyPackages(token: alice.token, endpointID: alice.endpoint, userID: "bob")
        try expect(
            claimed == [ClaimedKeyPackage(endpointID: "bob-1", keyPackage: second, lastResort: false)],
            "each one-time KeyPackage is handed out once; the phone has none left: \(claimed)")
        for _ in 0..<2 {
            claimed = try await service.claimKeyPackages(token: alice.token, endpointID: alice.endpoint, userID: "bob")
            try expect(
                claimed == [ClaimedKeyPackage(endpointID: "bob-1", keyPackage: Data("kp-last".utf8), lastResort: true)],
                "then the last-resort one, again and again: \(claimed)")
        }
        let left = try await service.keyPackageCount(token: laptop.token, endpointID: laptop.endpoint)
        try expect(left == 0, "the laptop has no one-time KeyPackage left: \(left)")

        // A removed device's KeyPackages are handed out no more.
        try await service.deregisterEndpoint(token: phone.token, endpointID: phone.endpoint, target: phone.endpoint)
        _ = try await service.publishKeyPackages(
            token: laptop.token, endpointID: laptop.endpoint, keyPackages: [Data("kp-3".utf8)], lastResort: nil)
        claimed = try await service.claimKeyPackages(token: alice.token, endpointID: alice.endpoint, userID: "bob")
        try expect(claimed.map(\.endpointID) == ["bob-1"], "only registered devices: \(claimed)")
        try await expectRefused(.endpointRemoved, "publishKeyPackages from a removed endpoint") {
            try await service.publishKeyPackages(
                token: phone.token, endpointID: phone.endpoint, keyPackages: [Data("late".utf8)], lastResort: nil)
        }
        try expect(
            try await service.claimKeyPackages(token: alice.token, endpointID: alice.endpoint, userID: "nobody").isEmpty,
            "a user without devices has no KeyPackages")

        // Bounds: size, number, and an empty user id.
        try await expectRefused(.invalidRequest, "an oversized KeyPackage") {
            try await service.publishKeyPackages(
                token: alice.token, endpointID: alice.endpoint,
                keyPackages: [Data(count: DomainEngine.maximumKeyPackageSize + 1)], lastResort: nil)
        }
        try await expectRefused(.invalidRequest, "an empty KeyPackage") {
            try await service.publishKeyPackages(
                token: alice.token, endpointID: alice.endpoint, keyPackages: [], lastResort: Data())
        }
        let many = (0..<DomainEngine.maximumKeyPackages).map { Data("many-\($0)".utf8) }
        count = try await service.publishKeyPackages(
            token: alice.token, endpointID: alice.endpoint, keyPackages: many, lastResort: nil)
        try expect(count == DomainEngine.maximumKeyPackages, "a full store: \(count)")
        try await expectRefused(.invalidRequest, "one KeyPackage past the limit") {
            try await service.publishKeyPackages(
                token: alice.token, endpointID: alice.endpoint, keyPackages: [Data("one more".utf8)], lastResort: nil)
        }
        try expect(
            try await service.keyPackageCount(token: alice.token, endpointID: alice.endpoint) == DomainEngine.maximumKeyPackages,
            "a refused publication keeps nothing")
        try await expectRefused(.invalidRequest, "an empty user id") {
            try await service.claimKeyPackages(token: alice.token, endpointID: alice.endpoint, userID: "")
        }
    }

    /// One commit wins each epoch; the loser is told the epoch and wins after catching up; a
    /// retry of the winner is answered as it was; commits reach every member before and after in
    /// order, Welcomes to every member after the commit; membership changes follow the admin rules;
    /// an MLS message of an epoch the chat has left is refused.
    static func commitOrdering(_ domain: DomainUnderTest) async throws {
        let service = domain.service
        let alice = try await user(domain, "alice")
        let bob = try await user(domain, "bob")
        let carol = try await user(domain, "carol")
        let chat = try await service.createChat(
            token: alice.token, endpointID: alice.endpoint, chatID: "c-mls", participants: ["bob"])
        try expect(chat.epoch == 0, "a new chat is at epoch 0: \(chat.epoch)")
        let bobStart = try await service.readMailbox(token: bob.token, endpointID: bob.endpoint, after: 0, limit: 100).count
        let carolStart = try await service.readMailbox(token: carol.token, endpointID: carol.endpoint, after: 0, limit: 100)
            .count

        // Alice adds carol at epoch 0; bob's update for epoch 0 loses.
        var epoch = try await service.postCommit(
            token: alice.token, endpointID: alice.endpoint, chatID: "c-mls", epoch: 0, commit: Data("add carol".utf8),
            welcome: Data("welcome carol".utf8), add: ["carol"], remove: [])
        try expect(epoch == 1, "the chat moves to epoch 1: \(epoch)")
        try await expectRefused(.conflict, "a second commit for epoch 0") {
            try await service.postCommit(
                token: bob.token, endpointID: bob.endpoint, chatID: "c-mls", epoch: 0, commit: Data("bob update".utf8),
                welcome: nil, add: [], remove: [])
        }
        // Alice's retry (her answer was lost) is the same answer, not a second commit.
        epoch = try await service.postCommit(
            token: alice.token, endpointID: alice.endpoint, chatID: "c-mls", epoch: 0, commit: Data("add carol".utf8),
            welcome: Data("welcome carol".utf8), add: ["carol"], remove: [])
        try expect(epoch == 1, "a retried winner is answered with the epoch it made: \(epoch)")
        epoch = try await service.postCommit(
            token: bob.token, endpointID: bob.endpoint, chatID: "c-mls", epoch: 1, commit: Data("bob update".utf8),
            welcome: nil, add: [], remove: [])
        try expect(epoch == 2, "bob wins epoch 1 after catching up: \(epoch)")
        try await expectRefused(.conflict, "a commit for a future epoch") {
            try await service.postCommit(
                token: carol.token, endpointID: carol.endpoint, chatID: "c-mls", epoch: 5, commit: Data("x".utf8),
                welcome: nil, add: [], remove: [])
        }

        let bobEntries = try await service.readMailbox(token: bob.token, endpointID: bob.endpoint, after: 0, limit: 100)
            .dropFirst(bobStart)
        try expect(
            bobEntries.map(\.kind) == [.membership, .commit, .welcome, .commit]
                && bobEntries.filter { $0.kind == .commit }.map(\.epoch) == [0, 1]
                && bobEntries.filter { $0.kind == .commit }.map(\.payload) == [Data("add carol".utf8), Data("bob update".utf8)],
            "bob gets the membership, both commits in order with their epochs, and the Welcome (each device looks for its own KeyPackage in it): \(bobEntries.map(\.kind))"
        )
        let carolEntries = try await service.readMailbox(token: carol.token, endpointID: carol.endpoint, after: 0, limit: 100)
            .dropFirst(carolStart)
        try expect(
            carolEntries.map(\.kind) == [.membership, .commit, .welcome, .commit]
                && carolEntries.first { $0.kind == .welcome }?.payload == Data("welcome carol".utf8),
            "carol gets her Welcome with the commit that added her: \(carolEntries.map(\.kind))")
        try expect(
            try await service.chat(token: carol.token, endpointID: carol.endpoint, chatID: "c-mls").epoch == 2,
            "the chat reports its epoch")

        // Admin rules: carol (no admin) may not remove bob, but may leave; clients cannot post
        // commit or welcome entries as ordinary posts.
        try await expectRefused(.notAMember, "a non-admin's removal") {
            try await service.postCommit(
                token: carol.token, endpointID: carol.endpoint, chatID: "c-mls", epoch: 2, commit: Data("remove bob".utf8),
                welcome: nil, add: [], remove: ["bob"])
        }
        try expect(
            try await service.chat(token: carol.token, endpointID: carol.endpoint, chatID: "c-mls").epoch == 2,
            "a refused commit moves no epoch")
        // A Welcome may go with a commit that adds no user (a member's new device): to everyone.
        let bobBefore = try await service.readMailbox(token: bob.token, endpointID: bob.endpoint, after: 0, limit: 200).count
        epoch = try await service.postCommit(
            token: alice.token, endpointID: alice.endpoint, chatID: "c-mls", epoch: 2, commit: Data("add a device".utf8),
            welcome: Data("welcome the device".utf8), add: [], remove: [])
        try expect(epoch == 3, "a commit adding a device moves the epoch: \(epoch)")
        let bobAfter = try await service.readMailbox(token: bob.token, endpointID: bob.endpoint, after: 0, limit: 200)
            .dropFirst(bobBefore)
        try expect(
            bobAfter.map(\.kind) == [.commit, .welcome], "the device's Welcome reaches every member: \(bobAfter.map(\.kind))")
        // An MLS message sealed in an epoch the chat has left is refused: its sender applies the
        // commits and seals it again (RFC 9420 framing: version 1, PrivateMessage, group id, epoch).
        func privateMessage(epoch: UInt8) -> Data {
            Data([0, 1, 0, 2, 5]) + Data("c-mls".utf8) + Data([0, 0, 0, 0, 0, 0, 0, epoch]) + Data([1, 0xAA, 0xBB])
        }
        try await expectRefused(.conflict, "a message of a left epoch") {
            try await service.post(
                token: bob.token, endpointID: bob.endpoint, chatID: "c-mls", kind: .message, payload: privateMessage(epoch: 2),
                recipient: nil, clientID: "m-old")
        }
        let numbered = try await service.post(
            token: bob.token, endpointID: bob.endpoint, chatID: "c-mls", kind: .message, payload: privateMessage(epoch: 3),
            recipient: nil, clientID: "m-old")
        try expect(numbered.messageNumber == 1, "sealed again in the chat's epoch, it is numbered: \(numbered)")
        try await expectRefused(.invalidRequest, "a commit entry posted as a message") {
            try await service.post(
                token: alice.token, endpointID: alice.endpoint, chatID: "c-mls", kind: .commit, payload: Data("c".utf8),
                recipient: nil, clientID: nil)
        }
        try await expectRefused(.tooLarge, "an empty commit") {
            try await service.postCommit(
                token: alice.token, endpointID: alice.endpoint, chatID: "c-mls", epoch: 3, commit: Data(), welcome: nil,
                add: [], remove: [])
        }
        epoch = try await service.postCommit(
            token: carol.token, endpointID: carol.endpoint, chatID: "c-mls", epoch: 3, commit: Data("carol leaves".utf8),
            welcome: nil, add: [], remove: ["carol"])
        try expect(epoch == 4, "anyone may remove themselves: \(epoch)")
        try await expectRefused(.notAMember, "a commit from a user who left") {
            try await service.postCommit(
                token: carol.token, endpointID: carol.endpoint, chatID: "c-mls", epoch: 4, commit: Data("back".utf8),
                welcome: nil, add: [], remove: [])
        }
    }

    /// Security review 4: a member posts a commit every other member refuses (garbage, to the
    /// domain as good as any). An admin replaces it and every commit after it, naming the epoch
    /// the members are at; a member may not, nor may anyone replace an admin's commit, and the
    /// replacement, being an admin's, is final. Its entry carries the epoch it was made in.
    static func refusedCommitReplacement(_ domain: DomainUnderTest) async throws {
        let service = domain.service
        let alice = try await user(domain, "alice")
        let bob = try await user(domain, "bob")
        let mallory = try await user(domain, "mallory")
        _ = try await service.createChat(
            token: alice.token, endpointID: alice.endpoint, chatID: "c-wedge", participants: ["bob", "mallory"])
        var epoch = try await service.postCommit(
            token: alice.token, endpointID: alice.endpoint, chatID: "c-wedge", epoch: 0, commit: Data("add".utf8),
            welcome: nil, add: [], remove: [])
        // Mallory's garbage at epoch 1, then more on top of it.
        let garbage = Data((0..<300).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        epoch = try await service.postCommit(
            token: mallory.token, endpointID: mallory.endpoint, chatID: "c-wedge", epoch: 1, commit: garbage, welcome: nil,
            add: [], remove: [])
        epoch = try await service.postCommit(
            token: mallory.token, endpointID: mallory.endpoint, chatID: "c-wedge", epoch: 2, commit: garbage + garbage,
            welcome: nil, add: [], remove: [])
        try expect(epoch == 3, "the domain orders what it cannot read: \(epoch)")
        let bobStart = try await service.readMailbox(token: bob.token, endpointID: bob.endpoint, after: 0, limit: 100).count
        try await expectRefused(.notAMember, "a member's replacement") {
            try await service.postCommit(
                token: bob.token, endpointID: bob.endpoint, chatID: "c-wedge", epoch: 1, commit: Data("bob".utf8),
                welcome: nil, add: [], remove: [], replacingRefused: true)
        }
        try await expectRefused(.conflict, "replacing the admin's own commit at epoch 0") {
            try await service.postCommit(
                token: alice.token, endpointID: alice.endpoint, chatID: "c-wedge", epoch: 0, commit: Data("again".utf8),
                welcome: nil, add: [], remove: [], replacingRefused: true)
        }
        try await expectRefused(.conflict, "replacing at the chat's current epoch (nothing to replace)") {
            try await service.postCommit(
                token: alice.token, endpointID: alice.endpoint, chatID: "c-wedge", epoch: 3, commit: Data("now".utf8),
                welcome: nil, add: [], remove: [], replacingRefused: true)
        }
        epoch = try await service.postCommit(
            token: alice.token, endpointID: alice.endpoint, chatID: "c-wedge", epoch: 1, commit: Data("remove mallory".utf8),
            welcome: nil, add: [], remove: ["mallory"], replacingRefused: true)
        try expect(epoch == 2, "the chat goes back to where the members are, plus the admin's commit: \(epoch)")
        let info = try await service.chat(token: bob.token, endpointID: bob.endpoint, chatID: "c-wedge")
        try expect(
            info.epoch == 2 && !info.members.contains { $0.userID == "mallory" },
            "the chat is at epoch 2 without mallory: \(info.epoch), \(info.members.map(\.userID))")
        let entries = try await service.readMailbox(token: bob.token, endpointID: bob.endpoint, after: 0, limit: 100)
            .dropFirst(bobStart)
        try expect(
            entries.map(\.kind) == [.membership, .commit]
                && entries.last?.epoch == 1 && entries.last?.payload == Data("remove mallory".utf8),
            "bob gets the new membership and the admin's commit for epoch 1: \(entries.map(\.kind))")
        // The chat goes on from there, and the admin's replacement is final.
        try await expectRefused(.conflict, "replacing the admin's replacement") {
            try await service.postCommit(
                token: alice.token, endpointID: alice.endpoint, chatID: "c-wedge", epoch: 1, commit: Data("twice".utf8),
                welcome: nil, add: [], remove: [], replacingRefused: true)
        }
        epoch = try await service.postCommit(
            token: bob.token, endpointID: bob.endpoint, chatID: "c-wedge", epoch: 2, commit: Data("bob update".utf8),
            welcome: nil, add: [], remove: [])
        try expect(epoch == 3, "the next commit is ordered as usual: \(epoch)")
    }

    static func keyBlobs(_ domain: DomainUnderTest) async throws {
        let alice = try await user(domain, "alice")
        let bob = try await user(domain, "bob")
        let service = domain.service
        let first = try await service.putKeyBlob(
            token: alice.token, endpointID: alice.endpoint, name: "profile", data: Data("v1".utf8), expectedVersion: nil)
        try expect(first == 1, "the first version is 1, not \(first)")
        // A retry after a lost answer: the same bytes with the same expectation succeed again.
        let retried = try await service.putKeyBlob(
            token: alice.token, endpointID: alice.endpoint, name: "profile", data: Data("v1".utf8), expectedVersion: nil)
        try expect(retried == 1, "a repeated write is the same write, not version \(retried)")
        try await expectRefused(.conflict, "a write from a stale version") {
            try await service.putKeyBlob(
                token: alice.token, endpointID: alice.endpoint, name: "profile", data: Data("other".utf8), expectedVersion: nil)
        }
        let second = try await service.putKeyBlob(
            token: alice.token, endpointID: alice.endpoint, name: "profile", data: Data("v2".utf8), expectedVersion: 1)
        let fetched = try await service.fetchKeyBlob(token: alice.token, endpointID: alice.endpoint, name: "profile")
        try expect(
            second == 2 && fetched.blob == KeyBlob(name: "profile", data: Data("v2".utf8), version: 2),
            "the blob after two writes: \(String(describing: fetched.blob))")
        try await expectRefused(.invalidRequest, "an empty blob") {
            try await service.putKeyBlob(
                token: alice.token, endpointID: alice.endpoint, name: "x", data: Data(), expectedVersion: nil)
        }

        // Several blobs at once: all or none.
        try await expectRefused(.conflict, "a multi-blob write with one stale version") {
            try await service.putKeyBlobs(
                token: alice.token, endpointID: alice.endpoint,
                writes: [
                    KeyBlobWrite(name: "extra", data: Data("new".utf8), expectedVersion: nil),
                    KeyBlobWrite(name: "profile", data: Data("v3".utf8), expectedVersion: 1),
                ])
        }
        let untouched = try await service.fetchKeyBlob(token: alice.token, endpointID: alice.endpoint, name: "extra")
        try expect(untouched.blob == nil, "a refused multi-blob write wrote nothing: \(String(describing: untouched.blob))")
        let both = try await service.putKeyBlobs(
            token: alice.token, endpointID: alice.endpoint,
            writes: [
                KeyBlobWrite(name: "extra", data: Data("new".utf8), expectedVersion: nil),
                KeyBlobWrite(name: "profile", data: Data("v3".utf8), expectedVersion: 2),
            ])
        try expect(both == [1, 3], "the versions of a multi-blob write: \(both)")

        // A passcode attempt is the domain's OPRF evaluation, its proof checks out, and its
        // challenge is answered once by the identity key.
        let (identity, signing) = try identity("alice")
        try await service.publishIdentity(token: alice.token, endpointID: alice.endpoint, identity: identity)
        let oprf = OPRF.passcodeHardening
        let blinded = try oprf.blind(Data("a stretched passcode".utf8))
        let attempt = try await service.evaluatePasscode(
            token: alice.token, endpointID: alice.endpoint, blindedElement: blinded.element, keyID: nil)
        let policy = try await service.policy()
        try expect(
            attempt.current == nil && attempt.attemptsLeft == policy.unlockAttemptsPerHour - 1 && attempt.challenge.count == 32,
            "a first attempt: \(attempt.attemptsLeft) left, current \(String(describing: attempt.current))")
        let output = try oprf.finalize(
            [blinded], .init(elements: [attempt.requested.element], proof: attempt.requested.proof),
            publicKey: attempt.requested.publicKey)
        let again = try oprf.blind(Data("a stretched passcode".utf8))
        let repeated = try await service.evaluatePasscode(
            token: alice.token, endpointID: alice.endpoint, blindedElement: again.element, keyID: attempt.requested.keyID)
        try expect(
            try oprf.finalize(
                [again], .init(elements: [repeated.requested.element], proof: repeated.requested.proof),
                publicKey: attempt.requested.publicKey) == output && repeated.attemptsLeft == attempt.attemptsLeft - 1,
            "the same passcode gives the same output under the same key, and each attempt counts")
        let bobAttempt = try await service.evaluatePasscode(
            token: bob.token, endpointID: bob.endpoint, blindedElement: blinded.element, keyID: nil)
        try expect(bobAttempt.requested.publicKey != attempt.requested.publicKey, "each user has their own passcode key")
        try await expectRefused(.invalidRequest, "a blinded element that is not a point") {
            try await service.evaluatePasscode(
                token: alice.token, endpointID: alice.endpoint, blindedElement: Data([2] + [UInt8](repeating: 0xff, count: 32)),
                keyID: nil)
        }
        try await expectRefused(.notFound, "a passcode key the domain does not hold") {
            try await service.evaluatePasscode(
                token: alice.token, endpointID: alice.endpoint, blindedElement: blinded.element, keyID: "k999")
        }
        let challenge = attempt.challenge
        let message = unlockProofMessage(userID: "alice", endpointID: alice.endpoint, challenge: challenge)
        try await expectRefused(.invalidProof, "a proof by another key") {
            try await service.proveUnlock(
                token: alice.token, endpointID: alice.endpoint, challenge: challenge,
                signature: try Ed25519.PrivateKey().signature(for: message))
        }
        try await expectRefused(.invalidProof, "a proof of bob's attempt from alice") {
            try await service.proveUnlock(
                token: alice.token, endpointID: alice.endpoint, challenge: bobAttempt.challenge,
                signature: try signing.signature(
                    for: unlockProofMessage(userID: "alice", endpointID: alice.endpoint, challenge: bobAttempt.challenge)))
        }
        let signature = try signing.signature(for: message)
        try await service.proveUnlock(token: alice.token, endpointID: alice.endpoint, challenge: challenge, signature: signature)
        try await expectRefused(.invalidProof, "the same proof twice") {
            try await service.proveUnlock(
                token: alice.token, endpointID: alice.endpoint, challenge: challenge, signature: signature)
        }
        let third = try await service.evaluatePasscode(
            token: alice.token, endpointID: alice.endpoint, blindedElement: blinded.element, keyID: nil)
        // The two refused attempts above (not a point, an unknown key) counted: an attempt is
        // counted before the domain looks at it, so one past the limit costs it no OPRF work.
        try expect(
            third.attemptsLeft == repeated.attemptsLeft - 2, "a proven attempt no longer counts: \(third.attemptsLeft) left")
    }

    static func identities(_ domain: DomainUnderTest) async throws {
        let alice = try await user(domain, "alice")
        let bob = try await user(domain, "bob")
        let service = domain.service
        try expect(
            try await service.identityKeyVersion(token: alice.token, endpointID: alice.endpoint) == 0, "no identity yet")
        try expect(
            try await service.identity(token: bob.token, endpointID: bob.endpoint, userID: "alice") == nil, "no identity yet")
        let (published, aliceKey) = try identity("alice")
        try await service.publishIdentity(token: alice.token, endpointID: alice.endpoint, identity: published)
        try await service.publishIdentity(token: alice.token, endpointID: alice.endpoint, identity: published)
        try expect(
            try await service.identity(token: bob.token, endpointID: bob.endpoint, userID: "alice") == published,
            "bob reads alice's identity")
        let (forBob, _) = try identity("bob")
        try await expectRefused(.forbidden, "publishing another user's identity") {
            try await service.publishIdentity(token: alice.token, endpointID: alice.endpoint, identity: forBob)
        }
        try await expectRefused(.invalidRequest, "an identity not signed by its own key") {
            try await service.publishIdentity(
                token: bob.token, endpointID: bob.endpoint, identity: forBob.withSignature(Data(count: 64)))
        }
        // A user id with the characters a query string treats specially reaches the domain whole.
        let odd = try await user(domain, "o&d=d+1 %", endpoint: "odd-1")
        let (oddIdentity, _) = try identity(odd.id)
        try await service.publishIdentity(token: odd.token, endpointID: odd.endpoint, identity: oddIdentity)
        try expect(
            try await service.identity(token: bob.token, endpointID: bob.endpoint, userID: odd.id) == oddIdentity,
            "a user id with &, =, + and % is looked up as itself")
        // A token alone never replaces an identity: not by publishing over it, and a reset
        // without the current key waits (bob sees it) until any of alice's devices cancels it.
        try await expectRefused(.conflict, "publishing over an identity without a reset") {
            try await service.publishIdentity(
                token: alice.token, endpointID: alice.endpoint, identity: try identity("alice", version: 5).0)
        }
        let started = try await service.resetIdentity(token: alice.token, endpointID: alice.endpoint, signature: nil)
        guard case .pending(let pending) = started,
            pending.effectiveAt.timeIntervalSince(pending.requestedAt) == Double(try await service.policy().identityResetDelay),
            pending.endpointID == alice.endpoint
        else { throw ConformanceFailure("an unsigned reset waits out the delay: \(started)") }
        let again = try await service.resetIdentity(token: alice.token, endpointID: alice.endpoint, signature: nil)
        try expect(again == started, "asking again before the delay changes nothing: \(again)")
        try expect(
            try await service.pendingIdentityReset(token: bob.token, endpointID: bob.endpoint, userID: "alice") == pending,
            "bob sees alice's pending reset")
        try expect(
            try await service.identity(token: bob.token, endpointID: bob.endpoint, userID: "alice") == published,
            "the identity stays while the reset waits")
        try await service.cancelIdentityReset(token: alice.token, endpointID: alice.endpoint)
        try expect(
            try await service.pendingIdentityReset(token: bob.token, endpointID: bob.endpoint, userID: "alice") == nil,
            "a cancelled reset is gone")
        try await expectRefused(.notFound, "cancelling a reset that is not pending") {
            try await service.cancelIdentityReset(token: alice.token, endpointID: alice.endpoint)
        }
        try await expectRefused(.invalidProof, "a reset signed by another key") {
            try await service.resetIdentity(
                token: alice.token, endpointID: alice.endpoint,
                signature: try Ed25519.PrivateKey().signature(
                    for: identityResetMessage(userID: "alice", endpointID: alice.endpoint, keyVersion: 1)))
        }
        let signed = try aliceKey.signature(for: identityResetMessage(userID: "alice", endpointID: alice.endpoint, keyVersion: 1))
        let reset = try await service.resetIdentity(token: alice.token, endpointID: alice.endpoint, signature: signed)
        try expect(reset == .completed, "a reset signed by the current key happens at once: \(reset)")
        try expect(
            try await service.identity(token: bob.token, endpointID: bob.endpoint, userID: "alice") == nil,
            "a reset identity is gone")
        try expect(
            try await service.identityKeyVersion(token: alice.token, endpointID: alice.endpoint) == 1,
            "the version survives the reset")
        let (older, _) = try identity("alice", version: 1)
        try await expectRefused(.conflict, "an identity no newer than the last") {
            try await service.publishIdentity(token: alice.token, endpointID: alice.endpoint, identity: older)
        }
        let (newer, _) = try identity("alice", version: 2)
        try await service.publishIdentity(token: alice.token, endpointID: alice.endpoint, identity: newer)
    }

    /// One token fills no one's mailbox: past the policy's posts, bytes, commits or chats for a
    /// user, a call is refused (429, with the seconds to wait) and writes nothing; other users are
    /// not held back, and a retry of an accepted post is answered as before.
    static func writeLimits(_ domain: DomainUnderTest) async throws {
        var policy = try await domain.service.policy()
        policy.postsPerMinute = 3
        policy.commitsPerMinute = 2
        policy.chatsPerHour = 2
        try await domain.admin.setPolicy(policy)
        let service = domain.service
        let alice = try await user(domain, "alice")
        let bob = try await user(domain, "bob")
        func refusedWithWait(_ what: String, _ body: () async throws -> Void) async throws {
            do {
                try await body()
                throw ConformanceFailure("\(what) was not refused")
            } catch let error as DomainError {
                try expect(
                    error.code == .tooManyAttempts && (error.retryAfter ?? 0) >= 1,
                    "\(what) was refused with \(error.code), retry after \(String(describing: error.retryAfter))")
            }
        }
        let chat = try await service.createChat(
            token: alice.token, endpointID: alice.endpoint, chatID: "q1", participants: ["bob"])
        _ = try await service.createChat(token: alice.token, endpointID: alice.endpoint, chatID: "q2", participants: ["bob"])
        try await refusedWithWait("a third chat in the hour") {
            _ = try await service.createChat(token: alice.token, endpointID: alice.endpoint, chatID: "q3", participants: ["bob"])
        }
        try await expectRefused(.notFound, "the refused chat") {
            try await service.chat(token: alice.token, endpointID: alice.endpoint, chatID: "q3")
        }
        for index in 0..<3 {
            _ = try await service.post(
                token: alice.token, endpointID: alice.endpoint, chatID: chat.chatID, kind: .message,
                payload: Data([UInt8(index)]),
                recipient: nil, clientID: "m\(index)")
        }
        try await refusedWithWait("a fourth post in the minute") {
            _ = try await service.post(
                token: alice.token, endpointID: alice.endpoint, chatID: chat.chatID, kind: .message, payload: Data([9]),
                recipient: nil, clientID: "m9")
        }
        let retried = try await service.post(
            token: alice.token, endpointID: alice.endpoint, chatID: chat.chatID, kind: .message, payload: Data([0]),
            recipient: nil, clientID: "m0")
        try expect(retried.messageNumber == 1, "a retry of an accepted post is answered: \(retried)")
        let bobPost = try await service.post(
            token: bob.token, endpointID: bob.endpoint, chatID: chat.chatID, kind: .message, payload: Data([7]), recipient: nil,
            clientID: nil)
        try expect(bobPost.messageNumber == 4, "bob is not held back, and the refused post took no number: \(bobPost)")
        for epoch in 0..<2 {
            _ = try await service.postCommit(
                token: bob.token, endpointID: bob.endpoint, chatID: chat.chatID, epoch: Int64(epoch),
                commit: Data([1, UInt8(epoch)]),
                welcome: nil, add: [], remove: [])
        }
        try await refusedWithWait("a third commit in the minute") {
            _ = try await service.postCommit(
                token: bob.token, endpointID: bob.endpoint, chatID: chat.chatID, epoch: 2, commit: Data([1, 2]), welcome: nil,
                add: [], remove: [])
        }
        let info = try await service.chat(token: bob.token, endpointID: bob.endpoint, chatID: chat.chatID)
        try expect(info.epoch == 2, "the refused commit moved nothing: \(info.epoch)")
        // Bytes: each post's payload times its recipients.
        policy.postsPerMinute = 1000
        policy.postedBytesPerMinute = 1 << 20
        try await domain.admin.setPolicy(policy)
        let carol = try await user(domain, "carol")
        let big = try await service.createChat(
            token: carol.token, endpointID: carol.endpoint, chatID: "q4", participants: ["bob"])
        let payload = Data(repeating: 7, count: 60_000)
        var accepted = 0
        for _ in 0..<12 {
            do {
                _ = try await service.post(
                    token: carol.token, endpointID: carol.endpoint, chatID: big.chatID, kind: .message, payload: payload,
                    recipient: nil, clientID: nil)
                accepted += 1
            } catch let error as DomainError where error.code == .tooManyAttempts { break }
        }
        try expect(accepted == (1 << 20) / (2 * 60_000), "posts of 60 KB to two members up to 1 MiB: \(accepted)")
        // What one sender leaves unread for one user: refused past the cap whatever the minute's
        // budget, until that user reads; the sender's own mailbox does not count.
        policy.postedBytesPerMinute = 1 << 40
        policy.unreadBytesPerSender = 1 << 20
        try await domain.admin.setPolicy(policy)
        let dave = try await user(domain, "dave")
        let erin = try await user(domain, "erin")
        let unread = try await service.createChat(
            token: dave.token, endpointID: dave.endpoint, chatID: "q5", participants: ["erin"])
        func daveSends(_ clientID: String) async throws {
            _ = try await service.post(
                token: dave.token, endpointID: dave.endpoint, chatID: unread.chatID, kind: .message, payload: payload,
                recipient: nil, clientID: clientID)
        }
        for index in 0..<(1 << 20) / 60_000 { try await daveSends("u\(index)") }
        try await refusedWithWait("a post past what dave may leave unread for erin") { try await daveSends("over") }
        let entries = try await service.readMailbox(
            token: erin.token, endpointID: erin.endpoint, after: 0, limit: 1000, wait: .zero)
        guard let last = entries.last?.sequence else { throw ConformanceFailure("erin's mailbox is empty") }
        _ = try await service.readMailbox(token: erin.token, endpointID: erin.endpoint, after: last, limit: 10, wait: .zero)
        try await daveSends("over")
    }

    static func chats(_ domain: DomainUnderTest) async throws {
        let alice = try await user(domain, "alice")
        let bob = try await user(domain, "bob")
        let carol = try await user(domain, "carol")
        let service = domain.service
        let created = try await service.createChat(
            token: alice.token, endpointID: alice.endpoint, chatID: "c1", participants: ["bob"],
            posts: [ChatPost(kind: .event, payload: Data("subject".utf8))])
        try expect(
            created.members == [ChatMember(userID: "alice", isAdmin: true), ChatMember(userID: "bob", isAdmin: false)],
            "the members: \(created.members)")
        // A retry of the same creation is the same chat, and sends nothing twice.
        let again = try await service.createChat(
            token: alice.token, endpointID: alice.endpoint, chatID: "c1", participants: ["bob"])
        try expect(again == created, "a repeated creation: \(again)")
        try await expectRefused(.conflict, "another chat under a taken id") {
            try await service.createChat(token: carol.token, endpointID: carol.endpoint, chatID: "c1", participants: [])
        }
        // Members are users of the domain: made-up ids fill no mailboxes, and nothing is written.
        let madeUp = (0..<999).map { "nobody-\($0)" }
        try await expectRefused(.notFound, "a chat of made-up users") {
            try await service.createChat(token: carol.token, endpointID: carol.endpoint, chatID: "c-fake", participants: madeUp)
        }
        try await expectRefused(.notFound, "a chat with one made-up user") {
            try await service.createChat(
                token: carol.token, endpointID: carol.endpoint, chatID: "c-fake", participants: ["bob", "nobody"])
        }
        try await expectRefused(.notFound, "the chat of the refused creation") {
            try await service.chat(token: carol.token, endpointID: carol.endpoint, chatID: "c-fake")
        }
        let bobs = try await service.readMailbox(token: bob.token, endpointID: bob.endpoint, after: 0, limit: 100)
        try expect(bobs.map(\.kind) == [.membership, .event], "bob heard of the chat once: \(bobs.map(\.kind))")

        // Numbers are gapless; a repeated post (same client id) is the same post.
        var numbers: [Int64] = []
        for index in 1...3 {
            let receipt = try await service.post(
                token: index == 2 ? bob.token : alice.token, endpointID: index == 2 ? bob.endpoint : alice.endpoint, chatID: "c1",
                kind: .message, payload: Data("m\(index)".utf8), recipient: nil, clientID: "client-\(index)")
            numbers.append(receipt.messageNumber ?? -1)
        }
        let repeated = try await service.post(
            token: alice.token, endpointID: alice.endpoint, chatID: "c1", kind: .message, payload: Data("m3".utf8),
            recipient: nil,
            clientID: "client-3")
        try expect(numbers == [1, 2, 3] && repeated.messageNumber == 3, "numbers \(numbers), repeat \(repeated)")
        try await expectRefused(.notAMember, "a non-member's post") {
            try await service.post(
                token: carol.token, endpointID: carol.endpoint, chatID: "c1", kind: .message, payload: Data("x".utf8),
                recipient: nil, clientID: nil)
        }
        try await expectRefused(.notAMember, "a non-member's read of the chat") {
            try await service.chat(token: carol.token, endpointID: carol.endpoint, chatID: "c1")
        }
        try await expectRefused(.notAMember, "a member who is no admin inviting") {
            try await service.updateMembers(token: bob.token, endpointID: bob.endpoint, chatID: "c1", add: ["carol"], remove: [])
        }
        let grown = try await service.updateMembers(
            token: alice.token, endpointID: alice.endpoint, chatID: "c1", add: ["carol"], remove: [])
        try expect(grown.members.map(\.userID) == ["alice", "bob", "carol"], "after the invitation: \(grown.members)")
        // Repeating the change changes nothing and tells nobody again.
        let carolsBefore = try await service.readMailbox(token: carol.token, endpointID: carol.endpoint, after: 0, limit: 100)
        _ = try await service.updateMembers(
            token: alice.token, endpointID: alice.endpoint, chatID: "c1", add: ["carol"], remove: [])
        let carolsAfter = try await service.readMailbox(token: carol.token, endpointID: carol.endpoint, after: 0, limit: 100)
        try expect(carolsAfter.count == carolsBefore.count, "a repeated invitation is not sent twice")
        let left = try await service.updateMembers(
            token: bob.token, endpointID: bob.endpoint, chatID: "c1", add: [], remove: ["bob"])
        try expect(left.members.map(\.userID) == ["alice", "carol"], "bob left: \(left.members)")
        try await expectRefused(.tooLarge, "an oversized payload") {
            try await service.post(
                token: alice.token, endpointID: alice.endpoint, chatID: "c1", kind: .message,
                payload: Data(count: EmbeddedDomain.maximumPayloadSize + 1), recipient: nil, clientID: nil)
        }
        try await expectRefused(.invalidRequest, "a membership entry posted by a user") {
            try await service.post(
                token: alice.token, endpointID: alice.endpoint, chatID: "c1", kind: .membership, payload: Data(), recipient: nil,
                clientID: nil)
        }
    }

    static func mailboxes(_ domain: DomainUnderTest) async throws {
        let alice = try await user(domain, "alice")
        let bob = try await user(domain, "bob")
        let service = domain.service
        _ = try await service.createChat(token: alice.token, endpointID: alice.endpoint, chatID: "c2", participants: ["bob"])
        for index in 1...5 {
            _ = try await service.post(
                token: alice.token, endpointID: alice.endpoint, chatID: "c2", kind: .message, payload: Data("\(index)".utf8),
                recipient: nil, clientID: nil)
        }
        let all = try await service.readMailbox(token: bob.token, endpointID: bob.endpoint, after: 0, limit: 100)
        try expect(all.count == 6 && all.map(\.sequence) == Array(1...6), "bob's six entries in order: \(all.map(\.sequence))")
        let page = try await service.readMailbox(token: bob.token, endpointID: bob.endpoint, after: 2, limit: 2)
        try expect(page.map(\.sequence) == [3, 4], "a page after 2: \(page.map(\.sequence))")
        try expect(all[1].sender == "alice" && all[1].messageNumber == 1 && all[1].chatID == "c2", "an entry: \(all[1])")
        // A long-poll returns with the entry that arrives while it waits. (That it returns at
        // once, not at its timeout, is proven where no clock is involved: MailboxWaitTests waits
        // an hour for a wake-up.)
        let waiting = Task {
            try await service.readMailbox(token: bob.token, endpointID: bob.endpoint, after: 6, limit: 10, wait: .seconds(30))
        }
        try await Task.sleep(for: .milliseconds(300))
        _ = try await service.post(
            token: alice.token, endpointID: alice.endpoint, chatID: "c2", kind: .message, payload: Data("late".utf8),
            recipient: nil, clientID: nil)
        let woken = try await waiting.value
        try expect(woken.map(\.payload) == [Data("late".utf8)], "the long-poll's entry: \(woken)")
        let quiet = try await service.readMailbox(
            token: bob.token, endpointID: bob.endpoint, after: 7, limit: 10, wait: .seconds(1))
        try expect(quiet.isEmpty, "nothing new: the long-poll ends empty")
        try await expectRefused(.invalidRequest, "a wait over 30 seconds") {
            try await service.readMailbox(token: bob.token, endpointID: bob.endpoint, after: 0, limit: 10, wait: .seconds(31))
        }
    }

    /// An ephemeral post reaches every member unnumbered, wakes a long-poll, and is bounded: to
    /// every member (no recipient), 16 KB, members only, and 120 a minute from one user, counted
    /// apart from the user's posts. (That it expires is checked with a clock: `EphemeralEntryTests`.)
    static func ephemeralEntries(_ domain: DomainUnderTest) async throws {
        let alice = try await user(domain, "alice")
        let bob = try await user(domain, "bob")
        let mallory = try await user(domain, "mallory")
        let service = domain.service
        _ = try await service.createChat(token: alice.token, endpointID: alice.endpoint, chatID: "c-live", participants: ["bob"])
        let start = try await service.readMailbox(token: bob.token, endpointID: bob.endpoint, after: 0, limit: 100)
        let cursor = start.last?.sequence ?? 0
        let waiting = Task {
            try await service.readMailbox(
                token: bob.token, endpointID: bob.endpoint, after: cursor, limit: 10, wait: .seconds(30))
        }
        try await Task.sleep(for: .milliseconds(300))
        let posted = ContinuousClock.now
        let receipt = try await service.post(
            token: alice.token, endpointID: alice.endpoint, chatID: "c-live", kind: .ephemeral, payload: Data("typing".utf8),
            recipient: nil, clientID: nil)
        try expect(receipt.messageNumber == nil, "an ephemeral post is not numbered: \(receipt)")
        var woken = try await waiting.value
        var ephemeralPosts = 1
        if woken.isEmpty, ContinuousClock.now - posted > .seconds(Int(DomainEngine.ephemeralLifetime)) {
            ephemeralPosts += 1
            // A machine so loaded that the wait outlived the entry's lifetime: post again and
            // read at once (what is checked is that a read gets it, not how fast the load is).
            _ = try await service.post(
                token: alice.token, endpointID: alice.endpoint, chatID: "c-live", kind: .ephemeral,
                payload: Data("typing".utf8), recipient: nil, clientID: nil)
            woken = try await service.readMailbox(token: bob.token, endpointID: bob.endpoint, after: cursor, limit: 10)
        }
        try expect(
            woken.map(\.kind) == [.ephemeral] && woken.first?.payload == Data("typing".utf8) && woken.first?.sender == "alice",
            "the long-poll gets the ephemeral entry: \(woken)")
        try await expectRefused(.invalidRequest, "an ephemeral post to one member") {
            try await service.post(
                token: alice.token, endpointID: alice.endpoint, chatID: "c-live", kind: .ephemeral, payload: Data([1]),
                recipient: "bob", clientID: nil)
        }
        try await expectRefused(.invalidRequest, "an ephemeral post over 16 KB") {
            try await service.post(
                token: alice.token, endpointID: alice.endpoint, chatID: "c-live", kind: .ephemeral,
                payload: Data(count: 16 * 1024 + 1), recipient: nil, clientID: nil)
        }
        try await expectRefused(.notAMember, "an ephemeral post by a non-member") {
            try await service.post(
                token: mallory.token, endpointID: mallory.endpoint, chatID: "c-live", kind: .ephemeral, payload: Data([1]),
                recipient: nil, clientID: nil)
        }
        // 120 a minute (one or two are posted already), then refused with the wait; a message
        // still goes.
        for _ in ephemeralPosts..<120 {
            _ = try await service.post(
                token: alice.token, endpointID: alice.endpoint, chatID: "c-live", kind: .ephemeral, payload: Data([2]),
                recipient: nil, clientID: nil)
        }
        try await expectRefused(.tooManyAttempts, "the 121st ephemeral post in a minute") {
            try await service.post(
                token: alice.token, endpointID: alice.endpoint, chatID: "c-live", kind: .ephemeral, payload: Data([3]),
                recipient: nil, clientID: nil)
        }
        let message = try await service.post(
            token: alice.token, endpointID: alice.endpoint, chatID: "c-live", kind: .message, payload: Data("still".utf8),
            recipient: nil, clientID: nil)
        try expect(message.messageNumber == 1, "typing takes nothing from what a user may send: \(message)")
    }

    /// A member reports another with their messages; the operator lists it. A non-member, a
    /// report of a non-member or of oneself, messages of someone else and a message number the
    /// chat never had are refused.
    static func reports(_ domain: DomainUnderTest) async throws {
        let alice = try await user(domain, "alice")
        let bob = try await user(domain, "bob")
        let mallory = try await user(domain, "mallory")
        let service = domain.service
        _ = try await service.createChat(
            token: alice.token, endpointID: alice.endpoint, chatID: "c-report", participants: ["bob"])
        _ = try await service.post(
            token: bob.token, endpointID: bob.endpoint, chatID: "c-report", kind: .message, payload: Data("abuse".utf8),
            recipient: nil, clientID: nil)
        let message = ReportedMessage(
            id: "m1", sender: "bob", number: 1, content: "something abusive", sentAt: Date(timeIntervalSince1970: 1_790_000_000))
        let id = try await service.report(
            token: alice.token, endpointID: alice.endpoint, chatID: "c-report", user: "bob", reason: "abuse", messages: [message])
        let listed = try await domain.admin.reports(limit: 10)
        try expect(
            listed.map(\.id) == [id] && listed.first?.messages == [message] && listed.first?.reporter == "alice"
                && listed.first?.reported == "bob" && listed.first?.reason == "abuse",
            "the operator lists the report: \(listed)")
        try await expectRefused(.notAMember, "a report by a non-member") {
            try await service.report(
                token: mallory.token, endpointID: mallory.endpoint, chatID: "c-report", user: "bob", reason: "x",
                messages: [message])
        }
        try await expectRefused(.notAMember, "a report of a non-member") {
            var theirs = message
            theirs.sender = "mallory"
            return try await service.report(
                token: alice.token, endpointID: alice.endpoint, chatID: "c-report", user: "mallory", reason: "x",
                messages: [theirs])
        }
        try await expectRefused(.invalidRequest, "a message of someone else than the reported user") {
            var aliceOwn = message
            aliceOwn.sender = "alice"
            return try await service.report(
                token: alice.token, endpointID: alice.endpoint, chatID: "c-report", user: "bob", reason: "x",
                messages: [aliceOwn])
        }
        try await expectRefused(.invalidRequest, "a message number the chat never had") {
            var invented = message
            invented.number = 2
            return try await service.report(
                token: alice.token, endpointID: alice.endpoint, chatID: "c-report", user: "bob", reason: "x",
                messages: [invented])
        }
        try await expectRefused(.invalidRequest, "a report of oneself, or with no message") {
            try await service.report(
                token: alice.token, endpointID: alice.endpoint, chatID: "c-report", user: "bob", reason: "x", messages: [])
        }
        try expect(try await domain.admin.reports(limit: 10).count == 1, "nothing refused was kept")
    }

    static func blobs(_ domain: DomainUnderTest) async throws {
        let alice = try await user(domain, "alice")
        let bob = try await user(domain, "bob")
        let mallory = try await user(domain, "mallory")
        let service = domain.service
        _ = try await service.createChat(token: alice.token, endpointID: alice.endpoint, chatID: "c-blob", participants: ["bob"])
        let blobID = String(repeating: "ab", count: 16)
        let part = DomainEngine.blobPartSize
        let bytes = SystemRandom.bytes(count: part + 10)
        let size = Int64(bytes.count)
        let created = try await service.createBlob(
            token: alice.token, endpointID: alice.endpoint, chatID: "c-blob", blobID: blobID, size: size)
        try expect(
            created == BlobStatus(blobID: blobID, chatID: "c-blob", size: size, received: 0, partSize: part),
            "a new blob: \(created)")
        let again = try await service.createBlob(
            token: alice.token, endpointID: alice.endpoint, chatID: "c-blob", blobID: blobID, size: size)
        try expect(again == created, "a repeat answers where it stands")
        try await expectRefused(.notAMember, "a blob in a chat the caller is not in") {
            try await service.createBlob(
                token: mallory.token, endpointID: mallory.endpoint, chatID: "c-blob", blobID: String(repeating: "cd", count: 16),
                size: 10)
        }
        try await expectRefused(.tooLarge, "a blob past the size cap") {
            try await service.createBlob(
                token: alice.token, endpointID: alice.endpoint, chatID: "c-blob", blobID: String(repeating: "ef", count: 16),
                size: 200 << 20)
        }
        try await expectRefused(.invalidRequest, "a blob id that is not 32 hexadecimal digits") {
            try await service.createBlob(
                token: alice.token, endpointID: alice.endpoint, chatID: "c-blob", blobID: "../../etc", size: 10)
        }
        try await expectRefused(.conflict, "a part that is not where the upload stands") {
            try await service.uploadBlob(
                token: alice.token, endpointID: alice.endpoint, blobID: blobID, offset: Int64(part), bytes: bytes.suffix(10))
        }
        try await expectRefused(.invalidRequest, "a part of the wrong size") {
            try await service.uploadBlob(
                token: alice.token, endpointID: alice.endpoint, blobID: blobID, offset: 0, bytes: bytes.prefix(100))
        }
        try await expectRefused(.forbidden, "a part of another user's blob") {
            try await service.uploadBlob(
                token: bob.token, endpointID: bob.endpoint, blobID: blobID, offset: 0, bytes: bytes.prefix(part))
        }
        for _ in 0..<2 {
            let status = try await service.uploadBlob(
                token: alice.token, endpointID: alice.endpoint, blobID: blobID, offset: 0, bytes: bytes.prefix(part))
            try expect(status.received == Int64(part), "the first part is stored once: \(status)")
        }
        try await expectRefused(.notFound, "a read before the blob is whole") {
            try await service.downloadBlob(token: bob.token, endpointID: bob.endpoint, blobID: blobID, offset: 0, length: 10)
        }
        let done = try await service.uploadBlob(
            token: alice.token, endpointID: alice.endpoint, blobID: blobID, offset: Int64(part), bytes: bytes.suffix(10))
        try expect(done.isComplete, "the last part completes it: \(done)")
        let status = try await service.blobStatus(token: bob.token, endpointID: bob.endpoint, blobID: blobID)
        try expect(status == done, "a member sees where it stands")
        let head = try await service.downloadBlob(
            token: bob.token, endpointID: bob.endpoint, blobID: blobID, offset: 0, length: part)
        let across = try await service.downloadBlob(
            token: bob.token, endpointID: bob.endpoint, blobID: blobID, offset: Int64(part - 5), length: 100)
        try expect(head == bytes.prefix(part), "a member reads the first part")
        try expect(across == bytes.suffix(15), "a range across the parts ends with the blob: \(across.count) bytes")
        try await expectRefused(.rangeNotSatisfiable, "a read past the end") {
            try await service.downloadBlob(token: bob.token, endpointID: bob.endpoint, blobID: blobID, offset: size, length: 1)
        }
        try await expectRefused(.notAMember, "a read by a non-member") {
            try await service.downloadBlob(
                token: mallory.token, endpointID: mallory.endpoint, blobID: blobID, offset: 0, length: 1)
        }
        try await expectRefused(.forbidden, "a delete by a member who did not upload it") {
            try await service.deleteBlob(token: bob.token, endpointID: bob.endpoint, blobID: blobID)
        }
        try await service.deleteBlob(token: alice.token, endpointID: alice.endpoint, blobID: blobID)
        try await service.deleteBlob(token: alice.token, endpointID: alice.endpoint, blobID: blobID)
        try await expectRefused(.notFound, "a deleted blob") {
            try await service.blobStatus(token: alice.token, endpointID: alice.endpoint, blobID: blobID)
        }
    }

    static func blocking(_ domain: DomainUnderTest) async throws {
        let alice = try await user(domain, "alice")
        let bob = try await user(domain, "bob")
        _ = try await user(domain, "carol")
        let service = domain.service
        try await service.setBlocked(token: alice.token, endpointID: alice.endpoint, userID: "bob", blocked: true)
        try await service.setBlocked(token: alice.token, endpointID: alice.endpoint, userID: "bob", blocked: true)
        try expect(
            try await service.blockedUsers(token: alice.token, endpointID: alice.endpoint) == ["bob"], "alice's list names bob")
        try expect(try await service.blockedUsers(token: bob.token, endpointID: bob.endpoint).isEmpty, "bob's list is his own")
        let told = try await service.readMailbox(
            token: alice.token, endpointID: alice.endpoint, after: 0, limit: 100, wait: .zero)
        try expect(told.filter { $0.kind == .devices }.count == 1, "alice's devices are told once: \(told.map(\.kind))")
        try await expectRefused(.forbidden, "a chat bob starts with alice") {
            try await service.createChat(
                token: bob.token, endpointID: bob.endpoint, chatID: "c-blocked", participants: ["alice"], posts: [])
        }
        _ = try await service.createChat(
            token: bob.token, endpointID: bob.endpoint, chatID: "c-bob", participants: ["carol"], posts: [])
        try await expectRefused(.forbidden, "bob adding alice to a chat") {
            try await service.updateMembers(
                token: bob.token, endpointID: bob.endpoint, chatID: "c-bob", add: ["alice"], remove: [], posts: [])
        }
        let aliceChat = try await service.createChat(
            token: alice.token, endpointID: alice.endpoint, chatID: "c-alice", participants: ["bob"], posts: [])
        try expect(aliceChat.members.count == 2, "alice still starts a chat with bob herself (her devices decide)")
        try await expectRefused(.invalidRequest, "blocking oneself") {
            try await service.setBlocked(token: alice.token, endpointID: alice.endpoint, userID: "alice", blocked: true)
        }
        try await service.setBlocked(token: alice.token, endpointID: alice.endpoint, userID: "bob", blocked: false)
        try expect(try await service.blockedUsers(token: alice.token, endpointID: alice.endpoint).isEmpty, "unblocked")
        let info = try await service.createChat(
            token: bob.token, endpointID: bob.endpoint, chatID: "c-again", participants: ["alice"], posts: [])
        try expect(info.members.count == 2, "once unblocked, bob starts a chat with alice")
    }

    static func moderation(_ domain: DomainUnderTest) async throws {
        let alice = try await user(domain, "alice")
        let mallory = try await user(domain, "mallory")
        let service = domain.service
        _ = try await service.createChat(token: alice.token, endpointID: alice.endpoint, chatID: "c3", participants: ["mallory"])
        let infraction = try await domain.admin.issueInfraction(to: "mallory", reason: "spam")
        try await domain.admin.timeOut("mallory", for: 600, reason: "flooding")
        let status = try await service.userStatus(token: mallory.token, endpointID: mallory.endpoint)
        guard case .timeout(let until, let reason) = status.state, reason == "flooding", until > Date() else {
            throw ConformanceFailure("mallory's status: \(status)")
        }
        try expect(status.infractions.map(\.id) == [infraction.id], "the infraction: \(status.infractions)")
        try await expectRefused(.moderated, "a timed-out user's post") {
            try await service.post(
                token: mallory.token, endpointID: mallory.endpoint, chatID: "c3", kind: .message, payload: Data("x".utf8),
                recipient: nil, clientID: nil)
        }
        try await domain.admin.ban("mallory", reason: "abuse")
        guard case .banned = try await domain.admin.moderationStatus(of: "mallory").state else {
            throw ConformanceFailure("mallory is not banned")
        }
        try await domain.admin.unban("mallory")
        _ = try await service.post(
            token: mallory.token, endpointID: mallory.endpoint, chatID: "c3", kind: .message, payload: Data("sorry".utf8),
            recipient: nil, clientID: nil)
        try await service.dismissInfraction(token: mallory.token, endpointID: mallory.endpoint, id: infraction.id)
        try await expectRefused(.notFound, "dismissing it twice") {
            try await service.dismissInfraction(token: mallory.token, endpointID: mallory.endpoint, id: infraction.id)
        }
        try await expectRefused(.notFound, "dismissing another user's infraction") {
            let other = try await domain.admin.issueInfraction(to: "alice", reason: "x")
            try await service.dismissInfraction(token: mallory.token, endpointID: mallory.endpoint, id: other.id)
        }
    }

    static func accounts(_ domain: DomainUnderTest) async throws {
        let service = domain.service
        try await service.signUp(
            SignUpRequest(userName: "fay", password: "Correct-Horse-7", email: "fay@example.com", country: "FR", age: 30))
        try await expectRefused(.notActivated, "a login before activation") {
            try await service.logIn(userName: "fay", password: "Correct-Horse-7")
        }
        let code = try await latestCode(domain, to: "fay@example.com")
        try await expectRefused(.codeInvalid, "a wrong activation code") {
            try await service.activate(userName: "fay", code: code == "000000" ? "111111" : "000000")
        }
        try await service.activate(userName: "fay", code: code)
        try await expectRefused(.invalidCredentials, "a wrong password") {
            try await service.logIn(userName: "fay", password: "wrong-password-1")
        }
        let login = try await service.logIn(userName: "fay", password: "Correct-Horse-7")
        try expect(try await service.validate(token: login.token).userID == "fay", "the login's token proves fay")
        let refreshToken = try login.refreshToken ?? { throw ConformanceFailure("no refresh token") }()
        let refreshed = try await service.refresh(refreshToken: refreshToken)
        try await expectRefused(.invalidToken, "the old refresh token") { try await service.refresh(refreshToken: refreshToken) }
        try await service.revoke(refreshToken: refreshed.refreshToken ?? "")
        try await service.requestPasswordReset(email: "fay@example.com")
        try await service.requestPasswordReset(email: "nobody@example.com")  // says nothing either way
        let reset = try await latestCode(domain, to: "fay@example.com")
        try await service.resetPassword(email: "fay@example.com", code: reset, newPassword: "Battery-Staple-9")
        _ = try await service.logIn(userName: "fay", password: "Battery-Staple-9")
        let names = try await domain.admin.accounts().map(\.userName)
        try expect(names == ["fay"], "the operator sees the account: \(names)")
    }

    /// The six-digit code in the newest mail to `address`.
    static func latestCode(_ domain: DomainUnderTest, to address: String) async throws -> String {
        guard let mail = try await domain.admin.outbox(recipient: address, limit: 1).last else {
            throw ConformanceFailure("no mail to \(address)")
        }
        let digits = mail.body.split(whereSeparator: { !$0.isNumber }).first { $0.count == 6 }
        guard let digits else { throw ConformanceFailure("no code in: \(mail.body)") }
        return String(digits)
    }

    static func administration(_ domain: DomainUnderTest) async throws {
        let alice = try await user(domain, "alice")
        _ = try await user(domain, "alice", endpoint: "alice-2")
        let users = try await domain.admin.endpointUsers()
        try expect(users == [EndpointUser(userID: "alice", endpoints: 2)], "users with endpoints: \(users)")
        try await domain.admin.deregisterEndpoint("alice-2")
        try expect(try await domain.admin.endpoints(of: "alice").map(\.endpointID) == [alice.endpoint], "after the removal")
        try await expectRefused(.notFound, "removing it again") { try await domain.admin.deregisterEndpoint("alice-2") }
        let keys = try await domain.admin.issuerKeys("test")
        try expect(!keys.keys.isEmpty, "the test issuer has keys")
        try await expectRefused(.invalidRequest, "an issuer kind that is none") { try await domain.admin.issuerKeys("other") }
        let external = TokenIssuer(issuer: "https://id.example.com", key: try Ed25519.PrivateKey(), keyID: "k1")
        try await domain.admin.trustIssuer("https://id.example.com", audience: "app", jwks: try external.jwks.jsonData())
        let trusted = try await domain.admin.externalIssuers()
        try expect(trusted.map(\.issuer) == ["https://id.example.com"], "trusted issuers: \(trusted)")
        let token = try external.issue(subject: "zoe", audience: "app", lifetime: 600, now: Date()).token
        try expect(try await domain.service.validate(token: token).userID == "zoe", "the external issuer's token is accepted")
        // An expired token keeps its code across the wire (the SDK asks for a new token on it).
        let stale = try external.issue(subject: "zoe", audience: "app", lifetime: 600, now: Date() - 7200).token
        try await expectRefused(.tokenExpired, "an expired token") { try await domain.service.validate(token: stale) }
        try await domain.admin.removeExternalIssuer("https://id.example.com")
        try await expectRefused(.invalidToken, "the removed issuer's token") { try await domain.service.validate(token: token) }
        try await expectRefused(.invalidRequest, "a JWKS that is none") {
            try await domain.admin.trustIssuer("https://x.example.com", audience: "app", jwks: Data("nope".utf8))
        }
        let token2 = try await domain.admin.testToken(userID: "yan")
        try expect(try await domain.service.validate(token: token2.token).userID == "yan", "the operator's test token")
        var policy = try await domain.admin.policy()
        policy.maximumEndpoints = 0
        try await expectRefused(.invalidRequest, "a policy out of range") { try await domain.admin.setPolicy(policy) }
    }

    static func isolation(_ domain: DomainUnderTest) async throws {
        let alice = try await user(domain, "alice")
        let mallory = try await user(domain, "mallory")
        let service = domain.service
        _ = try await service.createChat(token: alice.token, endpointID: alice.endpoint, chatID: "secret", participants: [])
        _ = try await service.putKeyBlob(
            token: alice.token, endpointID: alice.endpoint, name: "profile", data: Data("alice's".utf8), expectedVersion: nil)
        // Mallory's token with alice's endpoint id is refused; with her own she sees her own.
        try await expectRefused(.endpointRemoved, "mallory reading with alice's endpoint") {
            try await service.readMailbox(token: mallory.token, endpointID: alice.endpoint, after: 0, limit: 10)
        }
        try expect(
            try await service.readMailbox(token: mallory.token, endpointID: mallory.endpoint, after: 0, limit: 10).isEmpty,
            "mallory's own mailbox holds nothing of alice's")
        let blob = try await service.fetchKeyBlob(token: mallory.token, endpointID: mallory.endpoint, name: "profile")
        try expect(blob.blob == nil, "mallory's profile blob is her own (none)")
        try await expectRefused(.notFound, "mallory removing alice's endpoint") {
            try await service.deregisterEndpoint(token: mallory.token, endpointID: mallory.endpoint, target: alice.endpoint)
        }
        try await expectRefused(.forbidden, "mallory registering alice's endpoint id") {
            try await service.registerEndpoint(
                token: mallory.token, registration: .init(endpointID: alice.endpoint, description: "stolen"))
        }
        _ = try await service.checkIn(token: alice.token, endpointID: alice.endpoint)
    }
}

/// A conformance check that found the domain not doing what the contract says.
public struct ConformanceFailure: Error, CustomStringConvertible {
    /// What differed.
    public let description: String
    init(_ description: String) { self.description = description }
}

extension PublishedIdentity {
    fileprivate func withSignature(_ signature: Data) -> PublishedIdentity {
        var copy = self
        copy.signature = signature
        return copy
    }
}
