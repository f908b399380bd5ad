import Foundation
import SparkDomain
import SparkDomainEngine
import SparkSDK
import SparkTestSupport
import Synchronization
import Testing

/// Tokens reach the service by one route, and the user is the one the token proves.
@Suite("Tokens: one route, the validated user")
struct TokenRouteTests {
    @Test func theUserIsTheOneTheTokenProvesNotTheOneTheAppNames() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let devices = try Devices(directory)
            let service = try await devices.service("device")
            await service.sendAuthToken(try await devices.domain.testToken(userID: "alice").token, userIdentifier: "bob")
            let state = service.authState.value
            #expect(state.authTokenState == .rejected && state.setupState == .notRequested)
            #expect(state.failure?.code == .tokenRejected && state.failure?.reason.contains("'alice', not 'bob'") == true)
            await #expect(throws: SetupError(.tokenRejected, "", domainCode: .forbidden)) {
                try await service.completeSetup(using: ScriptedHandler(passcodes: ["first-passcode"]))
            }
            #expect(try devices.domain.endpoints(of: "alice").isEmpty && devices.domain.endpoints(of: "bob").isEmpty)
            // The same token under its own user sets up.
            await service.sendAuthToken(try await devices.domain.testToken(userID: "alice").token, userIdentifier: "alice")
            #expect(try await service.completeSetup(using: ScriptedHandler(passcodes: ["first-passcode"])).setupState == .success)
        }
    }

    @Test func aRefreshedTokenIsPulledByTheServiceAndNeverPushedAgain() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let clock = TestClock()
            let embedded = try EmbeddedDomain.create(
                at: directory.appendingPathComponent("domain.sqlite").path, domainID: "route", clock: clock.wallClock)
            let domain = CountingDomain(embedded)
            let store = try EndpointStore(directory: directory.appendingPathComponent("device"))
            let manager = BBMTestTokenManager(domain: domain, store: store, leeway: 60, clock: clock.wallClock)
            let service = BBMEnterpriseService(store: store, endpointDescription: "device", unsafePasscodeIterations: 1000)
            let controller = BBMAuthController(tokenManager: manager, domain: domain, environment: .sandbox, service: service)
            try await controller.startBBMEnterpriseService()
            try await controller.signIn(userID: "alice")
            try await controller.completeSetup(using: ScriptedHandler(passcodes: ["first-passcode"]))
            #expect(domain.validations.load(ordering: .relaxed) == 1, "the sign-in reached the service once")
            // The token expires; the next call of the app's works, with a token the service
            // pulled from the token manager, which refreshed it once.
            clock.advance(by: 3600)
            #expect(try await service.endpoints().count == 1)
            #expect(domain.testTokens.load(ordering: .relaxed) == 2, "signed in, then refreshed once")
            // The token manager reports the refresh to the controller, which does not push it.
            try await Task.sleep(for: .milliseconds(100))
            #expect(domain.validations.load(ordering: .relaxed) == 1, "no second route")
            #expect(service.authState.value.setupState == .success)
            await service.stop()
        }
    }
}
