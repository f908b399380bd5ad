import Foundation
import SparkCrypto
import SparkStore
import SparkTestSupport
import Testing

@testable import SparkSDK

/// Search: what is found (words, prefixes, phrases, scripts without spaces, each filter, pages),
/// what is no longer found (an edit's old text, a recall, an expiry, a chat left), and what the
/// files hold (keyed tokens, and none left of what was taken out).
@Suite("Search")
struct SearchTests {
    // MARK: Text and queries

    @Test func termsAreFoldedAndScriptsWithoutSpacesAreSplitIntoCharacters() {
        let units = SearchText.units(of: "Crème BRÛLÉE, ｆｕｌｌ-width 東京都に e-mail")
        #expect(units.map(\.term) == ["creme", "brulee", "full", "width", "東", "京", "都", "に", "e", "mail"])
        #expect(units.filter(\.isGram).count == 4)
        #expect(SearchText.units(of: "  ,.!? ").isEmpty)
        // The Latin table folds as the rule does on the whole word (Foundation's).
        for word in ["Crème", "Łódź", "Straße", "Œuvre", "Ĳssel", "ÆØÅ", "ſtraße", "Ÿ"] {
            let rule = word.precomposedStringWithCompatibilityMapping
                .folding(options: [.caseInsensitive, .diacriticInsensitive, .widthInsensitive], locale: nil)
                .precomposedStringWithCanonicalMapping
            #expect(SearchText.normalize(word[...]) == rule, "\(word)")
        }
        let long = String(repeating: "a", count: 500)
        #expect(SearchText.units(of: long).first?.term.count == SearchText.longestTerm)
    }

    /// Latin text takes a shorter path to its tokens: the same tokens as the general one.
    @Test func latinTextHasTheTokensOfTheGeneralPath() {
        let key = SearchKey(key: SymmetricKey(size: .bits256))
        let texts = [
            "Lunch at NOON, don't be late!", "x", "ab abc ABCD", String(repeating: "Long", count: 40) + " tail",
            "under_score 12:30 e-mail", "", "Crème BRÛLÉE à Łódź, l’été… ÆØÅ", "Ĳssel Œuvre Straße ÉÉÉé",
            "×÷ ÿ ſ", String(repeating: "é", count: 70) + "x", "ée ÉÉ",
        ]
        for text in texts {
            let fast = SearchDocument(content: text, fileName: nil, mediaType: nil, chatID: "c", sender: "s").tokens(key)
            var general: [SearchToken] = []
            for unit in SearchText.units(of: text) where !general.contains(key.wordToken(unit.term)) {
                general.append(key.wordToken(unit.term))
            }
            #expect(fast == general, "\(text)")
        }
    }

