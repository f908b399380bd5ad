// ChatApp: the app of SparkSDK's Getting Started guide (Sources/SparkSDK/SparkSDK.docc), whole.
// The guide shows it piece by piece; a test checks that every piece of the guide is here, and
// runs it. Two users on one machine: alice starts a chat with bob, bob reads her message, and
// alice sees it delivered and then read; then alice sends a file and bob saves it.
//
//   swift run ChatApp [DIRECTORY]     (a temporary directory by default)
import Foundation
import SparkSDK

// MARK: Configure

/// The passcode prompts of this app: every question setup asks a person, answered from code.
struct Prompts: SetupHandler {
    let passcode: String

    func passcode(for request: PasscodeRequest) async -> PasscodeAnswer? {
        // A real app asks the person, showing `request.problem?.reason` after a refusal.
        request.problem == nil ? .passcode(passcode) : nil
    }
    func confirmDeviceSwitch(active endpoints: [EndpointInfo]) async -> Bool { true }
    func endpointToRemove(from endpoints: [EndpointInfo]) async -> String? { endpoints.first?.endpointID }
}

let directory =
    CommandLine.arguments.dropFirst().first.map { URL(fileURLWithPath: $0) }
    ?? FileManager.default.temporaryDirectory.appendingPathComponent("chatapp-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
let plist = directory.appendingPathComponent("ConfigSettings.plist")
try Data(
    """
    <?xml version="1.0" encoding="UTF-8"?>
    <plist version="1.0"><dict>
      <key>authProvider</key><string>testAuth</string>
      <key>testAuth</key><dict>
        <key>domain</key><string>chatapp</string>
        <key>environment</key><string>sandbox</string>
      </dict>
      <key>embeddedDomainPath</key><string>domain.sqlite</string>
    </dict></plist>
    """.utf8
).write(to: plist)

// MARK: Start, sign in and set up

/// One user's device: its data directory holds its credentials, keys and messages.
func device(_ user: String) async throws -> BBMAuthController {
    let controller = try BBMAuthController.fromConfigFile(
        plist, dataDirectory: directory.appendingPathComponent(user))
    try await controller.startBBMEnterpriseService()
    try await controller.signIn(userID: user)
    try await controller.completeSetup(using: Prompts(passcode: "\(user)-passcode-2026"))
    return controller
}

let alice = try await device("alice")
let bob = try await device("bob")
print("alice and bob are set up")

// MARK: Chat

let aliceChats = try await alice.service.messaging()
let bobChats = try await bob.service.messaging()
let steps = aliceChats.messageEvents  // subscribed before sending: no step is missed

let chat = try await aliceChats.startChat(with: ["bob"], subject: "Lunch")
let message = try await aliceChats.sendMessage("12:30 at the usual place?", to: chat.chatID)
print("alice sent #\(message.number ?? 0): \(message.content)")

// MARK: Observe

// A monitor re-runs whenever what it read changes: here, bob's unread count.
let unread = ObservableMonitor(activatedWithName: "bob's unread") {
    let count = bobChats.chats.value.first?.unreadCount ?? 0
    print("bob has \(count) unread")
}

// Bob waits for the message, then reads it: alice gets a read receipt.
for await messages in try await bobChats.messages(in: chat.chatID).values where !messages.isEmpty {
    print("bob got: \(messages[0].content) from \(messages[0].sender)")
    try await bobChats.markMessagesRead(in: chat.chatID)
    break
}

// Alice sees each step of her message: sent, delivered, read.
for await step in steps where step.messageID == message.id {
    print("alice's message is \(step.state)")
    if step.state == .read { break }
}

// MARK: Send a file

let menu = directory.appendingPathComponent("menu.txt")
try Data("Soup of the day: lentils".utf8).write(to: menu)
let upload = try aliceChats.sendFile(at: menu.path, to: chat.chatID, caption: "today's menu")
for await progress in upload.progress where progress.completed == progress.total {
    print("alice uploaded \(progress.total) bytes")
}
let withFile = try await upload.value
for await messages in try await bobChats.messages(in: chat.chatID).values
where messages.contains(where: { $0.id == withFile.id }) {
    break
}
let saved = directory.appendingPathComponent("menu-from-alice.txt")
try await bobChats.saveAttachment(of: withFile.id, to: saved.path).value
print("bob saved \(withFile.attachment?.fileName ?? ""): \(try String(contentsOf: saved, encoding: .utf8))")

unread.deactivate()
await alice.service.stop()
await bob.service.stop()
print("done")
