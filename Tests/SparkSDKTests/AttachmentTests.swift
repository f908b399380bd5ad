import Foundation
import SparkCrypto
import SparkLock
import SparkTestSupport
import Testing

@testable import SparkDomain
@testable import SparkSDK

/// Attachments end to end, through a domain that lies where told to: a file goes up sealed in
/// parts and comes down whole; a lost connection costs no part twice; a swapped or truncated
/// blob is refused and leaves nothing; a non-member reads nothing; a recall takes the key from
/// every device and the blob from the domain.
@Suite("Messaging: attachments")
struct AttachmentTests {
    static func file(_ directory: URL, _ name: String, size: Int) throws -> (path: String, bytes: Data) {
        let bytes = SystemRandom.bytes(count: size)
        let path = directory.appendingPathComponent(name).path
        try bytes.write(to: URL(fileURLWithPath: path))
        return (path, bytes)
    }

    /// Alice sends `size` bytes to bob; returns bob's copy of the message once it arrived.
    static func sendToBob(
        _ world: HostileWorld, size: Int, thumbnail: Thumbnail? = nil
    ) async throws -> (alice: BBMAccess, bob: BBMAccess, chatID: String, sent: ChatMessage, bytes: Data) {
        let (_, alice) = try await world.endpoint("alice", "alice-laptop")
        let (_, bob) = try await world.endpoint("bob", "bob-phone")
        let chat = try await alice.startChat(with: ["bob"])
        let (path, bytes) = try file(world.directory, "holiday.png", size: size)
        let transfer = try alice.sendFile(at: path, to: chat.chatID, caption: "the beach", thumbnail: thumbnail)
        let sent = try await transfer.value
        let bobMessages = try await bob.messages(in: chat.chatID)
        #expect(await waitFor("bob has it") { bobMessages.value.first?.attachment != nil })
        return (alice, bob, chat.chatID, sent, bytes)
    }

