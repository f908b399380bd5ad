import Foundation
import SparkDomain
import SparkDomainEngine
import SparkLock
import SparkTestSupport
import Testing

/// The `quickstart` binary, run as a user would: flags, a broken config, the demo, and the
/// interactive flows driven through standard input.
@Suite("quickstart")
struct QuickStartTests {
    static let binary = Fixtures.executable("quickstart")

    /// A plist whose embedded domain and data live in `directory`.
    static func config(_ directory: URL, provider: String = "testAuth", environment: String = "sandbox") throws -> String {
        let url = directory.appendingPathComponent("ConfigSettings.plist")
        try Data(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><dict>
            <key>authProvider</key><string>\(provider)</string>
            <key>\(provider)</key><dict><key>domain</key><string>qs</string><key>environment</key><string>\(environment)</string></dict>
            <key>embeddedDomainPath</key><string>domain.sqlite</string>
            </dict></plist>
            """.utf8
        ).write(to: url)
        return url.path
    }

    static func run(_ arguments: [String], input: String = "") async throws -> (status: Int32, stdout: String, stderr: String) {
        try await Fixtures.run(binary, arguments, input: Data(input.utf8))
    }

    @Test func helpUsageErrorsAndABrokenConfig() async throws {
        let help = try await Self.run(["--help"])
        #expect(help.status == 0 && help.stdout.contains("usage: quickstart") && help.stdout.contains("demo"))
        let unknown = try await Self.run(["--verbose"])
        #expect(unknown.status == 64 && unknown.stderr.hasPrefix("quickstart: unknown option --verbose"))
        let missing = try await Self.run(["--data-dir"])
        #expect(missing.status == 64 && missing.stderr.contains("--data-dir needs a value"))
        let badFD = try await Self.run(["--passcode-fd", "x"])
        #expect(badFD.status == 64)
        // The demo runs in a domain of its own: a plist for it is refused, not ignored.
        let demoConfig = try await Self.run(["demo", "--config", "ConfigSettings.plist"])
        #expect(demoConfig.status == 64 && demoConfig.stderr.contains("demo runs in a temporary domain of its own"))
        let strayOperator = try await Self.run(["--operator", "operator.credential"])
        #expect(strayOperator.status == 64 && strayOperator.stderr.contains("--operator goes with demo"))
        let demoUser = try await Self.run(["demo", "--user", "alice"])
        #expect(demoUser.status == 64 && demoUser.stderr.contains("demo takes only --keep DIR"))
        let noConfig = try await Self.run(["--config", "/nonexistent/ConfigSettings.plist"])
        #expect(
            noConfig.status == 1
                && noConfig.stderr == "quickstart: /nonexistent/ConfigSettings.plist: cannot be read (does the file exist?)\n")
    }

    @Test func aBrokenConfigNamesTheFileAndKey() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("bad.plist")
            try Data(
                """
                <?xml version="1.0" encoding="UTF-8"?>
                <plist version="1.0"><dict><key>authProvider</key><string>testAuth</string>
                <key>testAuth</key><dict><key>environment</key><string>sandbox</string></dict></dict></plist>
                """.utf8
            ).write(to: path)
            let result = try await Self.run(["--config", path.path])
            #expect(result.status == 1)
            #expect(
                result.stderr == "quickstart: \(path.path): key 'testAuth.domain' is missing (expected a string: the domain id)\n"
            )
        }
    }

    @Test func theDemoRunsTheWholeStory() async throws {
        let result = try await Self.run(["demo"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        for step in [
            "device switch", "wrong passcode is refused", "bob receives it live", "alice sees it read", "refused by the domain",
            "without gaps", "the same safety number", "bob is verified", "message is held, sealed to no one",
            "the held message goes to his new tablet", "raises the alarm, no number compared",
            "sees bob's key change in the log and holds what she sends",
        ] {
            #expect(result.stdout.contains(step), "missing: \(step)")
        }
        #expect(result.stdout.contains("every step behaved as expected") && !result.stdout.contains("✘"))
    }

    @Test func twoDevicesWithAWrongPasscodeFirst() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let config = try Self.config(directory)
            let first = try await Self.run(
                ["--config", config, "--data-dir", directory.appendingPathComponent("a").path],
                input: "alice\nshort\nshort\nfirst-passcode-1\nfirst-passcode-1\nchats\nquit\n")
            #expect(first.status == 0, "\(first.stdout)\(first.stderr)")
            #expect(first.stdout.contains("a passcode needs at least 8 characters"))
            #expect(first.stdout.contains("Setup complete: this device is endpoint 1"))
            #expect(first.stdout.contains("[state]"), "the monitor printed the states")
            #expect(first.stdout.contains("no chats yet"))
            let second = try await Self.run(
                ["--config", config, "--data-dir", directory.appendingPathComponent("b").path],
                input: "alice\nwrong-passcode\nfirst-passcode-1\nendpoints\nquit\n")
            let code = try #require(second.stdout.firstMatch(of: /it shows the code (\d{4} \d{4} \d{4})/)?.output.1)
            #expect(second.status == 0, "\(second.stdout)\(second.stderr)")
            #expect(second.stdout.contains("That passcode is incorrect. 9 attempts left this hour."))
            #expect(second.stdout.contains("Setup complete: this device is endpoint 2"))
            #expect(second.stdout.contains("Your keys are protected by the passcode you chose on your first device."))
            #expect(second.stdout.contains(/2\. SparkSDK on .* · regId 2 · last seen .* · this device/))
            #expect(second.stdout.contains("This device joins your chats once a device you have approves it"))
            // A restart of the first device signs in silently: no questions at all. It shows the
            // new device with the same code, and asks before approving it.
            let again = try await Self.run(
                ["--config", config, "--data-dir", directory.appendingPathComponent("a").path],
                input: "endpoints\napprove 2\nno\napprove 2\nyes\nendpoints\nquit\n")
            #expect(again.stdout.contains("Setup complete: this device is endpoint 1") && !again.stdout.contains("user id:"))
            #expect(again.stdout.contains("A new device of yours awaits approval: SparkSDK on"))
            #expect(again.stdout.contains("awaiting approval, code \(code)"))
            #expect(again.stdout.contains("Does SparkSDK on") && again.stdout.contains("show the code \(code)? (yes/no)"))
            #expect(again.stdout.contains("Not approved. If you did not set that device up, `remove 2` it."))
            #expect(again.stdout.contains(/Approved SparkSDK on .*: it joins your chats and gets their history\./))
            #expect(again.stdout.contains(/2\. SparkSDK on .* · regId 2 · last seen .* · approved/))
        }
    }

    @Test func aDeviceSwitchAndAFullDomain() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let config = try Self.config(directory)
            let path = directory.appendingPathComponent("domain.sqlite").path
            _ = try EmbeddedDomain.create(
                at: path, domainID: "qs", policy: DomainPolicy(maximumEndpoints: 2, multipleActiveEndpoints: false))
            func device(_ name: String, _ input: String) async throws -> (status: Int32, stdout: String, stderr: String) {
                try await Self.run(["--config", config, "--data-dir", directory.appendingPathComponent(name).path], input: input)
            }
            #expect(try await device("a", "alice\nfirst-passcode-1\nfirst-passcode-1\nquit\n").status == 0)
            let declined = try await device("b", "alice\nn\n")
            #expect(declined.status == 1 && declined.stdout.contains("Move the profile to this device?"))
            #expect(declined.stderr.contains("the device switch was declined"))
            // Signed in from the first attempt, so no user id is asked for this time.
            let switched = try await device("b", "y\nfirst-passcode-1\nquit\n")
            #expect(switched.status == 0 && switched.stdout.contains("Setup complete"), "\(switched.stdout)\(switched.stderr)")
            let superseded = try await device("a", "quit\n")
            #expect(superseded.status == 1 && superseded.stderr.contains("superseded"))

            // Full: at most one endpoint. A device not registered yet cannot make room by removing
            // the user's approved device (a stolen token could): the user removes it from another
            // approved device, or the operator does.
            let domain = try EmbeddedDomain.open(at: path)
            try domain.setPolicy(DomainPolicy(maximumEndpoints: 1, multipleActiveEndpoints: true))
            let full = try await device("c", "alice\n1\nfirst-passcode-1\nquit\n")
            #expect(full.stdout.contains("You have the maximum number of devices"), "\(full.stdout)\(full.stderr)")
            #expect(full.status != 0 && full.stderr.contains("is an approved device: remove it from another approved device"))
        }
    }

    /// A plist naming a served daemon, and the operator credential's path.
    static func served(_ daemon: DomainDaemon, in directory: URL) throws -> (config: String, credential: String) {
        let plist: [String: Any] = [
            "authProvider": "testAuth", "testAuth": ["domain": daemon.domainID, "environment": "sandbox"],
            "domainURL": daemon.url.absoluteString, "domainCAFile": daemon.directory.appendingPathComponent("ca.pem").path,
        ]
        let url = directory.appendingPathComponent("served.plist")
        try PropertyListSerialization.data(fromPropertyList: plist, format: .xml, options: 0).write(to: url)
        return (url.path, daemon.directory.appendingPathComponent("operator.credential").path)
    }

    @Test func theDemoRunsOnAServedDomainWithTheOperatorCredential() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let daemon = try await DomainDaemon.start(in: directory, domainID: "served-demo")
            let (config, credential) = try Self.served(daemon, in: directory)
            let result = try await Self.run(["demo", "--config", config, "--operator", credential])
            #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
            #expect(result.stdout.contains("on the domain \(config) names"))
            #expect(result.stdout.contains("refused by the domain") && !result.stdout.contains("✘"), "\(result.stdout)")
            // The operator's policy change was undone.
            #expect(try await daemon.administration().policy().multipleActiveEndpoints)
            let wrong = try await Self.run(["demo", "--config", config, "--operator", config])
            #expect(wrong.status == 1 && wrong.stdout.contains("✘"), "a wrong credential fails the demo: \(wrong.stdout)")
            await daemon.stop()
        }
    }

    @Test func theShellChatsThroughAServedDomain() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let daemon = try await DomainDaemon.start(in: directory, domainID: "served-shell")
            let (config, _) = try Self.served(daemon, in: directory)
            let bob = try await Self.device(directory, config, "bob", "bob\nbob-passcode-1\nbob-passcode-1\nquit\n")
            #expect(bob.status == 0, "\(bob.stdout)\(bob.stderr)")
            let alice = try await Self.device(
                directory, config, "alice", "alice\nalice-passcode-1\nalice-passcode-1\nstart bob : Remote\nsend over TLS\nquit\n"
            )
            #expect(alice.status == 0 && alice.stdout.contains("→ #1 sent"), "\(alice.stdout)\(alice.stderr)")
            let bobAgain = try await Self.device(directory, config, "bob", "chats\nopen 1\nread\nquit\n")
            #expect(bobAgain.stdout.contains("#1 alice: over TLS"), "\(bobAgain.stdout)")
            await daemon.stop()
        }
    }

    @Test func chatsBetweenTwoUsersInTheShell() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let config = try Self.config(directory)
            let bob = try await Self.run(
                ["--config", config, "--data-dir", directory.appendingPathComponent("bob").path],
                input: "bob\nbob-passcode-1\nbob-passcode-1\nquit\n")
            #expect(bob.status == 0)
            let alice = try await Self.run(
                ["--config", config, "--data-dir", directory.appendingPathComponent("alice").path],
                input:
                    "alice\nalice-passcode-1\nalice-passcode-1\nstart bob : Lunch\nsend hello bob\ntyping\nsend oops\nreact 1 👍\nreact 1 ok\nrecall 2\ntimer 3\ntimer 3600\nmessages\nrename Dinner\nstatus\nquit\n"
            )
            #expect(alice.status == 0, "\(alice.stdout)\(alice.stderr)")
            #expect(alice.stdout.contains("Started “Lunch” with alice, bob."))
            #expect(alice.stdout.contains("→ #1 sent"))
            #expect(alice.stdout.contains("They see you typing."))
            #expect(alice.stdout.contains("Reacted 👍 to #1."))
            #expect(alice.stdout.contains("a reaction is one emoji"), "\(alice.stdout)")
            #expect(alice.stdout.contains("Recalled #2."))
            #expect(alice.stdout.contains("a disappearing-messages timer is 5 seconds to 365 days"), "\(alice.stdout)")
            #expect(alice.stdout.contains("New messages disappear after 3600 s."))
            #expect(alice.stdout.contains("#2 alice: (recalled)"))
            #expect(alice.stdout.contains("Renamed to Dinner."))
            #expect(alice.stdout.contains("status: valid"))
            let bobAgain = try await Self.run(
                ["--config", config, "--data-dir", directory.appendingPathComponent("bob").path],
                input: "chats\nopen 1\nread\nsearch HELLO from alice in 1\nsearch oops\nsearch lu*\nsearch dinner\nquit\n")
            #expect(
                bobAgain.stdout.contains("1. “Dinner” with alice, bob ⏱ messages disappear after 3600 s · 1 unread"),
                "\(bobAgain.stdout)")
            #expect(bobAgain.stdout.contains("#1 alice: hello bob"))
            #expect(bobAgain.stdout.contains("#2 alice: (recalled)"), "\(bobAgain.stdout)")
            #expect(!bobAgain.stdout.contains("oops"), "bob's device never shows the recalled text")
            #expect(bobAgain.stdout.contains("#1 alice: [hello] bob"), "\(bobAgain.stdout)")
            #expect(bobAgain.stdout.contains("Nothing found."), "a recalled message is not found")
            #expect(bobAgain.stdout.contains("a prefix search needs at least 3 letters"), "\(bobAgain.stdout)")
            #expect(bobAgain.stdout.contains("chat: “Dinner”"), "\(bobAgain.stdout)")
        }
    }

    /// `send-file` sends a file with its progress; the other user's `save` writes the same bytes;
    /// `block` keeps what the blocked user sends away.
    @Test func filesAndBlockingInTheShell() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let config = try Self.config(directory)
            let bob = try await Self.device(directory, config, "bob", "bob\nbob-passcode-1\nbob-passcode-1\nquit\n")
            #expect(bob.status == 0)
            let file = directory.appendingPathComponent("report.pdf")
            let bytes = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 * 7) })
            try bytes.write(to: file)
            let alice = try await Self.device(
                directory, config, "alice",
                "alice\nalice-passcode-1\nalice-passcode-1\nstart bob\nsend-file \(file.path) : the report\nsend-file /no/such/file\nquit\n"
            )
            #expect(alice.stdout.contains("↑ 100 % (300000 of 300000 bytes)"), "\(alice.stdout)")
            #expect(alice.stdout.contains("→ #1 sent"), "\(alice.stdout)")
            #expect(alice.stdout.contains("cannot open /no/such/file"), "\(alice.stdout)")
            let saved = directory.appendingPathComponent("saved.pdf").path
            let bobAgain = try await Self.device(
                directory, config, "bob", "chats\nopen 1\nsave 1 \(saved)\nsave 2 \(saved)\nquit\n")
            #expect(
                bobAgain.stdout.contains("#1 alice: the report 📎 report.pdf (300000 bytes, application/pdf)"),
                "\(bobAgain.stdout)")
            #expect(bobAgain.stdout.contains("↓ 100 %"), "\(bobAgain.stdout)")
            #expect(bobAgain.stdout.contains("Saved report.pdf (300000 bytes) at \(saved)."), "\(bobAgain.stdout)")
            #expect(FileManager.default.contents(atPath: saved) == bytes)

            // Bob blocks alice: her next message does not reach him, and she cannot start
            // another chat with him.
            let blocking = try await Self.device(directory, config, "bob", "block alice\nblocked\nblock\nquit\n")
            #expect(blocking.stdout.contains("Blocked alice: nothing of theirs reaches your devices."), "\(blocking.stdout)")
            #expect(blocking.stdout.contains("Blocked: alice"))
            #expect(blocking.stdout.contains("usage: block USER"))
            let aliceAgain = try await Self.device(
                directory, config, "alice", "chats\nopen 1\nsend are you there?\nstart bob : again\nquit\n")
            #expect(aliceAgain.stdout.contains("does not take chats from alice"), "\(aliceAgain.stdout)")
            let bobLast = try await Self.device(directory, config, "bob", "chats\nopen 1\nmessages\nunblock alice\nquit\n")
            #expect(!bobLast.stdout.contains("are you there?"), "\(bobLast.stdout)")
            #expect(bobLast.stdout.contains("Unblocked alice."))
        }
    }

    /// `verify USER` shows the same number on both sides; `verify USER NUMBER` marks the contact
    /// verified only with that number; `accept USER` trusts the current key.
    @Test func verifyingAContactInTheShell() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let config = try Self.config(directory)
            let bob = try await Self.device(directory, config, "bob", "bob\nbob-passcode-1\nbob-passcode-1\nquit\n")
            #expect(bob.status == 0)
            let alice = try await Self.device(
                directory, config, "alice", "alice\nalice-passcode-1\nalice-passcode-1\nstart bob\nverify bob\nquit\n")
            let bobSees = try await Self.device(directory, config, "bob", "verify alice\nquit\n")
            func number(_ output: String, of user: String) -> String? {
                guard let range = output.range(of: "safety number with \(user) (unverified):\n") else { return nil }
                let lines = output[range.upperBound...].split(separator: "\n").prefix(2)
                return lines.map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
            }
            let seenByAlice = try #require(number(alice.stdout, of: "bob"), "\(alice.stdout)")
            #expect(number(bobSees.stdout, of: "alice") == seenByAlice, "both see the same number")
            #expect(seenByAlice.split(separator: " ").count == 12)
            var wrong = Array(seenByAlice)
            wrong[0] = wrong[0] == "1" ? "2" : "1"
            let confirm = try await Self.device(
                directory, config, "alice",
                "verify bob 12345\nverify bob \(String(wrong))\nverify bob \(seenByAlice)\nverify bob\naccept bob\nkeys\nquit\n")
            #expect(confirm.stdout.contains("✘ a safety number is 60 digits"), "\(confirm.stdout)")
            #expect(confirm.stdout.contains("✘ that is not the safety number of bob's current key"))
            #expect(confirm.stdout.contains("✔ bob is verified."))
            #expect(confirm.stdout.contains("safety number with bob (verified):"))
            #expect(confirm.stdout.contains("Trusting bob's current key"))
            #expect(confirm.stdout.contains("✔ the key log holds your key"), "\(confirm.stdout)")
        }
    }

    /// Runs the quick start as `user` on the device `device` of the domain in `directory`.
    static func device(
        _ directory: URL, _ config: String, _ device: String, _ input: String
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await run(["--config", config, "--data-dir", directory.appendingPathComponent(device).path], input: input)
    }

    @Test func aRestartAnnouncesWhatArrivedWhileOffAndNothingAlreadyRead() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let config = try Self.config(directory)
            #expect(try await Self.device(directory, config, "bob", "bob\nbob-passcode-1\nbob-passcode-1\nquit\n").status == 0)
            let alice = try await Self.device(
                directory, config, "alice",
                "alice\nalice-passcode-1\nalice-passcode-1\nstart bob : Lunch\nsend one\nsend two\nquit\n")
            #expect(alice.status == 0, "\(alice.stdout)\(alice.stderr)")
            // Bob was off: both messages are announced when he comes back, then he reads them.
            let back = try await Self.device(directory, config, "bob", "open 1\nread\nquit\n")
            #expect(back.stdout.contains("While you were away:\n[Lunch] alice: one\n[Lunch] alice: two\n"), "\(back.stdout)")
            // Read on the last run: not announced again.
            let again = try await Self.device(directory, config, "bob", "quit\n")
            #expect(again.status == 0 && !again.stdout.contains("alice: one") && !again.stdout.contains("While you were away"))
            // Alice learns what happened to her messages while she was off, each step once.
            let aliceBack = try await Self.device(directory, config, "alice", "quit\n")
            for number in [1, 2] {
                for state in ["delivered", "read"] {
                    #expect(
                        aliceBack.stdout.components(separatedBy: "[Lunch] your message #\(number) is \(state)\n").count == 2,
                        "#\(number) \(state) once: \(aliceBack.stdout)")
                }
            }
        }
    }

    @Test func eachSendPrintsItsStateOnceAndARefusalSaysWhy() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let config = try Self.config(directory)
            #expect(try await Self.device(directory, config, "bob", "bob\nbob-passcode-1\nbob-passcode-1\nquit\n").status == 0)
            let alice = try await Self.device(
                directory, config, "alice", "alice\nalice-passcode-1\nalice-passcode-1\nstart bob\nsend one\nsend two\nquit\n")
            #expect(alice.stdout.components(separatedBy: "#1 sent").count == 2, "\(alice.stdout)")
            #expect(alice.stdout.components(separatedBy: "#2 sent").count == 2)
            let admin = try await Fixtures.run(
                Fixtures.executable("spark-admin"), ["--config", config, "timeout", "alice", "120", "cool down"])
            #expect(admin.status == 0, "\(admin.stderr)")
            let refused = try await Self.device(directory, config, "alice", "open 1\nsend three\nstatus\nquit\n")
            #expect(refused.stdout.contains("not sent: the user is timed out"), "\(refused.stdout)")
            #expect(!refused.stdout.contains("is failed") && !refused.stdout.contains("#- "))
            #expect(refused.stdout.contains("status: timed out, "))
            #expect(refused.stdout.contains(/timeout: your messages are refused until .*: cool down/))
        }
    }

    @Test func theEndOfInputSaysGoodbyeAndStaysSignedIn() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let config = try Self.config(directory)
            let first = try await Self.device(directory, config, "a", "alice\nalice-passcode-1\nalice-passcode-1\nchats\n")
            #expect(first.status == 0 && first.stdout.contains("> \nGoodbye.\n"), "\(first.stdout)")
            let again = try await Self.device(directory, config, "a", "")
            #expect(again.status == 0 && again.stdout.contains("Setup complete") && !again.stdout.contains("user id:"))
        }
    }

    @Test func signUpWithActivationThroughTheOutbox() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let config = try Self.config(directory, provider: "accounts")
            let path = directory.appendingPathComponent("domain.sqlite").path
            _ = try EmbeddedDomain.create(
                at: path, domainID: "qs", policy: DomainPolicy(userAuthenticationEnabled: true, passwordIterations: 1000),
                allowUnsafePasswordHashing: true)
            // A live conversation: the activation code is read from what the quick start prints.
            let process = ChildProcess()
            process.executableURL = Self.binary
            process.arguments = ["--config", config, "--data-dir", directory.appendingPathComponent("dev").path]
            let input = Pipe()
            let output = Pipe()
            process.standardInput = input
            process.standardOutput = output
            process.standardError = output
            let transcript = Locked("")
            output.fileHandleForReading.readabilityHandler = { handle in
                let data = handle.availableData
                transcript.withLock { $0 += String(decoding: data, as: UTF8.self) }
            }
            try process.run()
            func send(_ line: String) { input.fileHandleForWriting.write(Data((line + "\n").utf8)) }
            func waitFor(_ text: String) async -> Bool {
                await eventually { transcript.withLock { $0.contains(text) } }
            }
            #expect(await waitFor("[l]og in, [s]ign up"))
            for line in ["s", "hana", "hana@example.com", "jp", "22", "Maple-Leaf-2024"] { send(line) }
            #expect(await waitFor("activation code: "))
            let code = try #require(transcript.withLock { $0 }.firstMatch(of: /activation code is (\d{6})/)?.1)
            send(String(code))
            #expect(await waitFor("Activated and logged in as hana."))
            #expect(await waitFor("new passcode: "))
            send("hana-passcode-1")
            send("hana-passcode-1")
            #expect(await waitFor("Setup complete"))
            send("quit")
            process.waitUntilExit()
            output.fileHandleForReading.readabilityHandler = nil
            #expect(process.terminationStatus == 0, "\(transcript.withLock { $0 })")
        }
    }

    @Test func anOpenIDSignInShowsTheDeviceCodeWaitsThenSetsUp() async throws {
        try await OpenIDTestProvider.with { provider in
            try await Fixtures.withTemporaryDirectory { directory in
                let domain = try EmbeddedDomain.create(
                    at: directory.appendingPathComponent("domain.sqlite").path, domainID: "qs",
                    policy: DomainPolicy(userAuthenticationEnabled: true))
                _ = try await domain.discoverIssuer(
                    provider.issuer, audience: provider.clientID, userClaim: "email", caPEM: provider.caPEM)
                let config = directory.appendingPathComponent("ConfigSettings.plist")
                let plist: [String: Any] = [
                    "authProvider": "oidc",
                    "oidc": [
                        "domain": "qs", "environment": "production", "issuer": provider.issuer, "clientId": provider.clientID,
                        "userClaim": "email", "caFile": provider.caFile, "flow": "device", "scopes": ["openid"],
                    ],
                    "embeddedDomainPath": "domain.sqlite",
                ]
                try PropertyListSerialization.data(fromPropertyList: plist, format: .xml, options: 0).write(to: config)
                let conversation = try Conversation(config: config.path, data: directory.appendingPathComponent("dev"))
                #expect(await conversation.waitFor("waiting for you to sign in"), "\(conversation.text)")
                let shown = try #require(conversation.text.firstMatch(of: /or open (\S+)\)/)?.1)
                #expect(conversation.text.contains(/enter the code [A-Z0-9-]+/))
                _ = try await provider.browser(try #require(URL(string: String(shown))), device: true)
                #expect(await conversation.waitFor("signed in as alice@example.org (Alice Example)"), "\(conversation.text)")
                #expect(await conversation.waitFor("new passcode: "))
                conversation.send("alice-passcode-1", "alice-passcode-1")
                #expect(await conversation.waitFor("Setup complete"), "\(conversation.text)")
                conversation.send("quit")
                await conversation.end()
                #expect(conversation.process.terminationStatus == 0, "\(conversation.text)")
            }
        }
    }

    /// The quick start as a live conversation: what it printed so far, and lines to send.
    final class Conversation: Sendable {
        let process = ChildProcess()
        let input = Pipe()
        let output = Pipe()
        let transcript = Locked("")

        init(config: String, data: URL) throws {
            process.executableURL = QuickStartTests.binary
            process.arguments = ["--config", config, "--data-dir", data.path]
            process.standardInput = input
            process.standardOutput = output
            process.standardError = output
            let transcript = transcript
            output.fileHandleForReading.readabilityHandler = { handle in
                let data = handle.availableData
                transcript.withLock { $0 += String(decoding: data, as: UTF8.self) }
            }
            try process.run()
        }

        func send(_ lines: String...) { for line in lines { input.fileHandleForWriting.write(Data((line + "\n").utf8)) } }
        func waitFor(_ text: String) async -> Bool { await eventually { self.transcript.withLock { $0.contains(text) } } }
        var text: String { transcript.withLock { $0 } }

        func end() async {
            try? input.fileHandleForWriting.close()
            await Fixtures.onThread { self.process.waitUntilExit() }
            output.fileHandleForReading.readabilityHandler = nil
        }
    }

    @Test func theOutboxShowsOnlyTheMailThisDeviceJustCausedOnASandbox() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let config = try Self.config(directory, provider: "accounts")
            let domain = try EmbeddedDomain.create(
                at: directory.appendingPathComponent("domain.sqlite").path, domainID: "qs",
                policy: DomainPolicy(userAuthenticationEnabled: true, passwordIterations: 1000), allowUnsafePasswordHashing: true)
            // Bob signed up elsewhere: his activation code sits in the outbox.
            try await domain.signUp(
                SignUpRequest(userName: "bob", password: "Maple-Leaf-2024", email: "bob@example.com", country: "JP", age: 30))
            let bobsCode = try #require(
                try domain.outbox(recipient: "bob@example.com").last?.body.firstMatch(of: /code is (\d{6})/)?.1)
            let session = try Conversation(config: config, data: directory.appendingPathComponent("eve"))
            #expect(await session.waitFor("[l]og in, [s]ign up"))
            // Eve signs up with bob's address: she is answered as anyone, and shown nothing.
            session.send("s", "eve", "bob@example.com", "jp", "22", "Maple-Leaf-2024")
            #expect(await session.waitFor("activation code: "))
            #expect(!session.text.contains(String(bobsCode)) && !session.text.contains("[outbox]"), "\(session.text)")
            #expect(session.text.contains("Unless bob@example.com already has an account"))
            await session.end()
        }
    }

    @Test func theOutboxIsNeverShownOutsideTheSandbox() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let config = try Self.config(directory, provider: "accounts", environment: "production")
            _ = try EmbeddedDomain.create(
                at: directory.appendingPathComponent("domain.sqlite").path, domainID: "qs",
                policy: DomainPolicy(userAuthenticationEnabled: true, passwordIterations: 1000), allowUnsafePasswordHashing: true)
            let session = try Conversation(config: config, data: directory.appendingPathComponent("hana"))
            #expect(await session.waitFor("[l]og in, [s]ign up"))
            session.send("s", "hana", "hana@example.com", "jp", "22", "Maple-Leaf-2024")
            #expect(await session.waitFor("activation code: "))
            #expect(!session.text.contains("[outbox]") && !session.text.contains("activation code is"), "\(session.text)")
            await session.end()
        }
    }

    @Test func aCommonPasscodeIsRefusedWithTheReason() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let config = try Self.config(directory)
            let session = try Conversation(config: config, data: directory.appendingPathComponent("a"))
            #expect(await session.waitFor("user id: "))
            session.send("alice")
            #expect(await session.waitFor("new passcode: "))
            session.send("iloveyou", "iloveyou")
            #expect(await session.waitFor("most common passwords"), "\(session.text)")
            await session.end()
        }
    }
}
