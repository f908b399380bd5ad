public import Foundation
import SparkCrypto

/// What applying a commit's proposals gives (§12.3), before the path.
struct ProvisionalState {
    var tree: RatchetTree
    var extensions: [Extension]
    var joiners: [(leaf: LeafIndex, package: KeyPackage)] = []
    var psks: [PreSharedKeyID] = []
    var removed: [LeafIndex] = []
    var updatedLeaves: [(leaf: LeafIndex, reference: Data)] = []
    var externalInit: Data?
    var reInit = false
}

/// The outcome of ``MLSGroup/commit(adding:removing:updatingPath:now:random:)``.
public struct MLSCommitResult: Sendable {
    /// The Commit, an `MLSMessage` for every current member.
    public let commit: Data
    /// The Welcome for the added members, when there are any.
    public let welcome: Data?
    /// The group in the new epoch. Keep it once the delivery service accepted the commit; keep the
    /// old group (and process the winner) if another commit of the same epoch won.
    public let group: MLSGroup
}

extension MLSGroup {
    // MARK: - Applying proposals

    func applyProposals(_ list: [ResolvedProposal]) throws -> ProvisionalState {
        var state = ProvisionalState(tree: tree, extensions: context.extensions)
        for item in list {
            if case .groupContextExtensions(let extensions) = item.proposal { state.extensions = extensions }
        }
        if state.extensions != context.extensions {
            for leaf in state.tree.memberLeaves {
                try Self.checkRequiredCapabilities(state.tree.leaf(leaf)!.capabilities, state.extensions)
            }
        }
        for item in list {
            if case .update(let leaf) = item.proposal, case .member(let sender) = item.sender {
                state.tree.update(sender, with: leaf)
                state.updatedLeaves.append((sender, item.reference ?? Data()))
            }
        }
        for item in list {
            if case .remove(let leaf) = item.proposal {
                state.tree.remove(leaf)
                state.removed.append(leaf)
            }
        }
        for item in list {
            if case .add(let package) = item.proposal {
                // Signature keys must stay unique once removes are applied (§7.3).
                try Self.checkCapabilities(package.leafNode, in: state.tree, replacing: nil, context: context)
                state.joiners.append((state.tree.add(package.leafNode), package))
            }
        }
        for item in list {
            switch item.proposal {
            case .preSharedKey(let id): state.psks.append(id)
            case .externalInit(let kemOutput): state.externalInit = kemOutput
            case .reInit: state.reInit = true
            default: break
            }
        }
        return state
    }

    /// The PSKs of a commit, resolved from this member's stores (§8.4).
    func resolvePSKs(_ ids: [PreSharedKeyID]) throws -> SecureBytes? {
        let resolved = try ids.map { id -> (id: PreSharedKeyID, secret: SecureBytes) in
            switch id.kind {
            case .external(let pskID):
                guard let secret = externalPSKs[pskID] else { throw MLSError(.invalid, "an unknown external PSK") }
                return (id, secret)
            case .resumption(_, let groupID, let epoch):
                guard groupID == context.groupID,
                    let secret = resumptionPSKs[epoch] ?? (epoch == context.epoch ? secrets.resumption : nil)
                else { throw MLSError(.invalid, "a resumption PSK of an epoch this member does not have") }
                return (id, secret)
            }
        }
        return try KeySchedule.pskSecret(suite: suite, psks: resolved)
    }

    // MARK: - Making a commit

