public import Foundation
import SparkCrypto
import SparkDomain
public import SparkMLS
import SparkStore

/// The per-message path of a chat's group through the endpoint store, for `spark-bench`'s rows
/// on chat size and on the number of chats (`message-in-1000-member-chat`, `add-one-to-1000`,
/// `rss-10k-chats`): what the messenger does for each message it seals or opens (load the live
/// session, seal or open, save the ratchets), without a domain. Not for apps.
@_spi(Benchmarks) public final class MessagingProbe: Sendable {
    /// A device of a chat: its signer, under a device credential its user's identity key signed.
    public struct Device: Sendable {
        /// The device's user.
        public let user: String
        /// The device's MLS signer.
        public let signer: MLSSigner
        /// The user's identity key (what a validator trusts).
        public let identityKey: Data

        /// A device of `user` with a fresh identity.
        public init(user: String) throws {
            let identity = try Ed25519.PrivateKey()
            let key = try Ed25519.PrivateKey()
            let credential = try DeviceCredential.issue(
                userID: user, deviceID: "\(user)-device", signatureKey: key.publicKey.rawRepresentation, identityKeyVersion: 1,
                identityKey: identity)
            self.user = user
            signer = MLSSigner(credential: credential.mlsCredential, key: key)
            identityKey = identity.publicKey.rawRepresentation
        }
    }

    let store: EndpointStore
    let groups: GroupStore
    let validator: DeviceCredentialValidator

    /// A probe on an endpoint store in `directory` trusting the identities of `devices`, with at
    /// most `sessions` chats live.
    public init(directory: URL, trusting devices: [Device], sessions: Int = 256) throws {
        store = try EndpointStore(directory: directory, key: .provided(SymmetricKey(size: .bits256)))
        groups = GroupStore(cache: GroupCache(capacity: sessions))
        validator = DeviceCredentialValidator(identityKeys: Dictionary(devices.map { ($0.user, $0.identityKey) }) { a, _ in a })
    }

    /// The validator of the probe's devices, for groups made outside it.
    public var credentialValidator: any MLSCredentialValidator { validator }

    /// The MLS group id of a chat.
    public static func groupID(_ chatID: String) -> Data { ChatGroup.groupID(chatID) }

    /// How many chats are live now.
    public var liveSessions: Int { groups.cache.count }

    /// Keeps `group` as the chat's group (made or joined outside the probe).
    public func keep(_ group: MLSGroup, as chatID: String) throws {
        let stored = GroupStore.Stored(
            group: ChatGroup(chatID: chatID, group: group.withValidator(validator)), sentSinceUpdate: 0, updatedAt: Date(),
            lastNumber: 0)
        let (groups, sealer) = (self.groups, store.sealer)
        try store.queue.write { db in try groups.save(SQLiteMessagingStore(db: db, sealer: sealer), stored) }
    }

    /// Seals `text` as this device's next message in the chat, as the outbox does.
    public func seal(_ text: String, in chatID: String) throws -> Data {
        let (groups, validator, sealer) = (self.groups, self.validator, store.sealer)
        return try store.queue.write { db in
            let store = SQLiteMessagingStore(db: db, sealer: sealer)
            guard var stored = try groups.load(store, chatID: chatID, validator: validator) else {
                throw MessagingError(.unknownChat, "no chat \(chatID)")
            }
            var random = MLSSystemRandom()
            let sealed = try stored.group.seal(ChatPayload(kind: .text, id: UUID().uuidString, content: text), random: &random)
            stored.sentSinceUpdate += 1
            try groups.save(store, stored)
            return sealed
        }
    }

    /// Opens a message `sender` sealed in the chat, as the mailbox sync does; its text, or nil
    /// when the group refused it.
    public func open(_ sealed: Data, in chatID: String, from sender: String, number: Int64) throws -> String? {
        let (groups, validator, sealer) = (self.groups, self.validator, store.sealer)
        return try store.queue.write { db in
            let store = SQLiteMessagingStore(db: db, sealer: sealer)
            guard var stored = try groups.load(store, chatID: chatID, validator: validator) else {
                throw MessagingError(.unknownChat, "no chat \(chatID)")
            }
            let entry = MailboxEntry(
                sequence: number, chatID: chatID, sender: sender, kind: .message, messageNumber: number, payload: sealed,
                members: nil, postedAt: Date())
            guard case .message(let payload, _, _) = stored.group.receive(entry, now: Date()) else { return nil }
            stored.lastNumber = number
            try groups.save(store, stored)
            return payload.content
        }
    }
}
