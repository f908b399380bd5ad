public import CSparkAPI
import Foundation
import SparkDomain
import SparkLock
import SparkSDK

// The functions of `spark/spark.h` that are Swift: each checks its arguments, runs its work as
// a task while the calling thread waits (`Client.wait`), and turns any error into a status and
// the thread's last error. The header documents each one; the conventions are at its top.
// Each is public: a release build drops a `@_cdecl` function that is not, and the library then
// exports none of the header's functions (`scripts/check-c.sh` compares `nm -D` with the header).

// MARK: Errors

/// A Swift error as a status and a message.
func status(for error: any Error) -> spark_status {
    let (status, message): (spark_status, String) =
        switch error {
        case let error as MessagingError:
            switch error.code {
            case .invalidArgument, .tooLarge: (SPARK_ERR_INVALID_ARGUMENT, error.reason)
            case .notReady: (SPARK_ERR_NOT_READY, error.reason)
            case .unknownChat, .unknownUser: (SPARK_ERR_NOT_FOUND, error.reason)
            case .storageFailure: (SPARK_ERR_STORAGE, error.reason)
            case .identityUnconfirmed: (SPARK_ERR_IDENTITY_UNCONFIRMED, error.reason)
            case .refused where error.domainCode == .unavailable: (SPARK_ERR_UNAVAILABLE, error.reason)
            default: (SPARK_ERR_REFUSED, error.reason)
            }
        case let error as AuthError: (SPARK_ERR_AUTH, error.reason)
        case let error as SetupError: (SPARK_ERR_SETUP, error.reason)
        case let error as ConfigError: (SPARK_ERR_CONFIG, error.reason)
        case let error as DomainError:
            error.code == .unavailable || error.code == .storageFailure
                ? (SPARK_ERR_UNAVAILABLE, error.reason) : (SPARK_ERR_REFUSED, error.reason)
        case let error as CArgumentError: (SPARK_ERR_INVALID_ARGUMENT, error.message)
        default: (SPARK_ERR_INTERNAL, "\(error)")
        }
    spark_internal_set_error(message)
    return status
}

/// A NULL or non-UTF-8 argument.
struct CArgumentError: Error {
    let message: String
}

/// Runs one API call: clears the thread's last error, maps a thrown error to its status.
func call(_ body: () throws -> Void) -> spark_status {
    spark_internal_set_error(nil)
    do {
        try body()
        return SPARK_OK
    } catch {
        return status(for: error)
    }
}

func text(_ pointer: UnsafePointer<CChar>?, _ name: String) throws -> String {
    guard let pointer else { throw CArgumentError(message: "\(name) is NULL") }
    guard let text = CString.read(pointer) else { throw CArgumentError(message: "\(name) is not UTF-8") }
    return text
}

func client(_ pointer: OpaquePointer?) throws -> Client {
    guard let pointer else { throw CArgumentError(message: "the client is NULL") }
    return Unmanaged<Client>.fromOpaque(UnsafeRawPointer(pointer)).takeUnretainedValue()
}

// MARK: The client

/// `spark_client_open`, declared and documented in `spark/spark.h`.
@_cdecl("spark_client_open")
public func sparkClientOpen(
    _ configPath: UnsafePointer<CChar>?, _ dataDirectory: UnsafePointer<CChar>?,
    _ out: UnsafeMutablePointer<OpaquePointer?>?
) -> spark_status {
    call {
        guard let out else { throw CArgumentError(message: "client is NULL") }
        let path = try text(configPath, "config_path")
        let directory = try dataDirectory.map { URL(fileURLWithPath: try text($0, "data_directory")) }
        // The app's token refresh (authProvider custom), set by spark_sign_in_token.
        let refresh = TokenRefresh()
        // The app's OpenID prompt (authProvider oidc), set by spark_sign_in_oidc on the client.
        let prompt = Locked<OpenIDPrompt?>(nil)
        let opened = try Client.wait {
            let controller = try BBMAuthController.fromConfigFile(
                URL(fileURLWithPath: path), dataDirectory: directory, customTokenRefresh: { _ in try await refresh.fetch() },
                oidcPresenter: { shown in
                    if let prompt = prompt.withLock({ $0 }) {
                        await prompt.show(shown)
                    } else {
                        await BBMOIDCTokenManager.defaultPresenter(shown)
                    }
                })
            try await controller.startBBMEnterpriseService()
            let client = Client(controller: controller, refresh: refresh)
            prompt.withLock { $0 = client.openIDPrompt }
            // Signed in before on this device: setup goes on by itself, and messaging starts.
            if try await controller.signInSilently() != nil,
                await controller.service.waitForSettledState().setupState == .success
            {
                try await client.startEvents()
            }
            return client
        }
        out.pointee = OpaquePointer(Unmanaged.passRetained(opened).toOpaque())
    }
}

