/// A deterministic random number generator (SplitMix64): equal seeds give equal streams, so a
/// randomized test or a benchmark's corpus is the same on every run.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    /// The generator's state; the seed at first.
    public var state: UInt64

    /// A stream from `seed`.
    public init(seed: UInt64) { state = seed }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `0..<bound` (`bound` > 0; the modulo's slight bias is of no matter here).
    public mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
}
