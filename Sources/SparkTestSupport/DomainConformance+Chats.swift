import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkMLS

// The conformance checks of chats: commit ordering, key blobs, identities, write limits, chats.
extension DomainConformance {
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

        // With an identity published, a blob is written only with the identity key's proof over
        // exactly that write: a token alone (a thief's endpoint) cannot replace the backup.
        let current = try await service.fetchKeyBlob(token: alice.token, endpointID: alice.endpoint, name: "profile")
        let zeroed = [KeyBlobWrite(name: "profile", data: Data(count: 64), expectedVersion: current.blob?.version)]
        func proof(_ writes: [KeyBlobWrite], challenge: Data, key: Ed25519.PrivateKey) throws -> KeyBlobProof {
            KeyBlobProof(
                challenge: challenge,
                signature: try key.signature(
                    for: keyBlobWriteMessage(
                        userID: "alice", endpointID: alice.endpoint, challenge: challenge, writes: writes)))
        }
        try await expectRefused(.invalidProof, "a blob write without the identity key's proof") {
            try await service.putKeyBlobs(token: alice.token, endpointID: alice.endpoint, writes: zeroed)
        }
        try await expectRefused(.invalidProof, "a blob write proved by another key") {
            try await service.putKeyBlobs(
                token: alice.token, endpointID: alice.endpoint, writes: zeroed,
                proof: try proof(zeroed, challenge: third.challenge, key: Ed25519.PrivateKey()))
        }
        try await expectRefused(.invalidProof, "a blob write proved with another user's challenge") {
            try await service.putKeyBlobs(
                token: alice.token, endpointID: alice.endpoint, writes: zeroed,
                proof: try proof(zeroed, challenge: bobAttempt.challenge, key: signing))
        }
        let signedForOther = try proof(
            [KeyBlobWrite(name: "profile", data: Data("v4".utf8), expectedVersion: current.blob?.version)],
            challenge: third.challenge, key: signing)
        try await expectRefused(.invalidProof, "a proof of other bytes") {
            try await service.putKeyBlobs(
                token: alice.token, endpointID: alice.endpoint, writes: zeroed, proof: signedForOther)
        }
        let unchanged = try await service.fetchKeyBlob(token: alice.token, endpointID: alice.endpoint, name: "profile")
        try expect(unchanged == current, "refused writes changed nothing: \(String(describing: unchanged.blob))")
        let good = [KeyBlobWrite(name: "profile", data: Data("v4".utf8), expectedVersion: current.blob?.version)]
        let written = try await service.putKeyBlob(
            token: alice.token, endpointID: alice.endpoint, name: "profile", data: Data("v4".utf8),
            expectedVersion: current.blob?.version, proof: try proof(good, challenge: third.challenge, key: signing))
        try expect(written == (current.blob?.version ?? 0) + 1, "a proved write is taken: version \(written)")
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
}