/// `spark_client_close`, declared and documented in `spark/spark.h`.
@_cdecl("spark_client_close")
public func sparkClientClose(_ pointer: OpaquePointer?) {
    guard let pointer else { return }
    let client = Unmanaged<Client>.fromOpaque(UnsafeRawPointer(pointer)).takeRetainedValue()
    _ = try? Client.wait { await client.close() }
}

// MARK: Signing in

/// `spark_sign_in_test`, declared and documented in `spark/spark.h`.
@_cdecl("spark_sign_in_test")
public func sparkSignInTest(_ pointer: OpaquePointer?, _ userID: UnsafePointer<CChar>?) -> spark_status {
    call {
        let client = try client(pointer)
        let user = try text(userID, "user_id")
        _ = try Client.wait { try await client.controller.signIn(userID: user) }
    }
}

/// `spark_log_in`, declared and documented in `spark/spark.h`.
@_cdecl("spark_log_in")
public func sparkLogIn(_ pointer: OpaquePointer?, _ userName: UnsafePointer<CChar>?, _ password: UnsafePointer<CChar>?)
    -> spark_status
{
    call {
        let client = try client(pointer)
        let (name, secret) = (try text(userName, "user_name"), try text(password, "password"))
        _ = try Client.wait { try await client.controller.logIn(userName: name, password: secret) }
    }
}

/// `spark_sign_in_token`, declared and documented in `spark/spark.h`.
@_cdecl("spark_sign_in_token")
public func sparkSignInToken(
    _ pointer: OpaquePointer?, _ jwt: UnsafePointer<CChar>?, _ refresh: spark_token_refresh?,
    _ context: UnsafeMutableRawPointer?
) -> spark_status {
    call {
        let client = try client(pointer)
        let token = try text(jwt, "jwt")
        client.refresh.set(refresh.map { UncheckedBox(($0, context)) }, on: client)
        _ = try Client.wait { try await client.controller.signIn(jwtToken: token) }
    }
}

/// `spark_sign_in_oidc`, declared and documented in `spark/spark.h`.
@_cdecl("spark_sign_in_oidc")
public func sparkSignInOIDC(_ pointer: OpaquePointer?, _ prompt: spark_oidc_prompt?, _ context: UnsafeMutableRawPointer?)
    -> spark_status
{
    call {
        let client = try client(pointer)
        client.openIDPrompt.set(prompt.map { UncheckedBox(($0, context)) }, on: client)
        _ = try Client.wait { try await client.controller.signInWithOpenID() }
    }
}

/// `spark_sign_out`, declared and documented in `spark/spark.h`.
@_cdecl("spark_sign_out")
public func sparkSignOut(_ pointer: OpaquePointer?, _ wipeKeys: Int32) -> spark_status {
    call {
        let client = try client(pointer)
        try Client.wait { await client.controller.signOut(wipeKeys: wipeKeys != 0) }
    }
}

// MARK: Setup

/// Setup's questions, asked of the app's C callbacks on the client's callback thread.
struct CSetupHandler: SetupHandler {
    let client: Client
    let handlers: UncheckedBox<spark_setup_handlers>

