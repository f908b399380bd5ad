import Foundation
import SparkTestSupport
import Testing

@testable import SparkCrypto

/// OpenSSL's exit-time cleanup must not pull its tables from under threads still using them.
@Suite("OpenSSL runtime")
struct OpenSSLRuntimeTests {
    @Test func initialisedBeforeMainWithoutExitCleanup() {
        #expect(OpenSSLRuntime.exitCleanupDisabled)
    }

    /// Without the constructor in `COpenSSLRuntime`, about one run in two of this helper died
    /// of SIGSEGV, SIGILL or SIGBUS in libcrypto during `exit`; twenty clean exits in a row
    /// would then happen about once in a million tries.
    @Test func exitingWhileThreadsUseOpenSSLIsClean() async throws {
        let helper = Fixtures.executable("crypto-exit")
        for run in 1...20 {
            let result = try await Fixtures.run(helper, [])
            try #require(result.status == 0, "run \(run) ended with status \(result.status): \(result.stderr)")
        }
    }
}
