import Foundation
import SparkCrypto
import SparkTestSupport
import Testing

@testable import SparkSDK

/// The sealed formats' checks, each attacked on its own: a message or key envelope that is
/// well formed and encrypted right but fails one check must be refused by that check.
@Suite("Sealed formats: attacks on each check")
struct SealedFormatTests {
    let alice: UnlockedKeys
    let bob: UnlockedKeys
    let mallory: UnlockedKeys
    let chatKey = SymmetricKey(size: .bits256)

    init() throws {
        alice = try UnlockedKeys.generate(userID: "alice", keyVersion: 1)
        bob = try UnlockedKeys.generate(userID: "bob", keyVersion: 1)
        mallory = try UnlockedKeys.generate(userID: "mallory", keyVersion: 1)
    }

    func sealed(epoch: Int = 1, by sender: UnlockedKeys? = nil) throws -> Data {
        try MessageSealing.seal("hi", chat: "c1", device: "d1", seq: 1, epoch: epoch, key: chatKey, sender: sender ?? alice)
    }

    /// The JSON of `data` with `change` applied.
    static func altered(_ data: Data, _ change: (inout [String: Any]) -> Void) throws -> Data {
        var object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        change(&object)
        return try JSONSerialization.data(withJSONObject: object)
    }

    @Test func aGoodMessageOpens() throws {
        #expect(
            try MessageSealing.open(try sealed(), chat: "c1", sender: "alice", senderKey: alice.signing.publicKey, key: chatKey)
                == "hi")
    }

    @Test func aNegativeOrZeroEpochIsRefusedNotACrash() throws {
        for epoch in [-1, 0, Int.min] {
            let hostile = try Self.altered(try sealed()) { $0["epoch"] = epoch }
            #expect(throws: MessagingError(.forged, ""), "epoch \(epoch)") {
                try MessageSealing.open(hostile, chat: "c1", sender: "alice", senderKey: alice.signing.publicKey, key: chatKey)
            }
            #expect(throws: MessagingError(.forged, "")) { try sealed(epoch: epoch) }
        }
        let negativeSeq = try Self.altered(try sealed()) { $0["seq"] = -5 }
        #expect(throws: MessagingError(.forged, "")) {
            try MessageSealing.open(negativeSeq, chat: "c1", sender: "alice", senderKey: alice.signing.publicKey, key: chatKey)
        }
    }

    @Test func aMessageFromAnotherChatOrSenderIsRefusedAsSuch() throws {
        let message = try sealed()
        for (chat, sender) in [("c2", "alice"), ("c1", "bob")] {
            do {
                _ = try MessageSealing.open(message, chat: chat, sender: sender, senderKey: alice.signing.publicKey, key: chatKey)
                Issue.record("a message of c1 by alice opened as \(chat) by \(sender)")
            } catch let error as MessagingError {
                #expect(error.code == .forged && error.reason.contains("names another chat or sender"), "\(error)")
            }
        }
    }

    @Test func aSoundlySignedMessageWithEpochZeroIsRefused() throws {
        // A member's own client could seal epoch 0 (no honest one does): signed and encrypted
        // right, only the epoch check refuses it.
        let aad = SealedFormats.SealedMessage.associatedData(chat: "c1", from: "alice", device: "d1", seq: 1, epoch: 0)
        let box = try AESGCM.seal(
            try SealedFormats.encoder.encode(SealedFormats.Content(content: "hi", tag: "Text")), using: chatKey,
            authenticating: aad)
        var message = SealedFormats.SealedMessage(
            id: "m1", chat: "c1", from: "alice", device: "d1", seq: 1, epoch: 0, nonce: box.nonce.bytes,
            ciphertext: box.ciphertext,
            tag: box.tag, signature: Data())
        message.signature = try alice.signing.signature(for: message.signedBytes)
        let payload = try SealedFormats.encoder.encode(message)
        #expect(throws: MessagingError(.forged, "")) {
            try MessageSealing.open(payload, chat: "c1", sender: "alice", senderKey: alice.signing.publicKey, key: chatKey)
        }
    }

    @Test func aMessageEncryptedRightButSignedByAnotherKeyIsRefused() throws {
        // Mallory holds the chat key (a member) and seals as alice: the encryption is right,
        // only the signature is not alice's.
        let forged = try Self.altered(try sealed(by: mallory)) { $0["from"] = "alice" }
        // Re-encrypt under the "alice" associated data so that only the signature check fails.
        let content = SealedFormats.Content(content: "hi", tag: "Text")
        let aad = SealedFormats.SealedMessage.associatedData(chat: "c1", from: "alice", device: "d1", seq: 1, epoch: 1)
        let box = try AESGCM.seal(try SealedFormats.encoder.encode(content), using: chatKey, authenticating: aad)
        var message = try JSONDecoder().decode(SealedFormats.SealedMessage.self, from: forged)
        message.nonce = box.nonce.bytes
        message.ciphertext = box.ciphertext
        message.tag = box.tag
        message.signature = try mallory.signing.signature(for: message.signedBytes)
        let payload = try SealedFormats.encoder.encode(message)
        #expect(
            try MessageSealing.open(payload, chat: "c1", sender: "alice", senderKey: mallory.signing.publicKey, key: chatKey)
                == "hi", "the same bytes open with mallory's key: only the signature tells them apart")
        #expect(throws: MessagingError(.forged, "")) {
            try MessageSealing.open(payload, chat: "c1", sender: "alice", senderKey: alice.signing.publicKey, key: chatKey)
        }
    }

    @Test func aKeyEnvelopeEncryptedRightButSignedByAnotherKeyIsRefused() throws {
        let envelope = try SealedFormats.sealKey(
            chatKey, chat: "c1", epoch: 1, after: 0, from: mallory, device: "d1", to: "bob",
            recipientKey: bob.encryption.publicKey)
        // Mallory's envelope claims to be alice's; it is encrypted to bob correctly (the
        // context binds "alice", so it is sealed again under that context).
        var decoded = try JSONDecoder().decode(SealedFormats.KeyEnvelope.self, from: envelope)
        decoded.from = "alice"
        let context = SealedFormats.KeyEnvelope.context(chat: "c1", from: "alice", device: "d1", to: "bob", epoch: 1, after: 0)
        let ephemeral = try X25519.PrivateKey()
        let kek = SymmetricKey(
            secureBytes: try HKDF.deriveKey(
                inputKeyMaterial: try ephemeral.sharedSecret(with: bob.encryption.publicKey),
                salt: Data(ephemeral.publicKey.rawRepresentation + bob.encryption.publicKey.rawRepresentation), info: context,
                outputByteCount: 32, hash: .sha256))
        let box = try AESGCM.seal(chatKey, using: kek, authenticating: context)
        decoded.ephemeral = ephemeral.publicKey.rawRepresentation
        decoded.nonce = box.nonce.bytes
        decoded.ciphertext = box.ciphertext
        decoded.tag = box.tag
        decoded.signature = try mallory.signing.signature(for: decoded.signedBytes)
        let payload = try SealedFormats.encoder.encode(decoded)
        let opened = try SealedFormats.openKey(
            payload, chat: "c1", sender: "alice", senderKey: mallory.signing.publicKey, me: bob)
        #expect(opened.epoch == 1, "the envelope is sound but for its signer")
        #expect(throws: MessagingError(.forged, "")) {
            try SealedFormats.openKey(payload, chat: "c1", sender: "alice", senderKey: alice.signing.publicKey, me: bob)
        }
    }

    @Test func aKeyEnvelopeWithANegativeEpochOrAfterIsRefused() throws {
        let envelope = try SealedFormats.sealKey(
            chatKey, chat: "c1", epoch: 1, after: 0, from: alice, device: "d1", to: "bob", recipientKey: bob.encryption.publicKey)
        for (field, value) in [("epoch", -1), ("epoch", 0), ("after", -1)] {
            let hostile = try Self.altered(envelope) { $0[field] = value }
            #expect(throws: MessagingError(.forged, ""), "\(field) \(value)") {
                try SealedFormats.openKey(hostile, chat: "c1", sender: "alice", senderKey: alice.signing.publicKey, me: bob)
            }
        }
    }
}
