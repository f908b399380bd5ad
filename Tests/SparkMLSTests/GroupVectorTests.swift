import Foundation
import SparkCrypto
import SparkTestSupport
import Testing

@testable import SparkMLS

@Suite("MLS vectors: welcome, passive clients, TreeKEM, message protection", .enabled(if: MLSVectors.isAvailable, Comment(rawValue: MLSVectors.missing)))
struct GroupVectorTests {
    static let suite = MLSCipherSuite.x25519AES128GCMSHA256Ed25519

    static func bundle(_ entry: MLSVectors.Entry) throws -> MLSKeyPackageBundle {
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
            package: package, initKey: SecureBytes(entry.hex("init_priv")), encryptionKey: SecureBytes(entry.hex("encryption_priv")),
            signer: MLSSigner(credential: try MLSCredential(package.leafNode.credential), key: key), suite: suite)
    }

    static func passive(_ file: String) throws {
        try MLSVectors.run(file) { entry in
            var psks: [Data: SecureBytes] = [:]
            for psk in entry.objects("external_psks") { psks[psk.hex("psk_id")] = SecureBytes(psk.hex("psk")) }
            let tree = entry["ratchet_tree"] is String ? entry.hex("ratchet_tree") : nil
            var group = try MLSGroup.join(
                welcome: entry.hex("welcome"), bundle: try bundle(entry), ratchetTree: tree, externalPSKs: psks)
            try MLSVectors.expectEqual(group.epochAuthenticator, entry.hex("initial_epoch_authenticator"), "initial authenticator")
            for (number, epoch) in entry.objects("epochs").enumerated() {
                for proposal in (epoch["proposals"] as? [String] ?? []) {
                    _ = try group.process(Data(hex: proposal))
                }
                do {
                    _ = try group.process(epoch.hex("commit"))
                } catch {
                    throw MLSVectors.Mismatch(description: "epoch \(number): \(error)")
                }
                try MLSVectors.expectEqual(group.epochAuthenticator, epoch.hex("epoch_authenticator"), "authenticator of epoch \(number)")
            }
        }
    }

    @Test func passiveClientWelcome() throws { try Self.passive("passive-client-welcome") }
    @Test func passiveClientHandlingCommit() throws { try Self.passive("passive-client-handling-commit") }
    @Test func passiveClientRandom() throws { try Self.passive("passive-client-random") }
}
