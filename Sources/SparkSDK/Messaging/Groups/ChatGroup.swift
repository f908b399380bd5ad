import Foundation
import SparkDomain
import SparkMLS

/// One chat as an MLS group of devices, and the pure decision about each mailbox entry of it:
/// the per-chat core the messenger drives (as matrix-sdk-crypto and libsignal keep theirs). It
/// does no I/O: an entry and the stored group give apply, drop with a reason, or retry later.
///
/// - A commit is applied only for the group's epoch; one for an epoch already left is dropped
///   (a replay, or this device's own echo), one for a later epoch waits (``Decision/retry(_:)``)
///   for the commits before it, which the domain may be withholding.
/// - A message is opened only in its epoch: an earlier one is dropped (its keys are gone, which
///   is forward secrecy), a later one waits for the commit that starts its epoch.
/// - The device that signed must belong to the user the domain names as the sender, so a domain
///   cannot pass one member's message off as another's; what MLS refuses (a forged, altered,
///   replayed or removed member's message) is dropped, the group untouched.
struct ChatGroup: Sendable {
    /// A device in the group: its user and endpoint, from its cross-signed credential.
    struct Device: Hashable, Sendable, Comparable {
        var user: String
        var device: String
        static func < (a: Device, b: Device) -> Bool { (a.user, a.device) < (b.user, b.device) }
    }

    /// What an entry does.
    enum Decision: Equatable, Sendable {
        /// A message, from `sender`.
        case message(ChatPayload, sender: Device)
        /// A commit moved the group to its next epoch.
        case commit(added: [Device], removed: [Device], by: Device)
        /// A commit removed this device: the group reads nothing more.
        case removed(by: Device)
        /// Refused: nothing changed.
        case drop(String)
        /// Not yet: keep the entry and offer it again after what comes before it.
        case retry(String)
    }

    let chatID: String
    private(set) var group: MLSGroup

    init(chatID: String, group: MLSGroup) {
        self.chatID = chatID
        self.group = group
    }

    /// The MLS group id of a chat.
    static func groupID(_ chatID: String) -> Data { Data("spark-chat:\(chatID)".utf8) }

    /// A new group of this device alone.
    static func create(
        chatID: String, signer: MLSSigner, validator: any MLSCredentialValidator, random: inout some MLSRandomSource
    ) throws -> ChatGroup {
        ChatGroup(
            chatID: chatID,
            group: try MLSGroup.create(groupID: groupID(chatID), signer: signer, validator: validator, random: &random))
    }

    /// This device joins from a Welcome for one of its KeyPackages.
    static func join(chatID: String, welcome: Data, bundle: MLSKeyPackageBundle, validator: any MLSCredentialValidator) throws
        -> ChatGroup
    {
        let group = try MLSGroup.join(welcome: welcome, bundle: bundle, validator: validator)
        guard group.groupID == groupID(chatID) else { throw MessagingError(.forged, "a Welcome for another chat's group") }
        return ChatGroup(chatID: chatID, group: group)
    }

    /// The devices of the group, each from its credential.
    var devices: [Device] { group.members.compactMap { Self.device(of: $0) }.sorted() }

    static func device(of member: MLSGroup.Member) -> Device? {
        guard let credential = try? DeviceCredential(encoded: member.credential.identity) else { return nil }
        return Device(user: credential.userID, device: credential.deviceID)
    }

    /// A commit adding `keyPackages` and removing every device of `users`; the group itself is
    /// unchanged until the domain accepted the commit (then keep `next`).
    func commit(adding keyPackages: [Data], removingUsers users: Set<String>, now: Date, random: inout some MLSRandomSource)
        throws -> (commit: Data, welcome: Data?, next: ChatGroup)
    {
        let leaves = group.members.filter { member in Self.device(of: member).map { users.contains($0.user) } ?? false }
            .map(\.leafIndex)
        let result = try group.commit(adding: keyPackages, removing: leaves, now: now, random: &random)
        return (result.commit, result.welcome, ChatGroup(chatID: chatID, group: result.group))
    }

    /// Seals a payload as this device's next message.
    mutating func seal(_ payload: ChatPayload, random: inout some MLSRandomSource) throws -> Data {
        try payload.validate()
        return try group.protect(payload.encoded, random: &random)
    }

    /// Decides what `entry` does, and applies it to the group when it is applied.
    mutating func receive(_ entry: MailboxEntry, now: Date) -> Decision {
        guard entry.chatID == chatID else { return .drop("an entry for another chat") }
        guard group.isActive else { return .drop("this device was removed from the chat's group") }
        guard let header = try? MLSMessageHeader(entry.payload), header.groupID == group.groupID else {
            return .drop("not a message of this chat's group")
        }
        switch (entry.kind, header.contentType) {
        case (.commit, .commit): break
        case (.message, .application), (.event, .application): break
        default: return .drop("a \(entry.kind.rawValue) entry that carries an MLS \(header.contentType)")
        }
        if entry.kind == .commit, entry.epoch != Int64(clamping: header.epoch) {
            return .drop("the domain ordered the commit for another epoch than the commit's own")
        }
        guard header.epoch >= group.epoch else {
            return .drop("from epoch \(header.epoch), which this device has left (its keys are gone)")
        }
        guard header.epoch == group.epoch else {
            return .retry("for epoch \(header.epoch), the group is at \(group.epoch): a commit before it has not arrived")
        }
        var next = group
        let received: MLSReceived
        let signer: MLSGroup.Member?
        do {
            (received, signer) = try next.processWithSender(entry.payload, now: now)
        } catch let error as MLSError {
            return .drop(error.reason)
        } catch {
            return .drop("\(error)")
        }
        guard let signer, let sender = Self.device(of: signer), sender.user == entry.sender else {
            return .drop("signed by a device of another user than the domain names (\(entry.sender))")
        }
        switch received {
        case .application(let bytes, _, _):
            guard let payload = try? ChatPayload(encoded: bytes) else { return .drop("a malformed chat payload") }
            group = next
            return .message(payload, sender: sender)
        case .commit:
            let before = Set(devices)
            group = next
            let after = Set(devices)
            return .commit(added: after.subtracting(before).sorted(), removed: before.subtracting(after).sorted(), by: sender)
        case .removed:
            group = next
            return .removed(by: sender)
        case .proposal:
            return .drop("a proposal where a commit or message was expected")
        }
    }
}
