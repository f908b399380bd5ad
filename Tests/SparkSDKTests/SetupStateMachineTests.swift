import Testing

@testable import SparkSDK

/// Every transition of the setup state machine.
@Suite("SetupStateMachine")
struct SetupStateMachineTests {
    /// A machine that reached `syncRequired` with the given passcode state.
    static func awaitingPasscode(existing: Bool) -> SetupStateMachine {
        var machine = SetupStateMachine()
        _ = machine.tokenReceived()
        _ = machine.registered(regID: 1)
        _ = machine.keysChecked(local: false, exist: existing)
        return machine
    }

    @Test func firstDeviceGoesFromTokenToSuccess() {
        var machine = SetupStateMachine()
        #expect(machine.setupState == .notRequested && machine.authTokenState == .needed)
        #expect(machine.tokenReceived() == .register(takeOver: false))
        #expect(machine.setupState == .ongoing(.registering) && machine.authTokenState == .ok)
        #expect(machine.tokenReceived() == nil, "a second token does not restart a running setup")
        #expect(machine.registered(regID: 7) == .checkKeys)
        #expect(machine.regID == 7 && machine.setupState == .ongoing(.checkingKeys))
        #expect(machine.keysChecked(local: false, exist: false) == nil)
        #expect(machine.setupState == .syncRequired && machine.passcodeState == .new)
        #expect(machine.syncStart(.existing) == nil, "no keys to unlock on a first device")
        #expect(machine.syncStart(.new) == .sync(.new))
        #expect(machine.setupState == .syncStarted)
        #expect(machine.syncSucceeded() == .finish)
        #expect(machine.setupState == .success && machine.passcodeState == .none)
    }

    @Test func laterDeviceWithAWrongPasscodeFirst() {
        var machine = Self.awaitingPasscode(existing: true)
        #expect(machine.passcodeState == .existing)
        #expect(machine.syncStart(.new) == nil)
        #expect(machine.syncStart(.existing) == .sync(.existing))
        machine.syncFailed(.incorrectPasscode)
        #expect(machine.setupState == .syncRequired && machine.syncError == .incorrectPasscode)
        #expect(machine.syncStart(.existing) == .sync(.existing))
        #expect(machine.syncError == .none)
        machine.syncFailed(.timeout)
        #expect(machine.syncError == .timeout)
        #expect(machine.syncStart(.reset) == .sync(.reset), "a forgotten passcode resets")
        #expect(machine.syncSucceeded() == .finish)
        machine.syncFailed(.failure)
        #expect(machine.setupState == .success, "a late failure does not undo success")
    }

    @Test func refusalsCarryTheirReasonAndTheAttemptsLeftUntilTheNextTry() {
        var machine = Self.awaitingPasscode(existing: true)
        _ = machine.syncStart(.existing)
        machine.syncFailed(.incorrectPasscode, attemptsLeft: 4)
        #expect(
            machine.state
                == .syncRequired(regID: 1, passcode: .existing, refusal: .init(error: .incorrectPasscode, attemptsLeft: 4)))
        #expect(machine.attemptsLeft == 4 && machine.setupError == nil)
        _ = machine.syncStart(.existing)
        #expect(machine.attemptsLeft == nil && machine.syncError == .none, "a new try clears the last refusal")
        let limit = SetupError(.tooManyAttempts, "wait", retryAfter: 600)
        machine.syncFailed(.failure, failure: limit, attemptsLeft: 0)
        #expect(machine.setupError == limit && machine.setupError?.retryAfter == 600 && machine.attemptsLeft == 0)
        #expect(machine.setupState == .syncRequired && machine.regID == 1)
    }

    @Test func aFailedStepStopsSetupWithItsError() {
        var machine = SetupStateMachine()
        _ = machine.tokenReceived()
        _ = machine.tokenNeeded(retrying: .register(takeOver: false))
        let unavailable = SetupError(.domainUnavailable, "no answer")
        machine.setupFailed(unavailable)
        #expect(machine.state == .idle(.failed(unavailable)) && machine.setupError == unavailable)
        #expect(machine.tokenReceived() == .register(takeOver: false), "the interrupted step was forgotten: setup starts over")
        _ = machine.registered(regID: 3)
        _ = machine.keysChecked(local: true, exist: true)
        machine.finishFailed(SetupError(.storageFailure, "disk"))
        #expect(machine.setupState == .success && machine.regID == 3 && machine.setupError?.code == .storageFailure)
        machine.finishFailed(SetupError(.storageFailure, "again"))
        machine.setupFailed(unavailable)
        #expect(machine.setupState == .notRequested && machine.regID == nil)
    }

    @Test func keysCreatedElsewhereMeanwhile() {
        var machine = Self.awaitingPasscode(existing: false)
        _ = machine.syncStart(.new)
        machine.keysAppeared(SetupError(.keysExist, "another device created them"))
        #expect(machine.setupState == .syncRequired && machine.passcodeState == .existing && machine.syncError == .failure)
        #expect(machine.setupError?.code == .keysExist && machine.regID == 1)
    }

    @Test func restartWithKeysOnTheEndpointSucceedsSilently() {
        var machine = SetupStateMachine()
        _ = machine.tokenReceived()
        _ = machine.registered(regID: 2)
        #expect(machine.keysChecked(local: true, exist: true) == .finish)
        #expect(machine.setupState == .success)
        #expect(machine.keysChecked(local: true, exist: true) == nil, "only while checking keys")
    }

    @Test func deviceSwitchAndFullNeedTheUser() {
        var machine = SetupStateMachine()
        _ = machine.tokenReceived()
        machine.deviceSwitchRequired()
        #expect(machine.setupState == .deviceSwitchRequired)
        #expect(machine.setupRetry() == .register(takeOver: true))
        machine.endpointLimitReached()
        #expect(machine.setupState == .full)
        #expect(machine.setupRetry() == .register(takeOver: false))
        #expect(machine.setupState == .ongoing(.registering))
        #expect(machine.setupRetry() == nil, "nothing to retry while ongoing")
    }

    @Test func aRemovedEndpointWipesAndWaitsForTheUser() {
        var machine = Self.awaitingPasscode(existing: true)
        _ = machine.syncStart(.existing)
        _ = machine.syncSucceeded()
        #expect(machine.endpointRemoved(reason: "deregistered by the user") == .wipe)
        #expect(
            machine.setupState == .notRequested && machine.removalReason == "deregistered by the user" && machine.regID == nil)
        #expect(machine.tokenReceived() == nil, "a superseded endpoint never restarts setup by itself")
        #expect(machine.setupState == .notRequested)
        #expect(machine.setupRetry() == .register(takeOver: false), "the user may ask again")
        #expect(machine.removalReason == nil && !machine.superseded)
    }

    @Test func tokensNeededResumeTheInterruptedStep() {
        var machine = SetupStateMachine()
        _ = machine.tokenReceived()
        #expect(machine.tokenNeeded(retrying: .register(takeOver: false)) == .requestToken)
        #expect(machine.authTokenState == .needed)
        #expect(machine.tokenReceived() == .register(takeOver: false), "the interrupted step runs again")
        #expect(machine.authTokenState == .ok)
        machine.tokenRejected(SetupError(.refused, "test auth is off", domainCode: .userAuthenticationRequired))
        #expect(machine.authTokenState == .rejected && machine.setupState == .notRequested)
        #expect(machine.state == .idle(.rejected(SetupError(.refused, "", domainCode: .userAuthenticationRequired))))
        #expect(machine.tokenReceived() == .register(takeOver: false), "a new token after a refusal tries again")
        machine.reset()
        #expect(machine == SetupStateMachine())
    }
}
