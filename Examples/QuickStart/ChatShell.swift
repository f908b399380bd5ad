import Foundation
import SparkDomain
import SparkObservable
import SparkSDK

/// The chat shell: commands on standard input, messages printed live as they arrive.
final class ChatShell: @unchecked Sendable {
    // @unchecked Sendable: `printed`, `seen`, `following`, `subscriptions`, `pending` and `announced` are only
    // touched under `lock`; the rest is immutable or used from the shell's loop.
    private let console: Console
    private let controller: BBMAuthController
    private let lock = NSLock()
    /// The latest state printed for each of this user's messages: each state prints once.
    private var printed: [String: MessageState] = [:]
    /// Every message id met in a chat's flow (incoming ones are announced when first met).
    private var seen: Set<String> = []
    private var following: Set<String> = []
    private var subscriptions: [FlowSubscription] = []
    /// Messages `send` left sending (the domain did not answer): their `sent` step prints later.
    private var pending: Set<String> = []
    private var current: String?
    /// The devices already announced as awaiting approval.
    private var announced: Set<String> = []
    /// What was last shown of each message's reactions and recall, to announce changes.
    private var shownExtras: [String: (reactions: [Reaction], recalled: Bool)] = [:]

    init(console: Console, controller: BBMAuthController) {
        self.console = console
        self.controller = controller
    }

    static let help = """
        commands:
          chats                       list your chats
          open N                      make chat N (from `chats`) the current chat and show it
          start USER [USER…] [: SUBJECT]
                                      start a chat (one user: one-to-one; several: a group)
          send TEXT                   send to the current chat
          send-file PATH [: CAPTION]  send a file to the current chat (encrypted on this device), with progress
          save N PATH                 save the file of message #N of the current chat at PATH, with progress
          react N EMOJI               react to message #N of the current chat (`unreact N EMOJI` removes it)
          recall N                    delete your message #N for everyone
          typing                      tell the current chat you are typing (others' typing shows by itself)
          timer SECONDS               make new messages of the current chat disappear after SECONDS (0: off)
          messages                    show the current chat's messages with their states
          search WORDS [in N] [from USER]
                                      find messages (`lunch*` a prefix, "a phrase"), in chat N, from USER
          read                        mark the current chat read
          invite USER…                invite users to the current chat (admins)
          leave                       leave the current chat
          rename SUBJECT              rename the current chat
          verify USER                 show your safety number with USER and whether it is verified
          verify USER NUMBER          mark USER verified: NUMBER is the safety number they read to you
          accept USER                 trust USER's changed identity key (messages held for it go out)
          keys                        check the domain's key-transparency log now: your key and your contacts'
                                      (done every hour; an alarm means someone logged a key as yours)
          block USER                  drop everything USER sends, on all your devices (`unblock USER` undoes it)
          blocked                     the users you blocked
          status                      your status (a timeout shows the time left) and infractions
          watch                       follow a timeout's countdown until it ends
          dismiss                     dismiss your oldest infraction
          endpoints                   list your devices, and which of them are approved
          approve N                   approve your device N (from `endpoints`) once both screens show its code
          remove N                    remove device N (from `endpoints`)
          passcode                    change your passcode
          signout                     sign out and quit
          quit                        quit (you stay signed in on this device)
        """

