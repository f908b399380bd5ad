import Foundation
import SparkStore
import SparkTestSupport
import Testing

@testable import SparkSDK

/// A device through power cuts (`PowerCut`: a VFS that throws away what was not synced): what
/// the API answered as stored is there after the cut, and no secret of a group (epoch, leaf,
/// generation) serves two messages, so the receiver opens every one. Each round cuts the
/// sender's store at a random write or sync while it sends, throwing away all the unsynced
/// writes or a random half of them, then starts the device again on what the disk kept.
@Suite("Power cuts: a device")
struct DevicePowerCutTests {
    @Test(arguments: 0..<6)
    func whatTheSenderWasToldIsStoredSurvivesACutAndNoKeyServesTwice(_ round: Int) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let aliceDirectory = directory.appendingPathComponent("alice-laptop")
            let prefix = try PowerCut.watch(aliceDirectory)
            var random = SplitMix64(seed: 62_100 + UInt64(round))
            let world = try ChatWorld(directory)
            var aliceSide: (BBMEnterpriseService, BBMAccess)? = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let events = EventRecorder(bob)
            let alice = try #require(aliceSide?.1)
            let chat = try await alice.startChat(with: ["bob"], subject: "cuts")
            try await alice.sendMessage("before", to: chat.chatID)
            let bobMessages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("bob has the first") { bobMessages.value.count == 1 })
            // What came before is on the disk (a checkpoint syncs it, whatever the durability),
            // so that a cut tells only of what follows.
            try DatabaseQueue(path: aliceDirectory.appendingPathComponent("endpoint.sqlite").path).withConnection { db in
                try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            }

            PowerCut.arm(prefix, at: Int64(1 + random.below(240)), seed: random.next(), losingAll: random.below(2) == 0)
            var answered: [String] = []
            var failure: (any Error)?
            for index in 0..<2_000 {
                let text = "m\(index)"
                do {
                    try await alice.sendMessage(text, to: chat.chatID)
                } catch {
                    failure = error
                    break
                }
                answered.append(text)
            }
            #expect(PowerCut.cuts(prefix) == 1, "the cut came before the sender ran out (\(String(describing: failure)))")
            if let (service, _) = aliceSide { await service.stop() }
            aliceSide = nil

            // The machine comes back: alice's device starts on what its disk kept.
            let (restarted, again) = try await world.restart("alice-laptop", user: "alice")
            let kept = try await again.messages(in: chat.chatID, before: nil, limit: 1_000).map(\.content)
            #expect(Set(answered).isSubset(of: Set(kept)), "every message the API answered as stored is there")
            for index in 0..<3 { try await again.sendMessage("after \(index)", to: chat.chatID) }
            // Bob opens every one, each once and in order: a key used twice would not open.
            let expected = ["before"] + answered + (0..<3).map { "after \($0)" }
            #expect(
                await eventuallyAwaiting(seconds: 60) {
                    let contents = bobMessages.value.map(\.content)
                    return Set(expected).isSubset(of: Set(contents)) && contents.last == "after 2"
                }, "bob has \(bobMessages.value.map(\.content)), expected \(expected)")
            let contents = bobMessages.value.map(\.content)
            #expect(contents.count == Set(contents).count, "no message twice")
            #expect(bobMessages.value.map(\.number) == (1...contents.count).map { Int64($0) })
            #expect(events.value.isEmpty, "nothing was dropped: \(events.value)")
            _ = restarted
        }
    }

    /// The receiver cut while it applies pages of its mailbox: started again, it has every
    /// message once, in order, and opens each (none applied twice, none skipped).
    @Test(arguments: 0..<4)
    func aReceiverCutWhileApplyingPagesHasEveryMessageOnce(_ round: Int) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let bobDirectory = directory.appendingPathComponent("bob-phone")
            let prefix = try PowerCut.watch(bobDirectory)
            var random = SplitMix64(seed: 62_200 + UInt64(round))
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            var bobSide: (BBMEnterpriseService, BBMAccess)? = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"], subject: "cuts")
            let bob = try #require(bobSide?.1)
            let bobMessages = try await bob.messages(in: chat.chatID)
            try await alice.sendMessage("m0", to: chat.chatID)
            #expect(await waitFor("bob has the first") { bobMessages.value.count == 1 })
            try DatabaseQueue(path: bobDirectory.appendingPathComponent("endpoint.sqlite").path).withConnection { db in
                try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            }
            PowerCut.arm(prefix, at: Int64(1 + random.below(200)), seed: random.next(), losingAll: random.below(2) == 0)
            let count = 40
            for index in 1..<count { try await alice.sendMessage("m\(index)", to: chat.chatID) }
            #expect(
                await eventuallyAwaiting(seconds: 60) { PowerCut.cuts(prefix) == 1 || bobMessages.value.count == count },
                "bob received or was cut")
            if PowerCut.cuts(prefix) == 0 { PowerCut.cut(prefix, seed: random.next(), losingAll: true) }
            if let (service, _) = bobSide { await service.stop() }
            bobSide = nil

            let (_, again) = try await world.restart("bob-phone", user: "bob")
            let events = EventRecorder(again)
            try await again.refresh()
            let expected = (0..<count).map { "m\($0)" }
            #expect(
                await eventuallyAwaiting(seconds: 60) {
                    (try? await again.messages(in: chat.chatID, before: nil, limit: 1_000).map(\.content)) == expected
                }, "every message once, in order")
            let numbers = try await again.messages(in: chat.chatID, before: nil, limit: 1_000).map(\.number)
            #expect(numbers == (1...count).map { Int64($0) })
            #expect(events.value.isEmpty, "nothing was dropped: \(events.value)")
        }
    }

    /// Sender and receiver cut in one round, each at its own random point, then both started
    /// again: every message the sender was told is stored reaches the receiver once, in order,
    /// and opens.
    @Test(arguments: 0..<3)
    func senderAndReceiverCutInOneRoundLoseNothingAnswered(_ round: Int) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let (aliceDirectory, bobDirectory) = (
                directory.appendingPathComponent("alice-laptop"), directory.appendingPathComponent("bob-phone")
            )
            let (alicePrefix, bobPrefix) = (try PowerCut.watch(aliceDirectory), try PowerCut.watch(bobDirectory))
            var random = SplitMix64(seed: 62_300 + UInt64(round))
            let world = try ChatWorld(directory)
            var sides: [(BBMEnterpriseService, BBMAccess)] = [
                try await world.endpoint("alice", "alice-laptop"), try await world.endpoint("bob", "bob-phone"),
            ]
            let (alice, bob) = (sides[0].1, sides[1].1)
            let chat = try await alice.startChat(with: ["bob"], subject: "cuts")
            try await alice.sendMessage("before", to: chat.chatID)
            let bobMessages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("bob has the first") { bobMessages.value.count == 1 })
            for device in [aliceDirectory, bobDirectory] {
                try DatabaseQueue(path: device.appendingPathComponent("endpoint.sqlite").path).withConnection { db in
                    try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                }
            }
            PowerCut.arm(alicePrefix, at: Int64(20 + random.below(400)), seed: random.next(), losingAll: random.below(2) == 0)
            PowerCut.arm(bobPrefix, at: Int64(1 + random.below(200)), seed: random.next(), losingAll: random.below(2) == 0)
            var answered: [String] = []
            for index in 0..<2_000 {
                guard (try? await alice.sendMessage("m\(index)", to: chat.chatID)) != nil else { break }
                answered.append("m\(index)")
            }
            #expect(PowerCut.cuts(alicePrefix) == 1)
            // Bob is cut by now, or is cut here (his pages may all have come before his point).
            if PowerCut.cuts(bobPrefix) == 0 { PowerCut.cut(bobPrefix, seed: random.next(), losingAll: true) }
            for (service, _) in sides { await service.stop() }
            sides = []

            let (_, aliceAgain) = try await world.restart("alice-laptop", user: "alice")
            let (_, bobAgain) = try await world.restart("bob-phone", user: "bob")
            let events = EventRecorder(bobAgain)
            let kept = try await aliceAgain.messages(in: chat.chatID, before: nil, limit: 1_000).map(\.content)
            #expect(Set(answered).isSubset(of: Set(kept)), "every message the API answered as stored is there")
            try await aliceAgain.sendMessage("after", to: chat.chatID)
            try await bobAgain.refresh()
            let expected = ["before"] + answered + ["after"]
            #expect(
                await eventuallyAwaiting(seconds: 60) {
                    let contents = (try? await bobAgain.messages(in: chat.chatID, before: nil, limit: 1_000).map(\.content)) ?? []
                    return Set(expected).isSubset(of: Set(contents)) && contents.last == "after"
                }, "bob has every message")
            let received = try await bobAgain.messages(in: chat.chatID, before: nil, limit: 1_000)
            #expect(received.count == Set(received.map(\.content)).count, "no message twice")
            #expect(received.map(\.number) == (1...received.count).map { Int64($0) })
            #expect(events.value.isEmpty, "nothing was dropped: \(events.value)")
        }
    }
}
