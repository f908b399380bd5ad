import Foundation
import SparkCrypto

extension LeafNode {
    /// Whether the leaf's signature (`LeafNodeTBS`) verifies under its own signature key.
    func verifySignature(suite: MLSCipherSuite, groupID: Data, leafIndex: LeafIndex) -> Bool {
        let content = signedContent(groupID: groupID, leafIndex: leafIndex)
        var digestInput = TLSWriter()
        digestInput.opaque(signatureKey)
        digestInput.opaque(content)
        digestInput.opaque(signature)
        let digest = suite.hash(digestInput.bytes)
        if VerifiedLeaves.contains(digest) { return true }
        guard suite.verifyWithLabel(signatureKey, "LeafNodeTBS", content, signature) else { return false }
        VerifiedLeaves.insert(digest)
        return true
    }

    /// Signs the leaf (sets `signature`).
    mutating func sign(suite: MLSCipherSuite, key: Ed25519.PrivateKey, groupID: Data, leafIndex: LeafIndex) throws {
        signature = try suite.signWithLabel(key, "LeafNodeTBS", signedContent(groupID: groupID, leafIndex: leafIndex))
    }
}

extension KeyPackage {
    func verifySignature(suite: MLSCipherSuite) -> Bool {
        suite.verifyWithLabel(leafNode.signatureKey, "KeyPackageTBS", signedContent, signature)
    }

    /// `KeyPackageRef`: `RefHash("MLS 1.0 KeyPackage Reference", KeyPackage)`.
    func reference(suite: MLSCipherSuite) -> Data { suite.refHash("MLS 1.0 KeyPackage Reference", tlsBytes) }
}
