public import Foundation
import SparkLock
public import SparkObservable

/// Chats and messages for the signed-in user (Spark's `BBMAccess` wrappers). Get it from
/// ``BBMEnterpriseService/messaging()`` once setup succeeded.
///
/// ```swift
/// let access = try await service.messaging()
/// let chat = try await access.startChat(with: ["bob"], subject: "Lunch")
/// try await access.sendMessage("12:30?", to: chat.chatID)
/// for await messages in try await access.messages(in: chat.chatID).values { render(messages) }
/// ```
public final class BBMAccess: Sendable {
    let messenger: Messenger
    /// Kept so that messaging goes on while the app holds only this object.
    let service: BBMEnterpriseService

    init(messenger: Messenger, service: BBMEnterpriseService) {
        self.messenger = messenger
        self.service = service
    }

    /// Whether this access's messaging has stopped (the service was stopped, reset or signed
    /// out): every call then throws ``MessagingError/Code/notReady``. Get a new one from
    /// ``BBMEnterpriseService/messaging()`` once setup succeeds again. An app that keeps the
    /// access (instead of asking the service each time) checks this first.
    public var isStopped: Bool { messenger.hasStopped }

    /// The signed-in user's id.
    public var currentUser: String { messenger.keys.userID }

    /// Every chat this endpoint knows, most recently active first (tracked by monitors).
    public var chats: StateFlow<[Chat]> { messenger.chatsOwner.flow }

    /// Identity changes and dropped arrivals, from now on; each call gives a new stream of its own.
    public var events: AsyncStream<MessagingEvent> { messenger.eventSinks.stream() }

    /// Every message of another user as it arrives on this device, from now on, once each (a
    /// history handed over from another device of this user is not an arrival); each call gives
    /// a new stream of its own. Beside the ``messages(in:)`` flows, this is how a bot or a
    /// notifier hears of a message without watching every chat.
    ///
    /// ```swift
    /// for await message in access.incomingMessages {
    ///     try await access.sendMessage("echo: \(message.content)", to: message.chatID)
    /// }
    /// ```
    public var incomingMessages: AsyncStream<ChatMessage> { messenger.arrivalSinks.stream() }

    /// Every step of this user's messages from now on (sent, delivered, read, failed with its
    /// reason), each once and in order; each call gives a new stream of its own. Beside the
    /// ``messages(in:)`` flow, which shows only the latest state, this is how an app shows
    /// "delivered" even when "read" follows at once.
    ///
    /// ```swift
    /// for await event in access.messageEvents where event.messageID == message.id {
    ///     print("message \(event)")   // "#1 sent", "#1 delivered", "#1 read"
    /// }
    /// ```
    public var messageEvents: AsyncStream<MessageEvent> { messenger.messageEventSinks.stream() }

    /// Messages that changed after they arrived, from now on: edited, reacted to, recalled or
    /// expired, by anyone (this user's other devices included). (A step of this user's own
    /// message, such as delivered or read, is in ``messageEvents``.)
    /// Each call gives a new stream of its own. An app that shows a chat through
    /// ``messages(in:)`` needs none of it (the flow changes); one that reads messages itself
    /// (a bot, the C API) reads the named ones again.
    public var messageChanges: AsyncStream<MessageChange> { messenger.changeSinks.stream() }

    /// Starts a chat with one user (one-to-one) or several (a group), with an optional subject.
    public func startChat(with users: [String], subject: String = "") async throws -> Chat {
        try await messenger.chats.startChat(with: users, subject: subject)
    }

    /// Sends a message; at most 70 KB of content and data together. Returns once the domain
    /// numbered it (state `sent`), or once it is left `sending` (the domain unreachable for now:
    /// it is posted again, exactly once, when it can be) or `held` (the chat holds a changed
    /// identity), or `failed`.
    @discardableResult
    public func sendMessage(
        _ content: String, tag: String = "Text", data: String? = nil, ref: Int64? = nil, to chatID: String
    ) async throws -> ChatMessage {
        try await messenger.outbox.send(content, tag: tag, data: data, ref: ref, to: chatID)
    }

