import Foundation
import SparkCrypto

/// The secrets of one epoch (RFC 9420 §8), derived from the epoch secret, plus the ones the next
/// epoch starts from. Every value lives in `SecureBytes`.
struct EpochSecrets: Sendable {
    var senderData: SecureBytes
    var encryption: SecureBytes
    var exporter: SecureBytes
    var external: SecureBytes
    var confirmation: SecureBytes
    var membership: SecureBytes
    var resumption: SecureBytes
    var authenticator: SecureBytes
    var initSecret: SecureBytes

    init(suite: MLSCipherSuite, epochSecret: SecureBytes) {
        senderData = suite.deriveSecret(epochSecret, "sender data")
        encryption = suite.deriveSecret(epochSecret, "encryption")
        exporter = suite.deriveSecret(epochSecret, "exporter")
        external = suite.deriveSecret(epochSecret, "external")
        confirmation = suite.deriveSecret(epochSecret, "confirm")
        membership = suite.deriveSecret(epochSecret, "membership")
        resumption = suite.deriveSecret(epochSecret, "resumption")
        authenticator = suite.deriveSecret(epochSecret, "authentication")
        initSecret = suite.deriveSecret(epochSecret, "init")
    }
}

enum KeySchedule {
    /// `joiner_secret` from the previous epoch's init secret and this commit's commit secret.
    static func joinerSecret(
        suite: MLSCipherSuite, initSecret: SecureBytes, commitSecret: SecureBytes, groupContext: GroupContext
    ) -> SecureBytes {
        let prk = suite.extract(salt: initSecret, ikm: commitSecret)
        return suite.expandWithLabel(prk, "joiner", groupContext.tlsBytes, suite.hashLength)
    }

    /// The welcome secret and the epoch's secrets from `joiner_secret` and `psk_secret`.
    static func epoch(
        suite: MLSCipherSuite, joinerSecret: SecureBytes, pskSecret: SecureBytes?, groupContext: GroupContext
    ) -> (welcome: SecureBytes, secrets: EpochSecrets) {
        let psk = pskSecret ?? SecureBytes(zeroes: suite.hashLength)
        let member = suite.extract(salt: joinerSecret, ikm: psk)
        let welcome = suite.deriveSecret(member, "welcome")
        let epochSecret = suite.expandWithLabel(member, "epoch", groupContext.tlsBytes, suite.hashLength)
        return (welcome, EpochSecrets(suite: suite, epochSecret: epochSecret))
    }

    /// `MLS-Exporter(Label, Context, Length)` (§8.5).
    static func export(suite: MLSCipherSuite, exporterSecret: SecureBytes, label: String, context: Data, length: Int)
        -> SecureBytes
    {
        let derived = suite.deriveSecret(exporterSecret, label)
        return suite.expandWithLabel(derived, "exported", suite.hash(context), length)
    }

    /// The key and nonce that encrypt a Welcome's GroupInfo (§12.4.3.1).
    static func welcomeKeyAndNonce(suite: MLSCipherSuite, welcomeSecret: SecureBytes) -> (SecureBytes, SecureBytes) {
        (
            suite.expandWithLabel(welcomeSecret, "key", [UInt8](), suite.keyLength),
            suite.expandWithLabel(welcomeSecret, "nonce", [UInt8](), suite.nonceLength)
        )
    }

    /// `psk_secret` from the PSKs of a commit, in order (§8.4); nil when there are none.
    static func pskSecret(suite: MLSCipherSuite, psks: [(id: PreSharedKeyID, secret: SecureBytes)]) throws -> SecureBytes? {
        guard !psks.isEmpty else { return nil }
        // PSKLabel counts in 16 bits.
        guard psks.count <= Int(UInt16.max) else { throw MLSError(.invalid, "more than 65,535 PSKs") }
        var secret = SecureBytes(zeroes: suite.hashLength)
        for (index, psk) in psks.enumerated() {
            let extracted = suite.extract(salt: [UInt8](), ikm: psk.secret)
            var label = TLSWriter()
            label.write(psk.id)
            label.u16(UInt16(index))
            label.u16(UInt16(psks.count))
            let input = suite.expandWithLabel(extracted, "derived psk", label.bytes, suite.hashLength)
            secret = suite.extract(salt: input, ikm: secret)
        }
        return secret
    }
}

/// The confirmed and interim transcript hashes (§8.2).
enum TranscriptHash {
    static func confirmed(suite: MLSCipherSuite, interim: Data, wireFormat: WireFormat, content: FramedContent, signature: Data)
        -> Data
    {
        var writer = TLSWriter()
        writer.raw(interim)
        writer.u16(wireFormat.rawValue)
        writer.write(content)
        writer.opaque(signature)
        return suite.hash(writer.bytes)
    }

    static func interim(suite: MLSCipherSuite, confirmed: Data, confirmationTag: Data) -> Data {
        var writer = TLSWriter()
        writer.raw(confirmed)
        writer.opaque(confirmationTag)
        return suite.hash(writer.bytes)
    }
}
