import Foundation
public import SparkDomain
import SparkLock
public import SparkObservable

/// The signed-in user's standing (Sportradar's user state).
public enum UserState: Sendable, Equatable {
    /// Not known yet.
    case initial
    /// In good standing.
    case valid
    /// Timed out: messages are refused for this many more seconds (counts down every second,
    /// then returns to valid by itself).
    case timeout(remainingSeconds: Int)
    /// Banned: messages are refused.
    case banned
}

/// The user's moderation status and infractions, kept current from the domain, with a live
/// countdown during a timeout and an auto-dismiss countdown for infractions (Sportradar's
/// `UserProvider`). The domain enforces the status; this only shows it.
///
/// ```swift
/// let users = UserProvider(service: service)
/// await users.refresh()
/// for await state in users.userState.values { show(state) }
/// ```
public final class UserProvider: Sendable {
    private let fetch: @Sendable () async throws -> UserStatus
    private let dismiss: @Sendable (Int64) async throws -> Void
    private let stateOwner = MutableStateFlow(UserState.initial, label: "UserProvider.userState")
    private let infractionsOwner = MutableStateFlow<[Infraction]>([], label: "UserProvider.infractions")
    private let nextOwner = MutableStateFlow<Infraction?>(nil, label: "UserProvider.nextInfraction")
    private let dismissOwner = MutableStateFlow(0, label: "UserProvider.dismissTimerCountDown")
    private let restrictionOwner = MutableStateFlow<UserStatus.State?>(nil, label: "UserProvider.restriction")
    private let tasks = Locked<(countdown: Task<Void, Never>?, dismiss: Task<Void, Never>?, poll: Task<Void, Never>?)>(
        (nil, nil, nil))
    private let clock: WallClock

    /// The user's state.
    public var userState: StateFlow<UserState> { stateOwner.flow }
    /// Infractions not yet dismissed, oldest first.
    public var infractions: StateFlow<[Infraction]> { infractionsOwner.flow }
    /// The oldest infraction not yet dismissed.
    public var nextInfraction: StateFlow<Infraction?> { nextOwner.flow }
    /// Seconds until the current infraction is dismissed automatically (0 when not counting).
    public var dismissTimerCountDown: StateFlow<Int> { dismissOwner.flow }
    /// The timeout (with its end and reason) or ban the domain last reported, nil while in good
    /// standing or not yet known; ``userState`` has the live countdown.
    public var restriction: StateFlow<UserStatus.State?> { restrictionOwner.flow }

    /// A provider for the service's signed-in user.
    public convenience init(service: BBMEnterpriseService, clock: WallClock = .system) {
        self.init(
            fetch: { try await service.engine.userStatus() }, dismiss: { id in try await service.engine.dismissInfraction(id) },
            clock: clock)
    }

    init(
        fetch: @escaping @Sendable () async throws -> UserStatus, dismiss: @escaping @Sendable (Int64) async throws -> Void,
        clock: WallClock
    ) {
        self.fetch = fetch
        self.dismiss = dismiss
        self.clock = clock
    }

    deinit {
        let running = tasks.withLock { $0 }
        running.countdown?.cancel()
        running.dismiss?.cancel()
        running.poll?.cancel()
    }

    /// Reads the status from the domain now.
    public func refresh() async {
        guard let status = try? await fetch() else { return }
        apply(status)
    }

    /// Keeps the status current by reading it every `interval` until ``stopUpdating()``.
    public func startUpdating(every interval: Duration = .seconds(2)) {
        let task = Task { [weak self] in
            while !Task.isCancelled {
                await self?.refresh()
                try? await Task.sleep(for: interval)
            }
        }
        tasks.withLock {
            $0.poll?.cancel()
            $0.poll = task
        }
    }

    /// Stops ``startUpdating(every:)``.
    public func stopUpdating() {
        tasks.withLock {
            $0.poll?.cancel()
            $0.poll = nil
        }
    }

    /// The oldest infraction not yet dismissed.
    public func getNextInfraction() -> Infraction? { nextOwner.value }

    /// Dismisses the oldest infraction (at the domain too).
    public func removeFirstInfraction() async {
        guard let first = infractionsOwner.value.first else { return }
        try? await dismiss(first.id)
        infractionsOwner.update { $0.removeAll { $0.id == first.id } }
        nextOwner.value = infractionsOwner.value.first
        stopAutoDismissInfraction()
    }

    /// Counts `seconds` down on ``dismissTimerCountDown`` and then removes the first infraction.
    public func startAutoDismissInfraction(after seconds: Int = 5) {
        guard nextOwner.value != nil else { return }
        dismissOwner.value = seconds
        let task = Task { [weak self] in
            var remaining = seconds
            while remaining > 0, !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                remaining -= 1
                self?.dismissOwner.value = remaining
            }
            guard !Task.isCancelled else { return }
            await self?.removeFirstInfraction()
        }
        tasks.withLock {
            $0.dismiss?.cancel()
            $0.dismiss = task
        }
    }

    /// Stops the auto-dismiss countdown.
    public func stopAutoDismissInfraction() {
        tasks.withLock {
            $0.dismiss?.cancel()
            $0.dismiss = nil
        }
        dismissOwner.value = 0
    }

    private func apply(_ status: UserStatus) {
        restrictionOwner.value =
            switch status.state {
            case .valid: nil
            case .timeout(let until, _) where until <= clock.now(): nil
            case .timeout, .banned: status.state
            }
        infractionsOwner.value = status.infractions
        nextOwner.value = status.infractions.first
        switch status.state {
        case .valid:
            tasks.withLock {
                $0.countdown?.cancel()
                $0.countdown = nil
            }
            stateOwner.value = .valid
        case .banned:
            tasks.withLock {
                $0.countdown?.cancel()
                $0.countdown = nil
            }
            stateOwner.value = .banned
        case .timeout(let until, _):
            let remaining = max(0, Int(until.timeIntervalSince(clock.now()).rounded(.up)))
            stateOwner.value = remaining > 0 ? .timeout(remainingSeconds: remaining) : .valid
            startCountdown(until: until)
        }
    }

    /// Ticks the timeout every second and returns to valid when it ends.
    private func startCountdown(until: Date) {
        let clock = self.clock
        let task = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                guard let self, !Task.isCancelled else { return }
                let remaining = max(0, Int(until.timeIntervalSince(clock.now()).rounded(.up)))
                self.stateOwner.value = remaining > 0 ? .timeout(remainingSeconds: remaining) : .valid
                if remaining == 0 {
                    self.restrictionOwner.value = nil
                    return
                }
            }
        }
        tasks.withLock {
            $0.countdown?.cancel()
            $0.countdown = task
        }
    }
}
