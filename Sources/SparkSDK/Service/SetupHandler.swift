public import SparkDomain

/// What a person answers during setup, for ``BBMEnterpriseService/completeSetup(using:)``: a
/// passcode, whether to take the profile over from another device, which device to remove when
/// the user has the maximum. Any provider's sign-in can be followed by the same handler.
///
/// Each method may take as long as the person needs; returning nil (or false) stops setup with
/// ``SetupError/Code/declined`` and changes nothing.
public protocol SetupHandler: Sendable {
    /// A passcode for `request`: on a first device (`request.kind == .new`) a new one, which
    /// every later device of the user will ask for; on a later device the one chosen on the
    /// first. `request.problem` says why the previous answer was refused.
    func passcode(for request: PasscodeRequest) async -> PasscodeAnswer?
    /// Whether to move the profile here from the active endpoint(s) (they are signed out).
    func confirmDeviceSwitch(active endpoints: [EndpointInfo]) async -> Bool
    /// Which endpoint to remove when the user has the maximum (its `endpointID`); nil to stop.
    func endpointToRemove(from endpoints: [EndpointInfo]) async -> String?
}

/// Setup needs a passcode: which kind, and why the previous answer was refused.
public struct PasscodeRequest: Sendable, Equatable {
    /// ``SyncPasscodeState/new`` on the user's first device (choose one), else
    /// ``SyncPasscodeState/existing`` (the passcode chosen on the first device).
    public var kind: SyncPasscodeState
    /// Why the previous answer was refused: ``SetupError/Code/incorrectPasscode``,
    /// ``SetupError/Code/passcodeTooWeak`` (its reason names the rule) or
    /// ``SetupError/Code/keysExist``; nil the first time.
    public var problem: SetupError?
    /// After a wrong passcode: how many more this hour, when the domain says.
    public var attemptsLeft: Int?

    /// A request.
    public init(kind: SyncPasscodeState, problem: SetupError? = nil, attemptsLeft: Int? = nil) {
        self.kind = kind
        self.problem = problem
        self.attemptsLeft = attemptsLeft
    }
}

/// A person's answer to a ``PasscodeRequest``.
public enum PasscodeAnswer: Sendable, Equatable {
    /// The passcode asked for: the new one on a first device, the existing one on a later one.
    case passcode(String)
    /// The passcode is forgotten: make a new identity protected by `newPasscode`.
    ///
    /// - Warning: the user's other devices are signed out, and chats encrypted to the old keys
    ///   can no longer be read anywhere. Ask the person to confirm first.
    case reset(newPasscode: String)
}

extension BBMEnterpriseService {
    /// Drives setup to ``SetupState/success`` after a token was handed over (any provider's
    /// sign-in), asking `handler` whenever a person must answer, and returns the final state.
    ///
    /// ```swift
    /// try await controller.signIn(userID: "alice")
    /// try await controller.service.completeSetup(using: prompts)
    /// let access = try await controller.service.messaging()
    /// ```
    ///
    /// A refused passcode (wrong, too weak) is asked for again with the reason in
    /// ``PasscodeRequest/problem``; the handler decides when to stop.
    ///
    /// - Throws: ``SetupError``: ``SetupError/Code/declined`` when the handler gave no answer,
    ///   ``SetupError/Code/tooManyAttempts``, ``SetupError/Code/endpointRemoved``,
    ///   ``SetupError/Code/tokenRejected``, ``SetupError/Code/noToken`` (sign in first),
    ///   ``SetupError/Code/domainUnavailable`` and the domain's refusals.
    @discardableResult
    public func completeSetup(using handler: any SetupHandler) async throws -> ServiceAuthState {
        var problem: SetupError?
        var refusals = 0
        while true {
            let state = await waitForSettledState()
            if let failure = state.failure {
                // A refused passcode leaves setup waiting for another: ask again, with the reason.
                guard state.setupState == .syncRequired, Self.askAgain.contains(failure.code) else { throw failure }
                problem = problem ?? failure
            }
            switch state.setupState {
            case .success:
                return state
            case .syncRequired:
                let request = PasscodeRequest(
                    kind: state.syncPasscodeState, problem: problem,
                    attemptsLeft: problem?.attemptsLeft ?? state.passcodeAttemptsLeft)
                guard let answer = await handler.passcode(for: request) else {
                    throw SetupError(.declined, "no passcode was given")
                }
                do {
                    switch answer {
                    case .passcode(let passcode):
                        try await syncStart(passcode: passcode, action: state.syncPasscodeState == .new ? .new : .existing)
                    case .reset(let newPasscode):
                        try await syncStart(passcode: newPasscode, action: .reset)
                    }
                    problem = nil
                } catch let error as SetupError where Self.askAgain.contains(error.code) {
                    // A handler that repeats a refused answer forever must not spin forever.
                    refusals += 1
                    guard refusals < Self.maximumRefusals else { throw error }
                    problem = error
                }
            case .deviceSwitchRequired:
                let active = try await endpoints()
                guard await handler.confirmDeviceSwitch(active: active) else {
                    throw SetupError(.declined, "the device switch was declined")
                }
                await setupRetry()
            case .full:
                let endpoints = try await endpoints()
                guard let victim = await handler.endpointToRemove(from: endpoints) else {
                    throw SetupError(.declined, "no device was removed")
                }
                try await deregisterEndpoint(victim)
                await setupRetry()
            case .notRequested, .ongoing, .syncStarted:
                // Settled and not a failure only while a token is awaited; that is a failure too.
                throw SetupError(.noToken, "sign in first: setup has no token (it is \(state.setupState))")
            }
        }
    }

    /// Refusals after which the person is asked again.
    static let askAgain: [SetupError.Code] = [.incorrectPasscode, .passcodeTooWeak, .keysExist]
    static let maximumRefusals = 20
}

extension ServiceAuthState {
    /// Why setup stopped, when it stopped on a failure: a wrong or refused passcode, this
    /// endpoint removed, the token refused, the domain failing. Nil while setup runs, succeeded
    /// or waits for a person (a passcode, a device switch, an endpoint to remove).
    public var failure: SetupError? {
        switch setupState {
        case .syncRequired:
            if syncError == .incorrectPasscode {
                return SetupError(.incorrectPasscode, "the passcode is incorrect", attemptsLeft: passcodeAttemptsLeft)
            }
            return syncError == .failure ? setupError ?? SetupError(.refused, "the passcode could not be applied") : nil
        case .notRequested:
            if let removalReason { return SetupError(.endpointRemoved, removalReason) }
            if authTokenState == .rejected {
                return SetupError(
                    .tokenRejected, setupError?.reason ?? "the domain refused the user", domainCode: setupError?.domainCode)
            }
            return setupError
        case .ongoing, .syncStarted, .deviceSwitchRequired, .full, .success:
            return nil
        }
    }
}
