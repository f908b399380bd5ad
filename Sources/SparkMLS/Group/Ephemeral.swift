public import Foundation
import SparkCrypto

/// Ephemeral messages: authenticated by the group, but outside its secret tree.
///
/// A typing notice or an app's live event reaches only the devices online when it is sent; the
/// delivery service forgets it within seconds. Were it an ordinary application message, every
/// one a device never received would be a generation of its sender's ratchet skipped, and a
/// device offline while a member typed a thousand times could no longer open that member's next
/// message (a ratchet looks at most ``SecretTree/forwardLimit`` generations ahead); and each
/// one received would rewrite the ratchet's stored state. So an ephemeral message is sealed
/// under a key every member of the epoch derives alike, and signed by its sender's leaf:
///
/// ```text
/// struct {
///     opaque group_id<V>;
///     uint64 epoch;
///     uint32 sender_leaf;
///     opaque nonce[Nn];        // fresh random bytes
///     opaque ciphertext<V>;    // AEAD.Seal(key, nonce, aad = the fields above, EphemeralContent)
/// } EphemeralMessage;
///
/// struct {
///     opaque content<V>;
///     opaque signature<V>;     // SignWithLabel(leaf key, "EphemeralContentTBS",
///                              //   the header's fields ‖ opaque content<V>)
/// } EphemeralContent;
///
/// key = MLS-Exporter("spark ephemeral", "", Nk)
/// ```
///
/// It gives what an application message gives (only the epoch's members read it; the domain
/// learns nothing of its content; the sender's leaf signed it) but not forward secrecy within
/// the epoch, nor replay protection: a receiver drops what it has seen and what is old by the
/// content's own time, which is the caller's to check.
extension MLSGroup {
    /// The exporter label of the ephemeral key.
    static let ephemeralLabel = "spark ephemeral"

    /// The sender leaf and content of an ephemeral message.
    public struct Ephemeral: Sendable, Equatable {
        /// The leaf that signed it (a member of the epoch).
        public var sender: Member
        /// What it carries.
        public var content: Data
        /// Its nonce: the same nonce twice is the same message (a replay).
        public var nonce: Data
    }

    /// Seals `content` as an ephemeral message of this epoch, signed by this member's leaf.
    public func sealEphemeral(_ content: Data, random: inout some MLSRandomSource) throws -> Data {
        guard isActive else { throw MLSError(.state, "this member has left the group") }
        let nonce = random.secret(count: suite.nonceLength).unsafeData()
        let header = Self.ephemeralHeader(groupID: groupID, epoch: epoch, leaf: ownLeaf, nonce: nonce)
        var signed = TLSWriter()
        signed.raw(header)
        signed.opaque(content)
        var plaintext = TLSWriter()
        plaintext.opaque(content)
        plaintext.opaque(try suite.signWithLabel(signer.key, "EphemeralContentTBS", signed.bytes))
        let key = try export(label: Self.ephemeralLabel, context: Data(), length: suite.keyLength)
        var message = TLSWriter()
        message.raw(header)
        message.opaque(try suite.seal(key: key, nonce: nonce, aad: header, plaintext.bytes))
        return message.data
    }

    /// Opens an ephemeral message of this epoch: one of another group is ``MLSError/Code/wrongGroup``,
    /// of another epoch ``MLSError/Code/keyUnavailable``; one that does not open, names no member,
    /// or whose signature is not that member's is refused; nothing of the group changes.
    public func openEphemeral(_ bytes: Data) throws -> Ephemeral {
        var reader = TLSReader(bytes)
        let groupID = try reader.opaque("group_id")
        let epoch = try reader.u64("epoch")
        let leaf = try reader.u32("sender_leaf")
        let nonce = try reader.raw(suite.nonceLength, "nonce")
        let ciphertext = try reader.opaque("ciphertext")
        try reader.finish("ephemeral message")
        guard groupID == self.groupID else { throw MLSError(.wrongGroup, "an ephemeral message of another group") }
        guard epoch == self.epoch else {
            throw MLSError(.keyUnavailable, "an ephemeral message of epoch \(epoch); the group is at \(self.epoch)")
        }
        guard let sender = member(at: leaf) else { throw MLSError(.invalid, "an ephemeral message from no member") }
        let header = Self.ephemeralHeader(groupID: groupID, epoch: epoch, leaf: leaf, nonce: nonce)
        let key = try export(label: Self.ephemeralLabel, context: Data(), length: suite.keyLength)
        let plaintext = try suite.open(key: key, nonce: nonce, aad: header, ciphertext)
        var inner = TLSReader(plaintext.unsafeData())
        let content = try inner.opaque("content")
        let signature = try inner.opaque("signature")
        try inner.finish("ephemeral content")
        var signed = TLSWriter()
        signed.raw(header)
        signed.opaque(content)
        guard suite.verifyWithLabel(sender.signatureKey, "EphemeralContentTBS", signed.bytes, signature) else {
            throw MLSError(.authentication, "an ephemeral message whose signature is not its sender leaf's")
        }
        return Ephemeral(sender: sender, content: content, nonce: nonce)
    }

    private static func ephemeralHeader(groupID: Data, epoch: UInt64, leaf: UInt32, nonce: Data) -> [UInt8] {
        var writer = TLSWriter()
        writer.opaque(groupID)
        writer.u64(epoch)
        writer.u32(leaf)
        writer.raw(nonce)
        return writer.bytes
    }
}