    func passcode(for request: PasscodeRequest) async -> PasscodeAnswer? {
        let handlers = self.handlers
        let isNew: Int32 = request.kind == .new ? 1 : 0
        let problem = request.problem?.reason
        let answer = await client.onCallbackThread { () -> String? in
            guard let ask = handlers.value.passcode else { return nil }
            var buffer = [CChar](repeating: 0, count: 1024)
            let answered = problem.withOptionalCString { problem in
                ask(handlers.value.context, isNew, problem, &buffer, buffer.count)
            }
            buffer[buffer.count - 1] = 0
            defer { for index in buffer.indices { buffer[index] = 0 } }
            let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
            return answered != 0 ? String(validating: bytes, as: UTF8.self) : nil
        }
        return answer.map(PasscodeAnswer.passcode)
    }

    func confirmDeviceSwitch(active endpoints: [EndpointInfo]) async -> Bool {
        let handlers = self.handlers
        return await client.onCallbackThread {
            guard let confirm = handlers.value.confirm_device_switch else { return false }
            return Self.withEndpoints(endpoints) { confirm(handlers.value.context, $0, $1) } != 0
        }
    }

    func endpointToRemove(from endpoints: [EndpointInfo]) async -> String? {
        let handlers = self.handlers
        return await client.onCallbackThread {
            guard let pick = handlers.value.endpoint_to_remove else { return nil }
            let index = Int(Self.withEndpoints(endpoints) { pick(handlers.value.context, $0, $1) })
            return endpoints.indices.contains(index) ? endpoints[index].endpointID : nil
        }
    }

    /// Calls `body` with the endpoints as a C array, valid during the call.
    static func withEndpoints(_ endpoints: [EndpointInfo], _ body: (UnsafePointer<spark_endpoint>?, Int) -> Int32) -> Int32 {
        let strings = endpoints.map { (strdup($0.endpointID), strdup($0.description), strdup($0.nickname)) }
        defer {
            for (id, description, nickname) in strings {
                free(id)
                free(description)
                free(nickname)
            }
        }
        let array = zip(endpoints, strings).map { endpoint, strings in
            spark_endpoint(
                endpoint_id: strings.0, description: strings.1, nickname: strings.2, registration_id: endpoint.registrationID,
                is_active: endpoint.isActive ? 1 : 0)
        }
        return array.withUnsafeBufferPointer { body($0.baseAddress, $0.count) }
    }
}

extension Optional where Wrapped == String {
    fileprivate func withOptionalCString<T>(_ body: (UnsafePointer<CChar>?) -> T) -> T {
        guard let self else { return body(nil) }
        return self.withCString(body)
    }
}

/// `spark_complete_setup`, declared and documented in `spark/spark.h`.
@_cdecl("spark_complete_setup")
public func sparkCompleteSetup(_ pointer: OpaquePointer?, _ handlers: UnsafePointer<spark_setup_handlers>?) -> spark_status {
    call {
        let client = try client(pointer)
        guard let handlers else { throw CArgumentError(message: "handlers is NULL") }
        let handler = CSetupHandler(client: client, handlers: UncheckedBox(handlers.pointee))
        try Client.wait {
            _ = try await client.controller.completeSetup(using: handler)
            try await client.startEvents()
        }
    }
}

/// `spark_is_set_up`, declared and documented in `spark/spark.h`.
@_cdecl("spark_is_set_up")
public func sparkIsSetUp(_ pointer: OpaquePointer?, _ state: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    guard let client = try? client(pointer) else { return 0 }
    let setup = client.controller.service.authState.value.setupState
    state?.pointee = strdup("\(setup)")
    return setup == .success ? 1 : 0
}

/// `spark_is_connected`, declared and documented in `spark/spark.h`.
@_cdecl("spark_is_connected")
public func sparkIsConnected(_ pointer: OpaquePointer?) -> Int32 {
    guard let client = try? client(pointer) else { return 0 }
    return client.controller.service.connected.value ? 1 : 0
}

// MARK: Chats and messages

/// The client's messaging, kept while it runs: asking the service on every call would queue each
/// call behind whatever the service is doing (a hop that cost the C API a tenth of its rate).
func access(_ client: Client) async throws -> BBMAccess {
    if let kept = client.access.withLock({ $0 }), !kept.isStopped { return kept }
    let fresh = try await client.controller.service.messaging()
    client.access.withLock { $0 = fresh }
    return fresh
}

