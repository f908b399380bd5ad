public import Foundation
public import SparkCrypto

extension MLSGroup {
    // MARK: - GroupInfo (§12.4.3)

    /// This epoch's signed GroupInfo with the `external_pub` extension (and the `ratchet_tree`
    /// extension unless `includingRatchetTree` is false), as an `MLSMessage`. Anyone holding it
    /// can join by an external commit, if the credential validator accepts them.
    public func groupInfo(includingRatchetTree: Bool = true) throws -> Data {
        MLSMessageBody.groupInfo(try signedGroupInfo(includingRatchetTree: includingRatchetTree)).tlsEncoded
    }

    /// The ratchet tree as the `ratchet_tree` extension encodes it, for delivery beside a Welcome.
    public var ratchetTree: Data { tree.encoding.tlsEncoded }

    func signedGroupInfo(includingRatchetTree: Bool) throws -> GroupInfo {
        var extensions: [Extension] = []
        if includingRatchetTree { extensions.append(Extension(type: ExtensionType.ratchetTree, data: tree.encoding.tlsEncoded)) }
        var externalPub = TLSWriter()
        externalPub.opaque(suite.deriveKeyPair(secrets.external).publicKey.rawRepresentation)
        extensions.append(Extension(type: ExtensionType.externalPub, data: externalPub.data))
        var info = GroupInfo(groupContext: context, extensions: extensions, confirmationTag: confirmationTag, signer: ownLeaf)
        info.signature = try suite.signWithLabel(signer.key, "GroupInfoTBS", info.signedContent)
        return info
    }

    func makeWelcome(
        joiners: [(leaf: LeafIndex, package: KeyPackage)], joinerSecret: SecureBytes, welcomeSecret: SecureBytes,
        psks: [PreSharedKeyID], pathSecrets: [UInt32: SecureBytes], random: inout some MLSRandomSource
    ) throws -> Data {
        let info = try signedGroupInfo(includingRatchetTree: true)
        let (key, nonce) = KeySchedule.welcomeKeyAndNonce(suite: suite, welcomeSecret: welcomeSecret)
        let encryptedInfo = try suite.seal(key: key, nonce: nonce, aad: Data(), info.tlsBytes)
        var secrets: [EncryptedGroupSecrets] = []
        for joiner in joiners {
            let ancestor = TreeMath.commonAncestor(ownLeaf * 2, joiner.leaf * 2)
            let groupSecrets = GroupSecrets(
                joinerSecret: joinerSecret.unsafeData(), pathSecret: pathSecrets[ancestor]?.unsafeData(), psks: psks)
            let ciphertext = try suite.encryptWithLabel(
                suite.hpkePublicKey(joiner.package.initKey), "Welcome", encryptedInfo, groupSecrets.tlsBytes, random: &random)
            secrets.append(
                EncryptedGroupSecrets(newMember: joiner.package.reference(suite: suite), encryptedGroupSecrets: ciphertext))
        }
        return MLSMessageBody.welcome(Welcome(cipherSuite: suite.rawValue, secrets: secrets, encryptedGroupInfo: encryptedInfo))
            .tlsEncoded
    }

    // MARK: - Joining by Welcome (§12.4.3.1)

