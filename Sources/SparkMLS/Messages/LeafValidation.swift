import Foundation
import SparkCrypto

extension LeafNode {
    /// Whether the leaf's signature (`LeafNodeTBS`) verifies under its own signature key.
    func verifySignature(suite: MLSCipherSuite, groupID: Data, leafIndex: LeafIndex) -> Bool {
        suite.verifyRemembering(signatureKey, "LeafNodeTBS", signedContent(groupID: groupID, leafIndex: leafIndex), signature)
    }

    /// Signs the leaf (sets `signature`).
    mutating func sign(suite: MLSCipherSuite, key: Ed25519.PrivateKey, groupID: Data, leafIndex: LeafIndex) throws {
        signature = try suite.signWithLabel(key, "LeafNodeTBS", signedContent(groupID: groupID, leafIndex: leafIndex))
    }
}

extension KeyPackage {
    func verifySignature(suite: MLSCipherSuite) -> Bool {
        suite.verifyRemembering(leafNode.signatureKey, "KeyPackageTBS", signedContent, signature)
    }

    /// `KeyPackageRef`: `RefHash("MLS 1.0 KeyPackage Reference", KeyPackage)`.
    func reference(suite: MLSCipherSuite) -> Data { suite.refHash("MLS 1.0 KeyPackage Reference", tlsBytes) }
}

extension MLSCipherSuite {
    /// `VerifyWithLabel` for objects that are seen many times (leaves, KeyPackages), remembering
    /// what verified (see ``VerifiedLeaves``).
    func verifyRemembering(_ publicKey: Data, _ label: String, _ content: [UInt8], _ signature: Data) -> Bool {
        var digestInput = TLSWriter()
        digestInput.opaque(Array(label.utf8))
        digestInput.opaque(publicKey)
        digestInput.opaque(content)
        digestInput.opaque(signature)
        let digest = hash(digestInput.bytes)
        if VerifiedLeaves.contains(digest) { return true }
        guard verifyWithLabel(publicKey, label, content, signature) else { return false }
        VerifiedLeaves.insert(digest)
        return true
    }
}
