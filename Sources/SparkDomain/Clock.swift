public import Foundation

/// The time source of the domain and the SDK, injected so that tests run with a fixed clock.
public struct WallClock: Sendable {
    /// The current time.
    public let now: @Sendable () -> Date

    /// A clock reading `now`.
    public init(now: @escaping @Sendable () -> Date) { self.now = now }

    /// The system clock.
    public static let system = WallClock { Date() }
}
