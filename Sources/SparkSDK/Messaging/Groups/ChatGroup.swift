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
/// - The chat's admins are a group context extension every member holds the same
///   (``adminsExtensionType``): a commit that adds or removes another user's devices, or changes
///   the admins, is applied only when an admin made it (a user may add and remove their own
///   devices). The domain enforces the same rule on the commits it orders. So is a commit that
///   re-initializes the group (a ReInit), which would end the chat's group for every member.
/// - A commit the domain ordered for this epoch that every member refuses (no commit of the
///   group, or against the admins' rule) is ``Decision/refuseCommit(_:)``: the domain's epoch has
///   moved past the members, so an admin's device replaces it (security review 4). One refused
///   only because this device does not trust a credential in it is a plain drop: other members
///   may have applied it.
struct ChatGroup: Sendable {
    /// A device in the group: its user and endpoint, from its cross-signed credential.
    struct Device: Hashable, Sendable, Comparable {
        var user: String
        var device: String
        static func < (a: Device, b: Device) -> Bool { (a.user, a.device) < (b.user, b.device) }
    }

    /// What an entry does.
    enum Decision: Equatable, Sendable {
        /// A message, from `sender`, with the tree head its device gossiped (its MLS
        /// `authenticated_data`; empty when it carried none).
        case message(ChatPayload, sender: Device, gossip: Data)
        /// A commit moved the group to its next epoch.
        case commit(added: [Device], removed: [Device], by: Device)
        /// A commit removed this device: the group reads nothing more.
        case removed(by: Device)
        /// Refused: nothing changed.
        case drop(String)
        /// A commit ordered for this epoch that every member refuses: nothing changed, and the
        /// chat is stuck here until an admin's device replaces it.
        case refuseCommit(String)
        /// Not yet: keep the entry and offer it again after what comes before it.
        case retry(String)
    }

    let chatID: String
    private(set) var group: MLSGroup

    init(chatID: String, group: MLSGroup) {
        self.chatID = chatID
        self.group = group
    }

    /// This group judged by `validator` from now on (trust changes while a group lives).
    func judged(by validator: any MLSCredentialValidator) -> ChatGroup {
        ChatGroup(chatID: chatID, group: group.withValidator(validator))
    }

    /// The MLS group id of a chat.
    static func groupID(_ chatID: String) -> Data { Data("spark-chat:\(chatID)".utf8) }

    /// The admins' extension (private use): a vector of `opaque user_id<V>`, sorted.
    static let adminsExtensionType: UInt16 = 0xF5A0

    static func adminsExtension(_ admins: Set<String>) -> MLSGroupExtension {
        var writer = TLSWriter()
        writer.vector { list in for admin in admins.sorted() { list.opaque(Data(admin.utf8)) } }
        return MLSGroupExtension(type: adminsExtensionType, data: writer.data)
    }

    /// The subject's extension (private use): the chat's subject, UTF-8. It is in the group
    /// context, so a joiner has it from the Welcome, every member holds the same, and a change
    /// is a commit (encrypted, as every handshake message here).
    static let subjectExtensionType: UInt16 = 0xF5A1

    static func subjectExtension(_ subject: String) -> MLSGroupExtension {
        MLSGroupExtension(type: subjectExtensionType, data: Data(subject.utf8))
    }

    /// The disappearing-messages timer's extension (private use): `uint32 seconds`, present only
    /// while the timer is on. In the group context like the subject: every member holds the
    /// same, and a change is a commit.
    static let timerExtensionType: UInt16 = 0xF5A2

    /// The shortest and longest timer a chat may have.
    static let timerRange: ClosedRange<Int> = 5...(365 * 86400)

    static func timerExtension(_ seconds: Int) -> MLSGroupExtension {
        var writer = TLSWriter()
        writer.u32(UInt32(seconds))
        return MLSGroupExtension(type: timerExtensionType, data: writer.data)
    }

