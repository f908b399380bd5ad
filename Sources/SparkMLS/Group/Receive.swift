public import Foundation
import SparkCrypto

/// What processing one message did.
public enum MLSReceived: Sendable, Equatable {
    /// An application message: its plaintext, sender and authenticated data.
    case application(Data, sender: UInt32, authenticatedData: Data)
    /// A proposal, now cached for the next commit of this epoch.
    case proposal(reference: Data, sender: UInt32?)
    /// A commit that moved the group to `epoch`; `added` and `removed` are leaf indices.
    case commit(epoch: UInt64, added: [UInt32], removed: [UInt32])
    /// A commit that removed this member; the group is now inactive.
    case removed
}

extension MLSGroup {
    /// Processes one `MLSMessage` (PublicMessage or PrivateMessage) of this group. Application
    /// messages are decrypted and their sender's signature checked; proposals are cached; commits
    /// are validated (§12.2, §12.4.2) and move the group to the next epoch. KeyPackage lifetimes
    /// are judged at `now` (the caller's clock; the system's by default). A refused message
    /// throws and leaves the group exactly as it was.
    public mutating func process(_ message: Data, now: Date = Date()) throws -> MLSReceived {
        try processWithSender(message, now: now).received
    }

    /// Processes a message as ``process(_:now:)`` does, and also says who sent it: the member
    /// whose signature it carries, as the tree was before the message (for a commit, the
    /// committer before its own path changed its leaf); nil for a new member's or an external
    /// sender's message. The layer above checks the sender's rights (admins, for a commit).
    ///
    /// `applicationSignatures`, when given, checks the sender's signature on an application
    /// message in place of the group (see ``MLSSignatureChecker``: one that defers answers true
    /// now, and its caller keeps nothing until the check held).
    public mutating func processWithSender(
        _ message: Data, now: Date = Date(), applicationSignatures: (any MLSSignatureChecker)? = nil
    ) throws -> (received: MLSReceived, sender: Member?) {
        try requireActive()
        var next = self
        let result = try next.processInPlace(
            try MLSMessageBody(tlsEncoded: message), now: now, applicationSignatures: applicationSignatures)
        self = next
        return result
    }

    private mutating func processInPlace(
        _ body: MLSMessageBody, now: Date, applicationSignatures: (any MLSSignatureChecker)?
    ) throws -> (received: MLSReceived, sender: Member?) {
        let authenticated: AuthenticatedContent
        switch body {
        case .publicMessage(let message):
            try checkEpoch(message.content.groupID, message.content.epoch)
            if case .application = message.content.content {
                throw MLSError(.invalid, "application data must come as a PrivateMessage")
            }
            authenticated = try Framing.openPublic(suite: suite, message, membershipKey: secrets.membership, context: context)
        case .privateMessage(let message):
            try checkEpoch(message.groupID, message.epoch)
            authenticated = try Framing.openPrivate(
                suite: suite, message, secretTree: &secretTree, senderDataSecret: secrets.senderData)
        default:
            throw MLSError(.malformed, "only PublicMessage and PrivateMessage are processed by a group")
        }
        let signatureKey: Data
        switch authenticated.content.sender {
        case .member(let leaf):
            guard let node = tree.leaf(leaf) else { throw MLSError(.wrongGroup, "the sender (leaf \(leaf)) is not a member") }
            guard leaf != ownLeaf || authenticated.wireFormat == .publicMessage else {
                throw MLSError(.invalid, "a PrivateMessage that claims to come from this member")
            }
            signatureKey = node.signatureKey
        case .newMemberCommit:
            guard case .commit(let commit) = authenticated.content.content, let path = commit.path else {
                throw MLSError(.invalid, "a new member's message must be a commit with a path")
            }
            signatureKey = path.leafNode.signatureKey
        case .newMemberProposal:
            guard case .proposal(.add(let package)) = authenticated.content.content else {
                throw MLSError(.invalid, "a new member may only propose adding itself")
            }
            signatureKey = package.leafNode.signatureKey
        case .external(let index):
            signatureKey = try externalSenderKey(index)
        }
        let verified: Bool
        if let checker = applicationSignatures, authenticated.wireFormat == .privateMessage,
            case .application = authenticated.content.content
        {
            verified = checker.check(
                Framing.signatureCheck(suite: suite, authenticated, context: context, signatureKey: signatureKey))
        } else {
            verified = Framing.verify(suite: suite, authenticated, context: context, signatureKey: signatureKey)
        }
        guard verified else { throw MLSError(.authentication, "the sender's signature does not verify") }
        let sender: Member? =
            if case .member(let leaf) = authenticated.content.sender { member(at: leaf) } else { nil }
        switch authenticated.content.content {
        case .application(let data):
            guard case .member(let leaf) = authenticated.content.sender else {
                throw MLSError(.invalid, "application data from a non-member")
            }
            return (.application(data, sender: leaf, authenticatedData: authenticated.content.authenticatedData), sender)
        case .proposal(let proposal):
            return (try receiveProposal(proposal, authenticated, now: now), sender)
        case .commit(let commit):
            return (try receiveCommit(commit, authenticated, now: now), sender)
        }
    }

