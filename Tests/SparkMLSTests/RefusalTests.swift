import Foundation
import SparkCrypto
import SparkTestSupport
import Testing

@testable import SparkMLS

/// Every validation rule the working group's vectors do not exercise, attacked: each hostile
/// message is refused and the receiving member's state stays byte for byte what it was.
@Suite("MLS refusals")
struct RefusalTests {
    /// A group of four (leaves 0 to 3) whose handshake messages are PublicMessages, so a test can
    /// alter a commit and sign it again as its committer.
    static func group() throws -> Simulation {
        var simulation = try Simulation(seed: "refusals")
        try simulation.commit(by: 0, adding: 3)
        for leaf in simulation.members.keys { simulation.members[leaf]!.encryptsHandshake = false }
        return simulation
    }

    /// `message` is refused by `member` with `code`, and `member` is unchanged.
    static func expectRefused(
        _ message: Data, by member: inout MLSGroup, _ code: MLSError.Code, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let before = member.serialized()
        do {
            _ = try member.process(message)
            Issue.record("the message was accepted", sourceLocation: sourceLocation)
        } catch let error as MLSError {
            #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("unexpected \(error)", sourceLocation: sourceLocation)
        }
        #expect(member.serialized() == before, "the refused message changed the group", sourceLocation: sourceLocation)
    }

    /// A commit from `committer` changed by `transform`, signed again by the committer and given a
    /// valid membership tag: what a malicious member can send. Its confirmation tag no longer
    /// matches, so a receiver that skipped a rule would still refuse it, but later and as
    /// `authentication`: each test below expects the rule's own refusal, `invalid`.
    static func forged(_ commit: Data, by committer: MLSGroup, _ transform: (inout Commit) throws -> Void) throws -> Data {
        guard case .publicMessage(var message) = try MLSMessageBody(tlsEncoded: commit),
            case .commit(var body) = message.content.content
        else { throw MLSError(.malformed, "not a public commit") }
        try transform(&body)
        message.content.content = .commit(body)
        let signature = try Framing.sign(
            suite: committer.suite, wireFormat: .publicMessage, content: message.content, context: committer.context,
            key: committer.signer.key)
        let authenticated = AuthenticatedContent(
            wireFormat: .publicMessage, content: message.content,
            auth: FramedContentAuthData(signature: signature, confirmationTag: message.auth.confirmationTag))
        let republished = Framing.publicMessage(
            suite: committer.suite, authenticated, membershipKey: committer.secrets.membership, context: committer.context)
        return MLSMessageBody.publicMessage(republished).tlsEncoded
    }

    @Test func proposalRulesOfSection12_2() throws {
        var simulation = try Self.group()
        let committer = simulation.members[0]!
        let now = simulation.now
        let plain = try committer.commit(now: now, random: &simulation.random).commit
        let adding = try committer.commit(adding: [try simulation.bundle().keyPackage], now: now, random: &simulation.random)
            .commit
        let removing = try committer.commit(removing: [2], now: now, random: &simulation.random).commit
        guard case .publicMessage(let addMessage) = try MLSMessageBody(tlsEncoded: adding),
            case .commit(let addCommit) = addMessage.content.content, case .proposal(let add) = addCommit.proposals[0]
        else { throw MLSError(.malformed, "no add") }
        let ownLeaf = committer.tree.leaf(0)!
        let cases: [(String, Data)] = [
            ("two Adds of one KeyPackage", try Self.forged(adding, by: committer) { $0.proposals.append(.proposal(add)) }),
            ("the committer removes itself", try Self.forged(plain, by: committer) { $0.proposals = [.proposal(.remove(0))] }),
            ("a Remove of a blank leaf", try Self.forged(plain, by: committer) { $0.proposals = [.proposal(.remove(6))] }),
            (
                "two Removes of one leaf",
                try Self.forged(removing, by: committer) { $0.proposals.append(.proposal(.remove(2))) }
            ),
            ("an Update by value", try Self.forged(plain, by: committer) { $0.proposals = [.proposal(.update(ownLeaf))] }),
            (
                "two GroupContextExtensions",
                try Self.forged(plain, by: committer) {
                    $0.proposals = [.proposal(.groupContextExtensions([])), .proposal(.groupContextExtensions([]))]
                }
            ),
            (
                "a ReInit with another proposal",
                try Self.forged(removing, by: committer) {
                    $0.proposals.append(
                        .proposal(.reInit(groupID: Data("next".utf8), version: 1, cipherSuite: 1, extensions: [])))
                }
            ),
            (
                "an ExternalInit from a member",
                try Self.forged(plain, by: committer) {
                    $0.proposals = [.proposal(.externalInit(kemOutput: Data(repeating: 9, count: 32)))]
                }
            ),
            ("a Remove without a path", try Self.forged(removing, by: committer) { $0.path = nil }),
            ("an empty commit without a path", try Self.forged(plain, by: committer) { $0.path = nil }),
            (
                "a reference to an unknown proposal",
                try Self.forged(plain, by: committer) { $0.proposals = [.reference(Data(repeating: 1, count: 32))] }
            ),
            (
                "a PSK this member does not have",
                try Self.forged(plain, by: committer) {
                    $0.proposals = [
                        .proposal(.preSharedKey(PreSharedKeyID(kind: .external(id: Data("x".utf8)), nonce: Data(count: 32))))
                    ]
                }
            ),
        ]
        for (name, message) in cases {
            var receiver = simulation.members[1]!
            let before = receiver.serialized()
            do {
                _ = try receiver.process(message)
                Issue.record("\(name): accepted")
            } catch let error as MLSError {
                #expect(error.code == .invalid, "\(name): \(error)")
            }
            #expect(receiver.serialized() == before, "\(name) changed the group")
        }
        // The untouched commits are accepted, so the refusals above are the rules' doing.
        var receiver = simulation.members[1]!
        #expect(throws: Never.self) { _ = try receiver.process(plain) }
    }

