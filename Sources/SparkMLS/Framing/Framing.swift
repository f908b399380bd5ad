import Foundation
import SparkCrypto

/// `AuthenticatedContent` (RFC 9420 §6.1): framed content with its signature and, for a commit,
/// its confirmation tag.
struct AuthenticatedContent: TLSCodable, Hashable, Sendable {
    var wireFormat: WireFormat
    var content: FramedContent
    var auth: FramedContentAuthData

    init(wireFormat: WireFormat, content: FramedContent, auth: FramedContentAuthData) {
        self.wireFormat = wireFormat
        self.content = content
        self.auth = auth
    }

    func encode(to writer: inout TLSWriter) {
        writer.u16(wireFormat.rawValue)
        writer.write(content)
        auth.encode(to: &writer)
    }

    init(from reader: inout TLSReader) throws {
        wireFormat = try WireFormat(from: &reader)
        content = try reader.read()
        auth = try FramedContentAuthData(contentType: content.content.type, from: &reader)
    }
}

/// Signing, membership tags and the PrivateMessage encryption of §6.
enum Framing {
    /// `FramedContentTBS`: what a sender signs.
    static func signedContent(wireFormat: WireFormat, content: FramedContent, context: GroupContext?) -> [UInt8] {
        var writer = TLSWriter()
        writer.u16(mls10)
        writer.u16(wireFormat.rawValue)
        writer.write(content)
        switch content.sender {
        case .member, .newMemberCommit:
            if let context { writer.write(context) }
        case .external, .newMemberProposal: break
        }
        return writer.bytes
    }

    static func sign(
        suite: MLSCipherSuite, wireFormat: WireFormat, content: FramedContent, context: GroupContext, key: Ed25519.PrivateKey
    ) throws -> Data {
        try suite.signWithLabel(
            key, "FramedContentTBS", signedContent(wireFormat: wireFormat, content: content, context: context))
    }

    static func verify(suite: MLSCipherSuite, _ authenticated: AuthenticatedContent, context: GroupContext, signatureKey: Data)
        -> Bool
    {
        suite.verifyWithLabel(
            signatureKey, "FramedContentTBS",
            signedContent(wireFormat: authenticated.wireFormat, content: authenticated.content, context: context),
            authenticated.auth.signature)
    }

    /// What ``verify(suite:_:context:signatureKey:)`` checks, to be checked elsewhere.
    static func signatureCheck(
        suite: MLSCipherSuite, _ authenticated: AuthenticatedContent, context: GroupContext, signatureKey: Data
    ) -> MLSSignatureCheck {
        MLSSignatureCheck(
            publicKey: signatureKey,
            content: suite.signContent(
                "FramedContentTBS",
                signedContent(wireFormat: authenticated.wireFormat, content: authenticated.content, context: context)),
            signature: authenticated.auth.signature)
    }

    /// `MAC(membership_key, AuthenticatedContentTBM)`.
    static func membershipTag(
        suite: MLSCipherSuite, membershipKey: SecureBytes, _ authenticated: AuthenticatedContent, context: GroupContext
    ) -> Data {
        suite.mac(key: membershipKey, membershipInput(authenticated, context: context))
    }

    /// `AuthenticatedContentTBM`: what the membership tag covers.
    static func membershipInput(_ authenticated: AuthenticatedContent, context: GroupContext) -> [UInt8] {
        var writer = TLSWriter()
        writer.raw(signedContent(wireFormat: .publicMessage, content: authenticated.content, context: context))
        authenticated.auth.encode(to: &writer)
        return writer.bytes
    }

    static func publicMessage(
        suite: MLSCipherSuite, _ authenticated: AuthenticatedContent, membershipKey: SecureBytes?, context: GroupContext
    ) -> PublicMessage {
        var tag: Data?
        if case .member = authenticated.content.sender, let membershipKey {
            tag = membershipTag(suite: suite, membershipKey: membershipKey, authenticated, context: context)
        }
        return PublicMessage(content: authenticated.content, auth: authenticated.auth, membershipTag: tag)
    }

    /// Checks a member's membership tag; returns the authenticated content (signature not yet checked).
    static func openPublic(
        suite: MLSCipherSuite, _ message: PublicMessage, membershipKey: SecureBytes, context: GroupContext
    ) throws -> AuthenticatedContent {
        let authenticated = AuthenticatedContent(wireFormat: .publicMessage, content: message.content, auth: message.auth)
        if case .member = message.content.sender {
            guard let tag = message.membershipTag else { throw MLSError(.malformed, "a member's message has no membership tag") }
            guard suite.verifyMAC(key: membershipKey, membershipInput(authenticated, context: context), tag: tag) else {
                throw MLSError(.authentication, "the membership tag does not verify")
            }
        }
        return authenticated
    }

