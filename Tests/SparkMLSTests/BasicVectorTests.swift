import Foundation
import SparkCrypto
import SparkTestSupport
import Testing

@testable import SparkMLS

@Suite("MLS vectors: crypto, codec, schedule")
struct BasicVectorTests {
    @Test func treeMath() throws {
        try MLSVectors.run("tree-math", suiteKeyed: false) { entry in
            let leaves = UInt32(entry.int("n_leaves"))
            try MLSVectors.expectEqual(Int(TreeMath.nodeWidth(leaves)), entry.int("n_nodes"), "n_nodes")
            try MLSVectors.expectEqual(Int(TreeMath.root(leaves)), entry.int("root"), "root")
            for key in ["left", "right", "parent", "sibling"] {
                let expected = (entry[key] as? [Any] ?? []).map { $0 as? Int }
                try MLSVectors.expectEqual(expected.count, entry.int("n_nodes"), "\(key) count")
                for (index, value) in expected.enumerated() {
                    let x = UInt32(index)
                    let actual: Int? =
                        switch key {
                        case "left": TreeMath.level(x) == 0 ? nil : Int(TreeMath.left(x))
                        case "right": TreeMath.level(x) == 0 ? nil : Int(TreeMath.right(x))
                        case "parent": x == TreeMath.root(leaves) ? nil : Int(TreeMath.parent(x, leaves: leaves))
                        default: x == TreeMath.root(leaves) ? nil : Int(TreeMath.sibling(x, leaves: leaves))
                        }
                    try MLSVectors.expectEqual(actual, value, "\(key)[\(index)] with \(leaves) leaves")
                }
            }
        }
    }

    @Test func cryptoBasics() throws {
        try MLSVectors.run("crypto-basics") { entry in
            let suite = entry.suite
            let ref = entry.object("ref_hash")
            try MLSVectors.expectEqual(suite.refHash(ref.string("label"), ref.hex("value")), ref.hex("out"), "RefHash")
            let expand = entry.object("expand_with_label")
            try MLSVectors.expectEqual(
                suite.expandWithLabel(expand.hex("secret"), expand.string("label"), expand.hex("context"), expand.int("length"))
                    .unsafeData(), expand.hex("out"), "ExpandWithLabel")
            let derive = entry.object("derive_secret")
            try MLSVectors.expectEqual(
                suite.deriveSecret(derive.hex("secret"), derive.string("label")).unsafeData(), derive.hex("out"), "DeriveSecret")
            let tree = entry.object("derive_tree_secret")
            try MLSVectors.expectEqual(
                suite.deriveTreeSecret(
                    tree.hex("secret"), tree.string("label"), UInt32(tree.int("generation")), tree.int("length")
                ).unsafeData(), tree.hex("out"), "DeriveTreeSecret")
            let sign = entry.object("sign_with_label")
            try MLSVectors.expectTrue(
                suite.verifyWithLabel(sign.hex("pub"), sign.string("label"), sign.hex("content"), sign.hex("signature")),
                "VerifyWithLabel of the given signature")
            let key = try suite.signaturePrivateKey(sign.hex("priv"))
            let ours = try suite.signWithLabel(key, sign.string("label"), sign.hex("content"))
            try MLSVectors.expectTrue(
                suite.verifyWithLabel(sign.hex("pub"), sign.string("label"), sign.hex("content"), ours), "our SignWithLabel")
            try MLSVectors.expectTrue(
                !suite.verifyWithLabel(sign.hex("pub"), sign.string("label") + "x", sign.hex("content"), ours),
                "a signature under another label is refused")
            let encrypt = entry.object("encrypt_with_label")
            let privateKey = try suite.hpkePrivateKey(encrypt.hex("priv"))
            try MLSVectors.expectEqual(privateKey.publicKey.rawRepresentation, encrypt.hex("pub"), "HPKE public key")
            let given = HPKECiphertext(kemOutput: encrypt.hex("kem_output"), ciphertext: encrypt.hex("ciphertext"))
            try MLSVectors.expectEqual(
                try suite.decryptWithLabel(privateKey, encrypt.string("label"), encrypt.hex("context"), given).unsafeData(),
                encrypt.hex("plaintext"), "DecryptWithLabel")
            var random: some MLSRandomSource = MLSSystemRandom()
            let sealed = try suite.encryptWithLabel(
                privateKey.publicKey, encrypt.string("label"), encrypt.hex("context"), encrypt.hex("plaintext"), random: &random)
            try MLSVectors.expectEqual(
                try suite.decryptWithLabel(privateKey, encrypt.string("label"), encrypt.hex("context"), sealed).unsafeData(),
                encrypt.hex("plaintext"), "our EncryptWithLabel")
        }
    }