    @Test func updateAndRemoveOfOneLeaf() throws {
        var simulation = try Self.group()
        let update = try simulation.members[2]!.proposeUpdate(random: &simulation.random)
        _ = try simulation.members[0]!.process(update)
        _ = try simulation.members[1]!.process(update)
        // A commit of the Update (by reference) and a Remove of the same leaf.
        let committer = simulation.members[0]!
        let list = [
            MLSGroup.ResolvedProposal(
                proposal: committer.proposals[0].proposal, sender: .member(2), reference: committer.proposals[0].reference),
            MLSGroup.ResolvedProposal(proposal: .remove(2), sender: .member(0), reference: nil),
        ]
        let forged = try committer.makeCommit(
            list, withPath: true, sender: .member(0), initSecret: committer.secrets.initSecret, random: &simulation.random)
        Self.expectRefused(forged.commit, by: &simulation.members[1]!, .invalid)
    }

    /// §7.9: a committer's leaf whose parent hash does not match its path, properly signed.
    @Test func parentHashOfTheCommittersLeaf() throws {
        var simulation = try Self.group()
        let committer = simulation.members[0]!
        let commit = try committer.commit(now: simulation.now, random: &simulation.random).commit
        let forged = try Self.forged(commit, by: committer) { body in
            var leaf = body.path!.leafNode
            leaf.source = .commit(parentHash: Data(repeating: 0xaa, count: 32))
            try leaf.sign(suite: committer.suite, key: committer.signer.key, groupID: committer.groupID, leafIndex: 0)
            body.path!.leafNode = leaf
        }
        Self.expectRefused(forged, by: &simulation.members[1]!, .invalid)
    }

