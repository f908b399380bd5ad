// A helper for SparkSDKTests: one device of a multi-process setup test.
// Usage: sdk-peer DOMAIN_PATH DATA_DIR USER_ID [--take-over]   (passcode on standard input)
// Sets the device up with test auth and prints "<setupState> regId=<n> key=<signing key prefix>".
import Foundation
import SparkCrypto
import SparkDomain
import SparkSDK

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 3 else {
    FileHandle.standardError.write(Data("usage: sdk-peer DOMAIN_PATH DATA_DIR USER_ID [--take-over]\n".utf8))
    exit(64)
}
let passcode = readLine(strippingNewline: true) ?? ""
do {
    let domain = try EmbeddedDomain.open(at: arguments[0])
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
        await service.syncStart(passcode: passcode, action: state.syncPasscodeState == .new ? .new : .existing)
        state = await service.waitForSettledState()
    }
    let key = await service.keys?.signing.publicKey.rawRepresentation.prefix(6).map { String(format: "%02x", $0) }.joined() ?? "-"
    print("\(state.setupState) regId=\(state.regId.map(String.init) ?? "-") key=\(key) error=\(state.syncError)")
    await service.stop()
} catch {
    FileHandle.standardError.write(Data("sdk-peer: \(error)\n".utf8))
    exit(1)
}
