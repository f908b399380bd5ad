import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkObservable
import SparkSDK

/// `quickstart demo`: one scripted story with no input, in a temporary embedded domain, or with
/// `--config PLIST --operator FILE` on a served sandbox domain (its users then get a suffix of
/// their own, and the operator credential does the moderation). Two users, three endpoints (a
/// device switch and a key sync with a wrong passcode first), messages both ways with their
/// states, and a timeout by moderation. Prints a timeline; succeeds only if every step behaved
/// as expected.
struct Demo {
    let keep: String?
    /// The plist naming a served domain and the operator credential's file.
    let remote: (config: String, credential: String)?
    private let start = ContinuousClock.now
    private let failures = Box(0)

    init(keep: String?, remote: (config: String, credential: String)? = nil) {
        self.keep = keep
        self.remote = remote
    }

    private func step(_ text: String, _ ok: Bool, _ detail: String = "") {
        let elapsed = ContinuousClock.now - start
        let ms = Int(elapsed.components.seconds * 1000) + Int(elapsed.components.attoseconds / 1_000_000_000_000_000)
        print(String(format: "%7d ms  %@ %@%@", ms, ok ? "✔" : "✘", text, detail.isEmpty ? "" : "  (\(detail))"))
        if !ok { failures.value += 1 }
    }

    func run() async -> Bool {
        let directory =
            keep.map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("spark-demo-\(UUID().uuidString)")
        defer { if keep == nil { try? FileManager.default.removeItem(at: directory) } }
        if let remote {
            print("SparkSDK demo: alice (laptop, then phone) and bob (tablet) on the domain \(remote.config) names")
        } else {
            print("SparkSDK demo: alice (laptop, then phone) and bob (tablet) on one embedded domain in \(directory.path)")
        }
        do {
            try await story(in: directory)
        } catch {
            step("the story stopped", false, "\(error)")
        }
        print(failures.value == 0 ? "demo: every step behaved as expected" : "demo: \(failures.value) step(s) failed")
        return failures.value == 0
    }

    /// A picture (binary PPM): a gradient `width` by `height`.
    static func gradient(width: Int, height: Int) -> Data {
        var data = Data("P6\n\(width) \(height)\n255\n".utf8)
        for y in 0..<height {
            for x in 0..<width { data.append(contentsOf: [UInt8(x * 255 / width), UInt8(y * 255 / height), 160]) }
        }
        return data
    }

    private func device(_ name: String, _ domain: any DomainService, in directory: URL) async throws -> BBMEnterpriseService {
        let store = try EndpointStore(directory: directory.appendingPathComponent(name))
        let service = BBMEnterpriseService(store: store, endpointDescription: name, checkInInterval: .milliseconds(100))
        try await service.start(domain: domain, environment: .sandbox)
        return service
    }

