public import SparkCrypto

/// Where SparkMLS draws its secrets (leaf keys, path secrets, HPKE ephemerals, reuse guards).
/// Injected so tests are deterministic; production uses ``MLSSystemRandom``.
public protocol MLSRandomSource: Sendable {
    /// `count` fresh secret bytes.
    mutating func secret(count: Int) -> SecureBytes
}

/// The operating system's generator (OpenSSL's `RAND_bytes`).
public struct MLSSystemRandom: MLSRandomSource {
    /// How many bytes it has handed out. (It also keeps the type from being empty: an empty
    /// value passed `inout` through generic functions has no real address, and
    /// ThreadSanitizer's access instrumentation crashed on the one Swift made up.)
    public private(set) var bytesDrawn = 0

    /// The system generator.
    public init() {}

    /// `count` bytes from the system generator.
    public mutating func secret(count: Int) -> SecureBytes {
        bytesDrawn += count
        return SecureBytes(randomCount: count)
    }
}

/// A deterministic stream for tests: HKDF-SHA256 of a seed and a counter. Never for real keys.
public struct MLSSeededRandom: MLSRandomSource {
    private let seed: SecureBytes
    private var counter: UInt64 = 0

    /// A stream from `seed`; equal seeds give equal streams.
    public init(seed: some StringProtocol) { self.seed = SecureBytes(Array(seed.utf8)) }

    /// The next `count` bytes of the stream.
    public mutating func secret(count: Int) -> SecureBytes {
        counter += 1
        var info = [UInt8]()
        for shift in stride(from: 56, through: 0, by: -8) { info.append(UInt8((counter >> UInt64(shift)) & 0xff)) }
        // Outputs here are short (keys, nonces), well within HKDF's limit.
        return try! HKDF.expand(pseudoRandomKey: seed, info: info, outputByteCount: count, hash: .sha256)
    }
}
