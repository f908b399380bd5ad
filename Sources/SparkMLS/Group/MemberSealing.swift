public import Foundation
public import SparkCrypto

/// Sealing to one member alone, for what the application sends to a single device (a history
/// transfer): HPKE to the member's leaf encryption key, as RFC 9420's `EncryptWithLabel` does
/// for path secrets, under the label "Spark member seal" and a context of the group id and the
/// application's own context. Only the device holding the leaf's private key
/// opens it, and only while that leaf key is current (its next commit replaces it).
extension MLSGroup {
    static let memberSealLabel = "Spark member seal"

    private func memberSealContext(_ context: Data) -> [UInt8] {
        var writer = TLSWriter()
        writer.opaque(groupID)
        writer.opaque(context)
        return writer.bytes
    }

    /// Seals `plaintext` to the member at `leaf`; the bytes are a TLS-encoded `HPKECiphertext`.
    public func seal(
        toMember leaf: UInt32, context: Data, _ plaintext: some ContiguousBytes, random: inout some MLSRandomSource
    ) throws -> Data {
        try requireActive()
        guard let node = tree.leaf(leaf) else { throw MLSError(.invalid, "no member at leaf \(leaf)") }
        let sealed = try suite.encryptWithLabel(
            try suite.hpkePublicKey(node.encryptionKey), Self.memberSealLabel, memberSealContext(context), plaintext,
            random: &random)
        return sealed.tlsEncoded
    }

    /// Opens what another member sealed to this member's leaf (while the leaf key is the same).
    public func openSealedToSelf(_ sealed: Data, context: Data) throws -> SecureBytes {
        try requireActive()
        let ciphertext = try HPKECiphertext(tlsEncoded: sealed)
        guard let key = nodeKeys[ownLeaf * 2] else { throw MLSError(.state, "this member holds no key for its own leaf") }
        return try suite.decryptWithLabel(
            try suite.hpkePrivateKey(key.privateKey), Self.memberSealLabel, memberSealContext(context), ciphertext)
    }
}