    private func story(in directory: URL) async throws {
        // One active device per user, so that alice's phone meets a device switch.
        let domain: any DomainService
        let admin: any DomainAdministration
        var names = (alice: "alice", bob: "bob")
        var restore: DomainPolicy?
        if let remote {
            let settings = try ConfigSettings.load(from: URL(fileURLWithPath: remote.config))
            guard let url = settings.domainURL, let trust = settings.domainTrust else {
                throw QuickStartExit(message: "\(remote.config) names no served domain (domainURL)")
            }
            guard let credential = FileManager.default.contents(atPath: remote.credential) else {
                throw QuickStartExit(message: "the operator credential \(remote.credential) cannot be read")
            }
            domain = try RemoteDomain(url: url, domainID: settings.domain, trust: trust)
            admin = try RemoteAdministration(
                url: url, domainID: settings.domain, trust: trust, credential: String(decoding: credential, as: UTF8.self))
            let run = String(UUID().uuidString.prefix(6)).lowercased()
            names = ("alice-\(run)", "bob-\(run)")
            var policy = try await admin.policy()
            restore = policy
            policy.multipleActiveEndpoints = false
            policy.identityResetDelay = 0
            try await admin.setPolicy(policy)
            step(
                "the operator sets \(url.absoluteString) to one active device per user and no reset delay (restored at the end)",
                true)
        } else {
            let embedded = try EmbeddedDomain.create(
                at: directory.appendingPathComponent("domain.sqlite").path, domainID: "demo",
                policy: DomainPolicy(multipleActiveEndpoints: false, identityResetDelay: 0))
            (domain, admin) = (embedded, embedded)
            step("created a sandbox domain: one active device per user, identity resets at once", true)
        }

        let laptop = try await device("alice-laptop", domain, in: directory)
        await laptop.sendAuthToken(try await domain.testToken(userID: names.alice).token, userIdentifier: names.alice)
        var state = await laptop.waitForSettledState()
        step(
            "alice's laptop registers and is asked for a new passcode",
            state.setupState == .syncRequired && state.syncPasscodeState == .new, "\(state)")
        try await laptop.syncStart(passcode: "alice-demo-passcode", action: .new)
        state = await laptop.waitForSettledState()
        step(
            "alice's laptop creates her keys (PBKDF2 at 600,000 iterations) and is set up", state.setupState == .success,
            "\(state)")

        let tablet = try await device("bob-tablet", domain, in: directory)
        await tablet.sendAuthToken(try await domain.testToken(userID: names.bob).token, userIdentifier: names.bob)
        _ = await tablet.waitForSettledState()
        try await tablet.syncStart(passcode: "bob-demo-passcode", action: .new)
        state = await tablet.waitForSettledState()
        step("bob's tablet is set up with his own keys", state.setupState == .success, "\(state)")

        let phone = try await device("alice-phone", domain, in: directory)
        await phone.sendAuthToken(try await domain.testToken(userID: names.alice).token, userIdentifier: names.alice)
        state = await phone.waitForSettledState()
        step(
            "alice's phone meets a device switch (her laptop holds the profile)", state.setupState == .deviceSwitchRequired,
            "\(state)")
        await phone.setupRetry()
        state = await phone.waitForSettledState()
        step(
            "alice confirms; the phone takes the profile over and asks for her passcode", state.syncPasscodeState == .existing,
            "\(state)")
        var refusal: SetupError?
        do { try await phone.syncStart(passcode: "not-her-passcode", action: .existing) } catch let error as SetupError {
            refusal = error
        }
        state = phone.authState.value
        step(
            "a wrong passcode is refused and nothing changes",
            refusal?.code == .incorrectPasscode && state.syncError == .incorrectPasscode,
            "attempts left \(refusal?.attemptsLeft.map(String.init) ?? "?")")
        try await phone.syncStart(passcode: "alice-demo-passcode", action: .existing)
        state = await phone.waitForSettledState()
        step("the right passcode unlocks alice's keys on the phone", state.setupState == .success, "\(state)")
        await laptop.checkIn()
        step(
            "alice's laptop learns it was superseded and wipes its keys",
            laptop.authState.value.setupState == .notRequested && laptop.authState.value.removalReason != nil,
            laptop.authState.value.removalReason ?? "")

        let alice = try await phone.messaging()
        let bob = try await tablet.messaging()
        let chat = try await alice.startChat(with: [names.bob], subject: "Lunch")
        let first = try await alice.sendMessage("Lunch at 12:30?", to: chat.chatID)
        step("alice sends “Lunch at 12:30?”", first.state.isAccepted && first.number == 1, "#\(first.number ?? 0) \(first.state)")
        let bobMessages = try await bob.messages(in: chat.chatID)
        step(
            "bob receives it live, decrypted and verified", await until { bobMessages.value.first?.content == "Lunch at 12:30?" })
        let aliceMessages = try await alice.messages(in: chat.chatID)
        step("alice sees it delivered", await until { aliceMessages.value.first?.state == .delivered })
        try await bob.markMessagesRead(in: chat.chatID)
        step("bob reads it; alice sees it read", await until { aliceMessages.value.first?.state == .read })
        try await bob.sendMessage("Yes! See you there", to: chat.chatID)
        step("bob answers and alice receives it", await until { aliceMessages.value.last?.content == "Yes! See you there" })
        try await bob.react(to: first.id, emoji: "👍")
        let bobName = names.bob
        step(
            "bob reacts 👍 to alice's message; alice counts it",
            await until { aliceMessages.value.first?.reactions == [Reaction(emoji: "👍", userIDs: [bobName])] })
        let typo = try await alice.sendMessage("Bring the secret sauce recipe", to: chat.chatID)
        step("alice sends a message she regrets", await until { bobMessages.value.last?.content == typo.content })
        try await alice.recallMessage(typo.id)
        step(
            "alice recalls it: bob's device removes its content",
            await until { bobMessages.value.last.map { $0.isRecalled && $0.content.isEmpty } == true })

        // A picture with its thumbnail: encrypted on alice's laptop, stored in the domain as
        // ciphertext, opened on bob's tablet.
        let picture = directory.appendingPathComponent("sunset.ppm")
        try Self.gradient(width: 640, height: 480).write(to: picture)
        let thumbnail = Thumbnail(data: Self.gradient(width: 64, height: 48), mediaType: "image/x-portable-pixmap")
        let upload = try alice.sendFile(at: picture.path, to: chat.chatID, caption: "The view from here", thumbnail: thumbnail)
        var steps = 0
        for await _ in upload.progress { steps += 1 }
        let sent = try await upload.value
        step(
            "alice sends a 900 KB picture with a thumbnail", sent.attachment?.size == 921_615,
            "\(steps) progress steps, #\(sent.number ?? 0)")
        step("bob sees the picture's name and thumbnail", await until { bobMessages.value.last?.attachment != nil })
        let preview = try await bob.thumbnail(of: sent.id)
        step("bob's device opens the thumbnail", preview == thumbnail.data, "\(preview?.count ?? 0) bytes")
        let saved = directory.appendingPathComponent("sunset-from-alice.ppm")
        try await bob.saveAttachment(of: sent.id, to: saved.path).value
        step(
            "bob saves the picture: the same bytes",
            FileManager.default.contents(atPath: saved.path) == FileManager.default.contents(atPath: picture.path))

        try await admin.timeOut(names.bob, for: 2, reason: "demo moderation")
        let users = UserProvider(service: tablet)
        await users.refresh()
        var timedOut = false
        if case .timeout = users.userState.value { timedOut = true }
        step("the operator times bob out for 2 s; his status shows the countdown", timedOut, "\(users.userState.value)")
        let refused = try await bob.sendMessage("can anyone hear me?", to: chat.chatID)
        var refusedByDomain = false
        if case .failed(let reason) = refused.state { refusedByDomain = reason.contains("timed out") }
        step("bob's message during the timeout is refused by the domain", refusedByDomain, "\(refused.state)")
        step("the timeout ends by itself", await until(seconds: 10) { users.userState.value == .valid })
        let after = try await bob.sendMessage("back again", to: chat.chatID)
        step("after the timeout bob can send again", after.state.isAccepted, "#\(after.number ?? 0)")
        let gapless = await until { aliceMessages.value.compactMap(\.number) == [1, 2, 3, 4, 5] }
        step(
            "message numbers run without gaps", gapless,
            "\(aliceMessages.value.map { "#\($0.number.map(String.init) ?? "-") \($0.content)" })")
        try await alice.setDisappearingTimer(.seconds(5), in: chat.chatID)
        step(
            "alice sets a 5 s disappearing timer; bob's device applies it",
            await until { bob.chats.value.first { $0.chatID == chat.chatID }?.disappearingTimer == .seconds(5) })
        let fleeting = try await alice.sendMessage("This disappears 5 s after you read it", to: chat.chatID)
        step("bob receives the disappearing message", await until { bobMessages.value.contains { $0.id == fleeting.id } })
        try await bob.markMessagesRead(in: chat.chatID)
        step(
            "5 s after bob read it, it is gone from both devices",
            await until(seconds: 15) {
                !bobMessages.value.contains { $0.id == fleeting.id } && !aliceMessages.value.contains { $0.id == fleeting.id }
            })
        try await alice.setDisappearingTimer(nil, in: chat.chatID)

        // Verification: both see the same safety number; alice confirms the one bob reads out.
        let number = try await alice.safetyNumber(with: names.bob)
        let bobsNumber = try await bob.safetyNumber(with: names.alice)
        step(
            "alice and bob see the same safety number", number == bobsNumber,
            "\(number.groups.prefix(3).joined(separator: " ")) …")
        try await alice.confirmSafetyNumber(bobsNumber, of: names.bob)
        step("alice confirms it: bob is verified", try await alice.contact(names.bob).verification == .verified)

        // A key change: bob forgets his passcode on a new device and resets his identity.
        let newTablet = try await device("bob-new-tablet", domain, in: directory)
        await newTablet.sendAuthToken(try await domain.testToken(userID: names.bob).token, userIdentifier: names.bob)
        _ = await newTablet.waitForSettledState()
        await newTablet.setupRetry()
        _ = await newTablet.waitForSettledState()
        try await newTablet.syncStart(passcode: "bob-new-passcode", action: .reset)
        state = await newTablet.waitForSettledState()
        step("bob resets his identity on a new tablet (a forgotten passcode)", state.setupState == .success, "\(state)")
        let newBob = try await newTablet.messaging()
        step(
            "alice's phone hears of it and flags bob and their chat",
            await until { alice.chats.value.first { $0.chatID == chat.chatID }?.keyChanged == true })
        let held = try await alice.sendMessage("Is this still you, bob?", to: chat.chatID)
        let verification = try await alice.contact(names.bob).verification
        step(
            "alice's next message is held, sealed to no one: bob's key changed",
            held.state == .held && verification == .changed, "\(held.state), bob \(verification)")
        let newNumber = try await newBob.safetyNumber(with: names.alice)
        step("the safety number is new", newNumber != number)
        try await alice.confirmSafetyNumber(newNumber, of: names.bob)
        let newBobMessages = try await newBob.messages(in: chat.chatID)
        step(
            "alice confirms bob's new number; the held message goes to his new tablet",
            await until { newBobMessages.value.contains { $0.content == "Is this still you, bob?" } })
        // Key transparency: to read bob's chats, an operator must give his contacts a key it
        // holds, and devices take keys only from the log, so it must log that key as bob's.
        if let embedded = domain as? EmbeddedDomain {
            let signing = try Ed25519.PrivateKey()
            let encryption = try X25519.PrivateKey()
            var forged = PublishedIdentity(
                userID: names.bob, signingKey: signing.publicKey.rawRepresentation,
                encryptionKey: encryption.publicKey.rawRepresentation, keyVersion: 3, signature: Data())
            forged.signature = try signing.signature(for: forged.signedBytes)
            try await embedded.logAsOperator(forged)
            let alarm = try await newBob.checkTransparency()
            step(
                "the operator logs a key of its own as bob's; bob's tablet checks its label and raises the alarm, no number compared",
                alarm?.contains("none of your devices published") == true, alarm ?? "no alarm")
            _ = try await alice.checkTransparency()
            let seen = try await alice.contact(names.bob)
            let heldAgain = try await alice.sendMessage("Still you?", to: chat.chatID)
            step(
                "alice's phone sees bob's key change in the log and holds what she sends",
                seen.verification == .changed && heldAgain.state == .held, "bob \(seen.verification), \(heldAgain.state)")
        } else {
            step("key transparency's attack needs the domain's database: shown on the embedded domain only", true)
        }
        await newTablet.stop()
        await phone.stop()
        await tablet.stop()
        await laptop.stop()
        if let restore {
            try await admin.setPolicy(restore)
        }
    }

    private func until(seconds: Double = 30, _ condition: @Sendable () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return condition()
    }
}