    func run() async throws {
        let service = controller.service
        let access = try await service.messaging()
        let users = UserProvider(service: service)
        users.startUpdating(every: .seconds(2))
        defer { users.stopUpdating() }
        // Each step of this user's messages, once: sent (when not printed by `send`), delivered,
        // read, or not sent with the reason.
        let steps = access.messageEvents
        let stepPrinter = Task { [weak self] in
            for await event in steps { self?.print(event, access: access) }
        }
        // On the way out the printer is cancelled only if the shell failed; a normal end stops
        // the service first (which ends the stream) and lets the printer finish what arrived.
        var finishedCleanly = false
        defer { if !finishedCleanly { stepPrinter.cancel() } }
        // A new device of this user: shown with its code, for `approve N`.
        let events = access.events
        let eventPrinter = Task { [weak self] in
            for await event in events {
                switch event {
                case .deviceAwaitingApproval(let endpointID, let code): self?.announceDevice(endpointID, code: code)
                case .typing(let chatID, let userID, let isTyping): self?.announceTyping(chatID, userID, isTyping, access: access)
                case .chatEvent(let chatID, let userID, let tag, let data):
                    self?.announceInChat(chatID, "\(userID) sent the event \(tag)\(data.map { " \($0)" } ?? "")", access: access)
                case .transparencyFailure(let userID, let reason):
                    self?.console.say("⚠ the domain's key log does not prove \(userID)'s key (\(reason)): nothing goes to it")
                case .transparencyAlarm(let reason):
                    self?.console.say("⚠ ALARM: \(reason)")
                default: continue
                }
            }
        }
        defer { eventPrinter.cancel() }
        // Catch up with what arrived while this device was off, and show what is unread, before
        // following the chats live (which then announces only what comes later).
        // A domain busy for a moment (another process of this machine writing the embedded
        // file) is tried again, so what arrived is still announced as such.
        for attempt in 0..<5 {
            do {
                try await access.refresh()
                break
            } catch {
                try? await Task.sleep(for: .milliseconds(100 << attempt))
            }
        }
        try await announceUnread(access)
        try await announceApproval(access)
        let chatsSubscription = access.chats.subscribe { [weak self] chats in self?.follow(chats, access: access) }
        defer { chatsSubscription.cancel() }
        console.say("You are \(access.currentUser). Type `help` for commands.")
        try await commands(access: access, users: users)
        await service.stop()
        await stepPrinter.value
        finishedCleanly = true
    }

    /// A device's approval, in words.
    static func describe(_ approval: EndpointApproval) -> String {
        switch approval {
        case .thisDevice: "this device"
        case .approved: "approved"
        case .awaitingApproval(let code): "awaiting approval, code \(code)"
        case .unverified: "not set up"
        case .unknown: "unknown"
        }
    }

    /// Tells of a new device of this user awaiting approval (once).
    private func announceDevice(_ endpointID: String, code: String) {
        guard lock.withLock({ announced.insert(endpointID).inserted }) else { return }
        Task { [controller, console] in
            let endpoints = (try? await controller.service.endpoints()) ?? []
            let index = endpoints.firstIndex { $0.endpointID == endpointID }
            let name = index.map { endpoints[$0].description } ?? endpointID
            console.say(
                "A new device of yours awaits approval: \(name), code \(code). If you set it up and it shows the same code, "
                    + "type `approve \(index.map { String($0 + 1) } ?? "N")`; if not, `remove` it.")
        }
    }

    /// On a device no other device approved yet: the code each device it can be approved on shows.
    private func announceApproval(_ access: BBMAccess) async throws {
        let devices = try await access.devices()
        guard let me = devices.first(where: { $0.approval == .thisDevice }) else { return }
        for device in devices where device.registrationID > me.registrationID {
            if case .awaitingApproval(let code) = device.approval { announceDevice(device.endpointID, code: code) }
        }
        guard me.approvals.isEmpty else { return }
        let older = devices.filter { $0.registrationID < me.registrationID && $0.approval != .unverified }
        guard !older.isEmpty else { return }
        console.say("This device joins your chats once a device you have approves it. Approve it on one of these:")
        for device in older {
            console.say("  \(device.description): it shows the code \(try await access.approvalCode(with: device.endpointID))")
        }
    }