    /// The chat's disappearing-messages timer in this epoch, in seconds: 0 when off (no
    /// extension, or a malformed one or one out of ``timerRange``).
    var disappearingTimer: Int {
        guard let data = group.applicationExtensions.first(where: { $0.type == Self.timerExtensionType })?.data else {
            return 0
        }
        var reader = TLSReader(data)
        guard let seconds = try? Int(reader.u32("timer")), (try? reader.finish("timer")) != nil else { return 0 }
        return Self.timerRange.contains(seconds) ? seconds : 0
    }

    /// The chat's subject in this epoch (empty when none was set, or it is not UTF-8).
    var subject: String {
        group.applicationExtensions.first { $0.type == Self.subjectExtensionType }.flatMap {
            String(data: $0.data, encoding: .utf8)
        } ?? ""
    }

    /// The chat's admins, as every member holds them in this epoch (none if the extension is
    /// missing or malformed, so no one has rights the group did not agree on).
    var admins: Set<String> {
        guard let data = group.applicationExtensions.first(where: { $0.type == Self.adminsExtensionType })?.data else {
            return []
        }
        var reader = TLSReader(data)
        do {
            let admins = try reader.vector("admins") { list -> Set<String>? in
                var admins: Set<String> = []
                while !list.isAtEnd {
                    guard let admin = String(data: try list.opaque("admin"), encoding: .utf8) else { return nil }
                    admins.insert(admin)
                }
                return admins
            }
            try reader.finish("admins")
            return admins ?? []
        } catch {
            return []
        }
    }

    /// A new group of this device alone, of MLS cipher suite `suite`, its user the chat's admin.
    static func create(
        chatID: String, signer: MLSSigner, validator: any MLSCredentialValidator, subject: String = "",
        suite: MLSCipherSuite = .x25519AES128GCMSHA256Ed25519, random: inout some MLSRandomSource
    ) throws -> ChatGroup {
        let creator = try DeviceCredential(encoded: signer.credential.identity).userID
        return ChatGroup(
            chatID: chatID,
            group: try MLSGroup.create(
                groupID: groupID(chatID), signer: signer, suite: suite, validator: validator,
                extensions: [adminsExtension([creator]), subjectExtension(subject)], random: &random))
    }

    /// This device joins from a Welcome for one of its KeyPackages.
    static func join(chatID: String, welcome: Data, bundle: MLSKeyPackageBundle, validator: any MLSCredentialValidator) throws
        -> ChatGroup
    {
        let group = try MLSGroup.join(welcome: welcome, bundle: bundle, validator: validator)
        guard group.groupID == groupID(chatID) else { throw MessagingError(.forged, "a Welcome for another chat's group") }
        return ChatGroup(chatID: chatID, group: group)
    }

    /// This group (joined from a Welcome with a validator that accepts anyone) judged by
    /// `validator` from now on, once it accepts every device in it (see `MLSGroup.revalidated(by:)`).
    func accepted(by validator: any MLSCredentialValidator) throws -> ChatGroup {
        ChatGroup(chatID: chatID, group: try group.revalidated(by: validator))
    }

    /// The devices of the group, each from its credential.
    var devices: [Device] { group.members.compactMap { Self.device(of: $0) }.sorted() }

    static func device(of member: MLSGroup.Member) -> Device? {
        guard let credential = try? DeviceCredential(encoded: member.credential.identity) else { return nil }
        return Device(user: credential.userID, device: credential.deviceID)
    }

    /// A commit adding `keyPackages` and removing every device of `users`; the group itself is
    /// unchanged until the domain accepted the commit (then keep `next`).
    func commit(
        adding keyPackages: [Data], removingUsers users: Set<String>, admins: Set<String>? = nil, now: Date,
        random: inout some MLSRandomSource
    ) throws -> (commit: Data, welcome: Data?, next: ChatGroup) {
        try commit(
            adding: keyPackages, removing: Set(devices.filter { users.contains($0.user) }), admins: admins, now: now,
            random: &random)
    }

    /// A commit changing the chat's subject (and refreshing this device's keys).
    func commit(subject: String, now: Date, random: inout some MLSRandomSource) throws -> (commit: Data, next: ChatGroup) {
        let result = try commit(adding: [], removing: Set<Device>(), subject: subject, now: now, random: &random)
        return (result.commit, result.next)
    }

