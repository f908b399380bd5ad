import Foundation
import SparkLock
import SparkTestSupport
import Testing

@testable import SparkDomain
@testable import SparkSDK

/// Blocking, end to end: every device of the blocker drops the blocked user's messages,
/// reactions and typing in every chat, and refuses their invitations even when the domain lets
/// them through; the domain refuses the chats they start with the blocker.
@Suite("Messaging: blocking")
struct BlockingTests {
    @Test(arguments: MessagingStoreKind.tested) func aBlockedUserReachesNoDeviceOfTheBlocker(messaging: MessagingStoreKind)
        async throws
    {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory, messaging: messaging)
            let (_, laptop) = try await world.endpoint("alice", "alice-laptop")
            let (_, phone) = try await world.endpoint("alice", "alice-phone")
            try await approve(phone, on: laptop)
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let (_, carol) = try await world.endpoint("carol", "carol-phone")
            let direct = try await laptop.startChat(with: ["bob"])
            let group = try await carol.startChat(with: ["alice", "bob"], subject: "Team")
            #expect(await waitFor("bob is in both chats") { bob.chats.value.count == 2 })
            let hello = try await carol.sendMessage("hello team", to: group.chatID)
            try await bob.sendMessage("before", to: direct.chatID)
            #expect(await waitFor("the phone is in both chats") { phone.chats.value.count == 2 })
            let phoneDirect = try await phone.messages(in: direct.chatID)
            let phoneGroup = try await phone.messages(in: group.chatID)
            let laptopDirect = try await laptop.messages(in: direct.chatID)
            #expect(await waitFor("the phone has bob's message") { phoneDirect.value.map(\.content) == ["before"] })
            #expect(await waitFor("the phone is in the group") { phoneGroup.value.count == 1 })
            #expect(await waitFor("the laptop has bob's message") { laptopDirect.value.map(\.content) == ["before"] })

            let arrivals = Box<[String]>([])
            let arrivalsStream = phone.incomingMessages
            let listener = Task { for await message in arrivalsStream { arrivals.update { $0.append(message.content) } } }
            defer { listener.cancel() }
            try await laptop.block("bob")
            #expect(await laptop.blockedUsers() == ["bob"])
            #expect(await eventuallyAwaiting { await phone.blockedUsers() == ["bob"] })
            let events = EventRecorder(phone)

            // Bob, in both chats: a message, a reaction, typing. Then carol's message, after his.
            try await bob.sendMessage("after", to: direct.chatID)
            try await bob.sendMessage("bob in the group", to: group.chatID)
            try await bob.react(to: hello.id, emoji: "👍")
            try await bob.sendTyping(in: group.chatID)
            try await carol.sendMessage("carol again", to: group.chatID)
            #expect(await waitFor("carol's later message arrives") { phoneGroup.value.last?.content == "carol again" })
            #expect(phoneGroup.value.map(\.content) == ["hello team", "carol again"], "nothing of bob's")
            #expect(phoneGroup.value.first?.reactions == [], "bob's reaction is not counted")
            #expect(phoneDirect.value.map(\.content) == ["before"])
            #expect(
                await waitFor("the phone's arrivals name carol's message") { arrivals.value.contains("carol again") })
            #expect(!arrivals.value.contains("after") && !arrivals.value.contains("bob in the group"), "\(arrivals.value)")
            #expect(laptopDirect.value.map(\.content) == ["before"])
            #expect(!events.value.contains { if case .typing = $0 { true } else { false } }, "bob's typing shows nowhere")
            let carolGroup = try await carol.messages(in: group.chatID)
            #expect(
                await waitFor("the others still get what bob sends") {
                    carolGroup.value.contains { $0.content == "bob in the group" }
                })

            // The domain refuses a new chat bob starts with alice; alice cannot start one with bob.
            await #expect(throws: MessagingError(.refused, "")) { try await bob.startChat(with: ["alice"]) }
            await #expect(throws: MessagingError(.invalidArgument, "")) { try await laptop.startChat(with: ["bob"]) }

            try await phone.unblock("bob")
            #expect(await eventuallyAwaiting { await laptop.blockedUsers().isEmpty })
            try await bob.sendMessage("again", to: direct.chatID)
            #expect(await waitFor("bob reaches alice again") { laptopDirect.value.last?.content == "again" })
            #expect(laptopDirect.value.map(\.content) == ["before", "again"], "what came while blocked stays away")
            #expect(try await laptop.chat(direct.chatID).missingMessageCount == 0, "and is not counted missing")
        }
    }

    /// A domain that takes alice's block but enforces nothing: bob's new chat with her, and his
    /// invitation to a group of only him and her, reach her devices, which do not join.
    @Test(arguments: MessagingStoreKind.tested) func theBlockersDevicesRefuseInvitationsTheDomainLetsThrough(
        messaging: MessagingStoreKind
    ) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory, messaging: messaging)
            world.domain.keepsBlocksToItself.withLock { $0 = true }
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let (_, carol) = try await world.endpoint("carol", "carol-phone")
            try await alice.block("bob")
            let refused = try await bob.startChat(with: ["alice"], subject: "from bob")
            try await bob.sendMessage("hi alice", to: refused.chatID)
            // The domain also names alice herself as the sender of bob's next invitation: a chat
            // of no one but a blocked user is refused whoever is said to send it.
            world.domain.mailboxRewrite.withLock {
                $0 = { user, entries in
                    entries.map { entry in
                        var entry = entry
                        if user == "alice", entry.kind == .welcome, entry.sender == "bob" { entry.sender = "alice" }
                        return entry
                    }
                }
            }
            let renamed = try await bob.startChat(with: ["alice"], subject: "from bob, said to be from alice")
            let marker = try await carol.startChat(with: ["alice"], subject: "from carol")
            #expect(await waitFor("carol's chat reaches alice") { alice.chats.value.contains { $0.chatID == marker.chatID } })
            #expect(!alice.chats.value.contains { $0.chatID == refused.chatID }, "bob's invitation is not taken")
            #expect(!alice.chats.value.contains { $0.chatID == renamed.chatID }, "nor the one the domain renamed")
        }
    }
}
