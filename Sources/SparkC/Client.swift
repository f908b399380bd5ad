import CSparkAPI
import Foundation
import SparkDomain
import SparkLock
import SparkObservable
import SparkSDK

/// One `spark_client`: the app's controller, the thread its callbacks run on, and its events.
///
/// C callers block in every call (`wait`); the work runs as a task, never on the caller's
/// thread. Callbacks into C run on `callbacks`, a thread of the client's own, so that a callback
/// that blocks (a passcode asked at a terminal) or calls back into the library (an echo bot's
/// reply) holds no thread of Swift's cooperative pool.
final class Client: Sendable {
    let controller: BBMAuthController
    let callbacks: DispatchQueue
    let events: EventQueue
    private let watching = Locked<[Task<Void, Never>]>([])
    private let started = Locked(false)
    /// Messaging, once asked for (see `access(_:)`).
    let access = Locked<BBMAccess?>(nil)
    let cachedAccess = Locked<BBMAccess?>(nil)

    /// The app's token refresh, for `authProvider` custom.
    let refresh: TokenRefresh
    /// The app's OpenID prompt (authProvider oidc), set by spark_sign_in_oidc.
    let openIDPrompt = OpenIDPrompt()

    init(controller: BBMAuthController, refresh: TokenRefresh) {
        self.controller = controller
        self.refresh = refresh
        callbacks = DispatchQueue(label: "spark.callbacks")
        events = EventQueue(callbacks: callbacks)
    }

    /// Runs `body` as a task and blocks the calling (C) thread until it ends.
    static func wait<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        let result = Locked<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            let outcome: Result<T, any Error>
            do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
            result.withLock { $0 = outcome }
            done.signal()
        }
        done.wait()
        return try result.withLock { $0 }!.get()
    }

    /// Runs a file transfer as a task and blocks the calling (C) thread until it ends, calling
    /// `report` on this thread, during the call, with each step of its progress: a progress
    /// callback that ran on the callback thread would wait forever behind an app that sent the
    /// file from an event callback.
    static func transfer<T: Sendable>(
        _ start: @escaping @Sendable () async throws -> AttachmentTransfer<T>, report: (TransferProgress) -> Void
    ) throws -> T {
        let shared = Locked(TransferState<T>())
        let wake = DispatchSemaphore(value: 0)
        Task.detached {
            let outcome: Result<T, any Error>
            do {
                let transfer = try await start()
                let watcher = Task {
                    for await step in transfer.progress {
                        shared.withLock { $0.steps.append(step) }
                        wake.signal()
                    }
                }
                defer { watcher.cancel() }
                outcome = .success(try await transfer.value)
            } catch {
                outcome = .failure(error)
            }
            shared.withLock { $0.result = outcome }
            wake.signal()
        }
        while true {
            wake.wait()
            let (steps, result) = shared.withLock { state in
                defer { state.steps = [] }
                return (state.steps, state.result)
            }
            // Once the transfer ended only its end is reported: a step the watcher saw late
            // would move the progress backwards.
            if let result {
                if case .success = result, let last = steps.last { report(last) }
                return try result.get()
            }
            for step in steps { report(step) }
        }
    }

    /// Runs `body` on the callback thread and waits for it without holding a thread.
    func onCallbackThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in callbacks.async { continuation.resume(returning: body()) } }
    }

    /// Starts delivering events once messaging works (after setup; again is nothing).
    func startEvents() async throws {
        guard
            started.withLock({ state in
                defer { state = true }
                return !state
            })
        else { return }
        let access = try await controller.service.messaging()
        let steps = access.messageEvents
        let notices = access.events
        let arrivals = access.incomingMessages
        let changes = access.messageChanges
        let tasks = [
            Task { [events] in
                for await message in arrivals {
                    var event = CEvent(kind: SPARK_EVENT_MESSAGE)
                    event.chatID = message.chatID
                    event.messageID = message.id
                    event.userID = message.sender
                    event.message = message
                    events.push(event)
                }
            },
            Task { [events] in
                for await step in steps {
                    var event = CEvent(kind: SPARK_EVENT_MESSAGE_STATE)
                    event.chatID = step.chatID
                    event.messageID = step.messageID
                    event.state = Int32(Self.state(step.state).rawValue)
                    if case .failed(let reason) = step.state { event.text = reason }
                    events.push(event)
                }
            },
            Task { [events] in
                for await notice in notices {
                    var event: CEvent
                    switch notice {
                    case .typing(let chatID, let userID, let isTyping):
                        event = CEvent(kind: SPARK_EVENT_TYPING)
                        event.chatID = chatID
                        event.userID = userID
                        event.state = isTyping ? 1 : 0
                    case .chatEvent(let chatID, let userID, let tag, let data):
                        event = CEvent(kind: SPARK_EVENT_CHAT_EVENT)
                        event.chatID = chatID
                        event.userID = userID
                        event.text = tag
                        event.data = data
                    case .transparencyFailure(let userID, let reason):
                        event = CEvent(kind: SPARK_EVENT_TRANSPARENCY)
                        event.userID = userID
                        event.text = reason
                    case .transparencyAlarm(let reason):
                        event = CEvent(kind: SPARK_EVENT_TRANSPARENCY)
                        event.text = reason
                    default:
                        event = CEvent(kind: SPARK_EVENT_NOTICE)
                        event.text = "\(notice)"
                    }
                    events.push(event)
                }
            },
            Task { [events] in
                for await change in changes {
                    // One event per message named; one without a message when any may have.
                    for id in change.messageIDs.map({ Array($0).sorted() }) ?? [nil] as [String?] {
                        var event = CEvent(kind: SPARK_EVENT_MESSAGES_CHANGED)
                        event.chatID = change.chatID
                        event.messageID = id
                        events.push(event)
                    }
                }
            },
        ]
        watching.withLock { $0 += tasks }
    }

    /// Stops the events and the service.
    func close() async {
        for task in watching.withLock({ $0 }) { task.cancel() }
        await controller.service.stop()
        events.close()
    }

    static func state(_ state: MessageState) -> spark_message_state {
        switch state {
        case .sending: SPARK_MESSAGE_SENDING
        case .sent: SPARK_MESSAGE_SENT
        case .delivered: SPARK_MESSAGE_DELIVERED
        case .read: SPARK_MESSAGE_READ
        case .failed: SPARK_MESSAGE_FAILED
        case .held: SPARK_MESSAGE_HELD
        }
    }
}