    @Test func deserialization() throws {
        try MLSVectors.run("deserialization", suiteKeyed: false) { entry in
            var reader = TLSReader(entry.hex("vlbytes_header"))
            try MLSVectors.expectEqual(try reader.varint(), entry.int("length"), "varint")
            try reader.finish("header")
            var writer = TLSWriter()
            writer.varint(entry.int("length"))
            try MLSVectors.expectEqual(writer.data, entry.hex("vlbytes_header"), "re-encoded varint")
        }
    }

    @Test func secretTree() throws {
        try MLSVectors.run("secret-tree") { entry in
            let suite = entry.suite
            let senderData = entry.object("sender_data")
            let keys = SecretTree.senderDataKeys(
                suite: suite, senderDataSecret: SecureBytes(senderData.hex("sender_data_secret")),
                ciphertext: senderData.hex("ciphertext"))
            try MLSVectors.expectEqual(keys.key.unsafeData(), senderData.hex("key"), "sender data key")
            try MLSVectors.expectEqual(keys.nonce.unsafeData(), senderData.hex("nonce"), "sender data nonce")
            let leaves = entry["leaves"] as? [[[String: Any]]] ?? []
            var tree = SecretTree(
                suite: suite, encryptionSecret: SecureBytes(entry.hex("encryption_secret")), leafCount: UInt32(leaves.count))
            for (leaf, generations) in leaves.enumerated() {
                for fields in generations {
                    let generation = MLSVectors.Entry(fields: fields, index: entry.index, file: entry.file)
                    let g = UInt32(generation.int("generation"))
                    let handshake = try tree.take(.handshake, for: UInt32(leaf), generation: g)
                    let application = try tree.take(.application, for: UInt32(leaf), generation: g)
                    try MLSVectors.expectEqual(
                        handshake.key.unsafeData(), generation.hex("handshake_key"), "leaf \(leaf) hs key \(g)")
                    try MLSVectors.expectEqual(
                        handshake.nonce.unsafeData(), generation.hex("handshake_nonce"), "leaf \(leaf) hs nonce \(g)")
                    try MLSVectors.expectEqual(
                        application.key.unsafeData(), generation.hex("application_key"), "leaf \(leaf) app key \(g)")
                    try MLSVectors.expectEqual(
                        application.nonce.unsafeData(), generation.hex("application_nonce"), "leaf \(leaf) app nonce \(g)")
                }
            }
        }
    }

    @Test func keySchedule() throws {
        try MLSVectors.run("key-schedule") { entry in
            let suite = entry.suite
            var initSecret = SecureBytes(entry.hex("initial_init_secret"))
            for (epoch, step) in entry.objects("epochs").enumerated() {
                let context = GroupContext(
                    cipherSuite: entry.suite.rawValue, groupID: entry.hex("group_id"), epoch: UInt64(epoch),
                    treeHash: step.hex("tree_hash"),
                    confirmedTranscriptHash: step.hex("confirmed_transcript_hash"), extensions: [])
                try MLSVectors.expectEqual(context.tlsEncoded, step.hex("group_context"), "group context \(epoch)")
                let joiner = KeySchedule.joinerSecret(
                    suite: suite, initSecret: initSecret, commitSecret: SecureBytes(step.hex("commit_secret")),
                    groupContext: context)
                try MLSVectors.expectEqual(joiner.unsafeData(), step.hex("joiner_secret"), "joiner secret \(epoch)")
                let (welcome, secrets) = KeySchedule.epoch(
                    suite: suite, joinerSecret: joiner, pskSecret: SecureBytes(step.hex("psk_secret")), groupContext: context)
                let checks: [(SecureBytes, String)] = [
                    (welcome, "welcome_secret"), (secrets.initSecret, "init_secret"),
                    (secrets.senderData, "sender_data_secret"), (secrets.encryption, "encryption_secret"),
                    (secrets.exporter, "exporter_secret"), (secrets.authenticator, "epoch_authenticator"),
                    (secrets.external, "external_secret"), (secrets.confirmation, "confirmation_key"),
                    (secrets.membership, "membership_key"), (secrets.resumption, "resumption_psk"),
                ]
                for (value, key) in checks { try MLSVectors.expectEqual(value.unsafeData(), step.hex(key), "\(key) \(epoch)") }
                try MLSVectors.expectEqual(
                    suite.deriveKeyPair(secrets.external).publicKey.rawRepresentation, step.hex("external_pub"),
                    "external_pub \(epoch)")
                let exporter = step.object("exporter")
                try MLSVectors.expectEqual(
                    KeySchedule.export(
                        suite: suite, exporterSecret: secrets.exporter, label: exporter.string("label"),
                        context: exporter.hex("context"), length: exporter.int("length")
                    ).unsafeData(), exporter.hex("secret"), "exporter \(epoch)")
                initSecret = secrets.initSecret
            }
        }
    }

