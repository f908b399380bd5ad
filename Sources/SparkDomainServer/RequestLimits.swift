import Foundation
import SparkDomain
import SparkLock

#if canImport(Glibc)
    import Glibc
#endif

/// Rate limits on the calls that guess or cost: logins, sign-ups, code checks, resends, and key
/// fetches. Each call is counted against its client address and, where one is named, its
/// account or user (a token bucket each, refilled continuously), so neither one address with
/// many names nor many addresses with one name get far. A refused call is 429 with
/// `Retry-After`, before the domain does anything.
package final class RequestLimits: Sendable {
    /// A bucket's size and refill.
    package struct Rate: Sendable {
        /// Calls allowed in a burst.
        package var burst: Double
        /// Calls regained per second.
        package var perSecond: Double

        /// `burst` calls at once, refilled at `perMinute` per minute.
        package init(burst: Double, perMinute: Double) {
            self.burst = burst
            perSecond = perMinute / 60
        }
    }

    /// The limits per kind of call.
    package struct Policy: Sendable {
        /// Per client address.
        package var perAddress: Rate
        /// Per account or user named by the call.
        package var perName: Rate

        /// Limits.
        package init(perAddress: Rate, perName: Rate) {
            self.perAddress = perAddress
            self.perName = perName
        }

        /// The defaults: 30 at once and 30 a minute per address, 10 at once and 10 a minute per
        /// name.
        package static let standard = Policy(
            perAddress: Rate(burst: 30, perMinute: 30), perName: Rate(burst: 10, perMinute: 10))
    }

    private struct Bucket {
        var tokens: Double
        var updated: Double
    }

    private let policy: Policy
    private let buckets = Locked<[String: Bucket]>([:])
    private let now: @Sendable () -> Double
    /// The bits of an IPv6 client address its calls are counted by.
    private let ipv6Prefix: Int

    /// Limits with `policy`, timed by `now` (seconds; monotonic by default), counting an IPv6
    /// client by its first `ipv6Prefix` bits (64: its subnet, which any IPv6 host can pick
    /// addresses from) and an IPv4 client by its address.
    package init(policy: Policy = .standard, ipv6Prefix: Int = 64, now: (@Sendable () -> Double)? = nil) {
        self.policy = policy
        self.ipv6Prefix = min(128, max(1, ipv6Prefix))
        self.now = now ?? { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
    }

    /// What `address` is counted as: an IPv6 address cut to its first `bits` bits, written
    /// `PREFIX/bits`; anything else (IPv4, an IPv4-mapped address) as it is.
    package static func limitKey(_ address: String, bits: Int) -> String {
        var v6 = in6_addr()
        guard bits < 128, inet_pton(AF_INET6, address, &v6) == 1 else { return address }
        var bytes = withUnsafeBytes(of: v6) { Array($0) }
        let mapped = bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF
        guard !mapped else { return address }
        for bit in bits..<128 { bytes[bit / 8] &= ~(UInt8(0x80) >> (bit % 8)) }
        bytes.withUnsafeBytes { raw in withUnsafeMutableBytes(of: &v6) { $0.copyMemory(from: raw) } }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &v6, &text, socklen_t(text.count)) != nil else { return address }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) + "/\(bits)"
    }

    /// The kind of call an operation is, for limiting; nil when it is not limited.
    static func kind(of operation: DomainOperation) -> String? {
        switch operation {
        case .logIn: "login"
        case .signUp: "signUp"
        case .activate, .resetPassword: "code"
        case .resendActivationCode, .requestPasswordReset: "mail"
        case .fetchKeyBlob: "keyFetch"
        // A passcode guess: the domain counts attempts per user too, but each one costs an OPRF
        // evaluation, so the HTTP layer limits them per address and endpoint before that.
        case .evaluatePasscode: "passcode"
        case .testToken: "testToken"
        // Anonymous reads of the transparency log (a page costs the domain CPU and bandwidth);
        // a registered auditor's signed requests are not counted.
        case .transparencyUpdates: "updates"
        default: nil
        }
    }

    /// Takes one call of `kind` from `address` (and `name`); the seconds to wait when refused.
    func take(_ kind: String, address: String, name: String?) -> Int? {
        let time = now()
        return buckets.withLock { buckets -> Int? in
            var keys = [("a|\(kind)|\(Self.limitKey(address, bits: ipv6Prefix))", policy.perAddress)]
            if let name, !name.isEmpty { keys.append(("n|\(kind)|\(name.lowercased())", policy.perName)) }
            // Refill every bucket first; take from all only if all have a token.
            var wait = 0.0
            for (key, rate) in keys {
                var bucket = buckets[key] ?? Bucket(tokens: rate.burst, updated: time)
                bucket.tokens = min(rate.burst, bucket.tokens + (time - bucket.updated) * rate.perSecond)
                bucket.updated = time
                buckets[key] = bucket
                if bucket.tokens < 1 { wait = max(wait, (1 - bucket.tokens) / rate.perSecond) }
            }
            if wait > 0 { return max(1, Int(wait.rounded(.up))) }
            for (key, _) in keys { buckets[key]!.tokens -= 1 }
            if buckets.count > 100_000 { Self.prune(&buckets, time: time, policy: policy) }
            return nil
        }
    }

    /// Forgets full buckets (they are as good as new).
    private static func prune(_ buckets: inout [String: Bucket], time: Double, policy: Policy) {
        let slowest = min(policy.perAddress.perSecond, policy.perName.perSecond)
        let refill = max(policy.perAddress.burst, policy.perName.burst) / slowest
        buckets = buckets.filter { time - $0.value.updated < refill }
    }
}
