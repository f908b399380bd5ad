import Foundation
import SparkCrypto
import SparkTestSupport
import Testing

@testable import SparkMLS

@Suite(
    "MLS vectors: welcome, passive clients, TreeKEM, message protection")
struct GroupVectorTests {
    static let suite = MLSCipherSuite.x25519AES128GCMSHA256Ed25519

    static func bundle(_ entry: MLSVectors.Entry) throws -> MLSKeyPackageBundle {
        let suite = entry.suite
        let package: KeyPackage
        switch try MLSMessageBody(tlsEncoded: entry.hex("key_package")) {
        case .keyPackage(let value): package = value
        default: throw MLSVectors.Mismatch(description: "key_package is not a KeyPackage")
        }
        let key = try suite.signaturePrivateKey(entry.hex("signature_priv"))
        try MLSVectors.expectEqual(key.publicKey.rawRepresentation, package.leafNode.signatureKey, "signature key")
        if !entry.hex("init_priv").isEmpty {
            try MLSVectors.expectEqual(
                try suite.hpkePrivateKey(entry.hex("init_priv")).publicKey.rawRepresentation, package.initKey, "init key")
        }
        if !entry.hex("encryption_priv").isEmpty {
            try MLSVectors.expectEqual(
                try suite.hpkePrivateKey(entry.hex("encryption_priv")).publicKey.rawRepresentation,
                package.leafNode.encryptionKey, "encryption key")
        }
        return MLSKeyPackageBundle(
            package: package, initKey: SecureBytes(entry.hex("init_priv")),
            encryptionKey: SecureBytes(entry.hex("encryption_priv")),
            signer: MLSSigner(credential: try MLSCredential(package.leafNode.credential), key: key), suite: suite)
    }

    static func passive(_ file: String) throws {
        try MLSVectors.run(file) { entry in
            var psks: [Data: SecureBytes] = [:]
            for psk in entry.objects("external_psks") { psks[psk.hex("psk_id")] = SecureBytes(psk.hex("psk")) }
            let tree = entry["ratchet_tree"] is String ? entry.hex("ratchet_tree") : nil
            var group = try MLSGroup.join(
                welcome: entry.hex("welcome"), bundle: try bundle(entry), ratchetTree: tree, externalPSKs: psks)
            try MLSVectors.expectEqual(
                group.epochAuthenticator, entry.hex("initial_epoch_authenticator"), "initial authenticator")
            for (number, epoch) in entry.objects("epochs").enumerated() {
                for proposal in (epoch["proposals"] as? [String] ?? []) {
                    _ = try group.process(Data(hex: proposal), now: Date())
                }
                do {
                    _ = try group.process(epoch.hex("commit"), now: Date())
                } catch {
                    throw MLSVectors.Mismatch(description: "epoch \(number): \(error)")
                }
                try MLSVectors.expectEqual(
                    group.epochAuthenticator, epoch.hex("epoch_authenticator"), "authenticator of epoch \(number)")
            }
        }
    }

    @Test func passiveClientWelcome() throws { try Self.passive("passive-client-welcome") }
    @Test func passiveClientHandlingCommit() throws { try Self.passive("passive-client-handling-commit") }
    @Test func passiveClientRandom() throws { try Self.passive("passive-client-random") }
}

extension GroupVectorTests {
    @Test func welcome() throws {
        try MLSVectors.run("welcome") { entry in
            let suite = entry.suite
            guard case .keyPackage(let package) = try MLSMessageBody(tlsEncoded: entry.hex("key_package")),
                case .welcome(let welcome) = try MLSMessageBody(tlsEncoded: entry.hex("welcome"))
            else { throw MLSVectors.Mismatch(description: "not a KeyPackage and a Welcome") }
            let reference = package.reference(suite: suite)
            let secrets = try #require(welcome.secrets.first { $0.newMember == reference })
            let initKey = try suite.hpkePrivateKey(entry.hex("init_priv"))
            let groupSecrets = try GroupSecrets(
                tlsEncoded: try suite.decryptWithLabel(
                    initKey, "Welcome", welcome.encryptedGroupInfo, secrets.encryptedGroupSecrets))
            let member = suite.extract(salt: groupSecrets.joinerSecret, ikm: SecureBytes(zeroes: 32))
            let (key, nonce) = KeySchedule.welcomeKeyAndNonce(suite: suite, welcomeSecret: suite.deriveSecret(member, "welcome"))
            let info = try GroupInfo(tlsEncoded: try suite.open(key: key, nonce: nonce, aad: Data(), welcome.encryptedGroupInfo))
            try MLSVectors.expectTrue(
                suite.verifyWithLabel(entry.hex("signer_pub"), "GroupInfoTBS", info.signedContent, info.signature),
                "the GroupInfo signature")
            let (_, epoch) = KeySchedule.epoch(
                suite: suite, joinerSecret: SecureBytes(groupSecrets.joinerSecret), pskSecret: nil,
                groupContext: info.groupContext)
            try MLSVectors.expectTrue(
                suite.verifyMAC(key: epoch.confirmation, info.groupContext.confirmedTranscriptHash, tag: info.confirmationTag),
                "the confirmation tag")
        }
    }

