import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkLock
import SparkObservable
import SparkTestSupport
import Testing

@testable import SparkSDK

/// Where the tests' devices keep their chats: the messaging suites run on both stores.
enum MessagingStoreKind: String, CaseIterable, Sendable {
    /// The endpoint store's SQLite tables, sealed.
    case sqlite
    /// `MemoryMessagingStore`, one per device, kept for the test (a device that restarts finds
    /// what it had, as a file outlives a process).
    case memory

    /// The stores the messaging suites run on: both, unless `SPARK_TEST_MESSAGING_STORES` names
    /// some (CI's sanitizer stages run the SQLite store alone: the memory store is the tests' own).
    static var tested: [MessagingStoreKind] {
        guard let named = ProcessInfo.processInfo.environment["SPARK_TEST_MESSAGING_STORES"] else { return allCases }
        let kinds = named.split(separator: ",").compactMap { MessagingStoreKind(rawValue: String($0)) }
        return kinds.isEmpty ? allCases : kinds
    }

    /// Has `store` keep messaging as this kind says, the memory of `device` taken from `stores`.
    func apply(to store: EndpointStore, device: String, stores: Locked<[String: MemoryMessagingStore]>) {
        guard self == .memory else { return }
        store.keepMessagingInMemory(
            stores.withLock { stores in
                if let kept = stores[device] { return kept }
                let made = MemoryMessagingStore()
                stores[device] = made
                return made
            })
    }
}

/// Devices of one user on one embedded domain, each with its own data directory.
struct Devices {
    let directory: URL
    let domain: EmbeddedDomain
    /// The wall clock of the domain and of every device's KeyPackages.
    let clock: WallClock
    /// Where the devices keep their chats.
    let messaging: MessagingStoreKind
    let memoryStores = Locked<[String: MemoryMessagingStore]>([:])

    init(
        _ directory: URL, messaging: MessagingStoreKind = .sqlite, policy: DomainPolicy = DomainPolicy(passwordIterations: 1000),
        clock: WallClock = .system
    ) throws {
        self.directory = directory
        self.messaging = messaging
        self.clock = clock
        domain = try EmbeddedDomain.create(
            at: directory.appendingPathComponent("domain.sqlite").path, domainID: "svc", policy: policy, clock: clock,
            allowUnsafePasswordHashing: true)
    }

    func service(_ name: String, postQuantumChats: Bool = true) async throws -> BBMEnterpriseService {
        let store = try EndpointStore(directory: directory.appendingPathComponent(name))
        messaging.apply(to: store, device: name, stores: memoryStores)
        let service = BBMEnterpriseService(
            store: store, endpointDescription: name, unsafePasscodeIterations: 1000, checkInInterval: .milliseconds(50),
            clock: clock, postQuantumChats: postQuantumChats)
        try await service.start(domain: domain, environment: .sandbox)
        return service
    }

    /// Starts setup for `user` and waits for the first state that needs the user.
    func begin(_ service: BBMEnterpriseService, user: String = "alice") async throws -> ServiceAuthState {
        await service.sendAuthToken(try await domain.testToken(userID: user).token, userIdentifier: user)
        return await service.waitForSettledState()
    }
}

