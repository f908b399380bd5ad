import SparkDomain
import Testing

@testable import SparkSDK

/// Which failures while applying a mailbox entry leave it to be read again, and which drop it.
@Suite("Messaging: retry or drop")
struct MailboxRetryTests {
    @Test func failuresOutsideTheEntryAreRetried() {
        #expect(MessagingContext.isRetryable(MessagingError(.storageFailure, "disk full")))
        #expect(MessagingContext.isRetryable(MessagingError(.refused, "down", domainCode: .unavailable)))
        #expect(MessagingContext.isRetryable(MessagingError(.refused, "expired", domainCode: .tokenExpired)))
        #expect(MessagingContext.isRetryable(MessagingError(.refused, "domain disk", domainCode: .storageFailure)))
        #expect(MessagingContext.isRetryable(DomainError(.unavailable, "down")))
        #expect(MessagingContext.isRetryable(AuthError(.credentialsRequired, "log in again")))
        #expect(MessagingContext.isRetryable(CancellationError()))
        #expect(MessagingContext.isRetryable(MessagingError(.notReady, "messaging has stopped")))
    }

    @Test func failuresOfTheEntryItselfAreDropped() {
        #expect(!MessagingContext.isRetryable(MessagingError(.forged, "bad signature")))
        #expect(!MessagingContext.isRetryable(MessagingError(.unknownUser, "no identity")))
        #expect(!MessagingContext.isRetryable(MessagingError(.refused, "not a member", domainCode: .forbidden)))
        #expect(!MessagingContext.isRetryable(DomainError(.invalidRequest, "malformed")))
    }
}