    /// Sends a message without waiting for the domain: returns once the message is sealed and
    /// stored on this device (state `sending`, or `held`), as ``sendMessage(_:tag:data:ref:to:)``
    /// is before it posts. The chat's messages are posted in the order they were sent, several
    /// in one request while one is in flight; each one's later states arrive on
    /// ``messageEvents`` and in ``messages(in:)``. For an app that lets its user type the next
    /// message at once, or sends many.
    @discardableResult
    public func queueMessage(
        _ content: String, tag: String = "Text", data: String? = nil, ref: Int64? = nil, to chatID: String
    ) async throws -> ChatMessage {
        try await messenger.outbox.send(content, tag: tag, data: data, ref: ref, to: chatID, untilPosted: false)
    }

    /// The most messages one ``queueMessages(_:to:)`` call takes (each at most 70 KB: one
    /// transaction of at most about 18 MB).
    public static let mostQueuedAtOnce = 256

    /// Sends several messages to a chat at once, in the order given, without waiting for the
    /// domain: ``queueMessage(_:tag:data:ref:to:)`` for each, in one step. They are sealed and
    /// stored on this device in one transaction (all of them, or, when it fails, none) and posted
    /// together; returns them as stored (state `sending`, or `held`), in that order. For an app
    /// that sends many at once (a bot, an import, a forward): the chat's group is written once,
    /// not once a message. At most ``mostQueuedAtOnce`` messages a call.
    @discardableResult
    public func queueMessages(_ messages: [NewMessage], to chatID: String) async throws -> [ChatMessage] {
        try await messenger.outbox.send(messages, to: chatID, untilPosted: false)
    }

    /// Sends the file at `path` to a chat, with an optional caption and thumbnail: the file is
    /// encrypted on this device as it is read (AES-256-GCM in 64 KiB chunks, under a key drawn
    /// for it alone) and uploaded to the domain in parts, and then a message carrying the key goes
    /// to the chat (``ChatMessage/attachment``). Memory stays flat whatever the file's size; a lost
    /// connection resumes where it stopped. The domain caps a file's size (100 MiB by default) and
    /// each user's attachments in all.
    ///
    /// - Parameters:
    ///   - path: the file to send (a regular file).
    ///   - chatID: the chat.
    ///   - caption: text shown with the file (empty by default).
    ///   - tag: the message's app-defined tag ("File" by default).
    ///   - fileName: the name the members see (the path's last component by default).
    ///   - mediaType: its type, such as `image/png` (from the name's extension by default).
    ///   - thumbnail: a small picture the members see before they save the file.
    /// - Returns: the transfer; its value is the message once sent.
    public func sendFile(
        at path: String, to chatID: String, caption: String = "", tag: String = "File", fileName: String? = nil,
        mediaType: String? = nil, thumbnail: Thumbnail? = nil
    ) throws -> AttachmentTransfer<ChatMessage> {
        try messenger.outbox.sendFile(
            at: path, to: chatID, caption: caption, tag: tag, fileName: fileName, mediaType: mediaType, thumbnail: thumbnail)
    }

    /// Saves a message's attachment at `path`: it is read from the domain in parts and decrypted
    /// as it arrives into a hidden file beside `path`, which replaces `path` only once every
    /// chunk opened and the whole blob matched the digest the message carries (a swapped or
    /// truncated blob is refused with ``MessagingError/Code/forged``, and nothing is left).
    /// The saved file is the app's: a recall or an expiry does not reach it.
    public func saveAttachment(of messageID: String, to path: String) throws -> AttachmentTransfer<Void> {
        try messenger.attachments.saveAttachment(of: messageID, to: path)
    }

    /// The thumbnail of a message's attachment, if one came with it.
    public func thumbnail(of messageID: String) async throws -> Data? {
        try await messenger.attachments.thumbnail(of: messageID)
    }