    @Test func aFileGoesUpSealedAndComesDownWhole() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory)
            let thumbnail = Thumbnail(data: Data(repeating: 7, count: 3000), mediaType: "image/jpeg")
            let size = 3 * 1024 * 1024 + 12_345
            let (_, bob, chatID, sent, bytes) = try await Self.sendToBob(world, size: size, thumbnail: thumbnail)
            #expect(sent.content == "the beach" && sent.tag == "File")
            let received = try #require(try await bob.messages(in: chatID).value.first)
            #expect(
                received.attachment
                    == Attachment(
                        AttachmentDescriptor(
                            file: .init(blobID: "", key: Data(), digest: Data(), size: Int64(size), mediaType: "image/png"),
                            fileName: "holiday.png",
                            thumbnail: .init(blobID: "", key: Data(), digest: Data(), size: 3000, mediaType: "image/jpeg"))))
            #expect(try await bob.thumbnail(of: received.id) == thumbnail.data)

            // The domain holds ciphertext only: the blob's first mebibyte shares no 64 bytes with
            // the file.
            let blobID = try bob.messenger.attachment(of: received.id).file.blobID
            let blob = try await world.real.downloadBlob(
                token: try await world.real.testToken(userID: "bob").token, endpointID: bob.messenger.endpointID,
                blobID: blobID, offset: 0, length: 1 << 20)
            #expect(blob.count == 1 << 20 && blob.range(of: bytes.prefix(64)) == nil && blob.range(of: bytes[1000..<1064]) == nil)

            let target = directory.appendingPathComponent("saved.png").path
            let transfer = try bob.saveAttachment(of: received.id, to: target)
            var steps: [TransferProgress] = []
            for await step in transfer.progress { steps.append(step) }
            try await transfer.value
            #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == bytes)
            #expect(steps.last == TransferProgress(completed: Int64(size), total: Int64(size)))
            #expect(zip(steps, steps.dropFirst()).allSatisfy { $0.completed <= $1.completed }, "progress only grows")
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains(".spark-") }.isEmpty)
        }
    }

    /// Files of every shape of the chunking: empty, one byte, exactly a chunk, a byte past it.
    @Test(arguments: [0, 1, 65_536, 65_537, 2 * 65_536])
    func everyChunkBoundaryRoundTrips(size: Int) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory)
            let (_, bob, _, sent, bytes) = try await Self.sendToBob(world, size: size)
            let target = directory.appendingPathComponent("out").path
            try await bob.saveAttachment(of: sent.id, to: target).value
            #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == bytes)
        }
    }

    /// Every third blob call loses its connection (an upload is stored and its answer lost, a
    /// read goes unanswered): both transfers finish, and no part is uploaded twice.
    @Test func aLostConnectionResumesWhereItStopped() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory)
            world.domain.dropEveryBlobCall.withLock { $0 = 3 }
            let size = 5 * 1024 * 1024
            let (_, bob, _, sent, bytes) = try await Self.sendToBob(world, size: size)
            #expect(world.domain.uploadedBlobBytes.withLock { $0 } == Int(AttachmentCipher.blobSize(fileSize: Int64(size))))
            let target = directory.appendingPathComponent("saved").path
            try await bob.saveAttachment(of: sent.id, to: target).value
            #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == bytes)
        }
    }

    /// The domain hands out other bytes (a blob swapped for another, or tampered with), or cuts
    /// the blob short at a part boundary: refused, and neither the file nor a partial one is left.
    @Test func aSwappedOrTruncatedBlobIsRefused() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory)
            let (_, bob, _, sent, _) = try await Self.sendToBob(world, size: 2 * 1024 * 1024 + 5)
            let target = directory.appendingPathComponent("saved").path
            let cases: [(String, @Sendable (String, Int64, Data) -> Data)] = [
                ("swapped", { _, _, bytes in SystemRandom.bytes(count: bytes.count) }),
                (
                    "one bit flipped",
                    { _, offset, bytes in
                        var bytes = bytes
                        if offset == 1 << 20 { bytes[bytes.startIndex + 100] ^= 1 }
                        return bytes
                    }
                ),
                ("truncated", { _, offset, bytes in offset >= 2 << 20 ? Data() : bytes }),
            ]
            for (name, rewrite) in cases {
                world.domain.blobRewrite.withLock { $0 = rewrite }
                await #expect(throws: MessagingError(.forged, ""), "\(name)") {
                    try await bob.saveAttachment(of: sent.id, to: target).value
                }
                #expect(!FileManager.default.fileExists(atPath: target), "\(name): nothing saved")
                #expect(
                    try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains(".spark-") }
                        .isEmpty, "\(name): no partial file")
            }
            world.domain.blobRewrite.withLock { $0 = nil }
            try await bob.saveAttachment(of: sent.id, to: target).value
            #expect(FileManager.default.fileExists(atPath: target), "the true blob saves")
        }
    }

    /// Carol, who is not in the chat, learns a blob's id (the domain's data leaked): she can
    /// neither read it nor write it, nor delete it; bob, a member, cannot delete alice's.
    @Test func onlyMembersReadABlobAndOnlyItsUploaderWritesIt() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory)
            let (alice, _, _, sent, _) = try await Self.sendToBob(world, size: 1000)
            let (_, carol) = try await world.endpoint("carol", "carol-phone")
            let blobID = try alice.messenger.attachment(of: sent.id).file.blobID
            let carolToken = try await world.real.testToken(userID: "carol").token
            let bobToken = try await world.real.testToken(userID: "bob").token
            let bobEndpoint = try world.real.endpoints(of: "bob")[0].endpointID
            await #expect(throws: DomainError(.notAMember, "")) {
                try await world.real.downloadBlob(
                    token: carolToken, endpointID: carol.messenger.endpointID, blobID: blobID, offset: 0, length: 100)
            }
            await #expect(throws: DomainError(.notAMember, "")) {
                try await world.real.blobStatus(token: carolToken, endpointID: carol.messenger.endpointID, blobID: blobID)
            }
            await #expect(throws: DomainError(.forbidden, "")) {
                try await world.real.deleteBlob(token: bobToken, endpointID: bobEndpoint, blobID: blobID)
            }
            await #expect(throws: DomainError(.forbidden, "")) {
                try await world.real.uploadBlob(
                    token: bobToken, endpointID: bobEndpoint, blobID: blobID, offset: 0, bytes: Data(count: 10))
            }
            #expect(
                try await world.real.downloadBlob(token: bobToken, endpointID: bobEndpoint, blobID: blobID, offset: 0, length: 10)
                    .count == 10)
        }
    }

    /// A recall takes the attachment's key from every device and the blob from the domain.
    @Test func aRecallTakesTheKeyFromEveryDeviceAndTheBlobFromTheDomain() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory)
            let (alice, bob, chatID, sent, _) = try await Self.sendToBob(world, size: 70_000)
            let blobID = try alice.messenger.attachment(of: sent.id).file.blobID
            try await alice.recallMessage(sent.id)
            let bobMessages = try await bob.messages(in: chatID)
            #expect(await waitFor("bob's device forgets it") { bobMessages.value.first?.isRecalled == true })
            #expect(bobMessages.value.first?.attachment == nil)
            #expect(throws: MessagingError(.invalidArgument, "")) {
                try bob.saveAttachment(of: sent.id, to: directory.appendingPathComponent("x").path)
            }
            let token = try await world.real.testToken(userID: "alice").token
            await #expect(throws: DomainError(.notFound, "")) {
                try await world.real.blobStatus(token: token, endpointID: alice.messenger.endpointID, blobID: blobID)
            }
        }
    }

    /// The domain's cap on a file and its quota per user refuse a file before any part goes up.
    @Test func theSizeCapAndTheQuotaAreTheDomains() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let policy = DomainPolicy(passwordIterations: 1000, maximumAttachmentSize: 1 << 20, attachmentQuota: 3 << 20)
            let world = try HostileWorld(directory, policy: policy)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            _ = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"])
            let big = try Self.file(directory, "big", size: (1 << 20) + 1)
            await #expect(throws: MessagingError(.refused, "")) {
                try await alice.sendFile(at: big.path, to: chat.chatID).value
            }
            #expect(world.domain.uploadedBlobBytes.withLock { $0 } == 0)
            let fits = try Self.file(directory, "fits", size: 1 << 20)
            for _ in 0..<2 { _ = try await alice.sendFile(at: fits.path, to: chat.chatID).value }
            await #expect(throws: MessagingError(.refused, "")) {
                try await alice.sendFile(at: fits.path, to: chat.chatID).value
            }
        }
    }
}
