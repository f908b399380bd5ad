public import Foundation
public import SparkDomain
import SparkLock

/// A clock that tests move by hand.
public final class TestClock: Sendable {
    private let current: Locked<Date>

    /// A clock at `start` (a fixed date by default).
    public init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { current = Locked(start) }

    /// The current test time.
    public var now: Date { current.withLock { $0 } }

    /// Moves the clock forward.
    public func advance(by seconds: TimeInterval) { current.withLock { $0 += seconds } }

    /// The clock as the SDK and domain take it.
    public var wallClock: WallClock { WallClock { [self] in now } }
}