    /// Joins the group a Welcome invites `bundle` to. The tree comes from the GroupInfo's
    /// `ratchet_tree` extension or, when it has none, from `ratchetTree`. Every leaf is checked
    /// (signature, credential, capabilities, uniqueness), and so are the tree hash, the parent
    /// hashes, the GroupInfo's signature and the confirmation tag.
    public static func join(
        welcome: Data, bundle: MLSKeyPackageBundle, ratchetTree: Data? = nil,
        externalPSKs: [Data: SecureBytes] = [:], validator: any MLSCredentialValidator = MLSAcceptAnyCredential()
    ) throws -> MLSGroup {
        guard case .welcome(let message) = try MLSMessageBody(tlsEncoded: welcome) else {
            throw MLSError(.malformed, "the message is not a Welcome")
        }
        let suite = try MLSCipherSuite(rawValue: message.cipherSuite)
        guard bundle.package.cipherSuite == message.cipherSuite else {
            throw MLSError(.wrongGroup, "the Welcome's suite is not the KeyPackage's")
        }
        guard let entry = message.secrets.first(where: { $0.newMember == bundle.reference }) else {
            throw MLSError(.wrongGroup, "the Welcome has no secrets for this KeyPackage")
        }
        let initKey = try suite.hpkePrivateKey(bundle.initKey)
        let secretsBytes = try suite.decryptWithLabel(initKey, "Welcome", message.encryptedGroupInfo, entry.encryptedGroupSecrets)
        let groupSecrets = try GroupSecrets(tlsEncoded: secretsBytes)
        guard groupSecrets.joinerSecret.count == suite.hashLength else {
            throw MLSError(.invalid, "a joiner secret of the wrong length")
        }
        var resolvedPSKs: [(id: PreSharedKeyID, secret: SecureBytes)] = []
        for id in groupSecrets.psks {
            guard case .external(let pskID) = id.kind, let secret = externalPSKs[pskID] else {
                throw MLSError(.invalid, "the Welcome needs a PSK this client does not have")
            }
            resolvedPSKs.append((id, secret))
        }
        let pskSecret = try KeySchedule.pskSecret(suite: suite, psks: resolvedPSKs)
        let joiner = SecureBytes(groupSecrets.joinerSecret)
        let member = suite.extract(salt: joiner, ikm: pskSecret ?? SecureBytes(zeroes: suite.hashLength))
        let welcomeSecret = suite.deriveSecret(member, "welcome")
        let (key, nonce) = KeySchedule.welcomeKeyAndNonce(suite: suite, welcomeSecret: welcomeSecret)
        let info = try GroupInfo(
            tlsEncoded: try suite.open(key: key, nonce: nonce, aad: Data(), message.encryptedGroupInfo))
        guard info.groupContext.cipherSuite == message.cipherSuite, info.groupContext.version == mls10 else {
            throw MLSError(.invalid, "the GroupInfo's suite or version is not the Welcome's")
        }
        var tree = try verifiedTree(info: info, ratchetTree: ratchetTree, suite: suite, validator: validator)
        guard let ownLeaf = tree.memberLeaves.first(where: { tree.leaf($0) == bundle.package.leafNode }) else {
            throw MLSError(.invalid, "the tree does not hold this KeyPackage's leaf")
        }
        let (_, secrets) = KeySchedule.epoch(
            suite: suite, joinerSecret: joiner, pskSecret: pskSecret, groupContext: info.groupContext)
        guard suite.verifyMAC(key: secrets.confirmation, info.groupContext.confirmedTranscriptHash, tag: info.confirmationTag)
        else { throw MLSError(.authentication, "the GroupInfo's confirmation tag does not verify") }
        var nodeKeys: [UInt32: NodeKey] = [
            ownLeaf * 2: NodeKey(publicKey: bundle.package.leafNode.encryptionKey, privateKey: bundle.encryptionKey)
        ]
        _ = try suite.hpkePrivateKey(bundle.encryptionKey)
        if let pathSecret = groupSecrets.pathSecret {
            let filtered = tree.filteredDirectPath(info.signer)
            let ancestor = TreeMath.commonAncestor(ownLeaf * 2, info.signer * 2)
            guard let start = filtered.firstIndex(where: { $0.node == ancestor }) else {
                throw MLSError(.invalid, "the Welcome's path secret is for a node off the committer's path")
            }
            var secret = SecureBytes(pathSecret)
            for index in start..<filtered.count {
                let derived = suite.deriveKeyPair(suite.deriveSecret(secret, "node"))
                guard tree.node(filtered[index].node)?.encryptionKey == derived.publicKey.rawRepresentation else {
                    throw MLSError(.invalid, "the Welcome's path secret does not match the tree")
                }
                nodeKeys[filtered[index].node] = NodeKey(
                    publicKey: derived.publicKey.rawRepresentation, privateKey: derived.rawRepresentation)
                secret = suite.deriveSecret(secret, "path")
            }
        }
        var group = MLSGroup(
            suite: suite, context: info.groupContext, tree: tree, ownLeaf: ownLeaf, signer: bundle.signer, nodeKeys: nodeKeys,
            secrets: secrets,
            secretTree: SecretTree(suite: suite, encryptionSecret: secrets.encryption, leafCount: tree.leafCount),
            interimTranscriptHash: TranscriptHash.interim(
                suite: suite, confirmed: info.groupContext.confirmedTranscriptHash, confirmationTag: info.confirmationTag),
            confirmationTag: info.confirmationTag, validator: validator)
        group.externalPSKs = externalPSKs
        _ = tree.rootHash()
        return group
    }

    /// This group judged by `validator` from now on, once every member's credential passes it:
    /// what joining with `validator` checks of the members beyond joining with any other, for a
    /// group joined first with a validator that accepts anyone (to learn who is in it, and look
    /// them up) and then accepted without opening its Welcome a second time.
    ///
    /// - Throws: `credentialRefused` when `validator` refuses a member's credential.
    public func revalidated(by validator: any MLSCredentialValidator) throws -> MLSGroup {
        for leaf in tree.memberLeaves {
            guard let node = tree.leaf(leaf),
                validator.isValid(try MLSCredential(node.credential), signatureKey: node.signatureKey)
            else { throw MLSError(.credentialRefused, "the credential validator refused a leaf's credential") }
        }
        return withValidator(validator)
    }