    /// Blocks a user: from now on every device of this user drops their messages, reactions,
    /// typing and chat events (in every chat, groups included) and their invitations to new
    /// chats, and the domain refuses a chat they start with this user or their adding this user
    /// to one. The list is kept by the domain, so every device of this user has it (another
    /// device reads it as soon as it next reads its mailbox). What they send while blocked is not
    /// shown later, after an unblock. They are not told, though a chat they try to start with
    /// this user is refused.
    public func block(_ userID: String) async throws { try await messenger.identities.setBlocked(userID, true) }

    /// Unblocks a user: what they send from now on arrives again.
    public func unblock(_ userID: String) async throws { try await messenger.identities.setBlocked(userID, false) }

    /// The users this user blocked, sorted.
    public func blockedUsers() async -> [String] { messenger.identities.blockedUsers() }

    /// Marks incoming messages read up to `number` (all of them when nil) and tells the senders.
    public func markMessagesRead(in chatID: String, upTo number: Int64? = nil) async throws {
        try await messenger.outbox.markRead(chatID, upTo: number)
    }

    /// Leaves a chat; later messages are sealed with keys this user does not get.
    public func leaveChat(_ chatID: String) async throws { try await messenger.chats.leave(chatID) }

    /// Invites users (admins only).
    public func invite(_ users: [String], to chatID: String) async throws { try await messenger.chats.invite(users, to: chatID) }

    /// Removes a participant (admins only); the keys rotate so they cannot read what follows.
    public func removeParticipant(_ user: String, from chatID: String) async throws {
        try await messenger.chats.remove(user, from: chatID)
    }

    /// Renames a chat.
    public func updateChatSubject(_ chatID: String, subject: String) async throws {
        try await messenger.chats.rename(chatID, subject: subject)
    }

    /// The latest messages of a chat as a flow (the newest 200; page back with
    /// ``messages(in:before:limit:)``).
    public func messages(in chatID: String) async throws -> StateFlow<[ChatMessage]> { try await messenger.messageFlow(chatID) }

    /// Up to `limit` messages before `number` (or the newest), oldest first.
    public func messages(in chatID: String, before number: Int64?, limit: Int) async throws -> [ChatMessage] {
        try await messenger.messages(in: chatID, before: number, limit: limit)
    }

    /// One message, by its id (``ChatMessage/id``).
    /// - Throws: ``MessagingError/Code/unknownChat`` when this device has no such message.
    public func message(_ messageID: String) async throws -> ChatMessage { try await messenger.message(id: messageID) }

    /// A chat's participants.
    public func participants(of chatID: String) async throws -> [Participant] { try await messenger.chat(chatID).participants }

    /// One chat.
    public func chat(_ chatID: String) async throws -> Chat { try await messenger.chat(chatID) }

    /// Changes the text of a message this user sent; every member's device shows the new text
    /// (an edit travels as an authenticated message naming the edited message's id).
    public func editMessage(_ messageID: String, content: String) async throws {
        try await messenger.outbox.edit(messageID, content: content)
    }

    /// Adds this user's reaction `emoji` (one emoji) to a message of a chat; every member's
    /// device counts it in ``ChatMessage/reactions``. A user has one of each emoji on a message
    /// (adding it again changes nothing), and at most 20 different ones.
    public func react(to messageID: String, emoji: String) async throws {
        try await messenger.outbox.react(messageID, emoji: emoji, added: true)
    }

    /// Removes this user's reaction `emoji` from a message (nothing happens when it has none).
    public func removeReaction(from messageID: String, emoji: String) async throws {
        try await messenger.outbox.react(messageID, emoji: emoji, added: false)
    }

    /// Recalls a message this user sent (deletes it for everyone): every device of every member
    /// removes its content, data and reactions and shows it as recalled (``ChatMessage/isRecalled``).
    /// Only its sender may; a recall from anyone else is dropped by every device. A device that
    /// already shows the message keeps no copy of it, though a person may have read or copied it.
    public func recallMessage(_ messageID: String) async throws {
        try await messenger.outbox.recall(messageID)
    }