    @Test func treeKEM() throws {
        try MLSVectors.run("treekem") { entry in
            let suite = entry.suite
            var tree = try RatchetTree(suite: suite, encoded: RatchetTreeEncoding(tlsEncoded: entry.hex("ratchet_tree")))
            let context = GroupContext(
                cipherSuite: entry.suite.rawValue, groupID: entry.hex("group_id"), epoch: UInt64(entry.int("epoch")),
                treeHash: tree.rootHash(),
                confirmedTranscriptHash: entry.hex("confirmed_transcript_hash"), extensions: [])
            var members: [UInt32: MLSGroup] = [:]
            for leafPrivate in entry.objects("leaves_private") {
                let leaf = UInt32(leafPrivate.int("index"))
                var group = MLSGroup.probe(suite: suite, context: context, tree: tree, validator: MLSAcceptAnyCredential())
                group.ownLeaf = leaf
                group.signer = MLSSigner(
                    credential: try MLSCredential(tree.leaf(leaf)!.credential),
                    key: try suite.signaturePrivateKey(leafPrivate.hex("signature_priv")))
                let encryption = try suite.hpkePrivateKey(leafPrivate.hex("encryption_priv"))
                try MLSVectors.expectEqual(
                    encryption.publicKey.rawRepresentation, tree.leaf(leaf)!.encryptionKey, "leaf key \(leaf)")
                group.nodeKeys[leaf * 2] = .init(
                    publicKey: encryption.publicKey.rawRepresentation, privateKey: encryption.rawRepresentation)
                for secret in leafPrivate.objects("path_secrets") {
                    let node = UInt32(secret.int("node"))
                    let key = suite.deriveKeyPair(suite.deriveSecret(secret.hex("path_secret"), "node"))
                    try MLSVectors.expectEqual(
                        tree.node(node)?.encryptionKey, key.publicKey.rawRepresentation, "node \(node) key")
                    group.nodeKeys[node] = .init(publicKey: key.publicKey.rawRepresentation, privateKey: key.rawRepresentation)
                }
                members[leaf] = group
            }
            for update in entry.objects("update_paths") {
                let sender = UInt32(update.int("sender"))
                let path = try UpdatePath(tlsEncoded: update.hex("update_path"))
                var merged = tree
                let checker = MLSGroup.probe(suite: suite, context: context, tree: tree, validator: MLSAcceptAnyCredential())
                try checker.mergeReceivedPath(path, sender: sender, tree: &merged)
                try MLSVectors.expectEqual(merged.rootHash(), update.hex("tree_hash_after"), "tree hash after \(sender)'s path")
                var provisional = context
                provisional.treeHash = merged.rootHash()
                let expectedSecrets = (update["path_secrets"] as? [Any] ?? []).map { $0 as? String }
                for (leaf, member) in members where leaf != sender {
                    let (pathSecret, commitSecret, _) = try member.decryptPath(
                        path, sender: sender, tree: tree, excluding: [], context: provisional, ownKeys: member.nodeKeys)
                    try MLSVectors.expectEqual(
                        pathSecret.unsafeData(), Data(hex: expectedSecrets[Int(leaf)] ?? ""), "path secret at leaf \(leaf)")
                    try MLSVectors.expectEqual(commitSecret.unsafeData(), update.hex("commit_secret"), "commit secret at \(leaf)")
                }
                // Our own UpdatePath from the same sender decrypts to one commit secret everywhere.
                var ours = tree
                var senderGroup = members[sender]!
                var random = MLSSeededRandom(seed: "treekem \(entry.index) \(sender)")
                let made = try senderGroup.makePath(tree: &ours, leaf: sender, excluding: [], context: context, random: &random)
                var ourContext = context
                ourContext.treeHash = ours.rootHash()
                let ourPath = try senderGroup.encryptPath(
                    made.path, secrets: made.pathSecrets, tree: ours, leaf: sender, excluding: [], context: ourContext,
                    random: &random)
                var check = tree
                try checker.mergeReceivedPath(ourPath, sender: sender, tree: &check)
                for (leaf, member) in members where leaf != sender {
                    let (_, commitSecret, _) = try member.decryptPath(
                        ourPath, sender: sender, tree: tree, excluding: [], context: ourContext, ownKeys: member.nodeKeys)
                    try MLSVectors.expectEqual(commitSecret, made.commitSecret, "our commit secret at leaf \(leaf)")
                }
            }
        }
    }