    /// A leaf node signed by a key other than its own signature key.
    @Test func leafSignedByAnotherKey() throws {
        var simulation = try Self.group()
        let committer = simulation.members[0]!
        let commit = try committer.commit(now: simulation.now, random: &simulation.random).commit
        let stranger = try Ed25519.PrivateKey()
        let forged = try Self.forged(commit, by: committer) { body in
            var leaf = body.path!.leafNode
            try leaf.sign(suite: committer.suite, key: stranger, groupID: committer.groupID, leafIndex: 0)
            body.path!.leafNode = leaf
        }
        Self.expectRefused(forged, by: &simulation.members[1]!, .authentication)
        // The same for an Update proposal and for a KeyPackage.
        var member = simulation.members[2]!
        guard var leaf = member.tree.leaf(2) else { return }
        leaf.source = .update
        try leaf.sign(suite: member.suite, key: stranger, groupID: member.groupID, leafIndex: 2)
        let framed = FramedContent(
            groupID: member.groupID, epoch: member.epoch, sender: .member(2), authenticatedData: Data(),
            content: .proposal(.update(leaf)))
        let signature = try Framing.sign(
            suite: member.suite, wireFormat: .publicMessage, content: framed, context: member.context, key: member.signer.key)
        let proposal = try member.wrap(
            AuthenticatedContent(
                wireFormat: .publicMessage, content: framed,
                auth: FramedContentAuthData(signature: signature, confirmationTag: nil)),
            random: &simulation.random)
        Self.expectRefused(proposal, by: &simulation.members[1]!, .authentication)
        var bundle = try simulation.bundle()
        var package = bundle.package
        package.signature = try member.suite.signWithLabel(stranger, "KeyPackageTBS", package.signedContent)
        bundle = MLSKeyPackageBundle(
            package: package, initKey: bundle.initKey, encryptionKey: bundle.encryptionKey, signer: bundle.signer,
            suite: member.suite)
        #expect(throws: MLSError(.authentication, "")) {
            _ = try member.proposeAdd(keyPackage: bundle.keyPackage, now: simulation.now, random: &simulation.random)
        }
    }

    @Test func welcomeForAnotherKeyPackage() throws {
        var simulation = try Self.group()
        let invited = try simulation.bundle()
        let other = try simulation.bundle()
        let result = try simulation.members[0]!.commit(
            adding: [invited.keyPackage], now: simulation.now, random: &simulation.random)
        #expect(throws: MLSError(.wrongGroup, "")) { try MLSGroup.join(welcome: result.welcome!, bundle: other) }
        // The invited one joins, and a Welcome with one byte changed is refused.
        #expect(throws: Never.self) { try MLSGroup.join(welcome: result.welcome!, bundle: invited) }
        var damaged = result.welcome!
        damaged[damaged.count - 5] ^= 1
        #expect(throws: MLSError.self) { try MLSGroup.join(welcome: damaged, bundle: invited) }
    }

    @Test func epochReplay() throws {
        var simulation = try Self.group()
        let first = try simulation.members[0]!.commit(now: simulation.now, random: &simulation.random)
        _ = try simulation.members[1]!.process(first.commit)
        Self.expectRefused(first.commit, by: &simulation.members[1]!, .wrongGroup)
        // An application message of the old epoch is refused too: its keys are gone.
        let old = try simulation.members[2]!.protect(Data("old".utf8), random: &simulation.random)
        Self.expectRefused(old, by: &simulation.members[1]!, .wrongGroup)
    }

    @Test func reusedGeneration() throws {
        var simulation = try Self.group()
        let message = try simulation.members[2]!.protect(Data("once".utf8), random: &simulation.random)
        _ = try simulation.members[1]!.process(message)
        Self.expectRefused(message, by: &simulation.members[1]!, .keyUnavailable)
        // Out of order within the window is fine; each key opens one message.
        let a = try simulation.members[2]!.protect(Data("a".utf8), random: &simulation.random)
        let b = try simulation.members[2]!.protect(Data("b".utf8), random: &simulation.random)
        #expect(try simulation.members[1]!.process(b) == .application(Data("b".utf8), sender: 2, authenticatedData: Data()))
        #expect(try simulation.members[1]!.process(a) == .application(Data("a".utf8), sender: 2, authenticatedData: Data()))
        Self.expectRefused(a, by: &simulation.members[1]!, .keyUnavailable)
    }

    @Test func commitFromRemovedMember() throws {
        var simulation = try Self.group()
        let removedState = simulation.members[3]!
        try simulation.commit(by: 0, removing: [3])
        #expect(simulation.members[3] == nil)
        // The removed member's commit, made from its last state, is refused by those who stayed.
        var random = MLSSeededRandom(seed: "removed")
        let stale = try removedState.commit(now: simulation.now, random: &random)
        Self.expectRefused(stale.commit, by: &simulation.members[1]!, .wrongGroup)
        // A message of the current epoch that claims the removed member's leaf is refused.
        var member = simulation.members[1]!
        let framed = FramedContent(
            groupID: member.groupID, epoch: member.epoch, sender: .member(3), authenticatedData: Data(),
            content: .proposal(.remove(2)))
        let signature = try Framing.sign(
            suite: member.suite, wireFormat: .publicMessage, content: framed, context: member.context,
            key: removedState.signer.key)
        let claimed = try member.wrap(
            AuthenticatedContent(
                wireFormat: .publicMessage, content: framed,
                auth: FramedContentAuthData(signature: signature, confirmationTag: nil)),
            random: &random)
        Self.expectRefused(claimed, by: &simulation.members[2]!, .wrongGroup)
        // And the removed member reads nothing sent after its removal.
        let after = try simulation.members[0]!.protect(Data("after".utf8), random: &simulation.random)
        var removed = removedState
        #expect(throws: MLSError.self) { try removed.process(after) }
    }

    @Test func tamperedMessages() throws {
        var simulation = try Self.group()
        var sender = simulation.members[2]!
        let message = try sender.protect(Data("intact".utf8), random: &simulation.random)
        for position in [message.count - 1, message.count - 40, 20] {
            var damaged = message
            damaged[position] ^= 0x01
            let before = simulation.members[1]!.serialized()
            #expect(throws: MLSError.self) { _ = try simulation.members[1]!.process(damaged) }
            #expect(simulation.members[1]!.serialized() == before)
        }
        // Truncated and extended bytes are malformed, not crashes.
        Self.expectRefused(message.dropLast(), by: &simulation.members[1]!, .malformed)
        Self.expectRefused(message + Data([0]), by: &simulation.members[1]!, .malformed)
        #expect(
            try simulation.members[1]!.process(message) == .application(Data("intact".utf8), sender: 2, authenticatedData: Data())
        )
        // A message signed with a key other than the sender's.
        var impostor = simulation.members[1]!
        impostor.signer = MLSSigner(credential: impostor.signer.credential, key: try Ed25519.PrivateKey())
        let forged = try impostor.protect(Data("as 1".utf8), random: &simulation.random)
        Self.expectRefused(forged, by: &simulation.members[3]!, .authentication)
    }

    @Test func codecIsStrict() throws {
        // Non-minimal varints, the reserved prefix, trailing bytes and overlong lengths.
        for bytes in [[0x40, 0x05], [0x80, 0x00, 0x00, 0x05], [0xc0, 0, 0, 0, 0, 0, 0, 1], [0x05, 1, 2]] as [[UInt8]] {
            #expect(throws: MLSError.self) { _ = try Opaque(tlsEncoded: bytes) }
        }
        #expect(throws: MLSError.self) { _ = try Opaque(tlsEncoded: [0x01, 0x41, 0x00]) }
        #expect(try Opaque(tlsEncoded: [0x02, 0x41, 0x42]).bytes == Data("AB".utf8))
        var reader = TLSReader([0x02])
        #expect(throws: MLSError.self) { _ = try reader.optional("x", of: Opaque.self) }
    }
}