    /// Sets the chat's disappearing-messages timer, or turns it off (nil): each message sent from
    /// then on disappears from every device of every member (content, data and reactions, from
    /// the store and its files) this long after it was sent, on the sender's devices, or after it
    /// was read, on each recipient's. The timer is part of the chat's group, changed by a commit
    /// every member applies alike (``Chat/disappearingTimer``); any member may change it. From 5
    /// seconds to 365 days, whole seconds. A recipient can still copy what they read.
    public func setDisappearingTimer(_ timer: Duration?, in chatID: String) async throws {
        let seconds = timer.map { Int($0.components.seconds) } ?? 0
        if let timer, timer.components.attoseconds != 0 || seconds == 0 {
            throw MessagingError(.invalidArgument, "a disappearing-messages timer is whole seconds, 5 seconds to 365 days")
        }
        try await messenger.chats.setTimer(chatID, seconds: seconds)
    }

    /// Reports `userID`, a participant of the chat, to the domain's operator, revealing
    /// `messages` (theirs, from this chat; 1 to 50): the operator reads their text, which the
    /// domain could not before. The domain cannot check what a report says (it never held the
    /// keys): the report is the user's word. `spark-admin reports` lists reports.
    @discardableResult
    public func report(_ userID: String, in chatID: String, messages: [ChatMessage], reason: String) async throws -> Int64 {
        try await messenger.outbox.report(userID, in: chatID, messages: messages, reason: reason)
    }

    /// How long an app shows a user as typing after their last notice
    /// (``MessagingEvent/typing(chatID:userID:isTyping:)``) when no stop comes.
    public static let typingTimeout: Duration = .seconds(6)

    /// Tells the chat's members that this user is typing (call it as they type: a notice goes at
    /// most every 3 seconds), or stopped (after they sent, or cleared the text). Their devices
    /// that are online get ``MessagingEvent/typing(chatID:userID:isTyping:)``; nothing is stored,
    /// by the domain only for seconds.
    public func sendTyping(in chatID: String, isTyping: Bool = true) async throws {
        try await messenger.outbox.sendTyping(in: chatID, isTyping: isTyping)
    }

    /// Sends an app-defined live event to the chat (Spark's `chatEventSend`): `tag` names it (1 to
    /// 64 bytes) and `data` (at most 8 KB, JSON for example) carries it. The members' devices that
    /// are online, this user's others included, get ``MessagingEvent/chatEvent(chatID:userID:tag:data:)``;
    /// it is sealed to the chat's group like a message but never stored, and a device that reads
    /// its mailbox more than a few seconds later never gets it. The domain refuses more than 120
    /// typing notices and events a minute from one user.
    public func sendChatEvent(_ tag: String, data: String? = nil, to chatID: String) async throws {
        try await messenger.outbox.sendChatEvent(tag: tag, data: data, in: chatID)
    }

    // MARK: Search

    /// Searches this device's messages: every word of `query.text` (see ``SearchQuery`` for
    /// prefixes, phrases and scripts without spaces), narrowed by its filters, best first, a page
    /// at a time. The index behind it holds no word in the clear (`docs/SEARCH.md`).
    ///
    /// ```swift
    /// var page = try await access.search(SearchQuery("lunch tomorrow", sender: "bob"))
    /// while let next = page.next { page = try await access.search(SearchQuery("lunch tomorrow", sender: "bob", cursor: next)) }
    /// ```
    ///
    /// - Throws: ``MessagingError/Code/invalidArgument`` for a query with nothing to look for, a
    ///   text over ``SearchQuery/longestText`` characters, a prefix shorter than three letters,
    ///   or a cursor of another query.
    public func search(_ query: SearchQuery) async throws -> SearchPage { try await messenger.search.search(query) }

    /// The messages of `messageID`'s chat around it, oldest first: up to `limit`, about half of
    /// them after it (to open a chat at a search result).
    public func messages(around messageID: String, limit: Int = 50) async throws -> [ChatMessage] {
        try await messenger.search.messages(around: messageID, limit: limit)
    }

    /// Rebuilds the search index from the stored messages (after damage; an upgrade that changes
    /// the index rebuilds it by itself at start), telling `progress` how many of how many are
    /// done after each batch. Search goes on meanwhile, finding what is indexed so far.
    public func rebuildSearchIndex(progress: @escaping @Sendable (_ done: Int, _ total: Int) -> Void = { _, _ in }) async throws {
        try await messenger.search.rebuild(progress: progress)
    }

