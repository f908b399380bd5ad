import Foundation
import SparkDomain
import SparkSDK

/// Walks the setup state machine with the user: device switch, full, new and existing
/// passcodes, a forgotten passcode.
struct Setup {
    let console: Console
    let service: BBMEnterpriseService

    func run() async throws {
        for _ in 0..<30 {
            let state = await service.waitForSettledState()
            switch state.setupState {
            case .success:
                console.say("Setup complete: this device is endpoint \(state.regId.map(String.init) ?? "?") of the user.")
                return
            case .deviceSwitchRequired:
                console.say("Another device holds your profile; this domain allows one active device per user.")
                guard console.confirm("Move the profile to this device? The other device will be signed out.") else {
                    throw QuickStartExit(message: "setup stopped: the device switch was declined")
                }
                await service.setupRetry()
            case .full:
                let endpoints = try await service.endpointsGet()
                console.say("You have the maximum number of devices. Remove one to continue:")
                for (index, endpoint) in endpoints.enumerated() {
                    console.say(
                        "  \(index + 1). \(endpoint.description)\(endpoint.nickname.isEmpty ? "" : " (\(endpoint.nickname))") · last seen \(endpoint.lastSeen.formatted())"
                    )
                }
                guard let answer = console.ask("device to remove (number, empty to stop): "), let choice = Int(answer),
                    endpoints.indices.contains(choice - 1)
                else { throw QuickStartExit(message: "setup stopped: no device was removed") }
                try await service.endpointDeregister(endpoints[choice - 1].endpointID)
                console.say("Removed \(endpoints[choice - 1].description).")
                await service.setupRetry()
            case .syncRequired:
                try await passcode(for: state)
            case .notRequested:
                if let reason = state.removalReason { throw QuickStartExit(message: "this device was removed: \(reason)") }
                if let error = state.setupError { throw QuickStartExit(message: "setup failed: \(error.reason)") }
                throw QuickStartExit(message: "setup stopped: the domain needs a valid sign-in (token \(state.authTokenState))")
            case .ongoing, .syncStarted:
                continue
            }
        }
        throw QuickStartExit(message: "setup did not finish")
    }

    private func passcode(for state: ServiceAuthState) async throws {
        if state.syncPasscodeState == .new {
            console.say("This is your first device. Choose a passcode: it protects your keys for your other devices.")
            let passcode = try newPasscode()
            console.say("Creating your keys (this takes a moment)…")
            await service.syncStart(passcode: passcode, action: .new)
            return
        }
        if state.syncError == .incorrectPasscode {
            console.say(
                "That passcode is incorrect.\(state.passcodeAttemptsLeft.map { " \($0) attempts left this hour." } ?? "")")
        } else if state.syncError == .failure, let error = state.setupError {
            console.say("Unlocking failed: \(error.reason)")
            if error.domainCode == .tooManyAttempts {
                throw QuickStartExit(message: "too many passcode attempts; try again later")
            }
        }
        guard let entered = console.askSecret("passcode (or 'forgot'): ") else {
            throw QuickStartExit(message: "no passcode given")
        }
        if entered == "forgot" {
            console.say(
                """
                Resetting makes new keys. Your other devices will be signed out, and chats you had
                cannot be read any more, on any device. This cannot be undone.
                """)
            guard console.confirm("Reset your keys?") else { return }
            let passcode = try newPasscode()
            await service.syncStart(passcode: passcode, action: .reset)
            return
        }
        console.say("Checking the passcode…")
        await service.syncStart(passcode: entered, action: .existing)
    }

    private func newPasscode() throws -> String {
        for _ in 0..<3 {
            guard let first = console.askSecret("new passcode: "), let second = console.askSecret("again: ") else { break }
            guard first == second else {
                console.say("The two passcodes differ; try again.")
                continue
            }
            do {
                try BBMKeyManager.checkPasscode(first, userID: "")
                return first
            } catch let error as KeyManagementError {
                console.say(error.reason)
            }
        }
        throw QuickStartExit(message: "no passcode was chosen")
    }
}

/// The sign-up and login assistant in the terminal.
struct Accounts {
    let console: Console
    let manager: BBMAccountsTokenManager
    let domain: any DomainService

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
                    try await manager.signUp(
                        SignUpRequest(userName: name, password: password, email: email, country: country.uppercased(), age: age))
                    console.say("Account created. An activation code was sent to \(email).")
                    showLatestCode(for: email)
                    let code = console.ask("activation code: ") ?? ""
                    try await manager.activate(userName: name, code: code)
                    _ = try await manager.logIn(userName: name, password: password)
                    console.say("Activated and logged in as \(name).")
                    return
                case "r", "recover":
                    let email = console.ask("email: ") ?? ""
                    try await manager.requestPasswordReset(email: email)
                    console.say("If an account uses \(email), a reset code was sent to it.")
                    showLatestCode(for: email)
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

    /// The embedded domain's outbox stands in for email: show what was "sent".
    private func showLatestCode(for email: String) {
        guard let embedded = domain as? EmbeddedDomain, let mail = try? embedded.outbox(recipient: email, limit: 1).last else {
            return
        }
        console.say("  [outbox] to \(mail.to): \(mail.subject)\n  \(mail.body.replacingOccurrences(of: "\n", with: "\n  "))")
    }
}