    private static func contentAAD(_ groupID: Data, _ epoch: UInt64, _ type: ContentType, _ authenticatedData: Data)
        -> [UInt8]
    {
        var writer = TLSWriter()
        writer.opaque(groupID)
        writer.u64(epoch)
        writer.u8(type.rawValue)
        writer.opaque(authenticatedData)
        return writer.bytes
    }

    private static func senderDataAAD(_ groupID: Data, _ epoch: UInt64, _ type: ContentType) -> [UInt8] {
        var writer = TLSWriter()
        writer.opaque(groupID)
        writer.u64(epoch)
        writer.u8(type.rawValue)
        return writer.bytes
    }

    private static func applyReuseGuard(_ nonce: SecureBytes, _ reuseGuard: [UInt8]) -> [UInt8] {
        var bytes = [UInt8](nonce.unsafeData())
        for index in 0..<4 { bytes[index] ^= reuseGuard[index] }
        return bytes
    }

    /// Encrypts a member's content as a PrivateMessage (§6.3), taking the next key of the sender's
    /// ratchet and padding the content to a multiple of `paddingBlock` bytes.
    static func protectPrivate(
        suite: MLSCipherSuite, _ authenticated: AuthenticatedContent, secretTree: inout SecretTree,
        senderDataSecret: SecureBytes, paddingBlock: Int, random: inout some MLSRandomSource
    ) throws -> PrivateMessage {
        guard case .member(let leaf) = authenticated.content.sender else {
            throw MLSError(.state, "only members send PrivateMessages")
        }
        let content = authenticated.content
        let type = content.content.type
        let (generation, keys) = try secretTree.next(type == .application ? .application : .handshake, for: leaf)
        let reuseGuard = [UInt8](random.secret(count: 4).unsafeData())
        var plaintext = TLSWriter()
        content.content.encodeBody(to: &plaintext)
        authenticated.auth.encode(to: &plaintext)
        if paddingBlock > 1 {
            let padding = (paddingBlock - (plaintext.bytes.count + AESGCM.tagByteCount) % paddingBlock) % paddingBlock
            plaintext.raw([UInt8](repeating: 0, count: padding))
        }
        let ciphertext = try suite.seal(
            key: keys.key, nonce: applyReuseGuard(keys.nonce, reuseGuard),
            aad: contentAAD(content.groupID, content.epoch, type, content.authenticatedData), plaintext.bytes)
        var senderData = TLSWriter()
        senderData.u32(leaf)
        senderData.u32(generation)
        senderData.raw(reuseGuard)
        let senderKeys = SecretTree.senderDataKeys(suite: suite, senderDataSecret: senderDataSecret, ciphertext: ciphertext)
        let encryptedSenderData = try suite.seal(
            key: senderKeys.key, nonce: senderKeys.nonce, aad: senderDataAAD(content.groupID, content.epoch, type),
            senderData.bytes)
        return PrivateMessage(
            groupID: content.groupID, epoch: content.epoch, contentType: type, authenticatedData: content.authenticatedData,
            encryptedSenderData: encryptedSenderData, ciphertext: ciphertext)
    }

    /// Decrypts a PrivateMessage's sender data and content; the caller checks the signature with
    /// the sender's key. The key used is deleted from `secretTree`.
    static func openPrivate(
        suite: MLSCipherSuite, _ message: PrivateMessage, secretTree: inout SecretTree, senderDataSecret: SecureBytes
    ) throws -> AuthenticatedContent {
        let senderKeys = SecretTree.senderDataKeys(
            suite: suite, senderDataSecret: senderDataSecret, ciphertext: message.ciphertext)
        let senderBytes = try suite.open(
            key: senderKeys.key, nonce: senderKeys.nonce,
            aad: senderDataAAD(message.groupID, message.epoch, message.contentType), message.encryptedSenderData)
        var senderReader = TLSReader(senderBytes)
        let leaf = try senderReader.u32("leaf_index")
        let generation = try senderReader.u32("generation")
        let reuseGuard = [UInt8](try senderReader.raw(4, "reuse_guard"))
        try senderReader.finish("SenderData")
        let keys = try secretTree.take(
            message.contentType == .application ? .application : .handshake, for: leaf, generation: generation)
        let plaintext = try suite.open(
            key: keys.key, nonce: applyReuseGuard(keys.nonce, reuseGuard),
            aad: contentAAD(message.groupID, message.epoch, message.contentType, message.authenticatedData),
            message.ciphertext)
        var reader = TLSReader(plaintext)
        let content = try Content(type: message.contentType, from: &reader)
        let auth = try FramedContentAuthData(contentType: message.contentType, from: &reader)
        while !reader.isAtEnd {
            guard try reader.u8("padding") == 0 else { throw MLSError(.malformed, "PrivateMessage padding is not all zeros") }
        }
        return AuthenticatedContent(
            wireFormat: .privateMessage,
            content: FramedContent(
                groupID: message.groupID, epoch: message.epoch, sender: .member(leaf),
                authenticatedData: message.authenticatedData, content: content),
            auth: auth)
    }
}
