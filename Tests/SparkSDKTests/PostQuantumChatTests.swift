import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkLock
import SparkMLS
import SparkTestSupport
import Testing

@testable import SparkSDK

/// Post-quantum chats: a new chat runs the X-Wing MLS suite when every member device does, a
/// device of an earlier release keeps its chats classic and they show it, a domain cannot
/// downgrade a chat by withholding KeyPackages, and a domain's `requirePostQuantum` takes
/// nothing classic.
@Suite("Post-quantum chats")
struct PostQuantumChatTests {
    /// Devices that all run post-quantum chats make post-quantum chats: both sides show it,
    /// messages go both ways, and the group is of the X-Wing suite on every device. A device
    /// added later (the user's second one) joins with a post-quantum KeyPackage.
    @Test func newChatsArePostQuantumWhenEveryDeviceIs() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"], subject: "Harvest this")
            #expect(chat.postQuantum)
            #expect(await waitFor("bob has it, post-quantum") { bob.chats.value.first?.postQuantum == true })
            try await alice.sendMessage("hello after Q-day", to: chat.chatID)
            let bobMessages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("bob reads it") { bobMessages.value.map(\.content) == ["hello after Q-day"] })
            try await bob.sendMessage("and back", to: chat.chatID)
            let aliceMessages = try await alice.messages(in: chat.chatID)
            #expect(await waitFor("alice reads it") { aliceMessages.value.contains { $0.content == "and back" } })
            for access in [alice, bob] {
                let group = try #require(try await access.messenger.chats.storedGroup(chat.chatID))
                #expect(group.group.cipherSuite == .xWingAES128GCMSHA256Ed25519)
            }

            let (_, tablet) = try await world.endpoint("bob", "bob-tablet")
            try await approve(tablet, on: bob)
            #expect(await waitFor("bob's tablet is in the chat, post-quantum") { tablet.chats.value.first?.postQuantum == true })
        }
    }

    /// A device that does not run post-quantum chats (an earlier release, or the plist's
    /// `postQuantumChats` off) keeps a chat with it classic, and the chat says so; chats
    /// without it stay post-quantum, and it cannot be invited into one (its KeyPackages, signed,
    /// say it does not run the suite).
    @Test func aDeviceOfAnEarlierReleaseKeepsItsChatsClassicAndTheyShowIt() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            _ = try await world.endpoint("bob", "bob-phone")
            let (_, carol) = try await world.endpoint("carol", "carol-old", postQuantumChats: false)
            let carolToken = try await world.domain.testToken(userID: "carol").token
            let carolEndpoint = try #require(try await carol.devices().first { $0.approval == .thisDevice }).endpointID
            #expect(
                try await world.domain.keyPackageCount(token: carolToken, endpointID: carolEndpoint, suite: 0xF768) == 0,
                "the old device publishes no post-quantum KeyPackage")

            let mixed = try await alice.startChat(with: ["bob", "carol"], subject: "Mixed")
            #expect(!mixed.postQuantum, "classic: carol's device does not run the suite")
            #expect(await waitFor("carol has it, classic") { carol.chats.value.first.map { !$0.postQuantum } == true })
            try await alice.sendMessage("classic for now", to: mixed.chatID)
            let carolMessages = try await carol.messages(in: mixed.chatID)
            #expect(await waitFor("carol reads it") { carolMessages.value.map(\.content) == ["classic for now"] })

            let modern = try await alice.startChat(with: ["bob"], subject: "Modern")
            #expect(modern.postQuantum)
            let refused = await #expect(throws: MessagingError.self) { try await alice.invite(["carol"], to: modern.chatID) }
            #expect(refused?.code == .refused, "\(String(describing: refused))")
            #expect(try await alice.chat(modern.chatID).participants.map(\.userID).sorted() == ["alice", "bob"])

            // Carol's old device starts a chat of its own: classic, and alice's device joins it.
            let fromCarol = try await carol.startChat(with: ["alice"], subject: "From the old one")
            #expect(!fromCarol.postQuantum)
            #expect(await waitFor("alice has it") { alice.chats.value.contains { $0.chatID == fromCarol.chatID } })
            #expect(try await alice.chat(fromCarol.chatID).postQuantum == false)
        }
    }

    /// A domain that withholds bob's post-quantum KeyPackages, handing out his classic ones,
    /// does not get a classic chat: bob's classic KeyPackage lists the post-quantum suite in its
    /// signed capabilities, so alice's device leaves it out rather than downgrade; with no
    /// device of bob's left, no chat is made. Once the domain hands them out, the chat is
    /// post-quantum.
    @Test func aDomainThatWithholdsPostQuantumKeyPackagesDowngradesNoChat() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            world.domain.withheldPostQuantum.withLock { $0 = ["bob"] }
            let refused = await #expect(throws: MessagingError.self) {
                try await alice.startChat(with: ["bob"], subject: "Downgraded?")
            }
            #expect(refused?.code == .unknownUser, "\(String(describing: refused))")
            #expect(alice.chats.value.isEmpty, "no chat was made")

            world.domain.withheldPostQuantum.withLock { $0 = [] }
            let chat = try await alice.startChat(with: ["bob"], subject: "Post-quantum")
            #expect(chat.postQuantum)
            #expect(await waitFor("bob has it, post-quantum") { bob.chats.value.first?.postQuantum == true })
        }
    }

    /// Under `requirePostQuantum` (set once alice and bob published KeyPackages of both suites)
    /// the domain hands out no classic KeyPackage, even those it kept, and takes no classic
    /// KeyPackage and no Welcome into a classic group: a device set up then publishes
    /// post-quantum KeyPackages only, chats are post-quantum, and a device that runs classic MLS
    /// only can be in no chat.
    @Test func aDomainThatRequiresPostQuantumTakesNothingClassic() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            try world.domain.setPolicy(DomainPolicy(passwordIterations: 1000, requirePostQuantum: true))
            let aliceToken = try await world.domain.testToken(userID: "alice").token
            let aliceEndpoint = try #require(try await alice.devices().first { $0.approval == .thisDevice }).endpointID
            let (_, dave) = try await world.endpoint("dave", "dave-laptop")
            let daveToken = try await world.domain.testToken(userID: "dave").token
            let daveEndpoint = try #require(try await dave.devices().first { $0.approval == .thisDevice }).endpointID
            #expect(try await world.domain.keyPackageCount(token: daveToken, endpointID: daveEndpoint, suite: 1) == 0)
            #expect(
                try await world.domain.keyPackageCount(token: daveToken, endpointID: daveEndpoint, suite: 0xF768)
                    == DeviceKeys.oneTimeTarget)
            let chat = try await alice.startChat(with: ["bob"], subject: "Required")
            #expect(chat.postQuantum)
            #expect(await waitFor("bob has it") { bob.chats.value.first?.postQuantum == true })

            // The domain refuses what is classic, whoever sends it.
            let signer = try await alice.messenger.identities.deviceSigner()
            var random = MLSSystemRandom()
            let classic = try MLSKeyPackageBundle(signer: signer, now: Date(), random: &random)
            let published = await #expect(throws: DomainError.self) {
                try await world.domain.publishKeyPackages(
                    token: aliceToken, endpointID: aliceEndpoint, keyPackages: [classic.keyPackage], lastResort: nil)
            }
            #expect(published?.code == .forbidden)
            #expect(
                try await world.domain.claimKeyPackages(token: aliceToken, endpointID: aliceEndpoint, userID: "bob", suite: 1)
                    .isEmpty, "no classic KeyPackage is handed out, not even one bob published before")
            func stranger(_ name: String) throws -> MLSSigner {
                MLSSigner(credential: MLSCredential(identity: Data(name.utf8)), key: try Ed25519.PrivateKey())
            }
            let group = try MLSGroup.create(
                groupID: Data("spark-chat:classic".utf8), signer: try stranger("creator"), random: &random)
            let classicBob = try MLSKeyPackageBundle(signer: try stranger("joiner"), now: Date(), random: &random)
            let commit = try group.commit(adding: [classicBob.keyPackage], removing: [], now: Date(), random: &random)
            _ = try await world.domain.createChat(
                token: aliceToken, endpointID: aliceEndpoint, chatID: "classic", participants: [], posts: [])
            let welcomed = await #expect(throws: DomainError.self) {
                try await world.domain.postCommit(
                    token: aliceToken, endpointID: aliceEndpoint, chatID: "classic", epoch: 0, commit: commit.commit,
                    welcome: commit.welcome, add: ["bob"], remove: [])
            }
            #expect(welcomed?.code == .forbidden)

            // A classic-only device publishes nothing here, so no chat can add it.
            let (_, carol) = try await world.endpoint("carol", "carol-old", postQuantumChats: false)
            let refused = await #expect(throws: MessagingError.self) {
                try await alice.startChat(with: ["carol"], subject: "Classic only")
            }
            #expect(refused?.code == .unknownUser, "\(String(describing: refused))")
            _ = carol
        }
    }
}