/// `spark_list_chats`, declared and documented in `spark/spark.h`.
@_cdecl("spark_list_chats")
public func sparkListChats(
    _ pointer: OpaquePointer?, _ chats: UnsafeMutablePointer<UnsafeMutablePointer<spark_chat>?>?,
    _ count: UnsafeMutablePointer<Int>?
) -> spark_status {
    call {
        let client = try client(pointer)
        guard let chats, let count else { throw CArgumentError(message: "chats or count is NULL") }
        let list = try Client.wait { try await access(client).chats.value }
        chats.pointee = CMessages.make(list)
        count.pointee = list.count
    }
}

/// `spark_chats_free`, declared and documented in `spark/spark.h`.
@_cdecl("spark_chats_free")
public func sparkChatsFree(_ chats: UnsafeMutablePointer<spark_chat>?, _ count: Int) { CMessages.free(chats, count: count) }

/// `spark_start_chat`, declared and documented in `spark/spark.h`.
@_cdecl("spark_start_chat")
public func sparkStartChat(
    _ pointer: OpaquePointer?, _ users: UnsafePointer<UnsafePointer<CChar>?>?, _ count: Int,
    _ subject: UnsafePointer<CChar>?, _ chatID: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> spark_status {
    call {
        let client = try client(pointer)
        guard let users, count > 0, let chatID else { throw CArgumentError(message: "users, count or chat_id is missing") }
        let names = try (0..<count).map { try text(users[$0], "users[\($0)]") }
        let title = try subject.map { try text($0, "subject") } ?? ""
        let chat = try Client.wait { try await access(client).startChat(with: names, subject: title) }
        chatID.pointee = strdup(chat.chatID)
    }
}

/// `spark_send`, declared and documented in `spark/spark.h`.
@_cdecl("spark_send")
public func sparkSend(
    _ pointer: OpaquePointer?, _ chatID: UnsafePointer<CChar>?, _ content: UnsafePointer<CChar>?,
    _ message: UnsafeMutablePointer<UnsafeMutablePointer<spark_message>?>?
) -> spark_status {
    send(pointer, chatID, content, message) { access, body, chat in try await access.sendMessage(body, to: chat) }
}

/// `spark_queue`, declared and documented in `spark/spark.h`.
@_cdecl("spark_queue")
public func sparkQueue(
    _ pointer: OpaquePointer?, _ chatID: UnsafePointer<CChar>?, _ content: UnsafePointer<CChar>?,
    _ message: UnsafeMutablePointer<UnsafeMutablePointer<spark_message>?>?
) -> spark_status {
    send(pointer, chatID, content, message) { access, body, chat in try await access.queueMessage(body, to: chat) }
}

/// `spark_queue_many`, declared and documented in `spark/spark.h`.
@_cdecl("spark_queue_many")
public func sparkQueueMany(
    _ pointer: OpaquePointer?, _ chatID: UnsafePointer<CChar>?, _ texts: UnsafePointer<UnsafePointer<CChar>?>?, _ count: Int,
    _ messages: UnsafeMutablePointer<UnsafeMutablePointer<spark_message>?>?
) -> spark_status {
    call {
        let client = try client(pointer)
        let chat = try text(chatID, "chat_id")
        guard let texts, (1...BBMAccess.mostQueuedAtOnce).contains(count) else {
            throw CArgumentError(message: "texts is NULL, or count is not 1 to \(BBMAccess.mostQueuedAtOnce)")
        }
        let drafts = try (0..<count).map { NewMessage(try text(texts[$0], "texts[\($0)]")) }
        let sent = try Client.wait { try await access(client).queueMessages(drafts, to: chat) }
        messages?.pointee = CMessages.make(sent)
    }
}

/// `spark_send` and `spark_queue`: the text sent to the chat by `how`, and the message as it
/// returned in `*message`.
private func send(
    _ pointer: OpaquePointer?, _ chatID: UnsafePointer<CChar>?, _ content: UnsafePointer<CChar>?,
    _ message: UnsafeMutablePointer<UnsafeMutablePointer<spark_message>?>?,
    how: @escaping @Sendable (BBMAccess, String, String) async throws -> ChatMessage
) -> spark_status {
    call {
        let client = try client(pointer)
        let (chat, body) = (try text(chatID, "chat_id"), try text(content, "text"))
        let sent = try Client.wait { try await how(try await access(client), body, chat) }
        message?.pointee = CMessages.make([sent])
    }
}

/// `spark_list_messages`, declared and documented in `spark/spark.h`.
@_cdecl("spark_list_messages")
public func sparkListMessages(
    _ pointer: OpaquePointer?, _ chatID: UnsafePointer<CChar>?, _ before: Int64, _ limit: Int,
    _ messages: UnsafeMutablePointer<UnsafeMutablePointer<spark_message>?>?, _ count: UnsafeMutablePointer<Int>?
) -> spark_status {
    call {
        let client = try client(pointer)
        let chat = try text(chatID, "chat_id")
        guard let messages, let count, (1...1000).contains(limit), before >= 0 else {
            throw CArgumentError(message: "messages or count is NULL, or limit is not 1 to 1000")
        }
        let list = try Client.wait {
            try await access(client).messages(in: chat, before: before == 0 ? nil : before, limit: limit)
        }
        messages.pointee = CMessages.make(list)
        count.pointee = list.count
    }
}

/// `spark_messages_free`, declared and documented in `spark/spark.h`.
@_cdecl("spark_messages_free")
public func sparkMessagesFree(_ messages: UnsafeMutablePointer<spark_message>?, _ count: Int) {
    CMessages.free(messages, count: count)
}

/// `spark_get_message`, declared and documented in `spark/spark.h`.
@_cdecl("spark_get_message")
public func sparkGetMessage(
    _ pointer: OpaquePointer?, _ messageID: UnsafePointer<CChar>?,
    _ message: UnsafeMutablePointer<UnsafeMutablePointer<spark_message>?>?
) -> spark_status {
    call {
        let client = try client(pointer)
        let id = try text(messageID, "message_id")
        guard let message else { throw CArgumentError(message: "message is NULL") }
        let found = try Client.wait { try await access(client).message(id) }
        message.pointee = CMessages.make([found])
    }
}

/// `spark_search`, declared and documented in `spark/spark.h`.
@_cdecl("spark_search")
public func sparkSearch(
    _ pointer: OpaquePointer?, _ query: UnsafePointer<CChar>?, _ chatID: UnsafePointer<CChar>?,
    _ sender: UnsafePointer<CChar>?, _ limit: Int, _ cursor: UnsafePointer<CChar>?,
    _ messageIDs: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?,
    _ snippets: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?,
    _ count: UnsafeMutablePointer<Int>?, _ next: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> spark_status {
    call {
        let client = try client(pointer)
        let text = try text(query, "query")
        let chat = try chatID.map { try SparkC.text($0, "chat_id") }
        let from = try sender.map { try SparkC.text($0, "sender") }
        let after = try cursor.map { try SparkC.text($0, "cursor") }
        guard let messageIDs, let snippets, let count, let next else {
            throw CArgumentError(message: "message_ids, snippets, count or next is NULL")
        }
        let page = try Client.wait {
            try await access(client).search(SearchQuery(text, chatID: chat, sender: from, limit: limit, cursor: after))
        }
        func strings(_ values: [String]) -> UnsafeMutablePointer<UnsafeMutablePointer<CChar>?> {
            let array = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: max(values.count, 1))
            for (index, value) in values.enumerated() { (array + index).initialize(to: strdup(value)) }
            return array
        }
        messageIDs.pointee = strings(page.results.map(\.messageID))
        snippets.pointee = strings(page.results.map(\.snippet))
        count.pointee = page.results.count
        next.pointee = page.next.map { strdup($0) }
    }
}

/// `spark_mark_read`, declared and documented in `spark/spark.h`.
@_cdecl("spark_mark_read")
public func sparkMarkRead(_ pointer: OpaquePointer?, _ chatID: UnsafePointer<CChar>?) -> spark_status {
    call {
        let client = try client(pointer)
        let chat = try text(chatID, "chat_id")
        try Client.wait { try await access(client).markMessagesRead(in: chat) }
    }
}

/// `spark_edit`, declared and documented in `spark/spark.h`.
@_cdecl("spark_edit")
public func sparkEdit(_ pointer: OpaquePointer?, _ messageID: UnsafePointer<CChar>?, _ content: UnsafePointer<CChar>?)
    -> spark_status
{
    call {
        let client = try client(pointer)
        let (id, body) = (try text(messageID, "message_id"), try text(content, "text"))
        try Client.wait { try await access(client).editMessage(id, content: body) }
    }
}

// MARK: Rich messaging

/// `spark_react`, declared and documented in `spark/spark.h`.
@_cdecl("spark_react")
public func sparkReact(_ pointer: OpaquePointer?, _ messageID: UnsafePointer<CChar>?, _ emoji: UnsafePointer<CChar>?)
    -> spark_status
{
    call {
        let client = try client(pointer)
        let (id, symbol) = (try text(messageID, "message_id"), try text(emoji, "emoji"))
        try Client.wait { try await access(client).react(to: id, emoji: symbol) }
    }
}

/// `spark_remove_reaction`, declared and documented in `spark/spark.h`.
@_cdecl("spark_remove_reaction")
public func sparkRemoveReaction(_ pointer: OpaquePointer?, _ messageID: UnsafePointer<CChar>?, _ emoji: UnsafePointer<CChar>?)
    -> spark_status
{
    call {
        let client = try client(pointer)
        let (id, symbol) = (try text(messageID, "message_id"), try text(emoji, "emoji"))
        try Client.wait { try await access(client).removeReaction(from: id, emoji: symbol) }
    }
}

/// `spark_recall`, declared and documented in `spark/spark.h`.
@_cdecl("spark_recall")
public func sparkRecall(_ pointer: OpaquePointer?, _ messageID: UnsafePointer<CChar>?) -> spark_status {
    call {
        let client = try client(pointer)
        let id = try text(messageID, "message_id")
        try Client.wait { try await access(client).recallMessage(id) }
    }
}

/// `spark_set_disappearing_timer`, declared and documented in `spark/spark.h`.
@_cdecl("spark_set_disappearing_timer")
public func sparkSetDisappearingTimer(_ pointer: OpaquePointer?, _ chatID: UnsafePointer<CChar>?, _ seconds: Int64)
    -> spark_status
{
    call {
        let client = try client(pointer)
        let chat = try text(chatID, "chat_id")
        guard seconds >= 0 else { throw CArgumentError(message: "seconds is negative") }
        try Client.wait {
            try await access(client).setDisappearingTimer(seconds == 0 ? nil : .seconds(seconds), in: chat)
        }
    }
}

/// `spark_send_typing`, declared and documented in `spark/spark.h`.
@_cdecl("spark_send_typing")
public func sparkSendTyping(_ pointer: OpaquePointer?, _ chatID: UnsafePointer<CChar>?, _ isTyping: Int32) -> spark_status {
    call {
        let client = try client(pointer)
        let chat = try text(chatID, "chat_id")
        try Client.wait { try await access(client).sendTyping(in: chat, isTyping: isTyping != 0) }
    }
}

/// `spark_send_chat_event`, declared and documented in `spark/spark.h`.
@_cdecl("spark_send_chat_event")
public func sparkSendChatEvent(
    _ pointer: OpaquePointer?, _ chatID: UnsafePointer<CChar>?, _ tag: UnsafePointer<CChar>?, _ data: UnsafePointer<CChar>?
) -> spark_status {
    call {
        let client = try client(pointer)
        let (chat, name) = (try text(chatID, "chat_id"), try text(tag, "tag"))
        let payload = try data.map { try text($0, "data") }
        try Client.wait { try await access(client).sendChatEvent(name, data: payload, to: chat) }
    }
}

/// The app's progress callback, called on the thread that made the call.
func reporter(_ progress: spark_progress?, _ context: UnsafeMutableRawPointer?) -> (TransferProgress) -> Void {
    { step in progress?(context, step.completed, step.total) }
}

/// `spark_send_file`, declared and documented in `spark/spark.h`.
@_cdecl("spark_send_file")
public func sparkSendFile(
    _ pointer: OpaquePointer?, _ chatID: UnsafePointer<CChar>?, _ path: UnsafePointer<CChar>?,
    _ caption: UnsafePointer<CChar>?, _ progress: spark_progress?, _ context: UnsafeMutableRawPointer?,
    _ message: UnsafeMutablePointer<UnsafeMutablePointer<spark_message>?>?
) -> spark_status {
    call {
        let client = try client(pointer)
        let (chat, file) = (try text(chatID, "chat_id"), try text(path, "path"))
        let words = try caption.map { try text($0, "caption") } ?? ""
        let sent = try Client.transfer(
            { try await access(client).sendFile(at: file, to: chat, caption: words) }, report: reporter(progress, context))
        message?.pointee = CMessages.make([sent])
    }
}

/// `spark_save_attachment`, declared and documented in `spark/spark.h`.
@_cdecl("spark_save_attachment")
public func sparkSaveAttachment(
    _ pointer: OpaquePointer?, _ messageID: UnsafePointer<CChar>?, _ path: UnsafePointer<CChar>?,
    _ progress: spark_progress?, _ context: UnsafeMutableRawPointer?
) -> spark_status {
    call {
        let client = try client(pointer)
        let (id, file) = (try text(messageID, "message_id"), try text(path, "path"))
        try Client.transfer(
            { try await access(client).saveAttachment(of: id, to: file) }, report: reporter(progress, context))
    }
}

/// `spark_thumbnail`, declared and documented in `spark/spark.h`.
@_cdecl("spark_thumbnail")
public func sparkThumbnail(
    _ pointer: OpaquePointer?, _ messageID: UnsafePointer<CChar>?, _ bytes: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?,
    _ size: UnsafeMutablePointer<Int>?
) -> spark_status {
    call {
        let client = try client(pointer)
        let id = try text(messageID, "message_id")
        guard let bytes, let size else { throw CArgumentError(message: "bytes or size is NULL") }
        let thumbnail = try Client.wait { try await access(client).thumbnail(of: id) }
        guard let thumbnail, !thumbnail.isEmpty else {
            (bytes.pointee, size.pointee) = (nil, 0)
            return
        }
        let copy = malloc(thumbnail.count)!.assumingMemoryBound(to: UInt8.self)
        thumbnail.copyBytes(to: copy, count: thumbnail.count)
        (bytes.pointee, size.pointee) = (copy, thumbnail.count)
    }
}

/// `spark_block`, declared and documented in `spark/spark.h`.
@_cdecl("spark_block")
public func sparkBlock(_ pointer: OpaquePointer?, _ userID: UnsafePointer<CChar>?) -> spark_status {
    call {
        let client = try client(pointer)
        let user = try text(userID, "user_id")
        try Client.wait { try await access(client).block(user) }
    }
}

/// `spark_unblock`, declared and documented in `spark/spark.h`.
@_cdecl("spark_unblock")
public func sparkUnblock(_ pointer: OpaquePointer?, _ userID: UnsafePointer<CChar>?) -> spark_status {
    call {
        let client = try client(pointer)
        let user = try text(userID, "user_id")
        try Client.wait { try await access(client).unblock(user) }
    }
}

/// `spark_blocked_users`, declared and documented in `spark/spark.h`.
@_cdecl("spark_blocked_users")
public func sparkBlockedUsers(
    _ pointer: OpaquePointer?, _ users: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?,
    _ count: UnsafeMutablePointer<Int>?
) -> spark_status {
    call {
        let client = try client(pointer)
        guard let users, let count else { throw CArgumentError(message: "users or count is NULL") }
        let list = try Client.wait { try await access(client).blockedUsers() }.sorted()
        let array = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: max(1, list.count))
        for (index, user) in list.enumerated() { (array + index).initialize(to: strdup(user)) }
        (users.pointee, count.pointee) = (array, list.count)
    }
}