    /// Reads and runs commands until `quit` or the end of input.
    private func commands(access: BBMAccess, users: UserProvider) async throws {
        while true {
            guard let line = console.ask("> ") else {
                // The end of input (Ctrl-D): leave as `quit` does, signed in.
                console.say("\nGoodbye.")
                return
            }
            let words = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            guard let command = words.first else { continue }
            let rest = words.dropFirst().joined(separator: " ")
            do {
                switch command {
                case "help": console.say(Self.help)
                case "chats": listChats(access)
                case "open":
                    let chats = access.chats.value
                    guard let index = Int(rest), chats.indices.contains(index - 1) else {
                        console.say("usage: open N (see `chats`)")
                        continue
                    }
                    current = chats[index - 1].chatID
                    console.say("Now in \(title(chats[index - 1])).")
                    try await show(access)
                case "start":
                    let parts = rest.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                    let people = (parts.first ?? "").split(separator: " ").map(String.init)
                    guard !people.isEmpty else {
                        console.say("usage: start USER [USER…] [: SUBJECT]")
                        continue
                    }
                    let chat = try await access.startChat(with: people, subject: parts.count > 1 ? parts[1] : "")
                    current = chat.chatID
                    console.say("Started \(title(chat)).")
                case "send":
                    let chat = try requireChat()
                    let message = try await access.sendMessage(rest, to: chat)
                    try? await access.sendTyping(in: chat, isTyping: false)
                    switch message.state {
                    case .failed(let reason):
                        if claim(message.id, message.state) { console.say("  ✘ not sent: \(reason)") }
                    case .sending:
                        lock.withLock { _ = pending.insert(message.id) }
                        console.say("  … not sent yet: it goes out when the domain answers again")
                    case .held:
                        lock.withLock { _ = pending.insert(message.id) }
                        let people = try await access.chat(chat).unconfirmedParticipants.joined(separator: ", ")
                        console.say(
                            "  ⏸ held: the identity of \(people) changed; `verify USER` to compare, `accept USER` to trust it")
                    default:
                        if claim(message.id, message.state) {
                            console.say("  → #\(message.number.map(String.init) ?? "-") \(message.state)")
                        }
                    }
                case "send-file":
                    let parts = rest.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                    guard let path = parts.first, !path.isEmpty else {
                        console.say("usage: send-file PATH [: CAPTION]")
                        continue
                    }
                    let transfer = try access.sendFile(
                        at: path, to: try requireChat(), caption: parts.count > 1 ? parts[1] : "")
                    await showProgress(transfer.progress, "↑")
                    let message = try await transfer.value
                    if claim(message.id, message.state) {
                        console.say("  → #\(message.number.map(String.init) ?? "-") \(message.state)")
                    }
                case "save":
                    let parts = rest.split(separator: " ", maxSplits: 1).map(String.init)
                    guard parts.count == 2, let number = Int64(parts[0]) else {
                        console.say("usage: save N PATH")
                        continue
                    }
                    let message = try await numbered(number, access: access)
                    guard let attachment = message.attachment else {
                        console.say("#\(number) has no file.")
                        continue
                    }
                    let transfer = try access.saveAttachment(of: message.id, to: parts[1])
                    await showProgress(transfer.progress, "↓")
                    try await transfer.value
                    console.say("Saved \(attachment.fileName) (\(attachment.size) bytes) at \(parts[1]).")
                case "react", "unreact":
                    let parts = rest.split(separator: " ", maxSplits: 1).map(String.init)
                    guard parts.count == 2, let number = Int64(parts[0]) else {
                        console.say("usage: \(command) N EMOJI")
                        continue
                    }
                    let message = try await numbered(number, access: access)
                    if command == "react" {
                        try await access.react(to: message.id, emoji: parts[1])
                    } else {
                        try await access.removeReaction(from: message.id, emoji: parts[1])
                    }
                    console.say(
                        command == "react" ? "Reacted \(parts[1]) to #\(number)." : "Removed \(parts[1]) from #\(number).")
                case "timer":
                    guard let seconds = Int(rest), seconds >= 0 else {
                        console.say("usage: timer SECONDS (0 turns it off)")
                        continue
                    }
                    try await access.setDisappearingTimer(seconds == 0 ? nil : .seconds(seconds), in: try requireChat())
                    console.say(seconds == 0 ? "Messages no longer disappear." : "New messages disappear after \(seconds) s.")
                case "typing":
                    try await access.sendTyping(in: try requireChat())
                    console.say("They see you typing.")
                case "search":
                    try await search(rest, access: access)
                case "recall":
                    guard let number = Int64(rest) else {
                        console.say("usage: recall N")
                        continue
                    }
                    try await access.recallMessage(try await numbered(number, access: access).id)
                    console.say("Recalled #\(number).")
                case "block", "unblock":
                    guard !rest.isEmpty, !rest.contains(" ") else {
                        console.say("usage: \(command) USER")
                        continue
                    }
                    if command == "block" {
                        try await access.block(rest)
                        console.say("Blocked \(rest): nothing of theirs reaches your devices.")
                    } else {
                        try await access.unblock(rest)
                        console.say("Unblocked \(rest).")
                    }
                case "blocked":
                    let users = await access.blockedUsers()
                    console.say(users.isEmpty ? "You blocked no one." : "Blocked: \(users.joined(separator: ", "))")
                case "messages": try await show(access)
                case "read":
                    try await access.markMessagesRead(in: try requireChat())
                    console.say("Marked read.")
                case "invite":
                    try await access.invite(rest.split(separator: " ").map(String.init), to: try requireChat())
                    console.say("Invited.")
                case "leave":
                    try await access.leaveChat(try requireChat())
                    console.say("You left the chat.")
                    current = nil
                case "rename":
                    try await access.updateChatSubject(try requireChat(), subject: rest)
                    console.say("Renamed to \(rest).")
                case "verify":
                    let parts = rest.split(separator: " ", maxSplits: 1).map(String.init)
                    guard let user = parts.first else {
                        console.say("usage: verify USER [NUMBER]")
                        continue
                    }
                    if parts.count > 1 {
                        guard let number = SafetyNumber(digits: parts[1]) else {
                            console.say("✘ a safety number is 60 digits (spaces are fine)")
                            continue
                        }
                        try await access.confirmSafetyNumber(number, of: user)
                        console.say("✔ \(user) is verified.")
                    } else {
                        let contact = try await access.contact(user)
                        console.say("safety number with \(user) (\(contact.verification)):")
                        if let failure = contact.transparencyFailure {
                            console.say("⚠ the domain's key log does not prove this key: \(failure)")
                        }
                        let groups = contact.safetyNumber.groups
                        console.say("  " + groups[0..<6].joined(separator: " ") + "\n  " + groups[6...].joined(separator: " "))
                        console.say("Compare it with \(user)'s (in person or on a call); if it matches: verify \(user) NUMBER")
                    }
                case "keys":
                    // An alarm this check raises is told once, by its event; one already standing
                    // is told here.
                    let standing = try await access.transparencyAlarm()
                    if let alarm = try await access.checkTransparency() {
                        if alarm == standing { console.say("⚠ ALARM: \(alarm)") }
                    } else {
                        console.say("✔ the key log holds your key as your devices published it; your contacts' keys are checked")
                    }
                case "accept":
                    guard !rest.isEmpty else {
                        console.say("usage: accept USER")
                        continue
                    }
                    try await access.acceptIdentityChange(of: rest)
                    let verification = try await access.contact(rest).verification
                    console.say(
                        "Trusting \(rest)'s current key (\(verification)"
                            + (verification == .verified ? ")." : " until you compare safety numbers: `verify \(rest)`)."))
                case "status":
                    await users.refresh()
                    console.say("status: \(describe(users.userState.value))")
                    switch users.restriction.value {
                    case .timeout(let until, let reason)?:
                        console.say(
                            "timeout: your messages are refused until \(until.formatted(date: .omitted, time: .standard)): \(reason)"
                        )
                    case .banned(let reason)?:
                        console.say("ban: your messages are refused: \(reason)")
                    case .valid?, nil:
                        break
                    }
                    let infractions = users.infractions.value
                    console.say(
                        infractions.isEmpty
                            ? "no infractions" : infractions.map { "infraction: \($0.reason)" }.joined(separator: "\n"))
                case "watch":
                    await users.refresh()
                    var last = ""
                    for await state in users.userState.values {
                        let text = describe(state)
                        if text != last { console.say("status: \(text)") }
                        last = text
                        if case .timeout = state { continue }
                        break
                    }
                case "dismiss":
                    await users.refresh()
                    guard users.getNextInfraction() != nil else {
                        console.say("no infractions")
                        continue
                    }
                    await users.removeFirstInfraction()
                    console.say("Dismissed.")
                case "endpoints":
                    let endpoints = try await controller.service.endpoints()
                    for (index, endpoint) in endpoints.enumerated() {
                        console.say("\(index + 1). \(Setup.describe(endpoint)) · \(Self.describe(endpoint.approval))")
                    }
                case "approve":
                    let endpoints = try await controller.service.endpoints()
                    guard let index = Int(rest), endpoints.indices.contains(index - 1) else {
                        console.say("usage: approve N (see `endpoints`)")
                        continue
                    }
                    let device = endpoints[index - 1]
                    guard case .awaitingApproval(let code) = device.approval else {
                        console.say("\(device.description) is \(Self.describe(device.approval)): nothing to approve.")
                        continue
                    }
                    let answer = console.ask("Does \(device.description) show the code \(code)? (yes/no) ")
                    guard answer?.lowercased().hasPrefix("y") == true else {
                        console.say("Not approved. If you did not set that device up, `remove \(index)` it.")
                        continue
                    }
                    try await access.approveDevice(device.endpointID, code: code)
                    console.say("Approved \(device.description): it joins your chats and gets their history.")
                case "remove":
                    let endpoints = try await controller.service.endpoints()
                    guard let index = Int(rest), endpoints.indices.contains(index - 1) else {
                        console.say("usage: remove N (see `endpoints`)")
                        continue
                    }
                    try await controller.service.deregisterEndpoint(endpoints[index - 1].endpointID)
                    console.say("Removed \(endpoints[index - 1].description).")
                case "passcode":
                    guard let old = console.askSecret("current passcode: "), let new = console.askSecret("new passcode: "),
                        let again = console.askSecret("again: ")
                    else { continue }
                    guard new == again else {
                        console.say("The two passcodes differ.")
                        continue
                    }
                    try await controller.service.changePasscode(from: old, to: new)
                    console.say("Passcode changed.")
                case "signout":
                    await controller.signOut()
                    console.say("Signed out.")
                    return
                case "quit", "exit":
                    return
                default:
                    console.say("unknown command \(command); type `help`")
                }
            } catch let error as MessagingError {
                console.say("✘ \(error.reason)")
            } catch let error as KeyManagementError {
                console.say("✘ \(error.reason)")
            } catch let error as SetupError {
                console.say("✘ \(error.reason)")
            }
        }
    }