    /// Reads the mailbox now instead of at the next poll, then does what follows a read: sends
    /// delivery receipts, brings every chat's group up to date and resends what is left sending.
    public func refresh() async throws { try await messenger.refresh() }

    // MARK: This user's devices

    /// The user's devices, each with its approval as this device sees it: a device awaiting
    /// approval (`EndpointApproval.awaitingApproval(code:)`) joins no chat and gets no history.
    public func devices() async throws -> [EndpointInfo] { try await messenger.identities.devices() }

    /// The code this device and the user's device `endpointID` both show when one approves the
    /// other: a new device shows it beside each device it can be approved on.
    public func approvalCode(with endpointID: String) async throws -> String {
        try await messenger.identities.approvalCode(with: endpointID)
    }

    /// Approves the user's device `endpointID` once this screen and the device's show the same
    /// `code` (`EndpointApproval.awaitingApproval(code:)`, or the code in
    /// ``MessagingEvent/deviceAwaitingApproval(endpointID:code:)``). The approval is signed by
    /// this device, so the user's other devices follow it without asking; the device is added to
    /// every chat and gets its history. Approving one's older device in turn lets this device
    /// follow the approvals that one makes. A code that does not match throws
    /// ``MessagingError/Code/deviceCodeMismatch`` and approves nothing.
    public func approveDevice(_ endpointID: String, code: String) async throws {
        try await messenger.approveDevice(endpointID, code: code)
    }

    // MARK: Identities

    /// A contact: how far their identity key is trusted, and the safety number to compare.
    public func contact(_ userID: String) async throws -> Contact { try await messenger.identities.contact(userID) }

    /// The safety number of the signed-in user and `userID`: the two compare it (read aloud, or
    /// side by side) to know that neither key was substituted by the domain or anyone else.
    public func safetyNumber(with userID: String) async throws -> SafetyNumber {
        try await messenger.identities.safetyNumber(with: userID)
    }

    /// Marks `userID` verified once the user compared `number` with theirs. It must be the
    /// safety number of their current key (as ``safetyNumber(with:)`` gives it), or this throws
    /// ``MessagingError/Code/safetyNumberMismatch`` and marks nothing; a changed key that is
    /// confirmed this way is trusted, and what was held for it is sent.
    public func confirmSafetyNumber(_ number: SafetyNumber, of userID: String) async throws {
        try await messenger.confirmSafetyNumber(number, of: userID)
    }

    /// Trusts the key `userID` has now, after a change (``ContactVerification/changed``) or a
    /// first contact the policy held; messages held for it are sealed and sent. The contact is
    /// ``ContactVerification/unverified`` until a safety number is confirmed.
    public func acceptIdentityChange(of userID: String) async throws { try await messenger.acceptIdentity(of: userID) }

    /// Checks the domain's transparency log now, as the device does every hour: this user's own
    /// identity (owner monitoring: a version none of the user's devices published raises the
    /// alarm) and every contact's (a key the log no longer proves, or a newer one, marks the
    /// contact changed). Returns the alarm, if one is raised.
    @discardableResult
    public func checkTransparency() async throws -> String? { try await messenger.identities.monitorTransparency() }

    /// The alarm the monitoring of this user's own identity raised (nil: none): the log holds an
    /// identity for this user that none of their devices published, or its proof failed. It
    /// clears when a later check finds the log right.
    public func transparencyAlarm() async throws -> String? { try await messenger.identities.transparencyAlarm() }

    /// Whether contacts met for the first time are trusted at once (the default) or held until
    /// accepted; kept in this endpoint's store.
    public func identityTrustPolicy() async throws -> IdentityTrustPolicy { try await messenger.identities.identityTrustPolicy() }

    /// Sets the first-contact policy for contacts met from now on.
    public func setIdentityTrustPolicy(_ policy: IdentityTrustPolicy) async throws {
        try await messenger.identities.setIdentityTrustPolicy(policy)
    }
}
