public import Foundation
import SparkCrypto

/// One sender's signature on an application message, as a group found it while processing the
/// message: the key of the leaf that sent it, the labelled content it covers
/// (`SignContent("FramedContentTBS", …)`, RFC 9420 §5.1.2) and the signature.
public struct MLSSignatureCheck: Sendable {
    /// The sender's leaf signature key (Ed25519, raw).
    public let publicKey: Data
    /// What the signature covers, label included.
    public let content: [UInt8]
    /// The signature.
    public let signature: Data

    /// Whether the signature holds.
    public func verify() -> Bool {
        guard let key = try? Ed25519.PublicKey(rawRepresentation: publicKey) else { return false }
        return key.isValidSignature(signature, for: content)
    }
}

/// Who checks the signatures of the application messages a group processes (see
/// ``MLSGroup/processWithSender(_:now:applicationSignatures:)``). Commits, proposals and
/// everything else a group processes are always checked in line.
///
/// A checker may defer: answer true at once and verify later (on a thread of its own), when the
/// caller keeps nothing of what it processed until every deferred check held. That is the
/// caller's promise; the group cannot check it.
public protocol MLSSignatureChecker: Sendable {
    /// Whether `check` holds, or, for a checker that defers, true now with the check kept.
    func check(_ check: MLSSignatureCheck) -> Bool
}