    private func requireChat() throws -> String {
        guard let current else { throw MessagingError(.unknownChat, "open or start a chat first (see `chats`)") }
        return current
    }

    private func title(_ chat: Chat) -> String {
        let people = chat.participants.map(\.userID).joined(separator: ", ")
        return (chat.subject.isEmpty ? "chat" : "“\(chat.subject)”") + " with \(people)"
            + (chat.keyChanged ? " ⚠ a key changed" : "")
            + (chat.disappearingTimer.map { " ⏱ messages disappear after \($0.components.seconds) s" } ?? "")
    }

    private func listChats(_ access: BBMAccess) {
        let chats = access.chats.value
        if chats.isEmpty { console.say("no chats yet; `start USER` starts one") }
        for (index, chat) in chats.enumerated() {
            console.say(
                "\(index + 1). \(title(chat))\(chat.unreadCount > 0 ? " · \(chat.unreadCount) unread" : "")\(chat.isActive ? "" : " · left")"
            )
        }
    }

    /// A transfer's progress, a line at each quarter.
    private func showProgress(_ steps: AsyncStream<TransferProgress>, _ arrow: String) async {
        var shown = -1
        for await step in steps {
            let quarter = Int(step.fraction * 4)
            guard quarter > shown else { continue }
            shown = quarter
            console.say("  \(arrow) \(quarter * 25) % (\(step.completed) of \(step.total) bytes)")
        }
    }

