import Foundation
import SparkDomain
import Testing

@testable import SparkDomainServer

/// What a refused request tells the client.
@Suite("spark-domaind: refusals")
struct RefusalBodyTests {
    /// A 503 says the domain cannot answer and nothing of why: the store's error text (its
    /// engine, its statements, its tables) goes to the log only.
    @Test func aStoreFailureTellsTheClientNothingOfTheStore() throws {
        let causes = [
            DomainError(
                .storageFailure, "domain storage failed: SQLite 11: database disk image is malformed in SELECT hash FROM accounts"
            ),
            DomainError(.unavailable, "the domain file was written by a newer version: schema 14, this is 12"),
        ]
        for cause in causes {
            let response = DomainRouter.refusal(cause)
            let body = String(decoding: response.body, as: UTF8.self)
            #expect(response.status == 503 && response.headers.contains { $0.0 == "Retry-After" })
            #expect(body.contains(DomainRouter.unavailableMessage), "\(body)")
            for leak in ["SQLite", "SELECT", "accounts", "schema"] { #expect(!body.contains(leak), "\(leak) in \(body)") }
            let decoded = try WireCoder.decode(DomainError.self, from: response.body)
            #expect(decoded.code == cause.code, "the code still says what kind of failure it was")
        }
        // Other refusals keep their reason: it is about the request, not the server.
        let refused = DomainRouter.refusal(DomainError(.notAMember, "the caller is not a member of this chat"))
        #expect(String(decoding: refused.body, as: UTF8.self).contains("not a member"))
    }
}