    @Test func theIndexHoldsKeyedTokensThatDependOnTheKey() {
        let document = SearchDocument(
            content: "lunch at noon", fileName: "menu.pdf", mediaType: "application/pdf", chatID: "c1", sender: "bob")
        let key = SearchKey(key: SymmetricKey(size: .bits256))
        let tokens = document.tokens(key)
        let text = SearchToken.text(tokens)
        #expect(text.split(separator: " ").map(\.count) == [32, 16, 32, 32, 32, 16, 16, 16])
        #expect(text.allSatisfy { $0 == " " || $0.isHexDigit })
        #expect(!text.contains("lunch") && !text.contains("menu"))
        // lun+lunch, at, noo+noon, men+menu, pdf+pdf, a, m, t: a word's term begins with its
        // prefix's code, so words of one prefix share their first 16 digits.
        #expect(tokens.count == 8)
        #expect(tokens[0].first != tokens[2].first && tokens[0].second != nil && tokens[1].second == nil)
        #expect(
            SearchToken.text([key.wordToken("lunar")]).prefix(16) == SearchToken.text([key.wordToken("lunch")]).prefix(16))
        #expect(Set(tokens).isDisjoint(with: document.tokens(SearchKey(key: SymmetricKey(size: .bits256)))))
        #expect(tokens == document.tokens(key), "the same text gives the same tokens: how it is taken out again")
    }

    @Test func hostileQueriesGetALiteralMatchOrAClearError() throws {
        for text in [String(repeating: "a", count: 10_000), "", "   ", "*", "\"\"", "lu*", "a*"] {
            #expect(throws: MessagingError(.invalidArgument, ""), "\(text.prefix(20))") { try SearchMatch(SearchQuery(text)) }
        }
        // The index's own syntax is words, or punctuation that ends one.
        let match = try SearchMatch(SearchQuery("lunch OR \"NEAR(a b)\" -dinner ( \"open"))
        #expect(
            match.clauses.map(\.terms) == [["lunch"], ["or"], ["near", "a", "b"], ["dinner"], ["open"]], "\(match.clauses)")
        let key = SearchKey(key: SymmetricKey(size: .bits256))
        let expression = SearchMatch.expression(match.terms(key))
        #expect(expression.allSatisfy { $0 == " " || $0.isHexDigit || "ADN".contains($0) })
        #expect(!expression.lowercased().contains("near") && !expression.contains("\""))
        #expect(SearchMatch.expression(try SearchMatch(SearchQuery("lunch*")).terms(key)).hasSuffix("*"))
        #expect(throws: MessagingError(.invalidArgument, "")) { try SearchMatch(SearchQuery("lunch", limit: 0)) }
        // Invalid UTF-8 reaches Swift repaired (U+FFFD is neither letter nor digit).
        let repaired = String(decoding: [0x6C, 0x75, 0xFF, 0x6E, 0x63, 0x68], as: UTF8.self)
        #expect(try SearchMatch(SearchQuery(repaired)).clauses.map(\.terms) == [["lu", "nch"]])
    }

    // MARK: End to end

    /// A world where alice sent bob `texts`, all arrived on bob's device.
    private static func conversation(
        _ directory: URL, _ kind: MessagingStoreKind, _ texts: [String]
    ) async throws -> (world: ChatWorld, alice: BBMAccess, bob: BBMAccess, chatID: String, ids: [String]) {
        let world = try ChatWorld(directory, messaging: kind)
        let (_, alice) = try await world.endpoint("alice", "alice-laptop")
        let (_, bob) = try await world.endpoint("bob", "bob-phone")
        let chat = try await alice.startChat(with: ["bob"], subject: "Weekend plans")
        var ids: [String] = []
        for text in texts { ids.append(try await alice.sendMessage(text, to: chat.chatID).id) }
        let bobMessages = try await bob.messages(in: chat.chatID)
        #expect(await waitFor("bob has them all") { bobMessages.value.count == texts.count })
        return (world, alice, bob, chat.chatID, ids)
    }

    private static func found(_ access: BBMAccess, _ query: SearchQuery) async throws -> [String] {
        try await access.search(query).results.map(\.messageID)
    }

    @Test(arguments: MessagingStoreKind.tested)
    func wordsPrefixesPhrasesAndSubstringsAreFound(_ kind: MessagingStoreKind) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let texts = [
                "Let's have lunch tomorrow at the Crème café", "Lunchtime!", "lunch plans", "東京都に行きます",
                "nothing to see", "สวัสดีครับ",
            ]
            let (_, alice, bob, chatID, ids) = try await Self.conversation(directory, kind, texts)
            for access in [alice, bob] {
                #expect(Set(try await Self.found(access, SearchQuery("lunch"))) == [ids[0], ids[2]])
                #expect(Set(try await Self.found(access, SearchQuery("LUNCH*"))) == [ids[0], ids[1], ids[2]])
                #expect(try await Self.found(access, SearchQuery("\"lunch tomorrow\"")) == [ids[0]])
                #expect(try await Self.found(access, SearchQuery("\"tomorrow lunch\"")).isEmpty)
                #expect(try await Self.found(access, SearchQuery("creme CAFE")) == [ids[0]])
                #expect(try await Self.found(access, SearchQuery("東京")) == [ids[3]])
                #expect(try await Self.found(access, SearchQuery("京都")) == [ids[3]])
                #expect(try await Self.found(access, SearchQuery("都東")).isEmpty)
                // Thai, with its combining vowels: by substring too.
                #expect(try await Self.found(access, SearchQuery("สวัส")) == [ids[5]])
                #expect(try await Self.found(access, SearchQuery("ดีคร")) == [ids[5]])
                #expect(try await Self.found(access, SearchQuery("ครดี")).isEmpty)
                #expect(try await Self.found(access, SearchQuery("lunch nothing")).isEmpty, "every word must be there")
            }
            let page = try await bob.search(SearchQuery("lunch tomorrow", marks: ("<", ">")))
            #expect(page.results.first?.snippet == "Let's have <lunch> <tomorrow> at the Crème café")
            #expect(page.results.first?.chatID == chatID && page.results.first?.sender == "alice")
            // The chat's subject is found too.
            #expect(try await bob.search(SearchQuery("weekend")).chats.map(\.chatID) == [chatID])
            // A result opens its chat around it.
            let around = try await bob.messages(around: ids[2], limit: 3)
            #expect(around.map(\.id) == [ids[1], ids[2], ids[3]])
        }
    }

    @Test(arguments: MessagingStoreKind.tested)
    func filtersRankingAndPages(_ kind: MessagingStoreKind) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let texts =
                (1...5).map { "report number \($0)" } + ["report " + (1...30).map { "filler\($0)" }.joined(separator: " ")]
            let (world, alice, bob, chatID, ids) = try await Self.conversation(directory, kind, texts)
            // Equal matches come newest first; the long message (the word a smaller part of it) last.
            let ranked = try await Self.found(bob, SearchQuery("report"))
            #expect(ranked == Array(ids[0..<5].reversed()) + [ids[5]], "\(ranked) \(ids)")
            // Pages: two at a time, each result once, and the cursor belongs to its query.
            var seen: [String] = []
            var page = try await bob.search(SearchQuery("report", limit: 2))
            seen += page.results.map(\.messageID)
            while let next = page.next {
                page = try await bob.search(SearchQuery("report", limit: 2, cursor: next))
                seen += page.results.map(\.messageID)
            }
            #expect(seen == ranked)
            let first = try #require(try await bob.search(SearchQuery("report", limit: 2)).next)
            await #expect(throws: MessagingError(.invalidArgument, "")) {
                try await bob.search(SearchQuery("number", limit: 2, cursor: first))
            }
            await #expect(throws: MessagingError(.invalidArgument, "")) {
                try await bob.search(SearchQuery("report", cursor: "bm90IGEgY3Vyc29y"))
            }
            // Sender and chat.
            let (_, carol) = try await world.endpoint("carol", "carol-phone")
            let other = try await bob.startChat(with: ["carol"])
            let reply = try await bob.sendMessage("my report is late", to: other.chatID)
            #expect(await waitFor("carol has it") { carol.chats.value.count == 1 })
            #expect(try await Self.found(bob, SearchQuery("report", sender: "bob")) == [reply.id])
            #expect(try await Self.found(bob, SearchQuery("report", chatID: other.chatID)) == [reply.id])
            #expect(try await Self.found(bob, SearchQuery("report", chatID: chatID)).count == 6)
            // Dates.
            let sent = try await bob.message(reply.id).timestamp
            #expect(try await Self.found(bob, SearchQuery("report", since: sent)) == [reply.id])
            #expect(try await Self.found(bob, SearchQuery("report", until: sent)).count == 6)
            // Attachments: by having one, by media type, and by the file's name.
            let path = directory.appendingPathComponent("holiday.png").path
            try Data(repeating: 7, count: 1000).write(to: URL(fileURLWithPath: path))
            let file = try await alice.sendFile(at: path, to: chatID, caption: "the beach report").value
            #expect(await waitFor("bob has the file") { (try? bob.messenger.storage.readNow { try $0.message(file.id) }) != nil })
            #expect(try await Self.found(bob, SearchQuery("", hasAttachment: true)) == [file.id])
            #expect(try await Self.found(bob, SearchQuery("report", mediaType: "image")) == [file.id])
            #expect(try await Self.found(bob, SearchQuery("report", mediaType: "image/png")) == [file.id])
            #expect(try await Self.found(bob, SearchQuery("report", mediaType: "video")).isEmpty)
            #expect(try await Self.found(bob, SearchQuery("holiday")) == [file.id])
            #expect(try await bob.search(SearchQuery("holiday")).results.first?.snippet == "[holiday].png")
        }
    }

    /// What the files would hold of `word` in the device's index: the last 12 digits of its
    /// term (FTS5 stores a term after the first on a page as the part it does not share with the
    /// term before it: the prefix's code is shared with words of the same prefix, and the word's
    /// own code with hardly a digit of its neighbour's).
    private static func tokens(of word: String, in access: BBMAccess) async throws -> [Data] {
        let key = try await access.messenger.read { store in store.searchKey }
        return [Data(key.token(.word, word).suffix(12).utf8)]
    }

    /// Whether any of `tokens` is in the endpoint's files as they are: the store, its
    /// write-ahead log and the index's image (sealed).
    static func inFiles(_ tokens: [Data], _ directory: URL, device: String) -> Bool {
        ["endpoint.sqlite", "endpoint.sqlite-wal", SearchIndexImage.fileName].contains { file in
            let bytes = (try? Data(contentsOf: directory.appendingPathComponent(device).appendingPathComponent(file))) ?? Data()
            return tokens.contains { bytes.range(of: $0) != nil }
        }
    }

    /// Where `tokens` are in the index as the key holder reads it: its pages in memory, and its
    /// image opened with the store key.
    static func inIndex(_ tokens: [Data], of access: BBMAccess) async throws -> [String] {
        let queue = try #require(access.messenger.storage.sqliteQueue)
        let sealer = try #require(try await access.messenger.read { ($0 as? SQLiteMessagingStore)?.sealer })
        let memory = try queue.withConnection { db in try db.serialize(schema: SearchIndexImage.schema) }
        let image = SearchIndexImage.opened(besides: URL(fileURLWithPath: queue.path), sealer: sealer) ?? Data()
        return [("memory", memory), ("image", image)].filter { _, bytes in tokens.contains { bytes.range(of: $0) != nil } }
            .map(\.0)
    }

    @Test(arguments: MessagingStoreKind.tested)
    func editsRecallsExpiriesAndLeavingTakeMessagesOutLeavingNoToken(_ kind: MessagingStoreKind) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let texts = ["the zanzibar plan", "quokka sighting", "meet at the walrus", "the ocelot memo"]
            let (_, alice, bob, chatID, ids) = try await Self.conversation(directory, kind, texts)
            let words = ["zanzibar", "quokka", "walrus", "ocelot"]
            for (word, id) in zip(words, ids) { #expect(try await Self.found(bob, SearchQuery(word)) == [id]) }
            let scanned = kind == .sqlite
            if scanned {
                // No word of a message is in the files; its keyed tokens are (the scan below can fail).
                let checkpoint = {
                    try bob.messenger.storage.sqliteQueue?.withConnection { try $0.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
                }
                try checkpoint()
                for word in words + ["sighting", "memo"] {
                    #expect(!Self.inFiles([Data(word.utf8)], directory, device: "bob-phone"), "\(word) in the clear")
                }
                // Nor a token: they are in the index in memory, and in the files only sealed.
                let quokka = try await Self.tokens(of: "quokka", in: bob)
                #expect(!Self.inFiles(quokka, directory, device: "bob-phone"))
                #expect(try await Self.inIndex(quokka, of: bob).contains("memory"))
            }

            // An edit: the old word is gone, the new one found.
            try await alice.editMessage(ids[0], content: "the madagascar plan")
            let bobMessages = try await bob.messages(in: chatID)
            #expect(await waitFor("bob has the edit") { bobMessages.value.first?.content == "the madagascar plan" })
            #expect(try await Self.found(bob, SearchQuery("zanzibar")).isEmpty)
            #expect(try await Self.found(bob, SearchQuery("madagascar")) == [ids[0]])
            // A recall.
            try await alice.recallMessage(ids[1])
            #expect(await waitFor("bob's device recalls it") { bobMessages.value.contains { $0.id == ids[1] && $0.isRecalled } })
            #expect(try await Self.found(bob, SearchQuery("quokka")).isEmpty)
            #expect(try await Self.found(alice, SearchQuery("quokka")).isEmpty)
            if scanned {
                for word in ["zanzibar", "quokka"] {
                    #expect(try await Self.inIndex(try await Self.tokens(of: word, in: bob), of: bob) == [], "\(word)")
                }
                // Taken out, the index's new image was written at once: the others are there.
                #expect(try await Self.inIndex(try await Self.tokens(of: "walrus", in: bob), of: bob) == ["memory", "image"])
            }
            // Leaving: the messages stay to be read, search no longer finds them.
            try await bob.leaveChat(chatID)
            #expect(try await Self.found(bob, SearchQuery("walrus")).isEmpty)
            #expect(try await Self.found(bob, SearchQuery("ocelot")).isEmpty)
            #expect(try await bob.message(ids[2]).content == "meet at the walrus")
            if scanned {
                for word in ["walrus", "ocelot", "madagascar"] {
                    #expect(try await Self.inIndex(try await Self.tokens(of: word, in: bob), of: bob) == [], "\(word)")
                }
            }
        }
    }

    /// Stores a text of alice's in the chat "side" as received (the rollback tests' messages).
    static func receive(_ id: String, _ number: Int64, _ text: String, in store: any MessagingStore) throws {
        try store.insertReceived(
            ChatHistory.Record(
                id: id, number: number, sender: "alice", content: text, tag: "Text", state: .delivered,
                timestamp: Date(timeIntervalSince1970: 1_790_000_000)),
            chatID: "side", incoming: true, ignoringTaken: false)
    }

    /// A chat is live or not as the transaction stands: a savepoint that left it, stored a message
    /// there (not indexed) and was rolled back leaves the chat live for the next message.
    @Test(arguments: MessagingStoreKind.tested)
    func aRolledBackLeaveDoesNotKeepTheChatFromTheIndex(_ kind: MessagingStoreKind) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let (_, _, bob, _, _) = try await Self.conversation(directory, kind, [])
            let now = Date()
            try await bob.messenger.storage.write { store in
                try store.setMembership(chatID: "side", participants: [], active: true, at: now)
                _ = try? store.savepoint {
                    try store.setMembership(chatID: "side", participants: [], active: false, at: now)
                    try Self.receive("r1", 1, "pelican one", in: store)
                    throw MessagingError(.conflict, "rolled back")
                }
                try Self.receive("r2", 2, "pelican two", in: store)
            }
            #expect(try await Self.found(bob, SearchQuery("pelican")) == ["r2"])
        }
    }

    /// The index's writes wait for the end of the transaction (one segment a page, not one a
    /// message): a savepoint rolled back takes its own with it, and the rest are made.
    @Test(arguments: MessagingStoreKind.tested)
    func aRolledBackSavepointLeavesNothingInTheIndex(_ kind: MessagingStoreKind) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let (_, _, bob, _, _) = try await Self.conversation(directory, kind, [])
            let now = Date()
            try await bob.messenger.storage.write { store in
                try store.setMembership(chatID: "side", participants: [], active: true, at: now)
                try Self.receive("h1", 1, "heron first", in: store)
                _ = try? store.savepoint {
                    try Self.receive("h2", 2, "heron second", in: store)
                    throw MessagingError(.conflict, "rolled back")
                }
                try Self.receive("h3", 3, "heron third", in: store)
            }
            #expect(try await Self.found(bob, SearchQuery("heron", limit: 10)).sorted() == ["h1", "h3"])
            #expect(try await Self.found(bob, SearchQuery("second")).isEmpty)
            #expect(try await Self.found(bob, SearchQuery("third")) == ["h3"])
            // Not a token of the message rolled back in the file (results are checked against
            // the messages, so only the file shows one left behind).
            if kind == .sqlite {
                #expect(try await Self.inIndex(try await Self.tokens(of: "second", in: bob), of: bob) == [])
                #expect(try await Self.inIndex(try await Self.tokens(of: "third", in: bob), of: bob).contains("memory"))
            }
        }
    }

    @Test func anExpiredMessageLeavesNoTokenBehind() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let clock = TestClock(Date())
            let world = try ChatWorld(directory, clock: clock.wallClock)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"])
            try await alice.setDisappearingTimer(.seconds(60), in: chat.chatID)
            let secret = try await alice.sendMessage("the armadillo password", to: chat.chatID)
            try await alice.setDisappearingTimer(nil, in: chat.chatID)
            let kept = try await alice.sendMessage("armadillo facts", to: chat.chatID)
            #expect(try await Self.found(alice, SearchQuery("armadillo")).count == 2)
            clock.advance(by: 61)
            let aliceMessages = try await alice.messages(in: chat.chatID)
            #expect(await waitFor("alice's device removes it") { !aliceMessages.value.contains { $0.id == secret.id } })
            #expect(try await Self.found(alice, SearchQuery("armadillo")) == [kept.id])
            #expect(try await Self.found(alice, SearchQuery("password")).isEmpty)
            #expect(try await Self.inIndex(try await Self.tokens(of: "password", in: alice), of: alice) == [])
            #expect(try await Self.inIndex(try await Self.tokens(of: "facts", in: alice), of: alice) == ["memory", "image"])
            _ = bob
        }
    }

    @Test(arguments: MessagingStoreKind.tested)
    func theIndexIsRebuiltFromTheStore(_ kind: MessagingStoreKind) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let texts = (1...12).map { "entry \($0) of the ledger" }
            let (_, _, bob, _, ids) = try await Self.conversation(directory, kind, texts)
            let before = try await Self.found(bob, SearchQuery("ledger", limit: 100))
            #expect(Set(before) == Set(ids))
            // Damage: the index emptied behind the messenger's back.
            try await bob.messenger.storage.write { store in
                try store.resetSearchIndex()
            }
            #expect(try await Self.found(bob, SearchQuery("ledger")).isEmpty)
            let reports = Box<[Int]>([])
            try await bob.rebuildSearchIndex { done, total in
                #expect(total == 12)
                reports.update { $0.append(done) }
            }
            #expect(reports.value.last == 12)
            #expect(try await Self.found(bob, SearchQuery("ledger", limit: 100)) == before)
            #expect(
                try await bob.messenger.read { store in try store.searchIndexState() }
                    == SearchIndexState(current: true, building: false))
            // A rebuild walks the rows once, a batch after another: five, five, then the last two.
            let walked = try await bob.messenger.storage.write { store -> [Int] in
                try store.resetSearchIndex()
                var (counts, after) = ([Int](), Int64(0))
                while true {
                    let (indexed, last) = try store.indexUnindexed(after: after, limit: 5)
                    counts.append(indexed)
                    guard let last else { return counts }
                    after = last
                }
            }
            #expect(walked == [5, 5, 2])
            #expect(try await Self.found(bob, SearchQuery("ledger", limit: 100)) == before)
            // An index of another version (an upgrade) is rebuilt when messaging starts.
            if let queue = bob.messenger.storage.sqliteQueue {
                try queue.write { db in
                    try db.execute("INSERT INTO search.message_search(message_search) VALUES ('delete-all')")
                    try db.execute("DELETE FROM search.lengths")
                    try db.execute("UPDATE search.state SET version = 1")
                }
                #expect(try await bob.messenger.read { store in try store.searchIndexState().current } == false)
                #expect(try await Self.found(bob, SearchQuery("ledger")).isEmpty)
                try await bob.messenger.search.resumeIfNeeded()
                #expect(try await Self.found(bob, SearchQuery("ledger", limit: 100)) == before)
            }
        }
    }
}