    /// Commits the proposals received this epoch (by reference), plus Adds of `keyPackages` and
    /// Removes of `removing` (by value), with a path that refreshes this member's keys when
    /// `updatingPath` is true or the proposals need one. Returns the commit, the Welcome for new
    /// members and the group in the next epoch; `self` is unchanged.
    ///
    /// With `extensions`, the commit also replaces the application's own group context
    /// extensions (a GroupContextExtensions proposal; the group's other extensions are kept).
    public func commit(
        adding keyPackages: [Data] = [], removing: [UInt32] = [], updatingPath: Bool = true,
        extensions: [MLSGroupExtension]? = nil, now: Date, random: inout some MLSRandomSource
    ) throws -> MLSCommitResult {
        try requireActive()
        var list: [ResolvedProposal] = []
        if let extensions {
            let kept = context.extensions.filter { !MLSGroupExtension.range.contains($0.type) }
            list.append(
                ResolvedProposal(
                    proposal: .groupContextExtensions(kept + (try MLSGroupExtension.wire(extensions))), sender: .member(ownLeaf),
                    reference: nil))
        }
        for cached in proposals {
            if case .update = cached.proposal, case .member(let sender) = cached.sender, sender == ownLeaf { continue }
            list.append(ResolvedProposal(proposal: cached.proposal, sender: cached.sender, reference: cached.reference))
        }
        // A Remove proposed by someone else for a leaf this commit also removes by value is dropped.
        let removedByReference = Set(
            list.compactMap { item -> LeafIndex? in
                if case .remove(let leaf) = item.proposal { return leaf }
                return nil
            })
        for package in keyPackages {
            list.append(
                ResolvedProposal(proposal: .add(try Self.decodeKeyPackage(package)), sender: .member(ownLeaf), reference: nil))
        }
        for leaf in removing where !removedByReference.contains(leaf) {
            list.append(ResolvedProposal(proposal: .remove(leaf), sender: .member(ownLeaf), reference: nil))
        }
        // Updates for leaves that are also removed are dropped rather than failing the commit.
        let removedLeaves = Set(
            list.compactMap { item -> LeafIndex? in
                if case .remove(let leaf) = item.proposal { return leaf }
                return nil
            })
        list.removeAll { item in
            if case .update = item.proposal, case .member(let sender) = item.sender { return removedLeaves.contains(sender) }
            return false
        }
        let needsPath =
            list.isEmpty || updatingPath
            || !list.allSatisfy {
                switch $0.proposal {
                case .add, .preSharedKey: true
                default: false
                }
            }
        try validateProposalList(list, committer: ownLeaf, hasPath: needsPath, now: now)
        return try makeCommit(
            list, withPath: needsPath, sender: .member(ownLeaf), initSecret: secrets.initSecret, random: &random)
    }

    /// A commit that re-initializes the group as `groupID` with the same version and suite (a
    /// ReInit by value, §12.1.5): the group it moves to is inactive for every member.
    public func commit(reInitializingAs groupID: Data, now: Date, random: inout some MLSRandomSource) throws
        -> MLSCommitResult
    {
        try requireActive()
        let list = [
            ResolvedProposal(
                proposal: .reInit(groupID: groupID, version: 1, cipherSuite: suite.rawValue, extensions: []),
                sender: .member(ownLeaf), reference: nil)
        ]
        try validateProposalList(list, committer: ownLeaf, hasPath: true, now: now)
        return try makeCommit(list, withPath: true, sender: .member(ownLeaf), initSecret: secrets.initSecret, random: &random)
    }

