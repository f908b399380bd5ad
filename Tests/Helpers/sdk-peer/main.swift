// A helper for SparkSDKTests: one device of a multi-process setup test.
// Usage: sdk-peer DOMAIN DATA_DIR USER_ID [--take-over] [--serve COUNT] [--send USER COUNT]
//        (passcode on standard input; DOMAIN is an embedded file, or a ConfigSettings.plist
//        naming the domain, such as a spark-domaind's)
// Sets the device up with test auth and prints "<setupState> regId=<n> key=<signing key prefix>".
// With --serve COUNT it then waits for COUNT incoming messages, marks them read, answers each
// with "ack: <content>", and prints "served COUNT". With --send USER COUNT it starts a chat
// with USER, sends "m1"…"mCOUNT", waits for their acks and prints "acked A duplicates D".
import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkObservable
import SparkSDK

let arguments = Array(CommandLine.arguments.dropFirst())
// `sdk-peer store DATA_DIR`: opens the endpoint store with the default key source and says
// where its key is ("key file" when one was written, else "no key file") or why it failed.
if arguments.first == "store", arguments.count == 2 {
    do {
        let directory = URL(fileURLWithPath: arguments[1])
        _ = try EndpointStore(directory: directory)
        let keys = URL(fileURLWithPath: ProcessInfo.processInfo.environment["XDG_CONFIG_HOME"] ?? "/nonexistent")
            .appendingPathComponent("spark-sdk/store-keys")
        let files = (try? FileManager.default.contentsOfDirectory(atPath: keys.path)) ?? []
        print(files.isEmpty ? "opened; no key file" : "opened; key file")
        exit(0)
    } catch let error as AuthError {
        print("refused: \(error.code): \(error.reason)")
        exit(1)
    }
}
guard arguments.count >= 3 else {
    FileHandle.standardError.write(Data("usage: sdk-peer DOMAIN_PATH DATA_DIR USER_ID [--take-over]\n".utf8))
    exit(64)
}
let passcode = readLine(strippingNewline: true) ?? ""
do {
    let domain: any DomainService =
        arguments[0].hasSuffix(".plist")
        ? try ConfigSettings.load(from: URL(fileURLWithPath: arguments[0])).openDomain()
        : try EmbeddedDomain.open(at: arguments[0])
    let store = try EndpointStore(directory: URL(fileURLWithPath: arguments[1]))
    let service = BBMEnterpriseService(store: store, endpointDescription: "sdk-peer", unsafePasscodeIterations: 1000)
    try await service.start(domain: domain, environment: .sandbox)
    let token = try await domain.testToken(userID: arguments[2]).token
    await service.sendAuthToken(token, userIdentifier: arguments[2])
    var state = await service.waitForSettledState()
    if state.setupState == .deviceSwitchRequired, arguments.contains("--take-over") {
        await service.setupRetry()
        state = await service.waitForSettledState()
    }
    if state.setupState == .syncRequired {
        do {
            try await service.syncStart(passcode: passcode, action: state.syncPasscodeState == .new ? .new : .existing)
        } catch let error as SetupError where error.code == .incorrectPasscode {
            // Printed below from the state, which the refusal left at syncRequired.
        }
        state = await service.waitForSettledState()
    }
    let key = await service.keys?.signing.publicKey.rawRepresentation.prefix(6).map { String(format: "%02x", $0) }.joined() ?? "-"
    print("\(state.setupState) regId=\(state.regId.map(String.init) ?? "-") key=\(key) error=\(state.syncError)")
    if let index = arguments.firstIndex(of: "--serve"), index + 1 < arguments.count, let count = Int(arguments[index + 1]) {
        let access = try await service.messaging()
        var answered = Set<String>()
        // A bound on a hang, not a timing check: under the sanitizers, with the suite running
        // beside it on two cores, an answer can take a while.
        let deadline = ContinuousClock.now + .seconds(300)
        while answered.count < count, ContinuousClock.now < deadline {
            for chat in access.chats.value {
                for message in try await access.messages(in: chat.chatID).value
                where message.isIncoming && !answered.contains(message.id) {
                    answered.insert(message.id)
                    try await access.markMessagesRead(in: chat.chatID, upTo: message.number)
                    try await access.sendMessage("ack: \(message.content)", to: chat.chatID)
                }
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        print("served \(answered.count)")
    }
    if let index = arguments.firstIndex(of: "--listen"), index + 1 < arguments.count, let seconds = Int(arguments[index + 1]) {
        // Receives whatever comes for `seconds` (a test kills it at a random point meanwhile).
        _ = try await service.messaging()
        // Unbuffered: the test that kills this process waits for the line.
        FileHandle.standardOutput.write(Data("listening\n".utf8))
        try await Task.sleep(for: .seconds(seconds))
    }
    if let index = arguments.firstIndex(of: "--send"), index + 2 < arguments.count, let count = Int(arguments[index + 2]) {
        let access = try await service.messaging()
        let chat = try await access.startChat(with: [arguments[index + 1]])
        for number in 1...count { try await access.sendMessage("m\(number)", to: chat.chatID) }
        var acks: [String] = []
        let deadline = ContinuousClock.now + .seconds(300)
        while ContinuousClock.now < deadline {
            acks = try await access.messages(in: chat.chatID).value.filter(\.isIncoming).map(\.content)
            if Set(acks).count >= count { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        print("acked \(Set(acks).count) duplicates \(acks.count - Set(acks).count)")
    }
    await service.stop()
} catch {
    FileHandle.standardError.write(Data("sdk-peer: \(error)\n".utf8))
    exit(1)
}