    @Test func messageProtection() throws {
        try MLSVectors.run("message-protection") { entry in
            let suite = entry.suite
            let context = GroupContext(
                cipherSuite: entry.suite.rawValue, groupID: entry.hex("group_id"), epoch: UInt64(entry.int("epoch")),
                treeHash: entry.hex("tree_hash"),
                confirmedTranscriptHash: entry.hex("confirmed_transcript_hash"), extensions: [])
            let membershipKey = SecureBytes(entry.hex("membership_key"))
            let senderData = SecureBytes(entry.hex("sender_data_secret"))
            let signatureKey = try suite.signaturePrivateKey(entry.hex("signature_priv"))
            let publicKey = entry.hex("signature_pub")
            func freshTree() -> SecretTree {
                SecretTree(suite: suite, encryptionSecret: SecureBytes(entry.hex("encryption_secret")), leafCount: 2)
            }
            func check(_ authenticated: AuthenticatedContent, _ expected: Content, _ what: String) throws {
                try MLSVectors.expectEqual(authenticated.content.content, expected, "\(what) content")
                try MLSVectors.expectTrue(
                    Framing.verify(suite: suite, authenticated, context: context, signatureKey: publicKey), "\(what) signature")
            }
            var contents: [(String, Content)] = [
                ("proposal", .proposal(try Proposal(tlsEncoded: entry.hex("proposal")))),
                ("commit", .commit(try Commit(tlsEncoded: entry.hex("commit")))),
                ("application", .application(entry.hex("application"))),
            ]
            contents = contents.filter { !entry.hex($0.0).isEmpty || $0.0 == "application" }
            for (name, content) in contents {
                if name != "application" {
                    guard case .publicMessage(let message) = try MLSMessageBody(tlsEncoded: entry.hex("\(name)_pub")) else {
                        throw MLSVectors.Mismatch(description: "\(name)_pub is not a PublicMessage")
                    }
                    try check(
                        try Framing.openPublic(suite: suite, message, membershipKey: membershipKey, context: context), content,
                        "\(name)_pub")
                }
                guard case .privateMessage(let message) = try MLSMessageBody(tlsEncoded: entry.hex("\(name)_priv")) else {
                    throw MLSVectors.Mismatch(description: "\(name)_priv is not a PrivateMessage")
                }
                var tree = freshTree()
                try check(
                    try Framing.openPrivate(suite: suite, message, secretTree: &tree, senderDataSecret: senderData), content,
                    "\(name)_priv")
                // Protecting again, both ways.
                let framed = FramedContent(
                    groupID: context.groupID, epoch: context.epoch, sender: .member(1), authenticatedData: Data(),
                    content: content)
                var random = MLSSeededRandom(seed: "protect \(name)")
                for wireFormat in [WireFormat.publicMessage, .privateMessage] {
                    let signature = try Framing.sign(
                        suite: suite, wireFormat: wireFormat, content: framed, context: context, key: signatureKey)
                    let tag: Data? = name == "commit" ? Data(repeating: 7, count: 32) : nil
                    let authenticated = AuthenticatedContent(
                        wireFormat: wireFormat, content: framed,
                        auth: FramedContentAuthData(signature: signature, confirmationTag: tag))
                    if wireFormat == .publicMessage {
                        var group = MLSGroup.probe(
                            suite: suite, context: context,
                            tree: try RatchetTree(
                                suite: suite, encoded: RatchetTreeEncoding(nodes: [nil, nil, .leaf(Self.dummyLeaf)])),
                            validator: MLSAcceptAnyCredential())
                        group.secrets.membership = membershipKey
                        if name == "application" {
                            try MLSVectors.expectTrue(
                                (try? group.wrap(authenticated, random: &random)) == nil, "application as PublicMessage")
                            continue
                        }
                        let bytes = try group.wrap(authenticated, random: &random)
                        guard case .publicMessage(let message) = try MLSMessageBody(tlsEncoded: bytes) else { continue }
                        try check(
                            try Framing.openPublic(suite: suite, message, membershipKey: membershipKey, context: context),
                            content, "our \(name)_pub")
                    } else {
                        var sending = freshTree()
                        let message = try Framing.protectPrivate(
                            suite: suite, authenticated, secretTree: &sending, senderDataSecret: senderData, paddingBlock: 32,
                            random: &random)
                        var receiving = freshTree()
                        try check(
                            try Framing.openPrivate(suite: suite, message, secretTree: &receiving, senderDataSecret: senderData),
                            content,
                            "our \(name)_priv")
                    }
                }
            }
        }
    }

    static let dummyLeaf = LeafNode(
        encryptionKey: Data(repeating: 9, count: 32), signatureKey: Data(repeating: 1, count: 32),
        credential: Credential(.basic(identity: Data("x".utf8))), capabilities: .spark(suite), source: .update, extensions: [])
}