extension RefusalTests {
    /// A member's PublicMessage whose membership tag is wrong, and a commit whose confirmation tag
    /// is wrong (content, signature and membership tag all valid).
    @Test func membershipAndConfirmationTags() throws {
        var simulation = try Self.group()
        var proposer = simulation.members[2]!
        let proposal = try proposer.proposeUpdate(random: &simulation.random)
        var damaged = proposal
        damaged[damaged.count - 1] ^= 1
        Self.expectRefused(damaged, by: &simulation.members[1]!, .authentication)
        let committer = simulation.members[0]!
        let commit = try committer.commit(now: simulation.now, random: &simulation.random).commit
        guard case .publicMessage(var message) = try MLSMessageBody(tlsEncoded: commit) else { return }
        message.auth.confirmationTag = Data(repeating: 0x5a, count: 32)
        let authenticated = AuthenticatedContent(wireFormat: .publicMessage, content: message.content, auth: message.auth)
        let republished = Framing.publicMessage(
            suite: committer.suite, authenticated, membershipKey: committer.secrets.membership, context: committer.context)
        Self.expectRefused(MLSMessageBody.publicMessage(republished).tlsEncoded, by: &simulation.members[1]!, .authentication)
        #expect(throws: Never.self) { _ = try simulation.members[1]!.process(commit) }
    }

    /// Accepts the signature keys it knows.
    struct KnownKeys: MLSCredentialValidator {
        let keys: Set<Data>
        func isValid(_ credential: MLSCredential, signatureKey: Data) -> Bool { keys.contains(signatureKey) }
    }

