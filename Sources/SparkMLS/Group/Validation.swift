import Foundation
import SparkCrypto

/// Leaf node, KeyPackage and proposal-list validation (RFC 9420 §7.3, §10.1, §12.2).
extension MLSGroup {
    /// §10.1: version, suite, signature, keys, and the leaf inside.
    func validateKeyPackage(_ package: KeyPackage, now: Date?) throws {
        guard package.version == mls10 else { throw MLSError(.invalid, "a KeyPackage of version \(package.version)") }
        guard package.cipherSuite == suite.rawValue else {
            throw MLSError(.invalid, "a KeyPackage of suite \(package.cipherSuite) for a group of suite \(suite.rawValue)")
        }
        guard package.verifySignature(suite: suite) else {
            throw MLSError(.authentication, "the KeyPackage's signature does not verify")
        }
        guard package.initKey != package.leafNode.encryptionKey else {
            throw MLSError(.invalid, "a KeyPackage's init key equals its leaf's encryption key")
        }
        try suite.checkHPKEPublicKey(package.initKey)
        guard !package.extensions.hasDuplicates else { throw MLSError(.invalid, "a KeyPackage repeats an extension") }
        try validateLeaf(package.leafNode, at: nil, source: .keyPackage, in: tree, now: now)
    }

    enum ExpectedSource { case keyPackage, update, commit }

    /// §7.3: a leaf about to enter `tree` at `leaf` (nil for one from a KeyPackage).
    func validateLeaf(
        _ node: LeafNode, at leaf: LeafIndex?, source: ExpectedSource, in tree: RatchetTree, now: Date?,
        againstOthers: Bool = true
    ) throws {
        switch (node.source, source) {
        case (.keyPackage(let lifetime), .keyPackage):
            if let now {
                let seconds = UInt64(max(0, now.timeIntervalSince1970))
                guard lifetime.notBefore <= seconds, seconds <= lifetime.notAfter else {
                    throw MLSError(.invalid, "the KeyPackage's lifetime does not include now")
                }
            }
        case (.update, .update), (.commit, .commit): break
        default: throw MLSError(.invalid, "a leaf of source \(node.source.rawValue) where \(source) was expected")
        }
        guard node.verifySignature(suite: suite, groupID: context.groupID, leafIndex: leaf ?? 0) else {
            throw MLSError(.authentication, "a leaf node's signature does not verify")
        }
        // The signature key parsed as a canonical Ed25519 point when the signature verified.
        try suite.checkHPKEPublicKey(node.encryptionKey)
        let credential = try MLSCredential(node.credential)
        guard validator.isValid(credential, signatureKey: node.signatureKey) else {
            throw MLSError(.credentialRefused, "the credential validator refused a leaf's credential")
        }
        try Self.checkCapabilities(node, in: againstOthers ? tree : nil, replacing: leaf, context: context)
    }

    /// The uniqueness and credential-compatibility rules of §7.3 over a whole tree at once, in
    /// linear time (joining checks every leaf against every other).
    static func checkLeavesAgree(_ tree: RatchetTree) throws {
        let index = tree.index
        guard index.signatureKeys.count == index.count else { throw MLSError(.invalid, "two leaves share a signature key") }
        guard index.encryptionKeys.count == index.count else { throw MLSError(.invalid, "two leaves share an encryption key") }
        for (type, count) in index.credentialsInUse where count > 0 {
            guard index.credentialSupport[type, default: 0] == index.count else {
                throw MLSError(.invalid, "credential type \(type) is in use but not supported by every member")
            }
        }
    }

    /// The capability and uniqueness rules of §7.3 for `node` against the other members of `tree`.
    static func checkCapabilities(_ node: LeafNode, in tree: RatchetTree?, replacing leaf: LeafIndex?, context: GroupContext)
        throws
    {
        let capabilities = node.capabilities
        guard capabilities.versions.contains(mls10), capabilities.cipherSuites.contains(context.cipherSuite) else {
            throw MLSError(.invalid, "a leaf does not support the group's version and suite")
        }
        guard !node.extensions.hasDuplicates else { throw MLSError(.invalid, "a leaf repeats an extension") }
        for ext in node.extensions where !ExtensionType.known.contains(ext.type) {
            guard capabilities.extensions.contains(ext.type) else {
                throw MLSError(.invalid, "a leaf carries extension \(ext.type) it does not list as supported")
            }
        }
        try checkRequiredCapabilities(capabilities, context.extensions)
        guard capabilities.credentials.contains(node.credential.type) else {
            throw MLSError(.invalid, "a leaf does not list its own credential type")
        }
        guard let tree else { return }
        let index = tree.index
        if let holder = index.signatureKeys[node.signatureKey], holder != leaf {
            throw MLSError(.invalid, "a leaf's signature key is already used by leaf \(holder)")
        }
        if let holder = index.encryptionKeys[node.encryptionKey], holder != leaf {
            throw MLSError(.invalid, "a leaf's encryption key is already used by leaf \(holder)")
        }
        // The other members (all but the leaf being replaced) must support this credential type,
        // and this leaf every type the others use.
        let replaced = leaf.flatMap { tree.leaf($0) }
        let others = index.count - (replaced == nil ? 0 : 1)
        let replacedSupports = replaced.map { Set($0.capabilities.credentials).contains(node.credential.type) } ?? false
        guard index.credentialSupport[node.credential.type, default: 0] - (replacedSupports ? 1 : 0) == others else {
            throw MLSError(.invalid, "a leaf's credential type is not supported by every member")
        }
        for (type, count) in index.credentialsInUse where count - (replaced?.credential.type == type ? 1 : 0) > 0 {
            guard capabilities.credentials.contains(type) else {
                throw MLSError(.invalid, "a leaf does not support credential type \(type), which a member uses")
            }
        }
    }

