import Foundation
import SparkDomain
import SparkDomainEngine

extension DomainConformance {
    /// `postMessages`: a sender's messages numbered in the order given, in one transaction; a
    /// retried batch answered with its first receipts and delivered once; the first message
    /// refused ends the batch with the ones before it kept and nothing of it left behind (not an
    /// entry, not a number); the caller, the chat and the batch's size checked as a whole.
    static func messageBatches(_ domain: DomainUnderTest) async throws {
        let alice = try await user(domain, "alice")
        let bob = try await user(domain, "bob")
        let carol = try await user(domain, "carol")
        let service = domain.service
        _ = try await service.createChat(token: alice.token, endpointID: alice.endpoint, chatID: "c-batch", participants: ["bob"])
        func batch(_ user: User, _ ids: [String], payload: (String) -> Data = { Data($0.utf8) }) async throws -> PostBatchReceipt
        {
            try await service.postMessages(
                token: user.token, endpointID: user.endpoint, chatID: "c-batch",
                messages: ids.map { MessagePost(clientID: $0, payload: payload($0)) })
        }
        func bobsMessages() async throws -> [MailboxEntry] {
            try await service.readMailbox(token: bob.token, endpointID: bob.endpoint, after: 0, limit: 200).filter {
                $0.kind == .message
            }
        }

        let first = try await batch(alice, ["b1", "b2", "b3"])
        try expect(
            first.receipts.map(\.messageNumber) == [1, 2, 3] && first.refusal == nil,
            "a batch is numbered in order: \(first.receipts.map(\.messageNumber)), \(String(describing: first.refusal))")
        // A retry (its answer lost) with one more message: the first two answered as before and
        // not delivered again.
        let retried = try await batch(alice, ["b2", "b3", "b4"])
        try expect(
            retried.receipts.map(\.messageNumber) == [2, 3, 4], "a retried batch: \(retried.receipts.map(\.messageNumber))")
        var delivered = try await bobsMessages()
        try expect(
            delivered.map(\.messageNumber) == [1, 2, 3, 4]
                && delivered.map(\.payload) == ["b1", "b2", "b3", "b4"].map { Data($0.utf8) },
            "bob has each message once, in order: \(delivered.map(\.messageNumber))")

        // A message of an epoch the chat has left (it is at 0) ends the batch: the one before it is
        // numbered, it and the one after it are not posted.
        let stale = Data([0, 1, 0, 2, 7]) + Data("c-batch".utf8) + Data([0, 0, 0, 0, 0, 0, 0, 1]) + Data([1, 0xAA])
        let conflicted = try await batch(alice, ["b5", "b6", "b7"]) { $0 == "b6" ? stale : Data($0.utf8) }
        try expect(
            conflicted.receipts.map(\.messageNumber) == [5] && conflicted.refusal?.code == .conflict,
            "a stale epoch ends the batch: \(conflicted.receipts.map(\.messageNumber)), \(String(describing: conflicted.refusal))"
        )

        // A limit met mid-batch (after the number was drawn): the refused message takes its number
        // and its entries back with it.
        var policy = try await service.policy()
        let posted = 5
        policy.postsPerMinute = posted + 1
        try await domain.admin.setPolicy(policy)
        let limited = try await batch(alice, ["b6", "b7"])
        try expect(
            limited.receipts.map(\.messageNumber) == [6] && limited.refusal?.code == .tooManyAttempts,
            "a limit ends the batch: \(limited.receipts.map(\.messageNumber)), \(String(describing: limited.refusal))")
        policy.postsPerMinute = 1000
        try await domain.admin.setPolicy(policy)
        let resumed = try await batch(alice, ["b7"])
        try expect(
            resumed.receipts.map(\.messageNumber) == [7], "no number lost to a refusal: \(resumed.receipts.map(\.messageNumber))")
        delivered = try await bobsMessages()
        try expect(
            delivered.map(\.messageNumber) == Array(1...7) && delivered.last?.payload == Data("b7".utf8),
            "nothing of a refused message was delivered: \(delivered.map(\.messageNumber))")

        // Refused as a whole: a non-member, an empty or oversized batch, a client id missing.
        try await expectRefused(.notAMember, "a non-member's batch") { try await batch(carol, ["c1"]) }
        try await expectRefused(.invalidRequest, "an empty batch") { try await batch(alice, []) }
        try await expectRefused(.invalidRequest, "a batch of 65") { try await batch(alice, (0..<65).map { "x\($0)" }) }
        try await expectRefused(.invalidRequest, "a message without a client id") { try await batch(alice, [""]) }
        delivered = try await bobsMessages()
        try expect(delivered.count == 7, "the refused batches posted nothing: \(delivered.count)")
        // A message too large is refused alone: the one before it is kept.
        let oversized = try await batch(alice, ["b8", "big"]) {
            $0 == "big" ? Data(count: EmbeddedDomain.maximumPayloadSize + 1) : Data($0.utf8)
        }
        try expect(
            oversized.receipts.map(\.messageNumber) == [8] && oversized.refusal?.code == .tooLarge,
            "an oversized message ends the batch: \(oversized.receipts.map(\.messageNumber)), \(String(describing: oversized.refusal))"
        )
    }
}