    /// Builds and signs a commit of `list` from this member (or from a new member, for an
    /// external commit) and moves a copy of the group to the new epoch.
    func makeCommit(
        _ list: [ResolvedProposal], withPath: Bool, sender: Sender, initSecret: SecureBytes, newMemberLeaf: LeafNode? = nil,
        random: inout some MLSRandomSource
    ) throws -> MLSCommitResult {
        var provisional = try applyProposals(list)
        var next = self
        let joinerLeaves = Set(provisional.joiners.map(\.leaf))
        var path: UpdatePath?
        var pathSecrets: [UInt32: SecureBytes] = [:]
        var commitSecret = SecureBytes(zeroes: suite.hashLength)
        if let newMemberLeaf { next.ownLeaf = provisional.tree.add(newMemberLeaf) }
        var provisionalContext = context
        provisionalContext.epoch += 1
        provisionalContext.extensions = provisional.extensions
        next.nodeKeys = next.nodeKeys.filter { key, value in provisional.tree.node(key)?.encryptionKey == value.publicKey }
        if withPath {
            let made = try next.makePath(
                tree: &provisional.tree, leaf: next.ownLeaf, excluding: joinerLeaves, context: provisionalContext, random: &random
            )
            path = made.path
            pathSecrets = made.pathSecrets
            commitSecret = made.commitSecret
        }
        provisionalContext.treeHash = provisional.tree.rootHash()
        if let unsignedPath = path {
            path = try next.encryptPath(
                unsignedPath, secrets: pathSecrets, tree: provisional.tree, leaf: next.ownLeaf, excluding: joinerLeaves,
                context: provisionalContext, random: &random)
        }
        let proposalsOrRefs = list.map { item -> ProposalOrRef in
            if let reference = item.reference { return .reference(reference) }
            return .proposal(item.proposal)
        }
        let framed = FramedContent(
            groupID: context.groupID, epoch: context.epoch, sender: sender, authenticatedData: Data(),
            content: .commit(Commit(proposals: proposalsOrRefs, path: path)))
        let wireFormat: WireFormat = (encryptsHandshake && sender == .member(ownLeaf)) ? .privateMessage : .publicMessage
        let signature = try Framing.sign(suite: suite, wireFormat: wireFormat, content: framed, context: context, key: signer.key)
        let (confirmed, newContext, joiner, welcomeSecret, newSecrets) = try nextEpoch(
            provisionalContext, wireFormat: wireFormat, content: framed, signature: signature, psks: provisional.psks,
            initSecret: initSecret, commitSecret: commitSecret)
        let tag = suite.mac(key: newSecrets.confirmation, confirmed)
        let authenticated = AuthenticatedContent(
            wireFormat: wireFormat, content: framed, auth: FramedContentAuthData(signature: signature, confirmationTag: tag))
        // The commit is protected with this epoch's keys, so it is wrapped before the epoch moves.
        var sending = self
        let commitMessage = try sending.wrap(authenticated, random: &random)
        next.secretTree = sending.secretTree
        next.advance(
            to: newContext, tree: provisional.tree, secrets: newSecrets, confirmationTag: tag, confirmed: confirmed,
            updatedLeaves: provisional.updatedLeaves)
        var welcome: Data?
        if !provisional.joiners.isEmpty {
            welcome = try next.makeWelcome(
                joiners: provisional.joiners, joinerSecret: joiner, welcomeSecret: welcomeSecret, psks: provisional.psks,
                pathSecrets: pathSecrets, random: &random)
        }
        return MLSCommitResult(commit: commitMessage, welcome: welcome, group: next)
    }

    /// The transcript hash, group context and secrets of the epoch a commit starts (§8): shared by
    /// the committer and every member that processes the commit.
    func nextEpoch(
        _ provisionalContext: GroupContext, wireFormat: WireFormat, content: FramedContent, signature: Data,
        psks: [PreSharedKeyID], initSecret: SecureBytes, commitSecret: SecureBytes
    ) throws -> (
        confirmed: Data, context: GroupContext, joiner: SecureBytes, welcome: SecureBytes, secrets: EpochSecrets
    ) {
        let confirmed = TranscriptHash.confirmed(
            suite: suite, interim: interimTranscriptHash, wireFormat: wireFormat, content: content, signature: signature)
        var newContext = provisionalContext
        newContext.confirmedTranscriptHash = confirmed
        let joiner = KeySchedule.joinerSecret(
            suite: suite, initSecret: initSecret, commitSecret: commitSecret, groupContext: newContext)
        let (welcome, secrets) = KeySchedule.epoch(
            suite: suite, joinerSecret: joiner, pskSecret: try resolvePSKs(psks), groupContext: newContext)
        return (confirmed, newContext, joiner, welcome, secrets)
    }