/// A transfer's steps not yet reported, and its end.
struct TransferState<T: Sendable>: Sendable {
    var steps: [TransferProgress] = []
    var result: Result<T, any Error>?
}

/// The app's C function that fetches a fresh JWT (authProvider custom), called on the client's
/// callback thread.
final class TokenRefresh: Sendable {
    private let function = Locked<(UncheckedBox<(spark_token_refresh, UnsafeMutableRawPointer?)>, Client)?>(nil)

    func set(_ refresh: UncheckedBox<(spark_token_refresh, UnsafeMutableRawPointer?)>?, on client: Client) {
        function.withLock { $0 = refresh.map { ($0, client) } }
    }

    /// A fresh token from the app.
    func fetch() async throws -> String {
        guard let (refresh, client) = function.withLock({ $0 }) else {
            throw AuthError(.refreshFailed, "the app gave no token refresh function (spark_sign_in_token)")
        }
        let token = await client.onCallbackThread { () -> String? in
            guard let pointer = refresh.value.0(refresh.value.1) else { return nil }
            defer { free(pointer) }
            return String(validatingCString: pointer)
        }
        guard let token else { throw AuthError(.refreshFailed, "the app's token refresh returned no token") }
        return token
    }
}

/// The app's `spark_oidc_prompt`, called on the callback thread with what the user must see.
final class OpenIDPrompt: Sendable {
    private let function = Locked<(UncheckedBox<(spark_oidc_prompt, UnsafeMutableRawPointer?)>, Client)?>(nil)

    func set(_ prompt: UncheckedBox<(spark_oidc_prompt, UnsafeMutableRawPointer?)>?, on client: Client) {
        function.withLock { $0 = prompt.map { ($0, client) } }
    }