    private func checkEpoch(_ groupID: Data, _ epoch: UInt64) throws {
        guard groupID == context.groupID else { throw MLSError(.wrongGroup, "the message is for another group") }
        guard epoch == context.epoch else {
            throw MLSError(.wrongGroup, "the message is for epoch \(epoch); the group is at \(context.epoch)")
        }
    }

    private func externalSenderKey(_ index: UInt32) throws -> Data {
        guard let data = context.extensions.data(of: ExtensionType.externalSenders) else {
            throw MLSError(.invalid, "an external sender, and the group has none")
        }
        var reader = TLSReader(data)
        let senders: [Data] = try reader.vector("external_senders") { inner in
            var keys: [Data] = []
            while !inner.isAtEnd {
                keys.append(try inner.opaque("signature_key"))
                _ = try inner.read(Credential.self)
            }
            return keys
        }
        try reader.finish("ExternalSenders")
        guard Int(index) < senders.count else { throw MLSError(.invalid, "external sender \(index) is not listed") }
        return senders[Int(index)]
    }

    private mutating func receiveProposal(_ proposal: Proposal, _ authenticated: AuthenticatedContent, now: Date) throws
        -> MLSReceived
    {
        switch proposal {
        case .add(let package): try validateKeyPackage(package, now: now)
        case .update(let leaf):
            guard case .member(let sender) = authenticated.content.sender else {
                throw MLSError(.invalid, "an Update from a non-member")
            }
            try validateLeaf(leaf, at: sender, source: .update, in: tree, now: nil)
        case .remove(let leaf):
            guard tree.leaf(leaf) != nil else { throw MLSError(.invalid, "a Remove of blank leaf \(leaf)") }
        case .externalInit: throw MLSError(.invalid, "an ExternalInit proposal outside a commit")
        case .preSharedKey, .reInit, .groupContextExtensions: break
        }
        let reference = suite.refHash("MLS 1.0 Proposal Reference", authenticated.tlsBytes)
        guard !proposals.contains(where: { $0.reference == reference }) else {
            throw MLSError(.invalid, "this proposal was already received")
        }
        proposals.append(CachedProposal(reference: reference, proposal: proposal, sender: authenticated.content.sender))
        if case .member(let leaf) = authenticated.content.sender { return .proposal(reference: reference, sender: leaf) }
        return .proposal(reference: reference, sender: nil)
    }