    /// A message as the shell prints it: its text, and its file.
    private func text(_ message: ChatMessage) -> String {
        guard !message.isRecalled else { return "(recalled)" }
        guard let file = message.attachment else { return message.content }
        let thumbnail = file.thumbnailMediaType.map { ", thumbnail \($0)" } ?? ""
        let caption = message.content.isEmpty ? "" : "\(message.content) "
        return "\(caption)📎 \(file.fileName) (\(file.size) bytes, \(file.mediaType)\(thumbnail)); `save N PATH` saves it"
    }

    private func show(_ access: BBMAccess) async throws {
        for message in try await access.messages(in: try requireChat(), before: nil, limit: 20) {
            let text = text(message)
            let reactions = message.reactions.map { " \($0.emoji)\($0.count)" }.joined()
            console.say("  #\(message.number.map(String.init) ?? "-") \(message.sender): \(text)  [\(message.state)]\(reactions)")
        }
    }

    /// The current chat's message numbered `number`.
    /// `search WORDS [in N] [from USER]`: the words, then the chat (by its number in `chats`)
    /// and the sender, if given; each result with its chat, number and snippet.
    private func search(_ line: String, access: BBMAccess) async throws {
        var words: [String] = []
        var chatID: String?
        var sender: String?
        var parts = line.split(separator: " ").map(String.init)[...]
        while let part = parts.popFirst() {
            if part == "in", let value = parts.first, let index = Int(value) {
                let chats = access.chats.value
                guard chats.indices.contains(index - 1) else {
                    console.say("no chat \(index) (see `chats`)")
                    return
                }
                chatID = chats[index - 1].chatID
                parts.removeFirst()
            } else if part == "from", let value = parts.first {
                sender = value
                parts.removeFirst()
            } else {
                words.append(part)
            }
        }
        guard !words.isEmpty else {
            console.say("usage: search WORDS [in N] [from USER]")
            return
        }
        let page = try await access.search(SearchQuery(words.joined(separator: " "), chatID: chatID, sender: sender))
        let chats = access.chats.value
        for chat in page.chats { console.say("chat: \(title(chat))") }
        for result in page.results {
            let chat = chats.first { $0.chatID == result.chatID }.map(title) ?? result.chatID
            let number = result.number.map { "#\($0)" } ?? "(sending)"
            console.say("[\(chat)] \(number) \(result.sender): \(result.snippet)")
        }
        if page.results.isEmpty && page.chats.isEmpty { console.say("Nothing found.") }
    }