    /// Shows `prompt` through the app's function, or as the SDK does by default without one.
    func show(_ prompt: BBMOIDCTokenManager.Prompt) async {
        guard let (function, client) = function.withLock({ $0 }) else {
            await BBMOIDCTokenManager.defaultPresenter(prompt)
            return
        }
        let (url, code): (String, String?) =
            switch prompt {
            case .openBrowser(let url): (url.absoluteString, nil)
            case .enterCode(let code, let uri, let complete): ((complete ?? uri).absoluteString, code)
            }
        await client.onCallbackThread {
            url.withCString { url in
                if let code {
                    code.withCString { function.value.0(function.value.1, url, $0) }
                } else {
                    function.value.0(function.value.1, url, nil)
                }
            }
        }
    }
}

/// An event on its way to C: Swift values until it is handed over.
struct CEvent: Sendable {
    var kind: spark_event_kind
    var chatID: String?
    var messageID: String?
    var userID: String?
    var state: Int32 = 0
    var text: String?
    var message: ChatMessage?
    var data: String?
}

/// The client's events: queued, with an eventfd that counts them (readable while any waits), or
/// handed to the app's callback on the callback thread.
final class EventQueue: Sendable {
    private struct State {
        var queued: [CEvent] = []
        var callback: (spark_event_callback, UnsafeMutableRawPointer?)?
        var closed = false
    }

    private let state = Locked(State())
    /// A semaphore-mode eventfd: its count is the number of events queued.
    let descriptor: Int32 = spark_internal_eventfd()
    let callbacks: DispatchQueue

    init(callbacks: DispatchQueue) { self.callbacks = callbacks }

    deinit { if descriptor >= 0 { Glibc.close(descriptor) } }

    func push(_ event: CEvent) {
        let callback = state.withLock { state -> (spark_event_callback, UnsafeMutableRawPointer?)? in
            guard !state.closed else { return nil }
            if state.callback == nil {
                state.queued.append(event)
                var one: UInt64 = 1
                _ = write(descriptor, &one, 8)
            }
            return state.callback
        }
        guard let (function, context) = callback else { return }
        let box = UncheckedBox((function, context))
        callbacks.async {
            let pointer = Self.make(event)
            box.value.0(box.value.1, pointer)
            Self.free(pointer)
        }
    }

    /// The next queued event, or nil.
    func pop() -> CEvent? {
        state.withLock { state in
            guard !state.queued.isEmpty else { return nil }
            var count: UInt64 = 0
            _ = read(descriptor, &count, 8)
            return state.queued.removeFirst()
        }
    }

    func setCallback(_ callback: spark_event_callback?, _ context: UnsafeMutableRawPointer?) {
        let pending = state.withLock { state -> [CEvent] in
            state.callback = callback.map { ($0, context) }
            guard callback != nil else { return [] }
            defer { state.queued.removeAll() }
            for _ in state.queued {
                var count: UInt64 = 0
                _ = read(descriptor, &count, 8)
            }
            return state.queued
        }
        for event in pending { push(event) }
    }

    /// Delivers nothing more; waits for a callback that is running.
    func close() {
        state.withLock { $0.closed = true }
        callbacks.sync {}
    }

    /// A C event (and what it points to) from a Swift one; free with `free`.
    static func make(_ event: CEvent) -> UnsafeMutablePointer<spark_event> {
        let pointer = UnsafeMutablePointer<spark_event>.allocate(capacity: 1)
        pointer.initialize(
            to: spark_event(
                kind: event.kind, chat_id: CString.copy(event.chatID), message_id: CString.copy(event.messageID),
                user_id: CString.copy(event.userID), state: event.state, text: CString.copy(event.text),
                message: event.message.map { CMessages.make([$0]) }, data: CString.copy(event.data)))
        return pointer
    }

    static func free(_ pointer: UnsafeMutablePointer<spark_event>?) {
        guard let pointer else { return }
        let event = pointer.pointee
        for text in [event.chat_id, event.message_id, event.user_id, event.text, event.data] { Foundation.free(text) }
        if let message = event.message { CMessages.free(message, count: 1) }
        pointer.deinitialize(count: 1)
        pointer.deallocate()
    }
}

/// A value the compiler cannot see is used safely across threads (C function pointers and
/// contexts the app handed over, used only on the callback thread).
struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// C strings the caller frees with `spark_free` (malloc'd).
enum CString {
    static func copy(_ text: String?) -> UnsafeMutablePointer<CChar>? { text.flatMap { strdup($0) } }