    @Test func pskSecret() throws {
        try MLSVectors.run("psk_secret") { entry in
            let psks = entry.objects("psks").map { psk in
                (
                    id: PreSharedKeyID(kind: .external(id: psk.hex("psk_id")), nonce: psk.hex("psk_nonce")),
                    secret: SecureBytes(psk.hex("psk"))
                )
            }
            let secret = try KeySchedule.pskSecret(suite: entry.suite, psks: psks) ?? SecureBytes(zeroes: 32)
            try MLSVectors.expectEqual(secret.unsafeData(), entry.hex("psk_secret"), "psk_secret")
        }
    }

    @Test func transcriptHashes() throws {
        try MLSVectors.run("transcript-hashes") { entry in
            let suite = entry.suite
            var reader = TLSReader(entry.hex("authenticated_content"))
            let content = try AuthenticatedContent(from: &reader)
            try reader.finish("AuthenticatedContent")
            guard case .commit = content.content.content, let tag = content.auth.confirmationTag else {
                throw MLSVectors.Mismatch(description: "the content is not a commit")
            }
            let confirmed = TranscriptHash.confirmed(
                suite: suite, interim: entry.hex("interim_transcript_hash_before"), wireFormat: content.wireFormat,
                content: content.content, signature: content.auth.signature)
            try MLSVectors.expectEqual(confirmed, entry.hex("confirmed_transcript_hash_after"), "confirmed transcript hash")
            try MLSVectors.expectTrue(
                suite.verifyMAC(key: entry.hex("confirmation_key"), confirmed, tag: tag), "the confirmation tag verifies")
            try MLSVectors.expectEqual(
                TranscriptHash.interim(suite: suite, confirmed: confirmed, confirmationTag: tag),
                entry.hex("interim_transcript_hash_after"), "interim transcript hash")
        }
    }

    /// Every message type decodes and re-encodes to the same bytes.
    @Test func messages() throws {
        func roundTrip<T: TLSCodable>(_ type: T.Type, _ data: Data, _ what: String) throws {
            let value = try T(tlsEncoded: data)
            try MLSVectors.expectEqual(value.tlsEncoded, data, "\(what) re-encodes")
        }
        try MLSVectors.run("messages", suiteKeyed: false) { entry in
            for key in [
                "mls_welcome", "mls_group_info", "mls_key_package", "public_message_application", "public_message_proposal",
                "public_message_commit", "private_message",
            ] {
                try roundTrip(MLSMessageBody.self, entry.hex(key), key)
            }
            try roundTrip(RatchetTreeEncoding.self, entry.hex("ratchet_tree"), "ratchet_tree")
            try roundTrip(GroupSecrets.self, entry.hex("group_secrets"), "group_secrets")
            try roundTrip(Commit.self, entry.hex("commit"), "commit")
            try roundTrip(KeyPackage.self, entry.hex("add_proposal"), "add_proposal")
            try roundTrip(LeafNode.self, entry.hex("update_proposal"), "update_proposal")
            try MLSVectors.expectEqual(
                try UInt32(tlsEncoded: entry.hex("remove_proposal")).tlsEncoded, entry.hex("remove_proposal"), "remove")
            try roundTrip(PreSharedKeyID.self, entry.hex("pre_shared_key_proposal"), "pre_shared_key_proposal")
            var reInit = TLSReader(entry.hex("re_init_proposal"))
            _ = try reInit.opaque("group_id")
            _ = try reInit.u16()
            _ = try reInit.u16()
            let _: [Extension] = try reInit.vector("extensions")
            try reInit.finish("ReInit")
            try roundTrip(Opaque.self, entry.hex("external_init_proposal"), "external_init_proposal")
            var extensions = TLSReader(entry.hex("group_context_extensions_proposal"))
            let _: [Extension] = try extensions.vector("extensions")
            try extensions.finish("GroupContextExtensions")
        }
    }
}
