import Foundation
import SparkDomain
import SparkDomainEngine
import SparkSDK

/// Walks setup with the user through the SDK's setup driver: this type answers what a person
/// must (device switch, full, new and existing passcodes, a forgotten passcode), the driver
/// does the rest.
struct Setup: SetupHandler {
    let console: Console
    let service: BBMEnterpriseService

    func run() async throws {
        do {
            let state = try await service.completeSetup(using: self)
            console.say("Setup complete: this device is endpoint \(state.regId.map(String.init) ?? "?") of the user.")
        } catch let error as SetupError {
            switch error.code {
            case .declined: throw QuickStartExit(message: "setup stopped: \(error.reason)")
            case .endpointRemoved: throw QuickStartExit(message: "this device was removed: \(error.reason)")
            case .tooManyAttempts: throw QuickStartExit(message: "too many passcode attempts; try again later")
            case .noToken, .tokenRejected:
                throw QuickStartExit(message: "setup stopped: the domain needs a valid sign-in (\(error.reason))")
            default: throw QuickStartExit(message: "setup failed: \(error.reason)")
            }
        }
    }

    func confirmDeviceSwitch(active endpoints: [EndpointInfo]) async -> Bool {
        console.say("Another device holds your profile; this domain allows one active device per user.")
        for endpoint in endpoints { console.say("  active: \(Self.describe(endpoint))") }
        return console.confirm("Move the profile to this device? The other device will be signed out.")
    }

    func endpointToRemove(from endpoints: [EndpointInfo]) async -> String? {
        console.say("You have the maximum number of devices. Remove one to continue:")
        for (index, endpoint) in endpoints.enumerated() { console.say("  \(index + 1). \(Self.describe(endpoint))") }
        guard let answer = console.ask("device to remove (number, empty to stop): "), let choice = Int(answer),
            endpoints.indices.contains(choice - 1)
        else { return nil }
        console.say("Removed \(endpoints[choice - 1].description).")
        return endpoints[choice - 1].endpointID
    }

    /// How a device is listed: its description, nickname and when it was last seen, so that
    /// two devices with the same description can be told apart.
    static func describe(_ endpoint: EndpointInfo) -> String {
        endpoint.description + (endpoint.nickname.isEmpty ? "" : " (\(endpoint.nickname))")
            + " · regId \(endpoint.registrationID) · last seen \(endpoint.lastSeen.formatted(date: .abbreviated, time: .standard))"
    }

    func passcode(for request: PasscodeRequest) async -> PasscodeAnswer? {
        if request.kind == .new {
            if let problem = request.problem {
                console.say(problem.reason)
            } else {
                console.say(
                    "This is your first device. Choose a passcode: your other devices will ask for it to unlock your keys.")
                console.say(Self.passcodeRules)
            }
            guard let passcode = newPasscode() else { return nil }
            console.say("Creating your keys (this takes a moment)…")
            return .passcode(passcode)
        }
        switch request.problem?.code {
        case .incorrectPasscode?:
            console.say("That passcode is incorrect.\(request.attemptsLeft.map { " \($0) attempts left this hour." } ?? "")")
        case .keysExist?:
            console.say("Another device created your keys first; enter the passcode chosen there.")
        case .passcodeTooWeak?:
            console.say(request.problem?.reason ?? "")
        default:
            console.say("Your keys are protected by the passcode you chose on your first device.")
        }
        while true {
            guard let entered = console.askSecret("passcode from your first device (or 'forgot'): ") else { return nil }
            guard entered == "forgot" else {
                console.say("Checking the passcode…")
                return .passcode(entered)
            }
            console.say(
                """
                Resetting makes new keys. Your other devices will be signed out, and chats you had
                cannot be read any more, on any device. This cannot be undone.
                """)
            guard console.confirm("Reset your keys?") else { continue }
            console.say(Self.passcodeRules)
            return newPasscode().map { .reset(newPasscode: $0) }
        }
    }

    static let passcodeRules =
        "A passcode has at least 8 characters, is not your user id, does not repeat one character and is not a common password."

    /// A new passcode typed twice; nil when the input ends or the two never match.
    private func newPasscode() -> String? {
        for _ in 0..<3 {
            guard let first = console.askSecret("new passcode: "), let second = console.askSecret("again: ") else { return nil }
            if first == second { return first }
            console.say("The two passcodes differ; try again.")
        }
        return nil
    }
}

/// The sign-up and login assistant in the terminal.
struct Accounts {
    let console: Console
    let manager: BBMAccountsTokenManager
    let domain: any DomainService
    /// Whether the outbox stands in for email here: only an embedded domain of the sandbox
    /// environment, on one developer's machine. Anywhere else a code shown on screen would let
    /// whoever sits here read another person's mail.
    let showsOutbox: Bool

    func run() async throws {
        while true {
            guard let choice = console.ask("[l]og in, [s]ign up or [r]ecover a password? ") else {
                throw QuickStartExit(message: "no choice made")
            }
            do {
                switch choice.lowercased() {
                case "l", "log in", "login":
                    let name = console.ask("user name: ") ?? ""
                    let password = console.askSecret("password: ") ?? ""
                    _ = try await manager.logIn(userName: name, password: password)
                    console.say("Logged in as \(name).")
                    return
                case "s", "sign up", "signup":
                    let name = console.ask("user name: ") ?? ""
                    let email = console.ask("email: ") ?? ""
                    let country = console.ask("country (two letters, e.g. CA): ") ?? ""
                    let age = Int(console.ask("age: ") ?? "") ?? 0
                    let password = console.askSecret("password: ") ?? ""
                    let asked = Date()
                    try await manager.signUp(
                        SignUpRequest(userName: name, password: password, email: email, country: country.uppercased(), age: age))
                    console.say("Signed up. Unless \(email) already has an account, an activation code was sent to it.")
                    showCode(for: email, subject: "Activate your", since: asked)
                    let code = console.ask("activation code: ") ?? ""
                    try await manager.activate(userName: name, code: code)
                    _ = try await manager.logIn(userName: name, password: password)
                    console.say("Activated and logged in as \(name).")
                    return
                case "r", "recover":
                    let email = console.ask("email: ") ?? ""
                    let asked = Date()
                    try await manager.requestPasswordReset(email: email)
                    console.say("If an account uses \(email), a reset code was sent to it.")
                    showCode(for: email, subject: "password reset code", since: asked)
                    let code = console.ask("reset code: ") ?? ""
                    let password = console.askSecret("new password: ") ?? ""
                    try await manager.resetPassword(email: email, code: code, newPassword: password)
                    console.say("Password changed; log in with it.")
                default:
                    console.say("Type l, s or r.")
                }
            } catch let error as AuthError {
                console.say("✘ \(error.reason)\(error.retryAfter.map { " (wait \($0) s)" } ?? "")")
            }
        }
    }

    /// The embedded sandbox domain's outbox stands in for email: shows the mail this device's
    /// request just caused (to `email`, of that kind, sent since `since`), never an older one or
    /// another kind.
    private func showCode(for email: String, subject: String, since: Date) {
        guard showsOutbox, let embedded = domain as? EmbeddedDomain,
            let mail = try? embedded.outbox(recipient: email, limit: 5).last(where: {
                $0.subject.contains(subject) && $0.sentAt.timeIntervalSince(since) >= -0.001
            })
        else { return }
        console.say("  [outbox] to \(mail.to): \(mail.subject)\n  \(mail.body.replacingOccurrences(of: "\n", with: "\n  "))")
    }
}
