import Foundation
import SparkCrypto
import SparkLock
import SparkTestSupport
import Testing

@testable import SparkDomain
@testable import SparkDomainEngine
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

    @Test(arguments: MessagingStoreKind.tested) func aFileGoesUpSealedAndComesDownWhole(messaging: MessagingStoreKind)
        async throws
    {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory, messaging: messaging)
            let thumbnail = Thumbnail(data: Data(repeating: 7, count: 3000), mediaType: "image/jpeg")
            let size = 1024 * 1024 + 12_345
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
            let blobID = try bob.messenger.attachments.attachment(of: received.id).file.blobID
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

    /// Files of every shape of the chunking: empty, one byte, exactly a chunk, a byte past it,
    /// exactly two.
    @Test(arguments: MessagingStoreKind.tested) func everyChunkBoundaryRoundTrips(messaging: MessagingStoreKind) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory, messaging: messaging)
            let (alice, bob, chatID, _, _) = try await Self.sendToBob(world, size: 10)
            for size in [0, 1, 65_536, 65_537, 2 * 65_536] {
                let (path, bytes) = try Self.file(directory, "file-\(size)", size: size)
                let sent = try await alice.sendFile(at: path, to: chatID).value
                let messages = try await bob.messages(in: chatID)
                #expect(await waitFor("bob has file \(size)") { messages.value.contains { $0.id == sent.id } })
                let target = directory.appendingPathComponent("out-\(size)").path
                try await bob.saveAttachment(of: sent.id, to: target).value
                #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == bytes, "\(size) bytes")
            }
        }
    }

    /// Every third blob call loses its connection (an upload is stored and its answer lost, a
    /// read goes unanswered): both transfers finish, and no part is uploaded twice.
    @Test(arguments: MessagingStoreKind.tested) func aLostConnectionResumesWhereItStopped(messaging: MessagingStoreKind)
        async throws
    {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory, messaging: messaging)
            world.domain.dropEveryBlobCall.withLock { $0 = 3 }
            let size = 3 * 1024 * 1024 + 5
            let (_, bob, _, sent, bytes) = try await Self.sendToBob(world, size: size)
            #expect(world.domain.uploadedBlobBytes.withLock { $0 } == Int(AttachmentCipher.blobSize(fileSize: Int64(size))))
            let target = directory.appendingPathComponent("saved").path
            try await bob.saveAttachment(of: sent.id, to: target).value
            #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == bytes)
        }
    }

    /// The domain hands out other bytes (a blob swapped for another, or tampered with), or cuts
    /// the blob short at a part boundary: refused, and neither the file nor a partial one is left.
    @Test(arguments: MessagingStoreKind.tested) func aSwappedOrTruncatedBlobIsRefused(messaging: MessagingStoreKind)
        async throws
    {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory, messaging: messaging)
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

            // A message whose digest is not its blob's (a sender's modified client names one
            // blob and uploads another under the same key): refused at the end all the same.
            var lying = try bob.messenger.attachments.attachment(of: sent.id).file
            lying.digest[0] ^= 1
            await #expect(throws: MessagingError(.forged, "")) {
                try await bob.messenger.attachments.download(lying, write: { _ in }, progress: { _ in })
            }
        }
    }

    /// Carol, who is not in the chat, learns a blob's id (the domain's data leaked): she can
    /// neither read it nor write it, nor delete it; bob, a member, cannot delete alice's.
    @Test(arguments: MessagingStoreKind.tested) func onlyMembersReadABlobAndOnlyItsUploaderWritesIt(
        messaging: MessagingStoreKind
    ) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory, messaging: messaging)
            let (alice, _, _, sent, _) = try await Self.sendToBob(world, size: 1000)
            let (_, carol) = try await world.endpoint("carol", "carol-phone")
            let blobID = try alice.messenger.attachments.attachment(of: sent.id).file.blobID
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
    @Test(arguments: MessagingStoreKind.tested) func aRecallTakesTheKeyFromEveryDeviceAndTheBlobFromTheDomain(
        messaging: MessagingStoreKind
    ) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory, messaging: messaging)
            let (alice, bob, chatID, sent, _) = try await Self.sendToBob(world, size: 70_000)
            let blobID = try alice.messenger.attachments.attachment(of: sent.id).file.blobID
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

    /// The chunks are bound to their place and to the end: a chunk moved, dropped, or a blob cut
    /// at a chunk boundary does not open, even with the right key.
    @Test func chunksAreBoundToTheirPlaceAndTheEnd() throws {
        let key = SymmetricKey(size: .bits256)
        let file = SystemRandom.bytes(count: 3 * AttachmentCipher.chunkSize + 10)
        var sealer = AttachmentCipher.Sealer(key: key, fileSize: Int64(file.count))
        var chunks: [Data] = []
        for start in stride(from: 0, to: file.count, by: AttachmentCipher.chunkSize) {
            chunks.append(try sealer.seal(file[start..<min(file.count, start + AttachmentCipher.chunkSize)]))
        }
        #expect(chunks.reduce(0) { $0 + $1.count } == Int(AttachmentCipher.blobSize(fileSize: Int64(file.count))))
        #expect(throws: MessagingError(.invalidArgument, "")) { try sealer.seal(Data([1])) }
        func open(_ blob: Data, size: Int = file.count) throws -> Data {
            var opener = AttachmentCipher.Opener(key: key, fileSize: Int64(size))
            var plaintext = Data()
            // In pieces that do not follow the chunks.
            for start in stride(from: 0, to: blob.count, by: 50_000) {
                try opener.open(blob[start..<min(blob.count, start + 50_000)]) { plaintext.append($0) }
            }
            try opener.finish()
            return plaintext
        }
        #expect(try open(chunks.reduce(Data(), +)) == file)
        let swapped = [chunks[1], chunks[0], chunks[2], chunks[3]].reduce(Data(), +)
        #expect(throws: MessagingError(.forged, "")) { try open(swapped) }
        #expect(throws: MessagingError(.forged, "")) { try open(chunks.prefix(3).reduce(Data(), +)) }
        // Cut after three full chunks and claimed to be three chunks long: the third was not
        // sealed as the last.
        #expect(throws: MessagingError(.forged, "")) {
            try open(chunks.prefix(3).reduce(Data(), +), size: 3 * AttachmentCipher.chunkSize)
        }
        #expect(throws: MessagingError(.forged, "")) { try open(chunks.reduce(Data(), +) + Data([0])) }
        #expect(throws: MessagingError(.forged, "")) {
            var opener = AttachmentCipher.Opener(key: SymmetricKey(size: .bits256), fileSize: Int64(file.count))
            try opener.open(chunks[0]) { _ in }
        }
    }

    /// A message's attachment decodes strictly: the fuzz corpus's seed decodes, and each field
    /// out of bounds is refused as forged.
    @Test func anAttachmentDecodesStrictly() throws {
        let seed = try Data(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("Fuzz/corpus/chat-payload/seed-2"))
        let payload = try ChatPayload(encoded: seed)
        let attachment = try #require(payload.attachment)
        #expect(attachment.fileName == "a.png" && attachment.size == 123_456 && attachment.thumbnail?.size == 3000)
        #expect(payload.encoded == seed, "it encodes back to the same bytes")
        var variants: [(String, (inout AttachmentDescriptor) -> Void)] = [
            ("a name with a slash", { $0.fileName = "../etc/passwd" }),
            ("a control character", { $0.fileName = "a\u{1b}[2J.png" }),
            ("an empty name", { $0.fileName = "" }),
            ("no media subtype", { $0.file.mediaType = "image" }),
            ("a short key", { $0.file.key = Data(count: 31) }),
            ("a short digest", { $0.file.digest = Data(count: 16) }),
            ("a blob id not hexadecimal", { $0.file.blobID = String(repeating: "z", count: 32) }),
            ("a big thumbnail", { $0.thumbnail?.size = Int64(Thumbnail.maximumSize) + 1 }),
        ]
        variants.append(("a file past a tebibyte", { $0.file.size = AttachmentDescriptor.largestFile + 1 }))
        for (name, change) in variants {
            var forged = payload
            change(&forged.attachment!)
            #expect(throws: MessagingError(.forged, ""), "\(name)") { try ChatPayload(encoded: forged.encoded) }
        }
        var reaction = payload
        reaction.kind = .reaction
        #expect(throws: MessagingError(.forged, "")) { try ChatPayload(encoded: reaction.encoded) }
        #expect(throws: MessagingError(.forged, "")) { try ChatPayload(encoded: seed + Data([0])) }
    }

    /// The domain's cap on a file and its quota per user refuse a file before any part goes up.
    @Test(arguments: MessagingStoreKind.tested) func theSizeCapAndTheQuotaAreTheDomains(messaging: MessagingStoreKind)
        async throws
    {
        try await Fixtures.withTemporaryDirectory { directory in
            let policy = DomainPolicy(passwordIterations: 1000, maximumAttachmentSize: 1 << 20, attachmentQuota: 3 << 20)
            let world = try HostileWorld(directory, messaging: messaging, policy: policy)
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
