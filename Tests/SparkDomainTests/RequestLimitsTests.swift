import Foundation
import SparkDomain
import SparkLock
import Testing

@testable import SparkDomainServer

/// The daemon's rate limits on a clock the test moves: a burst, then one call per refill, per
/// address and per name.
@Suite("spark-domaind: rate limits")
struct RequestLimitsTests {
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
                .testToken, .evaluatePasscode,
            ])
    }
}
