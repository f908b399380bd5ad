public import Foundation
public import SparkCrypto
import SparkDomain

/// The wire formats of chat keys and messages (see `docs/FORMATS.md`). Pure functions: seal and
/// open, with every check a recipient makes.
enum SealedFormats {
    /// A chat key for one recipient: encrypted to their X25519 key with an ephemeral key, signed
    /// by the sender's Ed25519 identity key.
    struct KeyEnvelope: Codable, Equatable {
        var v = 1
        var chat: String
        var from: String
        /// The sending endpoint: each endpoint of a user has its own keys and numbering.
        var device: String
        var to: String
        var epoch: Int
        /// The sending endpoint's last message number in the chat when it made this key: a new
        /// member starts counting from here, so replays are caught from its first message on.
        var after: Int64
        var ephemeral: Data
        var nonce: Data
        var ciphertext: Data
        var tag: Data
        var signature: Data

        /// Bound into the key derivation, the associated data and the signature.
        static func context(chat: String, from: String, device: String, to: String, epoch: Int, after: Int64) -> Data {
            SealedFormats.encode("spark-chat-key-v1", [chat, from, device, to], [Int64(epoch), after])
        }

        var signedBytes: Data {
            var data = Self.context(chat: chat, from: from, device: device, to: to, epoch: epoch, after: after)
            for part in [ephemeral, nonce, ciphertext, tag] { data.append(part) }
            return data
        }
    }

    /// An encrypted, signed message or chat event.
    struct SealedMessage: Codable, Equatable {
        var v = 1
        /// The sender's local id for it (its retry key, not secret).
        var id: String
        var chat: String
        var from: String
        /// The sending endpoint.
        var device: String
        /// The sending endpoint's own message number in this chat: 1, 2, 3, … (replays and
        /// reordering show).
        var seq: Int64
        /// Which of the sender's chat keys sealed it.
        var epoch: Int
        var nonce: Data
        var ciphertext: Data
        var tag: Data
        var signature: Data

        static func associatedData(chat: String, from: String, device: String, seq: Int64, epoch: Int) -> Data {
            SealedFormats.encode("spark-message-v1", [chat, from, device], [seq, Int64(epoch)])
        }

        var signedBytes: Data {
            var data = Self.associatedData(chat: chat, from: from, device: device, seq: seq, epoch: epoch)
            for part in [nonce, ciphertext, tag] { data.append(part) }
            return data
        }
    }

    /// What a message carries once opened.
    struct Content: Codable, Equatable {
        var content: String
        var tag: String
        var data: String?
        var ref: Int64?
        var subject: String?
    }

