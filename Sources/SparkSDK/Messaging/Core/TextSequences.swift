import Foundation

/// What a device received of one other device's texts in a chat, by the sequence each text
/// carries inside its authenticated payload (``ChatPayload/sequence``): the highest so far and
/// the ones below it that have not arrived. The domain numbers messages, but its numbers prove
/// nothing; a sender's sequence does, so a text the domain withholds while it delivers a later
/// one is seen as missing until it arrives (security review 6).
struct TextSequences: Sendable, Equatable {
    var chatID: String
    /// The sending device's user and endpoint.
    var user: String
    var device: String
    /// The highest sequence received.
    var highest: UInt64
    /// Sequences below ``highest`` neither received nor withdrawn, ascending; at most
    /// ``maximumMissing`` (the lowest go first), so a sender that jumps far costs little.
    var missing: [UInt64]

    static let maximumMissing = 256

    /// Whether a text with `sequence` is one that was missing (it arrives late).
    func awaits(_ sequence: UInt64) -> Bool { missing.contains(sequence) }

    /// After a text of `device` with `sequence`, naming `withdrawn`, was received. The first text
    /// of a device sets where counting starts: what it sent before is not known to be missing.
    static func noting(
        _ state: TextSequences?, chatID: String, user: String, device: String, sequence: UInt64, withdrawn: [UInt64]
    ) -> TextSequences {
        guard var state else {
            return TextSequences(chatID: chatID, user: user, device: device, highest: sequence, missing: [])
        }
        if sequence > state.highest {
            let gap = sequence - state.highest - 1
            let kept = min(gap, UInt64(maximumMissing))
            state.missing += (sequence - kept)..<sequence
            state.highest = sequence
        } else {
            state.missing.removeAll { $0 == sequence }
        }
        let refused = Set(withdrawn)
        state.missing.removeAll { refused.contains($0) }
        if state.missing.count > maximumMissing { state.missing.removeFirst(state.missing.count - maximumMissing) }
        return state
    }
}
