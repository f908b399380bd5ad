import Foundation
import SparkDomain
import SparkLock
import Testing

@testable import SparkDomainServer

/// The daemon's rate limits on a clock the test moves: a burst, then one call per refill, per
/// address and per name.
@Suite("spark-domaind: rate limits")
struct RequestLimitsTests {
    /// Sixty addresses of one IPv6 /64 guess logins with sixty names: they share one address
    /// bucket, as one IPv4 address would, so five get through, not sixty; another /64 has its
    /// own; IPv4 and IPv4-mapped addresses count alone; with a prefix of 128 each address does.
    @Test func anIPv6SubnetIsOneAddress() {
        let time = Locked(1000.0)
        func limits(_ prefix: Int) -> RequestLimits {
            RequestLimits(
                policy: .init(perAddress: .init(burst: 5, perMinute: 1), perName: .init(burst: 3, perMinute: 1)),
                ipv6Prefix: prefix, now: { time.withLock { $0 } })
        }
        let subnet = limits(64)
        var allowed = 0
        for index in 1...60
        where subnet.take("login", address: "2001:db8:1:2::\(String(index, radix: 16))", name: "u\(index)") == nil {
            allowed += 1
        }
        #expect(allowed == 5, "one /64 is one client: \(allowed) guesses got through")
        #expect(subnet.take("login", address: "2001:db8:1:3::1", name: "x") == nil, "another /64 is another client")
        #expect(subnet.take("login", address: "192.0.2.1", name: "y") == nil)
        #expect(RequestLimits.limitKey("2001:db8:1:2:aaaa:bbbb:cccc:dddd", bits: 64) == "2001:db8:1:2::/64")
        #expect(RequestLimits.limitKey("2001:db8:1:2:aaaa::1", bits: 48) == "2001:db8:1::/48")
        #expect(RequestLimits.limitKey("::ffff:192.0.2.1", bits: 64) == "::ffff:192.0.2.1")
        #expect(RequestLimits.limitKey("192.0.2.1", bits: 64) == "192.0.2.1")
        let each = limits(128)
        allowed = 0
        for index in 1...10 where each.take("login", address: "2001:db8:1:2::\(index)", name: "v\(index)") == nil { allowed += 1 }
        #expect(allowed == 10, "with 128 bits each address is a client")
    }

    @Test func aBurstThenOneCallPerRefillPerNameAndPerAddress() {
        let time = Locked(1000.0)
        let limits = RequestLimits(
            policy: .init(perAddress: .init(burst: 5, perMinute: 60), perName: .init(burst: 3, perMinute: 6)),
            now: { time.withLock { $0 } })
        for _ in 0..<3 { #expect(limits.take("login", address: "192.0.2.1", name: "alice") == nil) }
        #expect(limits.take("login", address: "192.0.2.1", name: "alice") == 10, "the name's bucket is empty: 10 s to the next")
        #expect(
            limits.take("login", address: "192.0.2.9", name: "ALICE") == 10, "names are one bucket whatever the case or address")
        #expect(limits.take("login", address: "192.0.2.1", name: "bob") == nil, "another name has its own")
        #expect(limits.take("signUp", address: "192.0.2.1", name: "alice") == nil, "and another kind of call")
        time.withLock { $0 += 10 }
        #expect(limits.take("login", address: "192.0.2.1", name: "alice") == nil, "one call back after the refill")
        #expect(limits.take("login", address: "192.0.2.1", name: "alice") != nil)
        // One address trying many names runs out of its own bucket.
        var refused = 0
        for index in 0..<10 where limits.take("login", address: "198.51.100.7", name: "user\(index)") != nil { refused += 1 }
        #expect(refused == 5, "five at once from one address, whatever the names")
    }

    @Test func everyGuessingCallIsLimitedAndNothingElse() {
        let limited = DomainOperation.allCases.filter { RequestLimits.kind(of: $0) != nil }
        #expect(
            Set(limited) == [
                .logIn, .signUp, .activate, .resetPassword, .resendActivationCode, .requestPasswordReset, .fetchKeyBlob,
                .testToken, .evaluatePasscode, .transparencyUpdates,
            ])
    }
}
