public import Foundation
import SparkCrypto
public import SparkDomain
import SparkMLS

/// Entry points for the fuzz harnesses (`Tests/Fuzz`): the chat payload decoder, and a chat's
/// group deciding on hostile mailbox entries. Not for apps.
@_spi(Fuzzing) public enum ChatProbe {
    /// Decodes a chat payload and checks its rules; true when it is one.
    public static func decodePayload(_ data: Data) -> Bool {
        guard let payload = try? ChatPayload(encoded: data) else { return false }
        return (try? payload.validate()) != nil
    }

    /// A chat of alice's and bob's devices made from fixed keys and randomness, as bob's device
    /// holds it, with a message and a commit from alice's device that it accepts.
    public struct Fixture: Sendable {
        let bob: ChatGroup
        /// A text message alice's device sealed in the chat.
        public let message: Data
        /// A commit of alice's device (an update of her keys).
        public let commit: Data
        /// The epoch the commit is for.
        public let epoch: Int64
        /// A typing notice alice's device sealed as an ephemeral message (of the epoch before the commit).
        public let ephemeral: Data
    }

    /// The fixture (fixed, so that seeds written once stay valid).
    public static func fixture() throws -> Fixture {
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        func device(_ user: String, _ byte: UInt8) throws -> MLSSigner {
            let identity = try Ed25519.PrivateKey(rawRepresentation: Data(repeating: byte, count: 32))
            let key = try Ed25519.PrivateKey(rawRepresentation: Data(repeating: byte + 1, count: 32))
            let credential = try DeviceCredential.issue(
                userID: user, deviceID: "\(user)-phone", signatureKey: key.publicKey.rawRepresentation, identityKeyVersion: 1,
                identityKey: identity)
            return MLSSigner(credential: credential.mlsCredential, key: key)
        }
        let validator = DeviceCredentialValidator(identityKeys: [
            "alice": try Ed25519.PrivateKey(rawRepresentation: Data(repeating: 20, count: 32)).publicKey.rawRepresentation,
            "bob": try Ed25519.PrivateKey(rawRepresentation: Data(repeating: 30, count: 32)).publicKey.rawRepresentation,
        ])
        var random = MLSSeededRandom(seed: "chat probe")
        let bobBundle = try MLSKeyPackageBundle(signer: try device("bob", 30), now: now, random: &random)
        let created = try ChatGroup.create(chatID: "c1", signer: try device("alice", 20), validator: validator, random: &random)
        var (_, welcome, alice) = try created.commit(
            adding: [bobBundle.keyPackage], removing: Set<ChatGroup.Device>(), now: now, random: &random)
        let bob = try ChatGroup.join(chatID: "c1", welcome: welcome!, bundle: bobBundle, validator: validator)
        let message = try alice.seal(ChatPayload(kind: .text, id: "m1", content: "hello", tag: "Text"), random: &random)
        let ephemeral = try alice.sealEphemeral(
            ChatPayload(kind: .typing, id: "t1", upTo: Int64(now.timeIntervalSince1970 * 1000)), random: &random)
        let update = try alice.commit(adding: [], removing: Set<ChatGroup.Device>(), now: now, random: &random)
        return Fixture(
            bob: bob, message: message, commit: update.commit, epoch: Int64(alice.group.epoch), ephemeral: ephemeral)
    }

    /// Offers `payload` to bob's group as a `kind` entry from `sender`, ordered for `epoch`;
    /// returns what the group decided, in words.
    public static func receive(
        _ payload: Data, kind: MailboxKind, sender: String, epoch: Int64?, in fixture: Fixture
    ) -> String {
        var group = fixture.bob
        let entry = MailboxEntry(
            sequence: 1, chatID: "c1", sender: sender, kind: kind, messageNumber: 1, payload: payload, members: nil,
            postedAt: Date(timeIntervalSince1970: 1_790_000_000), epoch: epoch)
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        if kind == .ephemeral { return "\(group.receiveEphemeral(entry, now: now))" }
        return "\(group.receive(entry, now: now))"
    }
}