    /// What a commit changes of the chat's group context besides its members: each nil is kept.
    struct ContextChange: Sendable, Equatable {
        var subject: String?
        /// The disappearing-messages timer in seconds (0: off).
        var timer: Int?
        var isEmpty: Bool { subject == nil && timer == nil }
    }

    /// A commit adding `keyPackages` and removing `removed` (it always refreshes this device's own
    /// keys: post-compromise security); the group is unchanged until the domain accepted it.
    func commit(
        adding keyPackages: [Data], removing removed: Set<Device>, admins: Set<String>? = nil, subject: String? = nil,
        timer: Int? = nil, now: Date, random: inout some MLSRandomSource
    ) throws -> (commit: Data, welcome: Data?, next: ChatGroup) {
        let leaves = group.members.filter { member in Self.device(of: member).map { removed.contains($0) } ?? false }
            .map(\.leafIndex)
        // The application's extensions are replaced as a whole: what is not changed is kept.
        let seconds = timer ?? disappearingTimer
        let extensions =
            admins == nil && subject == nil && timer == nil
            ? nil
            : [Self.adminsExtension(admins ?? self.admins), Self.subjectExtension(subject ?? self.subject)]
                + (seconds > 0 ? [Self.timerExtension(seconds)] : [])
        let result = try group.commit(
            adding: keyPackages, removing: leaves, extensions: extensions, now: now, random: &random)
        return (result.commit, result.welcome, ChatGroup(chatID: chatID, group: result.group))
    }

    /// This device in the group.
    var ownDevice: Device? { group.member(at: group.ownLeaf).flatMap(Self.device(of:)) }

    /// The devices whose leaf `validator` refuses (a user's key this device does not trust, or a
    /// device of a previous identity of its user).
    func devices(refusedBy validator: any MLSCredentialValidator) -> [Device] {
        group.members.filter { !validator.isValid($0.credential, signatureKey: $0.signatureKey) }.compactMap {
            Self.device(of: $0)
        }.sorted()
    }

    /// The users with a device in the group.
    var users: [String] { Array(Set(devices.map(\.user))).sorted() }

    /// Seals a payload as this device's next message, carrying `gossip` (the transparency log's
    /// head this device holds, encoded) in the message's authenticated data: every member sees
    /// the head its sender was shown, so a domain that shows them different logs is caught.
    mutating func seal(_ payload: ChatPayload, gossip: Data = Data(), random: inout some MLSRandomSource) throws -> Data {
        try payload.validate()
        return try group.protect(payload.encoded, authenticatedData: gossip, random: &random)
    }

    /// What an ephemeral entry (typing, a live chat event) does.
    enum EphemeralDecision: Equatable, Sendable {
        /// A payload from `sender`, with the nonce that makes it unique (to drop a replay).
        case event(ChatPayload, sender: Device, nonce: Data)
        /// Of another epoch, or older (or newer) than ``ephemeralWindow`` by its own time: a
        /// member may have sent it, but it is not news.
        case ignore
        /// Refused: forged, altered, or not what it claims.
        case drop(String)
    }

    /// How far an ephemeral payload's own time may be from this device's clock to be shown.
    static let ephemeralWindow: TimeInterval = 30

    /// Seals an ephemeral payload (not on the ratchet: see `MLSGroup.sealEphemeral`).
    func sealEphemeral(_ payload: ChatPayload, random: inout some MLSRandomSource) throws -> Data {
        try payload.validate()
        precondition(payload.kind.isEphemeral, "only an ephemeral payload is sealed as one")
        return try group.sealEphemeral(payload.encoded, random: &random)
    }

