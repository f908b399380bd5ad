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
        Check(description: "batches of messages", run: messageBatches),
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

    /// Bytes that start as an MLS KeyPackage of `suite` does (what the domain reads of one),
    /// then `tag`.
    static func keyPackage(_ tag: String, suite: UInt16 = 1) -> Data {
        Data([0, 1, 0, 5, 0, 1, UInt8(suite >> 8), UInt8(suite & 0xFF)]) + Data(tag.utf8)
    }

    /// One-time KeyPackages are handed out once each, oldest first, then the last-resort one;
    /// only registered endpoints' are; sizes and counts are bounded; a repeat is kept once.
    /// Each suite's are apart: a claim of the post-quantum suite gets a device's KeyPackage of it
    /// where there is one, else its classic one; counts and last-resort ones are per suite.
    static func keyPackages(_ domain: DomainUnderTest) async throws {
        let service = domain.service
        let alice = try await user(domain, "alice")
        let laptop = try await user(domain, "bob")
        let phone = try await user(domain, "bob", endpoint: "bob-2")
        let first = keyPackage("kp-1")
        let second = keyPackage("kp-2")
        var count = try await service.publishKeyPackages(
            token: laptop.token, endpointID: laptop.endpoint, keyPackages: [first], lastResort: keyPackage("kp-last"))
        try expect(count == 1, "a one-time KeyPackage kept, not \(count)")
        // A retried publication keeps nothing twice.
        count = try await service.publishKeyPackages(
            token: laptop.token, endpointID: laptop.endpoint, keyPackages: [first, second], lastResort: nil)
        try expect(count == 2, "a repeated KeyPackage is kept once: \(count)")
        _ = try await service.publishKeyPackages(
            token: phone.token, endpointID: phone.endpoint, keyPackages: [keyPackage("phone-1")], lastResort: nil)

        var claimed = try await service.claimKeyPackages(token: alice.token, endpointID: alice.endpoint, userID: "bob")
        try expect(
            claimed == [
                ClaimedKeyPackage(endpointID: "bob-1", keyPackage: first, lastResort: false),
                ClaimedKeyPackage(endpointID: "bob-2", keyPackage: keyPackage("phone-1"), lastResort: false),
            ], "one per device, the oldest one-time one: \(claimed)")
        claimed = try await service.claimKeyPackages(token: alice.token, endpointID: alice.endpoint, userID: "bob")
        try expect(
            claimed == [ClaimedKeyPackage(endpointID: "bob-1", keyPackage: second, lastResort: false)],
            "each one-time KeyPackage is handed out once; the phone has none left: \(claimed)")
        for _ in 0..<2 {
            claimed = try await service.claimKeyPackages(token: alice.token, endpointID: alice.endpoint, userID: "bob")
            try expect(
                claimed == [ClaimedKeyPackage(endpointID: "bob-1", keyPackage: keyPackage("kp-last"), lastResort: true)],
                "then the last-resort one, again and again: \(claimed)")
        }
        let left = try await service.keyPackageCount(token: laptop.token, endpointID: laptop.endpoint)
        try expect(left == 0, "the laptop has no one-time KeyPackage left: \(left)")

        // A removed device's KeyPackages are handed out no more.
        try await service.deregisterEndpoint(token: phone.token, endpointID: phone.endpoint, target: phone.endpoint)
        _ = try await service.publishKeyPackages(
            token: laptop.token, endpointID: laptop.endpoint, keyPackages: [keyPackage("kp-3")], lastResort: nil)
        claimed = try await service.claimKeyPackages(token: alice.token, endpointID: alice.endpoint, userID: "bob")
        try expect(claimed.map(\.endpointID) == ["bob-1"], "only registered devices: \(claimed)")
        try await expectRefused(.endpointRemoved, "publishKeyPackages from a removed endpoint") {
            try await service.publishKeyPackages(
                token: phone.token, endpointID: phone.endpoint, keyPackages: [keyPackage("late")], lastResort: nil)
        }
        try expect(
            try await service.claimKeyPackages(token: alice.token, endpointID: alice.endpoint, userID: "nobody").isEmpty,
            "a user without devices has no KeyPackages")

        // Bounds: size, number, and an empty user id.
        try await expectRefused(.invalidRequest, "an oversized KeyPackage") {
            try await service.publishKeyPackages(
                token: alice.token, endpointID: alice.endpoint,
                keyPackages: [keyPackage(String(repeating: "x", count: DomainEngine.maximumKeyPackageSize))], lastResort: nil)
        }
        try await expectRefused(.invalidRequest, "an empty KeyPackage") {
            try await service.publishKeyPackages(
                token: alice.token, endpointID: alice.endpoint, keyPackages: [], lastResort: Data())
        }
        let many = (0..<DomainEngine.maximumKeyPackages).map { keyPackage("many-\($0)") }
        count = try await service.publishKeyPackages(
            token: alice.token, endpointID: alice.endpoint, keyPackages: many, lastResort: nil)
        try expect(count == DomainEngine.maximumKeyPackages, "a full store: \(count)")
        try await expectRefused(.invalidRequest, "one KeyPackage past the limit") {
            try await service.publishKeyPackages(
                token: alice.token, endpointID: alice.endpoint, keyPackages: [keyPackage("one more")], lastResort: nil)
        }
        try expect(
            try await service.keyPackageCount(token: alice.token, endpointID: alice.endpoint) == DomainEngine.maximumKeyPackages,
            "a refused publication keeps nothing")
        try await expectRefused(.invalidRequest, "an empty user id") {
            try await service.claimKeyPackages(token: alice.token, endpointID: alice.endpoint, userID: "")
        }
        try await expectRefused(.invalidRequest, "bytes that are no KeyPackage") {
            try await service.publishKeyPackages(
                token: alice.token, endpointID: alice.endpoint, keyPackages: [], lastResort: Data("kp-x".utf8))
        }
        try await expectRefused(.invalidRequest, "a KeyPackage of a suite the domain does not keep") {
            try await service.publishKeyPackages(
                token: alice.token, endpointID: alice.endpoint, keyPackages: [], lastResort: keyPackage("kp-3", suite: 3))
        }
        try await expectRefused(.invalidRequest, "a claim of a suite the domain does not keep") {
            try await service.claimKeyPackages(token: alice.token, endpointID: alice.endpoint, userID: "bob", suite: 3)
        }

        // The post-quantum suite beside the classic one.
        let carol = try await user(domain, "carol")
        let carolPhone = try await user(domain, "carol", endpoint: "carol-2")
        let pq = (0..<3).map { keyPackage("pq-\($0)", suite: 0xF768) }
        count = try await service.publishKeyPackages(
            token: carol.token, endpointID: carol.endpoint, keyPackages: Array(pq[0..<2]), lastResort: pq[2])
        try expect(count == 2, "two post-quantum one-time KeyPackages: \(count)")
        count = try await service.publishKeyPackages(
            token: carol.token, endpointID: carol.endpoint, keyPackages: [keyPackage("c-1")], lastResort: keyPackage("c-last"))
        try expect(count == 1, "the classic ones are counted apart: \(count)")
        _ = try await service.publishKeyPackages(
            token: carolPhone.token, endpointID: carolPhone.endpoint, keyPackages: [], lastResort: keyPackage("phone-last"))
        try await expectRefused(.invalidRequest, "one publication of two suites") {
            try await service.publishKeyPackages(
                token: carol.token, endpointID: carol.endpoint,
                keyPackages: [keyPackage("c-2"), keyPackage("pq-4", suite: 0xF768)],
                lastResort: nil)
        }
        var handedOut: [Data] = []
        for _ in 0..<4 {
            let got = try await service.claimKeyPackages(
                token: alice.token, endpointID: alice.endpoint, userID: "carol", suite: 0xF768)
            try expect(
                got.map(\.endpointID) == ["carol-1", "carol-2"] && got[1].keyPackage == keyPackage("phone-last")
                    && got[0].lastResort == (got[0].keyPackage == pq[2]),
                "the post-quantum ones of the device that has them, the classic one of the other: \(got)")
            handedOut.append(got[0].keyPackage)
        }
        try expect(
            Set(handedOut[0..<2]) == Set(pq[0..<2]) && handedOut[2...] == [pq[2], pq[2]],
            "each post-quantum one-time KeyPackage once, then the post-quantum last-resort one")
        let carolLeft = (
            try await service.keyPackageCount(token: carol.token, endpointID: carol.endpoint, suite: 0xF768),
            try await service.keyPackageCount(token: carol.token, endpointID: carol.endpoint)
        )
        try expect(carolLeft == (0, 1), "the post-quantum one-time ones are gone, the classic one is left: \(carolLeft)")
        let classic = try await service.claimKeyPackages(token: alice.token, endpointID: alice.endpoint, userID: "carol")
        try expect(
            classic.map(\.keyPackage) == [keyPackage("c-1"), keyPackage("phone-last")], "a classic claim: \(classic)")
    }

}

/// A conformance check that found the domain not doing what the contract says.
public struct ConformanceFailure: Error, CustomStringConvertible {
    /// What differed.
    public let description: String
    init(_ description: String) { self.description = description }
}

extension PublishedIdentity {
    func withSignature(_ signature: Data) -> PublishedIdentity {
        var copy = self
        copy.signature = signature
        return copy
    }
}