    /// Moves this state to the epoch of `newContext`.
    mutating func advance(
        to newContext: GroupContext, tree newTree: RatchetTree, secrets newSecrets: EpochSecrets, confirmationTag tag: Data,
        confirmed: Data, updatedLeaves: [(leaf: LeafIndex, reference: Data)]
    ) {
        resumptionPSKs[context.epoch] = secrets.resumption
        if resumptionPSKs.count > Self.resumptionWindow, let oldest = resumptionPSKs.keys.min() {
            resumptionPSKs.removeValue(forKey: oldest)
        }
        for update in updatedLeaves where update.leaf == ownLeaf {
            if let key = pendingUpdateKeys[update.reference], let leaf = newTree.leaf(ownLeaf) {
                nodeKeys[ownLeaf * 2] = NodeKey(publicKey: leaf.encryptionKey, privateKey: key)
            }
        }
        context = newContext
        tree = newTree
        secrets = newSecrets
        secretTree = SecretTree(suite: suite, encryptionSecret: newSecrets.encryption, leafCount: newTree.leafCount)
        confirmationTag = tag
        interimTranscriptHash = TranscriptHash.interim(suite: suite, confirmed: confirmed, confirmationTag: tag)
        proposals = []
        pendingUpdateKeys = [:]
        nodeKeys = nodeKeys.filter { key, value in newTree.node(key)?.encryptionKey == value.publicKey }
    }

    // MARK: - TreeKEM (§7.4–7.6)

    /// Generates this member's new leaf and path secrets, and merges the public keys into `tree`.
    /// The returned path has no ciphertexts yet; ``encryptPath`` adds them once the tree hash is known.
    mutating func makePath(
        tree: inout RatchetTree, leaf: LeafIndex, excluding joiners: Set<LeafIndex>, context provisionalContext: GroupContext,
        random: inout some MLSRandomSource
    ) throws -> (path: UpdatePath, pathSecrets: [UInt32: SecureBytes], commitSecret: SecureBytes) {
        let filtered = tree.filteredDirectPath(leaf)
        var pathSecret = random.secret(count: suite.hashLength)
        var pathSecrets: [UInt32: SecureBytes] = [:]
        var publicKeys: [Data] = []
        var newKeys: [UInt32: NodeKey] = [:]
        for entry in filtered {
            pathSecrets[entry.node] = pathSecret
            let key = suite.deriveKeyPair(suite.deriveSecret(pathSecret, "node"))
            publicKeys.append(key.publicKey.rawRepresentation)
            newKeys[entry.node] = NodeKey(publicKey: key.publicKey.rawRepresentation, privateKey: key.rawRepresentation)
            pathSecret = suite.deriveSecret(pathSecret, "path")
        }
        let commitSecret = pathSecret
        let leafKey = suite.deriveKeyPair(random.secret(count: 32))
        guard var leafNode = tree.leaf(leaf) else { throw MLSError(.state, "the committer has no leaf") }
        leafNode.encryptionKey = leafKey.publicKey.rawRepresentation
        leafNode.source = .commit(parentHash: Data())
        let parentHash = tree.mergePath(sender: leaf, leafNode: nil, publicKeys: publicKeys)
        leafNode.source = .commit(parentHash: parentHash)
        try leafNode.sign(suite: suite, key: signer.key, groupID: provisionalContext.groupID, leafIndex: leaf)
        tree.set(leaf * 2, .leaf(leafNode))
        newKeys[leaf * 2] = NodeKey(publicKey: leafNode.encryptionKey, privateKey: leafKey.rawRepresentation)
        nodeKeys = nodeKeys.filter {
            !TreeMath.directPath(leaf * 2, leaves: tree.leafCount).contains($0.key) && $0.key != leaf * 2
        }
        nodeKeys.merge(newKeys) { $1 }
        let nodes = publicKeys.map { UpdatePathNode(encryptionKey: $0, encryptedPathSecret: []) }
        return (UpdatePath(leafNode: leafNode, nodes: nodes), pathSecrets, commitSecret)
    }

    /// Encrypts each path secret to the resolution of its copath child, new members excluded.
    func encryptPath(
        _ path: UpdatePath, secrets pathSecrets: [UInt32: SecureBytes], tree: RatchetTree, leaf: LeafIndex,
        excluding joiners: Set<LeafIndex>, context provisionalContext: GroupContext, random: inout some MLSRandomSource
    ) throws -> UpdatePath {
        let contextBytes = provisionalContext.tlsBytes
        var nodes: [UpdatePathNode] = []
        for (index, entry) in tree.filteredDirectPath(leaf).enumerated() {
            let targets = tree.resolution(entry.copathChild).filter { !($0 % 2 == 0 && joiners.contains($0 / 2)) }
            let ciphertexts = try targets.map { target in
                try suite.encryptWithLabel(
                    suite.hpkePublicKey(tree.node(target)!.encryptionKey), "UpdatePathNode", contextBytes,
                    pathSecrets[entry.node]!, random: &random)
            }
            nodes.append(UpdatePathNode(encryptionKey: path.nodes[index].encryptionKey, encryptedPathSecret: ciphertexts))
        }
        return UpdatePath(leafNode: path.leafNode, nodes: nodes)
    }