    private func numbered(_ number: Int64, access: BBMAccess) async throws -> ChatMessage {
        let chat = try requireChat()
        guard let message = try await access.messages(in: chat, before: number + 1, limit: 1).first, message.number == number
        else { throw MessagingError(.unknownChat, "no message #\(number) in this chat") }
        return message
    }

    private func describe(_ state: UserState) -> String {
        switch state {
        case .initial: "unknown"
        case .valid: "valid"
        case .timeout(let remaining): "timed out, \(remaining) s left"
        case .banned: "banned"
        }
    }

    /// Whether `state` is news for message `id` (later than what was printed), marking it
    /// printed: `send` and the step stream both ask, so each state prints once.
    private func claim(_ id: String, _ state: MessageState) -> Bool {
        lock.withLock {
            if let previous = printed[id], previous.rank >= state.rank { return false }
            printed[id] = state
            return true
        }
    }

    private func label(_ chat: Chat) -> String {
        chat.subject.isEmpty ? chat.participants.map(\.userID).joined(separator: ", ") : chat.subject
    }

    /// Subscribes to each chat's messages once, printing arrivals live.
    private func follow(_ chats: [Chat], access: BBMAccess) {
        for chat in chats {
            let isNew = lock.withLock { following.insert(chat.chatID).inserted }
            guard isNew else { continue }
            Task {
                guard let flow = try? await access.messages(in: chat.chatID) else { return }
                let subscription = flow.subscribe { [weak self] messages in self?.print(messages, in: chat) }
                self.lock.withLock { self.subscriptions.append(subscription) }
            }
        }
    }

