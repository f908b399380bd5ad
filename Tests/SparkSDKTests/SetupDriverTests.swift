import Foundation
import SparkCrypto
import SparkDomainEngine
import SparkLock
import SparkSDK
import SparkTestSupport
import Synchronization
import Testing

/// `completeSetup(using:)` and the controller's per-provider sign-in: one call from a token to
/// `success`, every question a person answers going to the handler, every failure a typed error.
@Suite("Setup in one call")
struct SetupDriverTests {
    @Test func aFirstDeviceIsAskedAgainWithTheRuleThatAWeakPasscodeBroke() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let devices = try Devices(directory)
            let laptop = try await devices.service("laptop")
            _ = try await devices.begin(laptop)
            let handler = ScriptedHandler(passcodes: ["short", "aaaaaaaaaa", "first-passcode"])
            let state = try await laptop.completeSetup(using: handler)
            #expect(state.setupState == .success && state.regId == 1)
            let requests = handler.requests.withLock { $0 }
            #expect(requests.map(\.kind) == [.new, .new, .new])
            #expect(requests.map { $0.problem?.code } == [nil, .passcodeTooWeak, .passcodeTooWeak])
            #expect(requests[1].problem?.reason == "a passcode needs at least 8 characters")
            #expect(requests[2].problem?.reason == "the passcode must not repeat one character")
        }
    }

    @Test func theUserIDOfTheTokenIsNoPasscode() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let devices = try Devices(directory)
            let laptop = try await devices.service("laptop")
            _ = try await devices.begin(laptop, user: "margaret-h")
            let handler = ScriptedHandler(passcodes: ["MARGARET-H", "first-passcode"])
            #expect(try await laptop.completeSetup(using: handler).setupState == .success)
            #expect(handler.requests.withLock { $0 }.last?.problem?.reason == "the passcode must not be the user id")
        }
    }

    @Test func aLaterDeviceIsToldAWrongPasscodeAndTheAttemptsLeft() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let devices = try Devices(directory)
            let laptop = try await devices.service("laptop")
            _ = try await devices.begin(laptop)
            try await laptop.completeSetup(using: ScriptedHandler(passcodes: ["first-passcode"]))
            let phone = try await devices.service("phone")
            _ = try await devices.begin(phone)
            let handler = ScriptedHandler(passcodes: ["wrong-passcode", "first-passcode"])
            #expect(try await phone.completeSetup(using: handler).setupState == .success)
            let requests = handler.requests.withLock { $0 }
            #expect(requests.map(\.kind) == [.existing, .existing] && requests.map(\.attemptsLeft) == [nil, 9])
            #expect(requests.map { $0.problem?.code } == [nil, .incorrectPasscode])
            let laptopKey = await laptop.keys?.signing.publicKey
            let phoneKey = await phone.keys?.signing.publicKey
            #expect(laptopKey != nil && phoneKey == laptopKey)
        }
    }

    @Test func aHandlerThatGivesUpStopsSetupAndChangesNothing() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let devices = try Devices(directory)
            let laptop = try await devices.service("laptop")
            _ = try await devices.begin(laptop)
            try await laptop.completeSetup(using: ScriptedHandler(passcodes: ["first-passcode"]))
            let phone = try await devices.service("phone")
            _ = try await devices.begin(phone)
            await #expect(throws: SetupError(.declined, "")) {
                try await phone.completeSetup(using: ScriptedHandler(passcodes: ["wrong-passcode"]))
            }
            let state = phone.authState.value
            let keys = await phone.keys
            #expect(state.setupState == .syncRequired && state.syncPasscodeState == .existing && keys == nil)
            // The same service finishes when asked again with the right answer.
            #expect(try await phone.completeSetup(using: ScriptedHandler(passcodes: ["first-passcode"])).setupState == .success)
        }
    }

    @Test func aDeviceSwitchIsConfirmedOrDeclinedByTheHandler() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let devices = try Devices(directory, policy: DomainPolicy(multipleActiveEndpoints: false, passwordIterations: 1000))
            let old = try await devices.service("old")
            _ = try await devices.begin(old)
            try await old.completeSetup(using: ScriptedHandler(passcodes: ["first-passcode"]))
            let new = try await devices.service("new")
            _ = try await devices.begin(new)
            await #expect(throws: SetupError(.declined, "")) {
                try await new.completeSetup(using: ScriptedHandler(passcodes: ["first-passcode"], confirm: false))
            }
            #expect(new.authState.value.setupState == .deviceSwitchRequired, "declining leaves the choice open")
            #expect(try await new.completeSetup(using: ScriptedHandler(passcodes: ["first-passcode"])).setupState == .success)
            await old.checkIn()
            await #expect(throws: SetupError(.endpointRemoved, "")) {
                try await old.completeSetup(using: ScriptedHandler(passcodes: []))
            }
        }
    }

    @Test func aFullUserRemovesTheEndpointTheHandlerPicks() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let devices = try Devices(directory, policy: DomainPolicy(maximumEndpoints: 2, passwordIterations: 1000))
            let a = try await devices.service("a")
            _ = try await devices.begin(a)
            try await a.completeSetup(using: ScriptedHandler(passcodes: ["first-passcode"]))
            // A device that registered and never finished setup (nothing approved it).
            let token = try await devices.domain.testToken(userID: "alice").token
            _ = try await devices.domain.registerEndpoint(
                token: token, registration: .init(endpointID: "stray", description: "x"))
            let b = try await devices.service("b")
            #expect(try await devices.begin(b).setupState == .full)
            #expect(
                try await b.completeSetup(using: ScriptedHandler(passcodes: ["first-passcode"], remove: "stray")).setupState
                    == .success)
            #expect(try await b.endpoints().map(\.description) == ["a", "b"])
            // The user's approved device is not a new device's to remove (a stolen token could).
            let c = try await devices.service("c")
            #expect(try await devices.begin(c).setupState == .full)
            await #expect(throws: SetupError(.refused, "", domainCode: .conflict)) {
                try await c.completeSetup(using: ScriptedHandler(passcodes: ["first-passcode"]))
            }
            #expect(c.authState.value.setupError?.reason.contains("is an approved device") == true)
            #expect(try await b.endpoints().map(\.description) == ["a", "b"])
        }
    }

    @Test func tooManyWrongPasscodesEndSetupWithATypedError() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let devices = try Devices(directory)
            let laptop = try await devices.service("laptop")
            _ = try await devices.begin(laptop)
            try await laptop.completeSetup(using: ScriptedHandler(passcodes: ["first-passcode"]))
            let phone = try await devices.service("phone")
            _ = try await devices.begin(phone)
            let handler = ScriptedHandler(passcodes: Array(repeating: "wrong-passcode", count: 15))
            do {
                try await phone.completeSetup(using: handler)
                Issue.record("fifteen wrong passcodes were allowed")
            } catch let error as SetupError {
                #expect(error.code == .tooManyAttempts && (error.retryAfter ?? 0) > 0, "\(error)")
            }
            #expect(handler.requests.withLock { $0 }.count == 11, "ten wrong passcodes an hour; the domain refuses the eleventh")
            #expect(await phone.keys == nil)
        }
    }

    @Test func withoutATokenCompleteSetupSaysSignInFirst() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let service = try await Devices(directory).service("laptop")
            await #expect(throws: SetupError(.noToken, "")) {
                try await service.completeSetup(using: ScriptedHandler(passcodes: ["first-passcode"]))
            }
        }
    }

    @Test func theControllerSignsInForItsOwnProviderAndRefusesTheOthers() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let controller = try BBMAuthController.fromConfigFile(try AuthControllerTests.plist(directory))
            try await controller.startBBMEnterpriseService()
            await #expect(throws: AuthError(.wrongProvider, "")) { try await controller.logIn(userName: "a", password: "b") }
            await #expect(throws: AuthError(.wrongProvider, "")) { try await controller.signIn(jwtToken: "x.y.z") }
            await #expect(throws: AuthError(.wrongProvider, "")) { try await controller.requestPasswordReset(email: "a@b.c") }
            #expect(try await controller.signIn(userID: "alice").accountId == "alice")
            let state = try await controller.completeSetup(using: ScriptedHandler(passcodes: ["first-passcode"]))
            #expect(state.setupState == .success && controller.startedAndAuthenticated.value)
            await controller.service.stop()
        }
    }

    @Test func theAccountsAssistantFromSignUpToSetupThroughTheController() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try EmbeddedDomain.create(
                at: directory.appendingPathComponent("domain.sqlite").path, domainID: "ctl",
                policy: DomainPolicy(userAuthenticationEnabled: true, passwordIterations: 1000), allowUnsafePasswordHashing: true)
            let controller = try BBMAuthController.fromConfigFile(try AuthControllerTests.plist(directory, provider: "accounts"))
            try await controller.startBBMEnterpriseService()
            await #expect(throws: AuthError(.wrongProvider, "")) { try await controller.signIn(userID: "mia") }
            try await controller.signUp(
                SignUpRequest(userName: "mia", password: "Maple-Leaf-2024", email: "mia@example.com", country: "CA", age: 30))
            let mail = try #require(try domain.outbox(recipient: "mia@example.com", limit: 1).last)
            let code = try #require(mail.body.firstMatch(of: /activation code is (\d{6})/)?.1)
            await #expect(throws: AuthError(.refused, "", domainCode: .notActivated)) {
                try await controller.logIn(userName: "mia", password: "Maple-Leaf-2024")
            }
            try await controller.activate(userName: "mia", code: String(code))
            #expect(try await controller.logIn(userName: "mia", password: "Maple-Leaf-2024").accountId == "mia")
            #expect(
                try await controller.completeSetup(using: ScriptedHandler(passcodes: ["mia-passcode"])).setupState == .success)
            await controller.service.stop()
        }
    }
}