/// `spark_strings_free`, declared and documented in `spark/spark.h`.
@_cdecl("spark_strings_free")
public func sparkStringsFree(_ strings: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ count: Int) {
    guard let strings else { return }
    for index in 0..<count { free(strings[index]) }
    strings.deinitialize(count: count)
    strings.deallocate()
}

/// `spark_report`, declared and documented in `spark/spark.h`.
@_cdecl("spark_report")
public func sparkReport(
    _ pointer: OpaquePointer?, _ chatID: UnsafePointer<CChar>?, _ userID: UnsafePointer<CChar>?,
    _ messageIDs: UnsafePointer<UnsafePointer<CChar>?>?, _ count: Int, _ reason: UnsafePointer<CChar>?,
    _ reportID: UnsafeMutablePointer<Int64>?
) -> spark_status {
    call {
        let client = try client(pointer)
        let (chat, user, why) = (try text(chatID, "chat_id"), try text(userID, "user_id"), try text(reason, "reason"))
        guard let messageIDs, (1...50).contains(count) else {
            throw CArgumentError(message: "message_ids is NULL, or count is not 1 to 50")
        }
        let ids = try (0..<count).map { try text(messageIDs[$0], "message_ids[\($0)]") }
        let number = try Client.wait {
            let access = try await access(client)
            var revealed: [ChatMessage] = []
            for id in ids { revealed.append(try await access.message(id)) }
            return try await access.report(user, in: chat, messages: revealed, reason: why)
        }
        reportID?.pointee = number
    }
}