    /// `label ‖ 0 ‖ text₁ ‖ 0 ‖ … ‖ textₙ ‖ 0 ‖ number₁ (u64 BE) ‖ …`: the bound context of the
    /// formats in `docs/FORMATS.md`. Texts are user and chat ids, which contain no NUL. Numbers
    /// are checked positive where they are decoded; here they are taken bit for bit, so that no
    /// input can trap.
    static func encode(_ label: String, _ texts: [String], _ numbers: [Int64]) -> Data {
        var data = Data(label.utf8)
        for text in texts {
            data.append(0)
            data.append(contentsOf: Data(text.utf8))
        }
        data.append(0)
        for number in numbers { withUnsafeBytes(of: UInt64(bitPattern: number).bigEndian) { data.append(contentsOf: $0) } }
        return data
    }

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }()

    // MARK: Chat keys

    static func sealKey(
        _ key: SymmetricKey, chat: String, epoch: Int, after: Int64, from sender: UnlockedKeys, device: String,
        to recipient: String,
        recipientKey: X25519.PublicKey
    ) throws -> Data {
        guard epoch >= 1, after >= 0 else { throw MessagingError(.forged, "a chat key's epoch starts at 1, after at 0") }
        let ephemeral = try X25519.PrivateKey()
        let context = KeyEnvelope.context(
            chat: chat, from: sender.userID, device: device, to: recipient, epoch: epoch, after: after)
        let kek = try wrappingKey(
            shared: ephemeral.sharedSecret(with: recipientKey), ephemeral: ephemeral.publicKey.rawRepresentation,
            recipient: recipientKey.rawRepresentation, context: context)
        let box = try AESGCM.seal(key, using: kek, authenticating: context)
        var envelope = KeyEnvelope(
            chat: chat, from: sender.userID, device: device, to: recipient, epoch: epoch, after: after,
            ephemeral: ephemeral.publicKey.rawRepresentation,
            nonce: box.nonce.bytes, ciphertext: box.ciphertext, tag: box.tag, signature: Data())
        envelope.signature = try sender.signing.signature(for: envelope.signedBytes)
        return try encoder.encode(envelope)
    }

    /// Opens a key envelope addressed to `me`, checking the sender's signature and every bound
    /// field against the mailbox entry it came in.
    static func openKey(_ payload: Data, chat: String, sender: String, senderKey: Ed25519.PublicKey, me: UnlockedKeys) throws
        -> (device: String, epoch: Int, after: Int64, key: SymmetricKey)
    {
        guard let envelope = try? JSONDecoder().decode(KeyEnvelope.self, from: payload), envelope.v == 1 else {
            throw MessagingError(.forged, "a chat key envelope is malformed")
        }
        guard envelope.chat == chat, envelope.from == sender, envelope.to == me.userID, envelope.epoch >= 1, envelope.after >= 0
        else {
            throw MessagingError(.forged, "a chat key envelope names another chat, sender or recipient")
        }
        guard senderKey.isValidSignature(envelope.signature, for: envelope.signedBytes) else {
            throw MessagingError(.forged, "a chat key envelope is not signed by \(sender)")
        }
        do {
            let context = KeyEnvelope.context(
                chat: chat, from: sender, device: envelope.device, to: me.userID, epoch: envelope.epoch, after: envelope.after)
            let ephemeral = try X25519.PublicKey(rawRepresentation: envelope.ephemeral)
            let kek = try wrappingKey(
                shared: me.encryption.sharedSecret(with: ephemeral), ephemeral: envelope.ephemeral,
                recipient: me.encryption.publicKey.rawRepresentation, context: context)
            let box = try AESGCM.SealedBox(
                nonce: AESGCM.Nonce(envelope.nonce), ciphertext: envelope.ciphertext, tag: envelope.tag)
            let key = try AESGCM.open(box, using: kek, authenticating: context)
            guard key.count == 32 else { throw MessagingError(.forged, "a chat key has the wrong size") }
            return (envelope.device, envelope.epoch, envelope.after, SymmetricKey(secureBytes: key))
        } catch let error as MessagingError {
            throw error
        } catch {
            throw MessagingError(.forged, "a chat key envelope does not open with this user's key")
        }
    }

    private static func wrappingKey(shared: SecureBytes, ephemeral: Data, recipient: Data, context: Data) throws -> SymmetricKey {
        SymmetricKey(
            secureBytes: try HKDF.deriveKey(
                inputKeyMaterial: shared, salt: Data(ephemeral + recipient), info: context, outputByteCount: 32, hash: .sha256))
    }

    // MARK: Messages

    static func seal(
        _ content: Content, id: String, chat: String, device: String, seq: Int64, epoch: Int, key: SymmetricKey,
        sender: UnlockedKeys
    ) throws -> Data {
        guard seq >= 1, epoch >= 1 else { throw MessagingError(.forged, "a message's seq and epoch start at 1") }
        let plaintext = try encoder.encode(content)
        let aad = SealedMessage.associatedData(chat: chat, from: sender.userID, device: device, seq: seq, epoch: epoch)
        let box = try AESGCM.seal(plaintext, using: key, authenticating: aad)
        var message = SealedMessage(
            id: id, chat: chat, from: sender.userID, device: device, seq: seq, epoch: epoch, nonce: box.nonce.bytes,
            ciphertext: box.ciphertext,
            tag: box.tag, signature: Data())
        message.signature = try sender.signing.signature(for: message.signedBytes)
        return try encoder.encode(message)
    }

    /// The header of a sealed message, before any check (to find the key and the sender).
    static func header(_ payload: Data) throws -> SealedMessage {
        guard let message = try? JSONDecoder().decode(SealedMessage.self, from: payload), message.v == 1, message.seq >= 1,
            message.epoch >= 1
        else {
            throw MessagingError(.forged, "a message is malformed")
        }
        return message
    }

    /// Verifies and decrypts a message that arrived in `chat` from `sender`.
    static func open(_ message: SealedMessage, chat: String, sender: String, senderKey: Ed25519.PublicKey, key: SymmetricKey)
        throws
        -> Content
    {
        guard message.chat == chat, message.from == sender else {
            throw MessagingError(.forged, "a message names another chat or sender than the one it came in")
        }
        guard senderKey.isValidSignature(message.signature, for: message.signedBytes) else {
            throw MessagingError(.forged, "a message is not signed by \(sender)")
        }
        do {
            let box = try AESGCM.SealedBox(nonce: AESGCM.Nonce(message.nonce), ciphertext: message.ciphertext, tag: message.tag)
            let plaintext = try AESGCM.open(
                box, using: key,
                authenticating: SealedMessage.associatedData(
                    chat: chat, from: sender, device: message.device, seq: message.seq, epoch: message.epoch))
            return try JSONDecoder().decode(Content.self, from: plaintext.unsafeData())
        } catch {
            throw MessagingError(.forged, "a message does not decrypt with the sender's chat key")
        }
    }
}