    /// At the start: the unread messages (they arrived while the shell was off), under one
    /// header; the read ones were seen on an earlier run and stay quiet.
    private func announceUnread(_ access: BBMAccess) async throws {
        var header = false
        for chat in access.chats.value.reversed() {
            for message in try await access.messages(in: chat.chatID, before: nil, limit: 200)
            where message.isIncoming && !message.isRecalled {
                lock.withLock { _ = seen.insert(message.id) }
                guard message.state != .read else { continue }
                if !header { console.say("While you were away:") }
                header = true
                console.say("[\(label(chat))] \(message.sender): \(text(message))")
            }
        }
    }

    /// Tells that someone is typing in a chat, or stopped.
    private func announceTyping(_ chatID: String, _ userID: String, _ isTyping: Bool, access: BBMAccess) {
        announceInChat(chatID, isTyping ? "\(userID) is typing…" : "\(userID) stopped typing", access: access)
    }

    private func announceInChat(_ chatID: String, _ text: String, access: BBMAccess) {
        let chat = access.chats.value.first { $0.chatID == chatID }
        console.say("\(chat.map { "[\(label($0))] " } ?? "")\(text)")
    }

    /// Announces incoming messages not met before, and reactions and recalls as they change.
    private func print(_ messages: [ChatMessage], in chat: Chat) {
        for message in messages {
            let number = "#\(message.number.map(String.init) ?? "-")"
            let before = lock.withLock { shownExtras.updateValue((message.reactions, message.isRecalled), forKey: message.id) }
            if let before {
                if message.isRecalled, !before.recalled { console.say("[\(label(chat))] \(number) was recalled") }
                if message.reactions != before.reactions, !message.isRecalled {
                    let list = message.reactions.map { "\($0.emoji) \($0.userIDs.joined(separator: ", "))" }
                    console.say(
                        "[\(label(chat))] reactions to \(number): \(list.isEmpty ? "none" : list.joined(separator: "; "))")
                }
            }
            guard message.isIncoming, lock.withLock({ seen.insert(message.id).inserted }) else { continue }
            console.say("[\(label(chat))] \(message.sender): \(text(message))")
        }
    }

    /// Prints a step of one of this user's messages unless it was printed already. `sent` is
    /// what `send` prints itself, so here it prints only for a message `send` left sending.
    private func print(_ event: MessageEvent, access: BBMAccess) {
        if event.state == .sent, lock.withLock({ pending.remove(event.messageID) }) == nil { return }
        guard claim(event.messageID, event.state) else { return }
        let chat = access.chats.value.first { $0.chatID == event.chatID }
        let prefix = chat.map { "[\(label($0))] " } ?? ""
        if case .failed(let reason) = event.state {
            console.say("\(prefix)your message was not sent: \(reason)")
        } else {
            console.say("\(prefix)your message #\(event.number.map(String.init) ?? "-") is \(event.state)")
        }
    }
}