/// `spark_check_transparency`, declared and documented in `spark/spark.h`.
@_cdecl("spark_check_transparency")
public func sparkCheckTransparency(
    _ pointer: OpaquePointer?, _ alarm: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> spark_status {
    call {
        let client = try client(pointer)
        guard let alarm else { throw CArgumentError(message: "alarm is NULL") }
        let raised = try Client.wait { try await access(client).checkTransparency() }
        alarm.pointee = raised.map { strdup($0) } ?? nil
    }
}

/// `spark_safety_number`, declared and documented in `spark/spark.h`.
@_cdecl("spark_safety_number")
public func sparkSafetyNumber(
    _ pointer: OpaquePointer?, _ userID: UnsafePointer<CChar>?, _ number: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> spark_status {
    call {
        let client = try client(pointer)
        let user = try text(userID, "user_id")
        guard let number else { throw CArgumentError(message: "number is NULL") }
        let digits = try Client.wait { try await access(client).safetyNumber(with: user).digits }
        var groups: [Substring] = []
        var rest = Substring(digits)
        while !rest.isEmpty {
            groups.append(rest.prefix(5))
            rest = rest.dropFirst(5)
        }
        number.pointee = strdup(groups.joined(separator: " "))
    }
}

// MARK: Events

/// `spark_event_fd`, declared and documented in `spark/spark.h`.
@_cdecl("spark_event_fd")
public func sparkEventFD(_ pointer: OpaquePointer?) -> Int32 {
    guard let client = try? client(pointer) else { return -1 }
    return client.events.descriptor
}

/// `spark_next_event`, declared and documented in `spark/spark.h`.
@_cdecl("spark_next_event")
public func sparkNextEvent(_ pointer: OpaquePointer?, _ event: UnsafeMutablePointer<UnsafeMutablePointer<spark_event>?>?)
    -> spark_status
{
    call {
        let client = try client(pointer)
        guard let event else { throw CArgumentError(message: "event is NULL") }
        event.pointee = client.events.pop().map(EventQueue.make)
    }
}

/// `spark_event_free`, declared and documented in `spark/spark.h`.
@_cdecl("spark_event_free")
public func sparkEventFree(_ event: UnsafeMutablePointer<spark_event>?) { EventQueue.free(event) }

/// `spark_set_event_callback`, declared and documented in `spark/spark.h`.
@_cdecl("spark_set_event_callback")
public func sparkSetEventCallback(
    _ pointer: OpaquePointer?, _ callback: spark_event_callback?, _ context: UnsafeMutableRawPointer?
)
    -> spark_status
{
    call {
        let client = try client(pointer)
        client.events.setCallback(callback, context)
    }
}