/// The message and key-envelope formats' seal and open, for tools that measure or check them
/// (`spark-bench`, the fuzzers); apps send through ``BBMAccess``.
public enum MessageSealing {
    /// Seals `content` as `sender`'s message number `seq` from endpoint `device` in `chat`.
    public static func seal(
        _ content: String, chat: String, device: String, seq: Int64, epoch: Int, key: SymmetricKey, sender: UnlockedKeys
    ) throws -> Data {
        try SealedFormats.seal(
            SealedFormats.Content(content: content, tag: "Text"), id: "m\(seq)", chat: chat, device: device, seq: seq,
            epoch: epoch,
            key: key, sender: sender)
    }

    /// Seals `key` for `recipient` as `sender`'s chat key `epoch` in `chat` (a key envelope).
    public static func sealKeyEnvelope(
        _ key: SymmetricKey, chat: String, epoch: Int, from sender: UnlockedKeys, device: String, to recipient: String,
        recipientKey: X25519.PublicKey
    ) throws -> Data {
        try SealedFormats.sealKey(
            key, chat: chat, epoch: epoch, after: 0, from: sender, device: device, to: recipient, recipientKey: recipientKey)
    }

    /// Verifies and opens a key envelope from `sender` in `chat` for `recipient`; returns the
    /// chat key and its epoch.
    public static func openKeyEnvelope(
        _ envelope: Data, chat: String, sender: String, senderKey: Ed25519.PublicKey, recipient: UnlockedKeys
    ) throws -> (epoch: Int, key: SymmetricKey) {
        let opened = try SealedFormats.openKey(envelope, chat: chat, sender: sender, senderKey: senderKey, me: recipient)
        return (opened.epoch, opened.key)
    }

    /// Verifies and opens a sealed message from `sender` in `chat`; returns its text.
    public static func open(_ sealed: Data, chat: String, sender: String, senderKey: Ed25519.PublicKey, key: SymmetricKey) throws
        -> String
    {
        try SealedFormats.open(SealedFormats.header(sealed), chat: chat, sender: sender, senderKey: senderKey, key: key).content
    }
}
