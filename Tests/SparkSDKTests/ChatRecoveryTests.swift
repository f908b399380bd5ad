import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkMLS
import SparkTestSupport
import Testing

@testable import SparkSDK

/// Security review 4: a member gone bad posts, with their own token, a commit every other member
/// refuses. The domain cannot read a commit, so it orders it and the chat's epoch moves past the
/// members; before the fix, every later post and commit was refused with `conflict` for good.
/// Now the admin's device replaces the refused commit, which removes the member who posted it,
/// the chat goes on within a round trip, and what the others sent meanwhile arrives.
@Suite("A chat survives a member who goes bad")
struct ChatRecoveryTests {
    enum Attack: String, CaseIterable, Sendable {
        /// 300 random bytes posted as the chat's next commit.
        case garbage
        /// A valid commit by a member who is no admin, removing another member's device (the
        /// domain is told it removes no one).
        case removingOthers
        /// A valid ReInit by a member who is no admin: it would end the group for everyone.
        case reInit
    }

    @Test(arguments: Attack.allCases, MessagingStoreKind.tested)
    func theAdminReplacesARefusedCommitAndRemovesItsSender(_ attack: Attack, messaging: MessagingStoreKind) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory, messaging: messaging)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let (_, mallory) = try await world.endpoint("mallory", "mallory-pc")
            let chat = try await alice.startChat(with: ["bob", "mallory"], subject: "Team")
            try await alice.sendMessage("welcome", to: chat.chatID)
            for (name, access) in [("bob", bob), ("mallory", mallory)] {
                let messages = try await access.messages(in: chat.chatID)
                #expect(await waitFor("\(name) has the chat") { messages.value.count == 1 })
            }
            let bobEvents = EventRecorder(bob)

            let epoch = try await mallory.messenger.postHostileCommit(attack, in: chat.chatID)
            #expect(epoch > 0, "the domain ordered mallory's commit")

            // Bob writes while the chat is stuck; alice's device replaces the commit.
            try await bob.sendMessage("did that go through?", to: chat.chatID)
            let aliceMessages = try await alice.messages(in: chat.chatID)
            #expect(
                await waitFor("bob's message reaches alice") {
                    aliceMessages.value.contains { $0.content == "did that go through?" }
                })
            #expect(
                await waitFor("mallory is out of alice's chat") {
                    alice.chats.value.first { $0.chatID == chat.chatID }?.participants.map(\.userID) == ["alice", "bob"]
                })
            let members = try await world.domain.chat(
                token: try await alice.messenger.token(), endpointID: alice.messenger.endpointID, chatID: chat.chatID
            ).members.map(\.userID)
            #expect(Set(members) == ["alice", "bob"], "the domain removed mallory too: \(members)")
            // The chat goes on both ways.
            try await alice.sendMessage("yes, and mallory is gone", to: chat.chatID)
            let bobMessages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("alice's reply reaches bob") { bobMessages.value.last?.content == "yes, and mallory is gone" })
            #expect(
                bobMessages.value.first { $0.content == "did that go through?" }?.state.isAccepted == true,
                "bob's message was sent, not failed")
            #expect(try await bob.messenger.chats.groupDevices(of: chat.chatID).map(\.user) == ["alice", "bob"])
            // Bob saw mallory's commit refused.
            #expect(
                await waitFor("bob's device reported it") {
                    bobEvents.value.contains {
                        if case .dropped(let id, _) = $0 { return id == chat.chatID }
                        return false
                    }
                })
        }
    }

    /// A member may not replace anything, and the admin replaces only a commit no admin made:
    /// a commit bob's device refuses only because it does not trust a credential is not one every
    /// member refuses, so nothing is noted for it (see ChatGroupTests).
    @Test(arguments: MessagingStoreKind.tested) func aMemberCannotReplaceTheAdminsCommit(messaging: MessagingStoreKind)
        async throws
    {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory, messaging: messaging)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"], subject: "")
            let bobMessages = try await bob.messages(in: chat.chatID)
            try await alice.sendMessage("hello", to: chat.chatID)
            #expect(await waitFor("bob has the chat") { bobMessages.value.count == 1 })
            let info = try await world.domain.chat(
                token: try await bob.messenger.token(), endpointID: bob.messenger.endpointID, chatID: chat.chatID)
            await #expect(throws: DomainError.self) {
                _ = try await world.domain.postCommit(
                    token: try await bob.messenger.token(), endpointID: bob.messenger.endpointID, chatID: chat.chatID,
                    epoch: info.epoch - 1, commit: Data("bob's replacement".utf8), welcome: nil, add: [], remove: ["alice"],
                    replacingRefused: true)
            }
            try await alice.sendMessage("still the same chat", to: chat.chatID)
            #expect(await waitFor("bob reads on") { bobMessages.value.last?.content == "still the same chat" })
        }
    }
}

extension Messenger {
    /// Mallory's hand: a commit of the attack's kind for the chat's epoch, posted with her own
    /// token straight to the domain (her device neither records nor applies it).
    func postHostileCommit(_ attack: ChatRecoveryTests.Attack, in chatID: String) async throws -> Int64 {
        guard let group = try await chats.storedGroup(chatID) else { throw MessagingError(.unknownChat, "not in the chat") }
        var random = MLSSystemRandom()
        let commit: Data
        switch attack {
        case .garbage:
            commit = SystemRandom.bytes(count: 300)
        case .removingOthers:
            commit = try group.commit(
                adding: [], removing: Set(group.devices.filter { $0.user == "bob" }), now: Date(), random: &random
            ).commit
        case .reInit:
            commit = try group.group.commit(reInitializingAs: Data("new".utf8), now: Date(), random: &random).commit
        }
        return try await domain.postCommit(
            token: try await token(), endpointID: endpointID, chatID: chatID, epoch: Int64(clamping: group.group.epoch),
            commit: commit, welcome: nil, add: [], remove: [])
    }
}
