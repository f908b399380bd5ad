import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkMLS

// The conformance checks of mailboxes, ephemeral entries, reports, blobs, blocking, moderation,
// accounts, administration and isolation.
extension DomainConformance {
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
        if woken.isEmpty, ContinuousClock.now - posted > .seconds(Int(DomainEngine.ephemeralLifetime)) {
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
        // 120 a minute, then refused with the wait; a message still goes. Bob has posted nothing
        // ephemeral, so his window opens with this burst. The posts go eight at a time, so that a
        // machine starved of CPU still gets more than 120 into one minute; a burst that straddled
        // the window's turn may be refused nothing, so bursts repeat until one is.
        var refused = 0
        for _ in 0..<4 where refused == 0 {
            refused = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        var refusals = 0
                        for _ in 0..<16 {
                            do {
                                _ = try await service.post(
                                    token: bob.token, endpointID: bob.endpoint, chatID: "c-live", kind: .ephemeral,
                                    payload: Data([2]), recipient: nil, clientID: nil)
                            } catch let error as DomainError where error.code == .tooManyAttempts {
                                refusals += 1
                            }
                        }
                        return refusals
                    }
                }
                return try await group.reduce(0, +)
            }
        }
        try expect(refused > 0, "no ephemeral post refused in bursts of 128 at once")
        let message = try await service.post(
            token: bob.token, endpointID: bob.endpoint, chatID: "c-live", kind: .message, payload: Data("still".utf8),
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