    /// §12.4.3.2: anyone holding a GroupInfo can make an external commit, signed by a key of
    /// their own, so nothing in it may move a member before it is checked: a Remove must be of a
    /// leaf of the joiner's own identity (a resync), and the joiner's leaf must be one the
    /// member accepts. Until then the member, even the one removed, stays as it was.
    @Test func externalCommitsRemoveOnlyTheJoinersOwnLeaf() throws {
        var simulation = try Self.group()
        let info = try simulation.members[0]!.groupInfo()
        // Mallory, with the GroupInfo and a key of her own, removes member 1.
        let mallory = try Simulation.signer("mallory", &simulation.random)
        let (eviction, _) = try MLSGroup.joinExternally(
            groupInfo: info, signer: mallory, replacing: 1, random: &simulation.random)
        Self.expectRefused(eviction, by: &simulation.members[1]!, .invalid)
        Self.expectRefused(eviction, by: &simulation.members[2]!, .invalid)
        #expect(simulation.members[1]!.isActive)
        // Mallory calling herself member 1 (her own key): a member that knows member 1's key
        // refuses her leaf before anything else, the victim first of all.
        let impostor = MLSSigner(credential: MLSCredential(identity: Data("member-1".utf8)), key: try Ed25519.PrivateKey())
        let (impersonation, _) = try MLSGroup.joinExternally(
            groupInfo: info, signer: impostor, replacing: 1, random: &simulation.random)
        let known = Set(simulation.members.values.compactMap { $0.members.first { $0.leafIndex == 1 }?.signatureKey })
            .union(simulation.members.values.flatMap { group in group.members.map(\.signatureKey) })
        var victim = simulation.members[1]!.withValidator(KnownKeys(keys: known))
        Self.expectRefused(impersonation, by: &victim, .credentialRefused)
        #expect(victim.isActive)
        // The real member 1, resyncing with a new key, replaces its own old leaf: accepted.
        let resync = MLSSigner(credential: MLSCredential(identity: Data("member-1".utf8)), key: try Ed25519.PrivateKey())
        let (rejoin, rejoined) = try MLSGroup.joinExternally(
            groupInfo: info, signer: resync, replacing: 1, random: &simulation.random)
        guard case .commit = try simulation.members[2]!.process(rejoin) else {
            Issue.record("a resync was not applied")
            return
        }
        #expect(try simulation.members[1]!.process(rejoin) == .removed, "the old leaf learns it was replaced")
        #expect(simulation.members[2]!.epochAuthenticator == rejoined.epochAuthenticator)
    }

    /// A checker that keeps what it is asked and answers as told.
    final class Recorder: MLSSignatureChecker, @unchecked Sendable {
        let answer: Bool
        private let lock = NSLock()
        private var kept: [MLSSignatureCheck] = []
        init(answering answer: Bool) { self.answer = answer }
        var checks: [MLSSignatureCheck] { lock.withLock { kept } }
        func check(_ check: MLSSignatureCheck) -> Bool {
            lock.withLock { kept.append(check) }
            return answer
        }
    }

    /// An application message signed by a key other than its sender leaf's (a member
    /// impersonating another): refused when the group checks it; handed to a checker given for
    /// application signatures, the group takes the checker's answer, and the check it handed on
    /// fails when verified. A commit's signature is the group's to check, never handed on.
    @Test func applicationSignaturesGoToTheCheckerAndNothingElse() throws {
        var simulation = try Simulation(seed: "signature checks")
        try simulation.commit(by: 0, adding: 1)
        var mallory = simulation.members[0]!
        mallory.signer = MLSSigner(credential: mallory.signer.credential, key: try Ed25519.PrivateKey())
        let forged = try mallory.protect(Data("forged".utf8), random: &simulation.random)
        var sender = simulation.members[0]!
        let genuine = try sender.protect(Data("genuine".utf8), random: &simulation.random)
        Self.expectRefused(forged, by: &simulation.members[1]!, .authentication)

        var deferring = simulation.members[1]!
        let recorder = Recorder(answering: true)
        let taken = try deferring.processWithSender(forged, now: simulation.now, applicationSignatures: recorder).received
        guard case .application(let data, _, _) = taken else {
            Issue.record("not taken as an application message: \(taken)")
            return
        }
        #expect(data == Data("forged".utf8))
        #expect(recorder.checks.count == 1 && recorder.checks.allSatisfy { !$0.verify() }, "the check handed on fails")

        var refusing = simulation.members[1]!
        #expect(throws: MLSError(.authentication, "")) {
            try refusing.processWithSender(forged, now: simulation.now, applicationSignatures: Recorder(answering: false))
        }
        let honest = Recorder(answering: true)
        _ = try refusing.processWithSender(genuine, now: simulation.now, applicationSignatures: honest)
        #expect(honest.checks.count == 1 && honest.checks.allSatisfy { $0.verify() }, "a genuine signature verifies")

        // A commit: checked by the group whatever the checker would say.
        let committed = try simulation.members[0]!.commit(
            adding: [], removing: [], updatingPath: true, now: simulation.now, random: &simulation.random)
        let lenient = Recorder(answering: true)
        var receiver = simulation.members[1]!
        _ = try receiver.processWithSender(committed.commit, now: simulation.now, applicationSignatures: lenient)
        let handedOn = lenient.checks.count
        #expect(handedOn == 0, "a commit's signature is not handed on")
    }
}