@Suite("BBMEnterpriseService")
struct EnterpriseServiceTests {
    @Test func firstDeviceThenSecondWithAWrongPasscodeThenARestart() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let devices = try Devices(directory)
            let laptop = try await devices.service("laptop")
            #expect(laptop.serviceStarted.value)
            let states = Box<[String]>([])
            await laptop.sendAuthToken(try await devices.domain.testToken(userID: "alice").token, userIdentifier: "alice") {
                state in
                states.update { $0.append(state.setupState.description) }
            }
            var state = await laptop.waitForSettledState()
            #expect(state.setupState == .syncRequired && state.syncPasscodeState == .new && state.regId == 1)
            await #expect(throws: SetupError(.wrongState, ""), "no keys exist to unlock") {
                try await laptop.syncStart(passcode: "first-passcode", action: .existing)
            }
            #expect(laptop.authState.value.setupState == .syncRequired, "a refused call changes nothing")
            await #expect(throws: SetupError(.passcodeTooWeak, ""), "the user id is no passcode") {
                try await laptop.syncStart(passcode: "alice", action: .new)
            }
            await #expect(throws: SetupError(.passcodeTooWeak, "")) {
                try await laptop.syncStart(passcode: "aaaaaaaaaaaa", action: .new)
            }
            #expect(laptop.authState.value.setupState == .syncRequired && laptop.authState.value.syncError == .none)
            state = try await laptop.syncStart(passcode: "first-passcode", action: .new)
            #expect(state.setupState == .success && state.authTokenState == .ok)
            #expect(states.value == ["Ongoing(registering)", "Ongoing(checkingKeys)", "SyncRequired", "SyncStarted", "Success"])
            let laptopKey = try #require(await laptop.keys).signing.publicKey

            let phone = try await devices.service("phone")
            state = try await devices.begin(phone)
            #expect(state.setupState == .syncRequired && state.syncPasscodeState == .existing && state.regId == 2)
            do {
                try await phone.syncStart(passcode: "not-the-passcode", action: .existing)
                Issue.record("a wrong passcode was accepted")
            } catch let error as SetupError {
                #expect(error.code == .incorrectPasscode && error.attemptsLeft == 9)
            }
            state = phone.authState.value
            #expect(state.setupState == .syncRequired && state.syncError == .incorrectPasscode && state.passcodeAttemptsLeft == 9)
            state = try await phone.syncStart(passcode: "first-passcode", action: .existing)
            #expect(state.setupState == .success && state.syncError == .none)
            #expect(await phone.keys?.signing.publicKey == laptopKey)
            #expect(try await phone.endpoints().map(\.description) == ["laptop", "phone"])
            try await phone.setNickname("Alice's phone", forEndpoint: try await phone.endpointID)
            #expect(try await laptop.endpoints().map(\.nickname) == ["", "Alice's phone"])

            // A restart of the laptop: the same store, no passcode needed.
            await laptop.stop()
            let restarted = try await devices.service("laptop")
            state = try await devices.begin(restarted)
            #expect(state.setupState == .success && state.regId == 1)
            #expect(await restarted.keys?.signing.publicKey == laptopKey)
        }
    }

    /// A hostile operator replaces alice's identity in the directory and the log with one whose
    /// keys it holds. Her laptop restarts: its keys are kept (not wiped because the domain serves
    /// another identity), and her right passcode opens a backup holding those very keys, which
    /// raises the transparency alarm instead of calling her backup corrupt.
    @Test func aSubstitutedIdentityKeepsTheDevicesKeysAndRaisesTheAlarm() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let devices = try Devices(directory)
            let laptop = try await devices.service("laptop")
            _ = try await devices.begin(laptop)
            #expect(try await laptop.syncStart(passcode: "first-passcode", action: .new).setupState == .success)
            let own = try #require(await laptop.keys).signing.publicKey
            await laptop.stop()
            try await devices.domain.logAsOperator(try Fixtures.publishedIdentity("alice", version: 2).0)

            let restarted = try await devices.service("laptop")
            let state = try await devices.begin(restarted)
            #expect(state.setupState == .syncRequired && state.syncPasscodeState == .existing, "\(state)")
            let kept = try EndpointStore(directory: directory.appendingPathComponent("laptop")).keys(userID: "alice")
            #expect(kept?.signing.publicKey == own, "the device's keys were kept")
            let alarm = await #expect(throws: SetupError.self) {
                try await restarted.syncStart(passcode: "first-passcode", action: .existing)
            }
            #expect(
                alarm?.code == .identitySubstituted && alarm?.reason.contains("ALARM") == true, "\(String(describing: alarm))")
            let still = try EndpointStore(directory: directory.appendingPathComponent("laptop")).keys(userID: "alice")
            #expect(still?.signing.publicKey == own, "and are kept after the passcode too")
        }
    }

    /// An app signs in with a provider the domain does not trust: setup stops with the domain's
    /// reason (the untrusted issuer), not "sign in first", once the token manager has nothing
    /// fresher to give.
    @Test func aRefusedTokenKeepsTheDomainsReason() async throws {
        final class OneToken: BBMTokenManager, @unchecked Sendable {
            let fixed: BBMAuthenticatedAccount
            weak var delegate: (any BBMTokenManagerDelegate)?
            init(_ account: BBMAuthenticatedAccount) { fixed = account }
            var account: BBMAuthenticatedAccount? { get async { fixed } }
            func signIn() async throws -> BBMAuthenticatedAccount { fixed }
            func signInSilently() async throws -> BBMAuthenticatedAccount? { fixed }
            func signOut() async {}
            func validAccount() async throws -> BBMAuthenticatedAccount { fixed }
            func tokenRejected(_ token: String) async throws -> BBMAuthenticatedAccount { fixed }
        }
        try await Fixtures.withTemporaryDirectory { directory in
            let devices = try Devices(directory)
            let issuer = TokenIssuer(issuer: "https://untrusted.example", key: try Ed25519.PrivateKey(), keyID: "k1")
            let issued = try issuer.issue(subject: "mallory", audience: "svc", lifetime: 600, now: Date())
            let manager = OneToken(
                BBMAuthenticatedAccount(accountId: "mallory", idToken: issued.token, expiresAt: issued.expiresAt))
            let service = try await devices.service("laptop")
            await service.setTokenManager(manager)
            await service.sendAuthToken(issued.token, userIdentifier: "mallory")
            #expect(await eventually { service.authState.value.failure != nil })
            let failure = service.authState.value.failure
            #expect(failure?.code == .tokenRejected, "\(String(describing: failure))")
            #expect(failure?.reason.contains("issuer is not trusted") == true, "\(String(describing: failure))")
        }
    }

    @Test func aDeviceSwitchSupersedesTheOldEndpoint() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let devices = try Devices(directory, policy: DomainPolicy(multipleActiveEndpoints: false, passwordIterations: 1000))
            let old = try await devices.service("old-phone")
            _ = try await devices.begin(old)
            try await old.syncStart(passcode: "first-passcode", action: .new)
            #expect(await old.waitForSettledState().setupState == .success)

            let new = try await devices.service("new-phone")
            var state = try await devices.begin(new)
            #expect(state.setupState == .deviceSwitchRequired)
            await new.setupRetry()
            state = await new.waitForSettledState()
            #expect(state.setupState == .syncRequired && state.syncPasscodeState == .existing)
            try await new.syncStart(passcode: "first-passcode", action: .existing)
            #expect(await new.waitForSettledState().setupState == .success)

            // The old endpoint learns it at its next check-in, wipes its keys, and stays down.
            await old.checkIn()
            state = old.authState.value
            #expect(state.setupState == .notRequested && state.removalReason?.contains("superseded") == true)
            #expect(await old.keys == nil)
            await old.sendAuthToken(try await devices.domain.testToken(userID: "alice").token, userIdentifier: "alice")
            #expect(old.authState.value.setupState == .notRequested, "a superseded endpoint never restarts setup by itself")
        }
    }

    @Test func fullThenRemoveAnEndpointThenRetry() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let devices = try Devices(directory, policy: DomainPolicy(maximumEndpoints: 2, passwordIterations: 1000))
            let a = try await devices.service("a")
            _ = try await devices.begin(a)
            try await a.syncStart(passcode: "first-passcode", action: .new)
            let b = try await devices.service("b")
            _ = try await devices.begin(b)
            try await b.syncStart(passcode: "first-passcode", action: .existing)
            #expect(await b.waitForSettledState().setupState == .success)

            let c = try await devices.service("c")
            var state = try await devices.begin(c)
            #expect(state.setupState == .full)
            let endpoints = try await c.endpoints()
            #expect(endpoints.map(\.description) == ["a", "b"])
            // A device not registered yet may make room only in place of a device no approved
            // device approved: b (a, the user's oldest, is approved; a stolen token evicts it not).
            try await c.deregisterEndpoint(try #require(endpoints.last).endpointID)
            await c.setupRetry()
            state = await c.waitForSettledState()
            #expect(state.setupState == .syncRequired && state.regId == 3)

            // Device b learns from its heartbeat (no explicit call needed).
            #expect(await eventually { b.authState.value.setupState == .notRequested })
            #expect(b.authState.value.removalReason == "replaced by a new device of the user")
        }
    }

    @Test func aForgottenPasscodeWaitsOutTheResetDelay() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let devices = try Devices(directory)
            let a = try await devices.service("a")
            _ = try await devices.begin(a)
            try await a.syncStart(passcode: "first-passcode", action: .new)
            let b = try await devices.service("b")
            _ = try await devices.begin(b)
            do {
                try await b.syncStart(passcode: "brand-new-passcode", action: .reset)
                Issue.record("a reset without the keys completed at once")
            } catch let error as SetupError {
                #expect(error.reason.contains("takes effect at"), "\(error)")
            }
            #expect(await b.waitForSettledState().setupState != .success)
            #expect(await a.keys != nil, "the first device keeps its keys while the reset waits")
        }
    }

    @Test func aForgottenPasscodeResetsEverywhere() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            // No delay: this test is about what a completed reset does.
            let devices = try Devices(directory, policy: DomainPolicy(passwordIterations: 1000, identityResetDelay: 0))
            let a = try await devices.service("a")
            _ = try await devices.begin(a)
            try await a.syncStart(passcode: "first-passcode", action: .new)
            let oldKey = try #require(await a.keys).signing.publicKey
            let b = try await devices.service("b")
            _ = try await devices.begin(b)
            try await b.syncStart(passcode: "brand-new-passcode", action: .reset)
            #expect(await b.waitForSettledState().setupState == .success)
            let resetKeys = try #require(await b.keys)
            #expect(resetKeys.signing.publicKey != oldKey && resetKeys.keyVersion == 2)
            await a.checkIn()
            #expect(a.authState.value.removalReason?.contains("reset") == true)
            try await b.changePasscode(from: "brand-new-passcode", to: "changed-passcode")
            let c = try await devices.service("c")
            _ = try await devices.begin(c)
            await #expect(throws: SetupError(.incorrectPasscode, ""), "the old passcode no longer opens the keys") {
                try await c.syncStart(passcode: "brand-new-passcode", action: .existing)
            }
            #expect(await c.waitForSettledState().syncError == .incorrectPasscode)
            try await c.syncStart(passcode: "changed-passcode", action: .existing)
            #expect(await c.waitForSettledState().setupState == .success)
        }
    }

    @Test func anExpiredTokenIsRefreshedThroughTheTokenManagerAndSetupResumes() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let clock = TestClock(Date())
            let domain = try EmbeddedDomain.create(
                at: directory.appendingPathComponent("domain.sqlite").path, domainID: "svc",
                policy: DomainPolicy(passwordIterations: 1000),
                clock: clock.wallClock, allowUnsafePasswordHashing: true)
            let store = try EndpointStore(directory: directory.appendingPathComponent("device"))
            let manager = BBMTestTokenManager(domain: domain, store: store, clock: clock.wallClock)
            let account = try await manager.signIn(userID: "alice")
            let service = BBMEnterpriseService(store: store, endpointDescription: "device", unsafePasscodeIterations: 1000)
            try await service.start(domain: domain, environment: .sandbox)
            await service.setTokenManager(manager)
            clock.advance(by: 7200)  // the token is long expired
            await service.sendAuthToken(account.idToken, userIdentifier: "alice")
            #expect(await eventually { service.authState.value.setupState == .syncRequired })
            #expect(service.authState.value.authTokenState == .ok)
            #expect(try await manager.validAccount().idToken != account.idToken)
        }
    }

    @Test func setupStateIsObservableWithMonitorsAndFlows() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let devices = try Devices(directory)
            let service = try await devices.service("laptop")
            let seen = Box<[String]>([])
            let monitor = ObservableMonitor(activatedWithName: "setup", executor: .immediate) {
                seen.update { $0.append(service.authState.value.setupState.description) }
            }
            _ = try await devices.begin(service)
            try await service.syncStart(passcode: "first-passcode", action: .new)
            #expect(seen.value.first == "NotRequested" && seen.value.last == "Success")
            #expect(seen.value.contains("SyncRequired"))
            _ = monitor
        }
    }

    @Test func resetServiceWipesThisEndpointAndListenersHearConnectivity() async throws {
        final class Listener: BBMConnectivityListener {
            let events = Locked<[String]>([])
            func connectivityStateChange(connected: Bool, strict: Bool) {
                events.withLock { $0.append("\(connected)/\(strict)") }
            }
        }
        try await Fixtures.withTemporaryDirectory { directory in
            let devices = try Devices(directory)
            let service = try await devices.service("laptop")
            let listener = Listener()
            await service.addConnectivityListener(listener)
            _ = try await devices.begin(service)
            try await service.syncStart(passcode: "first-passcode", action: .new)
            #expect(await service.waitForSettledState().setupState == .success)
            #expect(listener.events.withLock { $0 }.first == "true/false" && listener.events.withLock { $0 }.last == "true/true")
            let oldEndpoint = try await service.endpointID
            try await service.resetService()
            let keysAfterReset = await service.keys
            #expect(service.authState.value.setupState == .notRequested && keysAfterReset == nil)
            #expect(try await service.endpointID != oldEndpoint, "a new endpoint id")
            let state = try await devices.begin(service)
            #expect(state.setupState == .syncRequired && state.syncPasscodeState == .existing && state.regId == 2)
            await service.stop()
            #expect(!service.serviceStarted.value && listener.events.withLock { $0 }.last == "false/false")
        }
    }

    @Test func twoRealProcessesShareTheUsersKeys() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let devices = try Devices(directory)
            let peer = Fixtures.executable("sdk-peer")
            let first = try await Fixtures.run(
                peer, [devices.domain.path, directory.appendingPathComponent("proc-a").path, "carol"],
                input: Data("first-passcode\n".utf8))
            #expect(first.status == 0, "\(first.stderr)")
            #expect(first.stdout.hasPrefix("Success regId=1"))
            let wrong = try await Fixtures.run(
                peer, [devices.domain.path, directory.appendingPathComponent("proc-b").path, "carol"],
                input: Data("nope-nope-nope\n".utf8))
            #expect(wrong.stdout.contains("SyncRequired") && wrong.stdout.contains("error=incorrectPasscode"))
            let second = try await Fixtures.run(
                peer, [devices.domain.path, directory.appendingPathComponent("proc-b").path, "carol"],
                input: Data("first-passcode\n".utf8))
            #expect(second.stdout.hasPrefix("Success regId=2"))
            let key = { (output: String) in output.split(separator: " ").first { $0.hasPrefix("key=") } }
            #expect(key(first.stdout) != nil && key(first.stdout) == key(second.stdout))
            // And this process, a third device, unlocks the keys the first process created.
            let here = try await devices.service("here")
            _ = try await devices.begin(here, user: "carol")
            try await here.syncStart(passcode: "first-passcode", action: .existing)
            #expect(await here.waitForSettledState().regId == 3)
        }
    }
}
