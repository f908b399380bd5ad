import Foundation
import SparkTestSupport
import Testing

/// The Getting Started guide cannot rot: every code block of it is in `Examples/ChatApp`, which
/// builds with the package (warnings as errors in CI) and runs here.
@Suite("ChatApp: the guide's app")
struct ChatAppTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The fenced Swift blocks of a DocC article, each as it reads.
    static func swiftBlocks(of article: String) -> [String] {
        var blocks: [String] = []
        var current: [Substring]?
        for line in article.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line == "```swift" {
                current = []
            } else if current != nil, line == "```" {
                blocks.append(current!.joined(separator: "\n"))
                current = nil
            } else {
                current?.append(line)
            }
        }
        return blocks
    }

    @Test func everyCodeBlockOfTheGuideIsInTheApp() throws {
        let guide = try String(
            contentsOf: Self.repository.appendingPathComponent("Sources/SparkSDK/SparkSDK.docc/GettingStarted.md"),
            encoding: .utf8)
        let app = try String(contentsOf: Self.repository.appendingPathComponent("Examples/ChatApp/main.swift"), encoding: .utf8)
        let blocks = Self.swiftBlocks(of: guide)
        #expect(blocks.count >= 6, "the guide shows configure, start, sign in, set up, chat and observe")
        for block in blocks {
            #expect(app.contains(block), "not in Examples/ChatApp/main.swift:\n\(block)")
        }
        #expect(blocks.joined().split(separator: "\n").count >= 40, "the whole flow, not a fragment of it")
    }

    @Test func theBlockReaderFindsWhatItShould() {
        let article = "text\n```swift\nlet a = 1\n\nlet b = 2\n```\n```sh\nls\n```\n```swift\nx()\n```\n"
        #expect(Self.swiftBlocks(of: article) == ["let a = 1\n\nlet b = 2", "x()"])
    }

    @Test func theAppRunsTwoUsersThroughAChatAndAReadReceipt() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let result = try await Fixtures.run(Fixtures.executable("ChatApp"), [directory.path])
            #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
            let lines = result.stdout.split(separator: "\n").map(String.init)
            let story = lines.filter { !$0.hasPrefix("bob has") }
            #expect(
                story == [
                    "alice and bob are set up", "alice sent #1: 12:30 at the usual place?",
                    "bob got: 12:30 at the usual place? from alice", "alice's message is sent", "alice's message is delivered",
                    "alice's message is read", "alice uploaded 24 bytes", "bob saved menu.txt: Soup of the day: lentils",
                    "done",
                ])
            // The monitor ran at least once, and only ever saw 0 or 1 unread (how many runs it
            // makes depends on how the changes fall into main-actor turns).
            let monitorLines = Set(lines.filter { $0.hasPrefix("bob has") })
            #expect(!monitorLines.isEmpty && monitorLines.isSubset(of: ["bob has 0 unread", "bob has 1 unread"]))
        }
    }
}