    static func checkRequiredCapabilities(_ capabilities: Capabilities, _ extensions: [Extension]) throws {
        guard let data = extensions.data(of: ExtensionType.requiredCapabilities) else { return }
        var reader = TLSReader(data)
        let required: [UInt16] = try reader.vector("extension_types")
        let proposals: [UInt16] = try reader.vector("proposal_types")
        let credentials: [UInt16] = try reader.vector("credential_types")
        try reader.finish("RequiredCapabilities")
        for type in required where !ExtensionType.known.contains(type) && !capabilities.extensions.contains(type) {
            throw MLSError(.invalid, "a leaf lacks required extension \(type)")
        }
        for type in proposals where !ProposalType.defaults.contains(type) && !capabilities.proposals.contains(type) {
            throw MLSError(.invalid, "a leaf lacks required proposal \(type)")
        }
        for type in credentials where !capabilities.credentials.contains(type) {
            throw MLSError(.invalid, "a leaf lacks required credential type \(type)")
        }
    }

    /// A commit's proposals with who proposed each.
    struct ResolvedProposal {
        let proposal: Proposal
        let sender: Sender
        let reference: Data?
    }

    /// §12.2's rules for the proposals of one commit from `committer` (nil for an external commit).
    func validateProposalList(_ list: [ResolvedProposal], committer: LeafIndex?, hasPath: Bool, now: Date?) throws {
        var removed = Set<LeafIndex>()
        var updated = Set<LeafIndex>()
        var addedKeys = Set<Data>()
        var pskIDs = Set<PreSharedKeyID>()
        var extensionChanges = 0
        var externalInits = 0
        var reInits = 0
        for item in list {
            switch item.proposal {
            case .add(let package):
                try validateKeyPackage(package, now: now)
                guard addedKeys.insert(package.leafNode.signatureKey).inserted else {
                    throw MLSError(.invalid, "two Adds for the same signature key")
                }
            case .update(let leaf):
                guard item.reference != nil else { throw MLSError(.invalid, "an Update proposal by value in a commit") }
                guard case .member(let sender) = item.sender else { throw MLSError(.invalid, "an Update from a non-member") }
                guard sender != committer else { throw MLSError(.invalid, "the committer's own Update proposal") }
                guard updated.insert(sender).inserted, !removed.contains(sender) else {
                    throw MLSError(.invalid, "two Updates or an Update and a Remove for leaf \(sender)")
                }
                try validateLeaf(leaf, at: sender, source: .update, in: tree, now: nil)
            case .remove(let leaf):
                guard tree.leaf(leaf) != nil else { throw MLSError(.invalid, "a Remove of blank leaf \(leaf)") }
                guard leaf != committer else { throw MLSError(.invalid, "the committer removes itself") }
                guard removed.insert(leaf).inserted, !updated.contains(leaf) else {
                    throw MLSError(.invalid, "two Removes or an Update and a Remove for leaf \(leaf)")
                }
            case .preSharedKey(let id):
                guard pskIDs.insert(id).inserted else { throw MLSError(.invalid, "a PSK proposed twice") }
                if case .resumption(let usage, _, _) = id.kind, usage != 1 {
                    throw MLSError(.invalid, "a resumption PSK of usage \(usage) in an ordinary commit")
                }
                guard id.nonce.count == suite.hashLength else { throw MLSError(.invalid, "a PSK nonce is not Nh bytes") }
            case .reInit: reInits += 1
            case .externalInit: externalInits += 1
            case .groupContextExtensions(let extensions):
                extensionChanges += 1
                guard !extensions.hasDuplicates else { throw MLSError(.invalid, "GroupContextExtensions repeats an extension") }
            }
        }
        guard extensionChanges <= 1 else { throw MLSError(.invalid, "more than one GroupContextExtensions proposal") }
        guard reInits == 0 || list.count == 1 else { throw MLSError(.invalid, "a ReInit with other proposals") }
        if committer == nil {
            guard externalInits == 1 else { throw MLSError(.invalid, "an external commit needs exactly one ExternalInit") }
            for item in list {
                switch item.proposal {
                case .externalInit, .remove, .preSharedKey:
                    guard item.reference == nil else { throw MLSError(.invalid, "an external commit refers to a proposal") }
                default: throw MLSError(.invalid, "an external commit carries a \(item.proposal.type) proposal")
                }
            }
        } else {
            guard externalInits == 0 else { throw MLSError(.invalid, "an ExternalInit in a member's commit") }
        }
        // §12.4: a path is required unless every proposal is an Add, a PreSharedKey or a ReInit.
        let pathOptional =
            !list.isEmpty
            && list.allSatisfy {
                switch $0.proposal {
                case .add, .preSharedKey, .reInit: true
                default: false
                }
            }
        guard hasPath || pathOptional else { throw MLSError(.invalid, "this commit needs a path") }
    }
}