    private mutating func receiveCommit(_ commit: Commit, _ authenticated: AuthenticatedContent, now: Date) throws
        -> MLSReceived
    {
        let committer: LeafIndex?
        switch authenticated.content.sender {
        case .member(let leaf):
            guard leaf != ownLeaf else {
                throw MLSError(.state, "this member's own commit: keep the group that commit() returned")
            }
            committer = leaf
        case .newMemberCommit: committer = nil
        default: throw MLSError(.invalid, "a commit from an external sender")
        }
        guard let tag = authenticated.auth.confirmationTag else {
            throw MLSError(.malformed, "a commit without a confirmation tag")
        }
        var list: [ResolvedProposal] = []
        for item in commit.proposals {
            switch item {
            case .proposal(let proposal):
                list.append(ResolvedProposal(proposal: proposal, sender: authenticated.content.sender, reference: nil))
            case .reference(let reference):
                guard let cached = proposals.first(where: { $0.reference == reference }) else {
                    throw MLSError(.invalid, "the commit refers to a proposal this member does not have")
                }
                list.append(ResolvedProposal(proposal: cached.proposal, sender: cached.sender, reference: reference))
            }
        }
        try validateProposalList(list, committer: committer, hasPath: commit.path != nil, now: now)
        var provisional = try applyProposals(list)
        var initSecret = secrets.initSecret
        var sender = committer ?? 0
        if committer == nil {
            // An external commit is signed by the joiner's own key, so its signature says nothing
            // about who may be removed (§12.4.3.2): before it moves anyone, its leaf must be one
            // this member accepts, every Remove must be of a leaf of the joiner's own identity
            // (a resync), and its ExternalInit must decapsulate.
            guard let path = commit.path else { throw MLSError(.invalid, "an external commit without a path") }
            sender = provisional.tree.add(path.leafNode)
            try validateLeaf(path.leafNode, at: sender, source: .commit, in: provisional.tree, now: nil, againstOthers: false)
            let joiner = try MLSCredential(path.leafNode.credential).identity
            for leaf in provisional.removed {
                guard let removed = tree.leaf(leaf), try MLSCredential(removed.credential).identity == joiner else {
                    throw MLSError(.invalid, "an external commit removes leaf \(leaf), which is not the joiner's own")
                }
            }
            let externalKey = suite.deriveKeyPair(secrets.external)
            let recipient: HPKE.Recipient
            do {
                recipient = try suite.hpkeRecipient(
                    externalKey, encapsulatedKey: provisional.externalInit ?? Data(), info: Data())
            } catch { throw MLSError(.invalid, "the ExternalInit's KEM output does not decapsulate") }
            initSecret = try recipient.export(context: Array("MLS 1.0 external init secret".utf8), length: suite.hashLength)
        }
        // A member removed by a commit cannot check its confirmation tag (the path is sealed to
        // the others), so it goes by the commit's signature: a member's, or, for an external
        // commit, one that passed every check above.
        if provisional.removed.contains(ownLeaf) {
            isActive = false
            return .removed
        }
        let joiners = Set(provisional.joiners.map(\.leaf))
        var ownKeys = nodeKeys.filter { key, value in provisional.tree.node(key)?.encryptionKey == value.publicKey }
        for update in provisional.updatedLeaves where update.leaf == ownLeaf {
            if let key = pendingUpdateKeys[update.reference], let leaf = provisional.tree.leaf(ownLeaf) {
                ownKeys[ownLeaf * 2] = NodeKey(publicKey: leaf.encryptionKey, privateKey: key)
            }
        }
        var provisionalContext = context
        provisionalContext.epoch += 1
        provisionalContext.extensions = provisional.extensions
        var commitSecret = SecureBytes(zeroes: suite.hashLength)
        if let path = commit.path {
            let before = provisional.tree
            try mergeReceivedPath(path, sender: sender, tree: &provisional.tree)
            provisionalContext.treeHash = provisional.tree.rootHash()
            let (_, secret, keys) = try decryptPath(
                path, sender: sender, tree: before, excluding: joiners, context: provisionalContext, ownKeys: ownKeys)
            commitSecret = secret
            ownKeys = ownKeys.filter { key, value in provisional.tree.node(key)?.encryptionKey == value.publicKey }
            ownKeys.merge(keys) { $1 }
        } else {
            provisionalContext.treeHash = provisional.tree.rootHash()
        }
        let (confirmed, newContext, _, _, newSecrets) = try nextEpoch(
            provisionalContext, wireFormat: authenticated.wireFormat, content: authenticated.content,
            signature: authenticated.auth.signature, psks: provisional.psks, initSecret: initSecret, commitSecret: commitSecret)
        guard suite.verifyMAC(key: newSecrets.confirmation, confirmed, tag: tag) else {
            throw MLSError(.authentication, "the commit's confirmation tag does not verify")
        }
        nodeKeys = ownKeys
        advance(
            to: newContext, tree: provisional.tree, secrets: newSecrets, confirmationTag: tag, confirmed: confirmed,
            updatedLeaves: [])
        if provisional.reInit { isActive = false }
        return .commit(epoch: newContext.epoch, added: provisional.joiners.map(\.leaf), removed: provisional.removed)
    }
}
