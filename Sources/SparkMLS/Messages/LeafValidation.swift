import Foundation
import SparkCrypto

extension LeafNode {
    /// Whether the leaf's signature (`LeafNodeTBS`) verifies under its own signature key.
    func verifySignature(suite: MLSCipherSuite, groupID: Data, leafIndex: LeafIndex) -> Bool {
        suite.verifyWithLabel(signatureKey, "LeafNodeTBS", signedContent(groupID: groupID, leafIndex: leafIndex), signature)
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