    /// Opens an ephemeral entry: signed by a member of this epoch, of the user the domain names,
    /// an ephemeral payload, and recent by its own time. The group does not change.
    func receiveEphemeral(_ entry: MailboxEntry, now: Date) -> EphemeralDecision {
        guard entry.chatID == chatID, group.isActive else { return .drop("an ephemeral entry for another chat") }
        let opened: MLSGroup.Ephemeral
        do {
            opened = try group.openEphemeral(entry.payload)
        } catch let error as MLSError where error.code == .keyUnavailable {
            return .ignore
        } catch {
            return .drop("an ephemeral entry that does not open: \((error as? MLSError)?.reason ?? "\(error)")")
        }
        guard let sender = Self.device(of: opened.sender), sender.user == entry.sender else {
            return .drop("signed by a device of another user than the domain names (\(entry.sender))")
        }
        guard let payload = try? ChatPayload(encoded: opened.content), payload.kind.isEphemeral, let sentAt = payload.upTo
        else { return .drop("an ephemeral entry that carries no ephemeral payload") }
        let age = now.timeIntervalSince1970 - Double(sentAt) / 1000
        guard abs(age) <= Self.ephemeralWindow else { return .ignore }
        return .event(payload, sender: sender, nonce: opened.nonce)
    }

    /// Decides what `entry` does, and applies it to the group when it is applied. `signatures`,
    /// when given, checks the sender's signature on a message, receipt or event (a page's
    /// ``DeferredSignatures``); the group checks every other signature itself.
    mutating func receive(_ entry: MailboxEntry, now: Date, signatures: (any MLSSignatureChecker)? = nil) -> Decision {
        guard entry.chatID == chatID else { return .drop("an entry for another chat") }
        guard group.isActive else { return .drop("this device was removed from the chat's group") }
        // What every member refuses of a commit the domain ordered for the group's epoch.
        let ordered = entry.kind == .commit && entry.epoch == Int64(clamping: group.epoch)
        func refuse(_ reason: String) -> Decision { ordered ? .refuseCommit(reason) : .drop(reason) }
        guard let header = try? MLSMessageHeader(entry.payload), header.groupID == group.groupID else {
            return refuse("not a message of this chat's group")
        }
        switch (entry.kind, header.contentType) {
        case (.commit, .commit): break
        case (.message, .application), (.event, .application), (.receipt, .application): break
        default: return refuse("a \(entry.kind.rawValue) entry that carries an MLS \(header.contentType)")
        }
        if entry.kind == .commit, entry.epoch != Int64(clamping: header.epoch) {
            return refuse("the domain ordered the commit for another epoch than the commit's own")
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
            (received, signer) = try next.processWithSender(entry.payload, now: now, applicationSignatures: signatures)
        } catch {
            let reason = (error as? MLSError)?.reason ?? "\(error)"
            // Refused only for a credential this device does not trust: others may apply it.
            var lenient = group.withValidator(MLSAcceptAnyCredential())
            return (try? lenient.processWithSender(entry.payload, now: now)) == nil ? refuse(reason) : .drop(reason)
        }
        guard let signer, let sender = Self.device(of: signer), sender.user == entry.sender else {
            return .drop("signed by a device of another user than the domain names (\(entry.sender))")
        }
        switch received {
        case .application(let bytes, _, let gossip):
            guard let payload = try? ChatPayload(encoded: bytes) else { return .drop("a malformed chat payload") }
            group = next
            return .message(payload, sender: sender, gossip: gossip)
        case .commit:
            let (before, adminsBefore) = (Set(devices), admins)
            let candidate = ChatGroup(chatID: chatID, group: next)
            let after = Set(candidate.devices)
            let added = after.subtracting(before).sorted()
            let removed = before.subtracting(after).sorted()
            let othersChanged = (added + removed).contains { $0.user != sender.user }
            guard !(othersChanged || candidate.admins != adminsBefore) || adminsBefore.contains(sender.user) else {
                return refuse("\(sender.user) is not an admin: only admins change who is in the chat or who the admins are")
            }
            guard next.isActive || adminsBefore.contains(sender.user) else {
                return refuse("\(sender.user) is not an admin: only an admin re-initializes the chat's group")
            }
            group = next
            return .commit(added: added, removed: removed, by: sender)
        case .removed:
            // Only an admin removes another user's device (a user may remove their own).
            let me = group.member(at: group.ownLeaf).flatMap(Self.device(of:))
            guard admins.contains(sender.user) || sender.user == me?.user else {
                return refuse("\(sender.user) is not an admin: only admins change who is in the chat or who the admins are")
            }
            group = next
            return .removed(by: sender)
        case .proposal:
            return refuse("a proposal where a commit or message was expected")
        }
    }
}