    /// A C argument as a Swift string; nil when NULL or not UTF-8.
    static func read(_ pointer: UnsafePointer<CChar>?) -> String? {
        guard let pointer else { return nil }
        return String(validatingCString: pointer)
    }
}

/// Arrays of `spark_message` and `spark_chat` for C.
enum CMessages {
    static func make(_ messages: [ChatMessage]) -> UnsafeMutablePointer<spark_message> {
        let pointer = UnsafeMutablePointer<spark_message>.allocate(capacity: max(1, messages.count))
        for (index, message) in messages.enumerated() {
            (pointer + index).initialize(
                to: spark_message(
                    message_id: strdup(message.id), chat_id: strdup(message.chatID), number: message.number ?? 0,
                    sender: strdup(message.sender), is_incoming: message.isIncoming ? 1 : 0, content: strdup(message.content),
                    tag: strdup(message.tag), data: CString.copy(message.data), state: Client.state(message.state),
                    timestamp_ms: Int64(message.timestamp.timeIntervalSince1970 * 1000), is_recalled: message.isRecalled ? 1 : 0,
                    reactions: reactions(message.reactions), reaction_count: message.reactions.count,
                    attachment: message.attachment.map(attachment),
                    expires_at_ms: message.expiresAt.map { Int64($0.timeIntervalSince1970 * 1000) } ?? 0))
        }
        return pointer
    }

    private static func reactions(_ reactions: [Reaction]) -> UnsafeMutablePointer<spark_reaction>? {
        guard !reactions.isEmpty else { return nil }
        let pointer = UnsafeMutablePointer<spark_reaction>.allocate(capacity: reactions.count)
        for (index, reaction) in reactions.enumerated() {
            (pointer + index).initialize(
                to: spark_reaction(
                    emoji: strdup(reaction.emoji), user_ids: strdup(reaction.userIDs.joined(separator: ",")),
                    count: reaction.count))
        }
        return pointer
    }

    private static func attachment(_ attachment: Attachment) -> UnsafeMutablePointer<spark_attachment> {
        let pointer = UnsafeMutablePointer<spark_attachment>.allocate(capacity: 1)
        pointer.initialize(
            to: spark_attachment(
                file_name: strdup(attachment.fileName), media_type: strdup(attachment.mediaType), size: attachment.size,
                has_thumbnail: attachment.thumbnailMediaType == nil ? 0 : 1))
        return pointer
    }

    static func free(_ pointer: UnsafeMutablePointer<spark_message>?, count: Int) {
        guard let pointer else { return }
        for index in 0..<count {
            let message = pointer[index]
            for text in [message.message_id, message.chat_id, message.sender, message.content, message.tag, message.data] {
                Foundation.free(text)
            }
            if let reactions = message.reactions {
                for reaction in UnsafeMutableBufferPointer(start: reactions, count: message.reaction_count) {
                    Foundation.free(reaction.emoji)
                    Foundation.free(reaction.user_ids)
                }
                reactions.deinitialize(count: message.reaction_count)
                reactions.deallocate()
            }
            if let attachment = message.attachment {
                Foundation.free(attachment.pointee.file_name)
                Foundation.free(attachment.pointee.media_type)
                attachment.deinitialize(count: 1)
                attachment.deallocate()
            }
        }
        pointer.deinitialize(count: count)
        pointer.deallocate()
    }

    static func make(_ chats: [Chat]) -> UnsafeMutablePointer<spark_chat> {
        let pointer = UnsafeMutablePointer<spark_chat>.allocate(capacity: max(1, chats.count))
        for (index, chat) in chats.enumerated() {
            (pointer + index).initialize(
                to: spark_chat(
                    chat_id: strdup(chat.chatID), subject: strdup(chat.subject),
                    participants: strdup(chat.participants.map(\.userID).joined(separator: ",")),
                    unread_count: Int64(chat.unreadCount), is_active: chat.isActive ? 1 : 0,
                    post_quantum: chat.postQuantum ? 1 : 0))
        }
        return pointer
    }

    static func free(_ pointer: UnsafeMutablePointer<spark_chat>?, count: Int) {
        guard let pointer else { return }
        for index in 0..<count {
            let chat = pointer[index]
            for text in [chat.chat_id, chat.subject, chat.participants] { Foundation.free(text) }
        }
        pointer.deinitialize(count: count)
        pointer.deallocate()
    }
}