    /// The tree of a GroupInfo, checked: hash, parent hashes, every leaf, and the signature.
    static func verifiedTree(
        info: GroupInfo, ratchetTree: Data?, suite: MLSCipherSuite, validator: any MLSCredentialValidator
    ) throws -> RatchetTree {
        guard !info.extensions.hasDuplicates, !info.groupContext.extensions.hasDuplicates else {
            throw MLSError(.invalid, "the GroupInfo repeats an extension")
        }
        guard let treeBytes = info.extensions.data(of: ExtensionType.ratchetTree) ?? ratchetTree else {
            throw MLSError(.invalid, "no ratchet tree in the GroupInfo and none given")
        }
        var tree = try RatchetTree(suite: suite, encoded: RatchetTreeEncoding(tlsEncoded: treeBytes))
        guard tree.rootHash() == info.groupContext.treeHash else {
            throw MLSError(.invalid, "the ratchet tree does not have the GroupInfo's tree hash")
        }
        try tree.verifyParentHashes()
        let probe = MLSGroup.probe(suite: suite, context: info.groupContext, tree: tree, validator: validator)
        for leaf in tree.memberLeaves {
            let node = tree.leaf(leaf)!
            let source: ExpectedSource =
                switch node.source {
                case .keyPackage: .keyPackage
                case .update: .update
                case .commit: .commit
                }
            try probe.validateLeaf(node, at: leaf, source: source, in: tree, now: nil, againstOthers: false)
        }
        try checkLeavesAgree(tree)
        guard let signer = tree.leaf(info.signer),
            suite.verifyWithLabel(signer.signatureKey, "GroupInfoTBS", info.signedContent, info.signature)
        else { throw MLSError(.authentication, "the GroupInfo's signature does not verify") }
        return tree
    }

    /// A group value that only validates (no keys): for checking a tree before joining it.
    static func probe(suite: MLSCipherSuite, context: GroupContext, tree: RatchetTree, validator: any MLSCredentialValidator)
        -> MLSGroup
    {
        let placeholder = EpochSecrets(suite: suite, epochSecret: SecureBytes(zeroes: suite.hashLength))
        // A throwaway key: the probe never signs.
        let key = try! Ed25519.PrivateKey()
        return MLSGroup(
            suite: suite, context: context, tree: tree, ownLeaf: 0,
            signer: MLSSigner(credential: MLSCredential(identity: Data()), key: key), nodeKeys: [:], secrets: placeholder,
            secretTree: SecretTree(suite: suite, encryptionSecret: placeholder.encryption, leafCount: tree.leafCount),
            interimTranscriptHash: Data(), confirmationTag: Data(), validator: validator)
    }

    // MARK: - Joining by external commit (§12.4.3.2)

    /// Joins from a GroupInfo by an external commit. Returns the commit for the members and the
    /// group in the new epoch, which holds once the delivery service accepts the commit.
    ///
    /// - Parameter replacing: the leaf this client held before (a resync after losing its state);
    ///   the commit removes it. Members accept that only for a leaf of the joiner's own identity.
    public static func joinExternally(
        groupInfo: Data, signer: MLSSigner, ratchetTree: Data? = nil, replacing oldLeaf: UInt32? = nil,
        validator: any MLSCredentialValidator = MLSAcceptAnyCredential(), random: inout some MLSRandomSource
    ) throws -> (commit: Data, group: MLSGroup) {
        guard case .groupInfo(let info) = try MLSMessageBody(tlsEncoded: groupInfo) else {
            throw MLSError(.malformed, "the message is not a GroupInfo")
        }
        let suite = try MLSCipherSuite(rawValue: info.groupContext.cipherSuite)
        let tree = try verifiedTree(info: info, ratchetTree: ratchetTree, suite: suite, validator: validator)
        guard let externalPubData = info.extensions.data(of: ExtensionType.externalPub) else {
            throw MLSError(.invalid, "the GroupInfo has no external_pub extension")
        }
        var reader = TLSReader(externalPubData)
        let externalPub = try suite.hpkePublicKey(try reader.opaque("external_pub"))
        try reader.finish("ExternalPub")
        let sender = try suite.hpkeSender(to: externalPub, info: Data(), random: &random)
        let initSecret = try sender.export(context: Array("MLS 1.0 external init secret".utf8), length: suite.hashLength)
        var group = probe(suite: suite, context: info.groupContext, tree: tree, validator: validator)
        group.signer = signer
        group.interimTranscriptHash = TranscriptHash.interim(
            suite: suite, confirmed: info.groupContext.confirmedTranscriptHash, confirmationTag: info.confirmationTag)
        let placeholderKey = suite.deriveKeyPair(random.secret(count: 32))
        let leaf = LeafNode(
            encryptionKey: placeholderKey.publicKey.rawRepresentation, signatureKey: signer.signatureKey,
            credential: signer.credential.wire, capabilities: .spark(suite), source: .commit(parentHash: Data()), extensions: [])
        guard validator.isValid(signer.credential, signatureKey: signer.signatureKey) else {
            throw MLSError(.credentialRefused, "the credential validator refused this client's own credential")
        }
        let list =
            [
                ResolvedProposal(
                    proposal: .externalInit(kemOutput: sender.encapsulatedKey), sender: .newMemberCommit, reference: nil)
            ] + (oldLeaf.map { [ResolvedProposal(proposal: .remove($0), sender: .newMemberCommit, reference: nil)] } ?? [])
        try group.validateProposalList(list, committer: nil, hasPath: true, now: nil)
        let result = try group.makeCommit(
            list, withPath: true, sender: .newMemberCommit, initSecret: initSecret, newMemberLeaf: leaf, random: &random)
        return (result.commit, result.group)
    }
}