    /// Merges a received path into `tree` and checks the sender's leaf: its signature, and the
    /// parent hash it carries against the one the merged path gives.
    func mergeReceivedPath(_ path: UpdatePath, sender: LeafIndex, tree: inout RatchetTree) throws {
        let filtered = tree.filteredDirectPath(sender)
        guard path.nodes.count == filtered.count else {
            throw MLSError(.invalid, "the path has \(path.nodes.count) nodes, the filtered direct path \(filtered.count)")
        }
        for node in path.nodes { try suite.checkHPKEPublicKey(node.encryptionKey) }
        guard Set(path.nodes.map(\.encryptionKey)).count == path.nodes.count else {
            throw MLSError(.invalid, "the path repeats an encryption key")
        }
        try validateLeaf(path.leafNode, at: sender, source: .commit, in: tree, now: nil)
        let parentHash = tree.mergePath(sender: sender, leafNode: path.leafNode, publicKeys: path.nodes.map(\.encryptionKey))
        guard path.leafNode.parentHash == parentHash else {
            throw MLSError(.invalid, "the committer's leaf carries the wrong parent hash")
        }
    }

    /// Decrypts the path secret meant for this member and derives the rest of the path; returns the
    /// commit secret and the new private keys.
    func decryptPath(
        _ path: UpdatePath, sender: LeafIndex, tree: RatchetTree, excluding joiners: Set<LeafIndex>,
        context provisionalContext: GroupContext, ownKeys: [UInt32: NodeKey]
    ) throws -> (pathSecret: SecureBytes, commitSecret: SecureBytes, keys: [UInt32: NodeKey]) {
        let filtered = tree.filteredDirectPath(sender)
        guard let position = filtered.firstIndex(where: { TreeMath.isInSubtree(ownLeaf * 2, of: $0.copathChild) }) else {
            throw MLSError(.invalid, "no node of the path covers this member")
        }
        let targets = tree.resolution(filtered[position].copathChild).filter { !($0 % 2 == 0 && joiners.contains($0 / 2)) }
        let ciphertexts = path.nodes[position].encryptedPathSecret
        guard ciphertexts.count == targets.count else {
            throw MLSError(.invalid, "the path has \(ciphertexts.count) ciphertexts for a resolution of \(targets.count)")
        }
        guard let slot = targets.firstIndex(where: { ownKeys[$0] != nil }), let key = ownKeys[targets[slot]] else {
            throw MLSError(.invalid, "this member holds no key of the resolution it was encrypted to")
        }
        var pathSecret = try suite.decryptWithLabel(
            suite.hpkePrivateKey(key.privateKey), "UpdatePathNode", provisionalContext.tlsBytes, ciphertexts[slot])
        guard pathSecret.count == suite.hashLength else { throw MLSError(.invalid, "a path secret of the wrong length") }
        let decrypted = pathSecret
        var keys: [UInt32: NodeKey] = [:]
        for index in position..<filtered.count {
            let derived = suite.deriveKeyPair(suite.deriveSecret(pathSecret, "node"))
            guard derived.publicKey.rawRepresentation == path.nodes[index].encryptionKey else {
                throw MLSError(.invalid, "a path secret does not give the public key of node \(filtered[index].node)")
            }
            keys[filtered[index].node] = NodeKey(
                publicKey: derived.publicKey.rawRepresentation, privateKey: derived.rawRepresentation)
            pathSecret = suite.deriveSecret(pathSecret, "path")
        }
        return (decrypted, pathSecret, keys)
    }
}
