import SparkDomain
import Testing

@testable import SparkSDK

/// Which failures while applying a mailbox entry leave it to be read again, and which drop it.
@Suite("Messaging: retry or drop")
struct MailboxRetryTests {
    @Test func failuresOutsideTheEntryAreRetried() {
        #expect(Messenger.isRetryable(MessagingError(.storageFailure, "disk full")))
        #expect(Messenger.isRetryable(MessagingError(.refused, "down", domainCode: .unavailable)))
        #expect(Messenger.isRetryable(MessagingError(.refused, "expired", domainCode: .tokenExpired)))
        #expect(Messenger.isRetryable(MessagingError(.refused, "domain disk", domainCode: .storageFailure)))
        #expect(Messenger.isRetryable(DomainError(.unavailable, "down")))
        #expect(Messenger.isRetryable(AuthError(.credentialsRequired, "log in again")))
        #expect(Messenger.isRetryable(CancellationError()))
        #expect(Messenger.isRetryable(MessagingError(.notReady, "messaging has stopped")))
    }

    @Test func failuresOfTheEntryItselfAreDropped() {
        #expect(!Messenger.isRetryable(MessagingError(.forged, "bad signature")))
        #expect(!Messenger.isRetryable(MessagingError(.unknownUser, "no identity")))
        #expect(!Messenger.isRetryable(MessagingError(.refused, "not a member", domainCode: .forbidden)))
        #expect(!Messenger.isRetryable(DomainError(.invalidRequest, "malformed")))
    }
}
