public import Foundation

/// A search of this device's messages (``BBMAccess/search(_:)``): words, filters, and where a
/// page starts.
///
/// The text is words, all of which a message must hold, in any order:
/// - `lunch` finds "Lunch", "LUNCH" and "lunch!"; `creme` finds "crème" (case and diacritics
///   do not count, nor full- and half-width forms);
/// - `lunch*` finds words that begin with `lunch` (a prefix needs at least three letters);
/// - `"lunch today"` finds the words next to each other, in that order;
/// - text in a script written without spaces (`東京`) is found anywhere, as a substring.
///
/// Nothing else is syntax: `OR`, `NEAR`, `-`, `(` are words or ignored punctuation, and a quote
/// left open ends at the end of the text.
public struct SearchQuery: Sendable, Equatable {
    /// The words searched for (may be empty when a filter on attachments is given).
    public var text: String
    /// Only this chat's messages.
    public var chatID: String?
    /// Only messages this user sent.
    public var sender: String?
    /// Only messages sent at or after this time.
    public var since: Date?
    /// Only messages sent before this time.
    public var until: Date?
    /// Only messages with an attachment.
    public var hasAttachment: Bool
    /// Only attachments of this media type: a whole type (`image/png`) or its first part
    /// (`image`).
    public var mediaType: String?
    /// The most results in a page (1 to 100).
    public var limit: Int
    /// Where the page starts: ``SearchPage/next`` of the page before, nil for the first.
    public var cursor: String?
    /// What marks a match in a snippet: the text before it and after it.
    public var marks: (open: String, close: String)

    /// The longest text a query takes, in characters.
    public static let longestText = 1_000

    /// A query for `text`, narrowed by the filters given.
    public init(
        _ text: String, chatID: String? = nil, sender: String? = nil, since: Date? = nil, until: Date? = nil,
        hasAttachment: Bool = false, mediaType: String? = nil, limit: Int = 20, cursor: String? = nil,
        marks: (open: String, close: String) = ("[", "]")
    ) {
        self.text = text
        self.chatID = chatID
        self.sender = sender
        self.since = since
        self.until = until
        self.hasAttachment = hasAttachment
        self.mediaType = mediaType
        self.limit = limit
        self.cursor = cursor
        self.marks = marks
    }

    /// Whether two queries ask the same (marks included).
    public static func == (lhs: SearchQuery, rhs: SearchQuery) -> Bool {
        lhs.text == rhs.text && lhs.chatID == rhs.chatID && lhs.sender == rhs.sender && lhs.since == rhs.since
            && lhs.until == rhs.until && lhs.hasAttachment == rhs.hasAttachment && lhs.mediaType == rhs.mediaType
            && lhs.limit == rhs.limit && lhs.cursor == rhs.cursor && lhs.marks == rhs.marks
    }
}

/// One message a search found.
public struct SearchResult: Sendable, Equatable {
    /// The message (``BBMAccess/message(_:)``; ``BBMAccess/messages(around:limit:)`` opens its
    /// chat there).
    public var messageID: String
    /// Its chat.
    public var chatID: String
    /// Who sent it.
    public var sender: String
    /// When it was sent.
    public var timestamp: Date
    /// Its number in the chat (nil while it is sending).
    public var number: Int64?
    /// Where it matched: a part of its text (or of its file's name) with each match between the
    /// query's marks, and `…` where the text goes on.
    public var snippet: String
}

/// A page of results, best first: BM25 without term frequencies (the index keeps none), so of
/// the messages that hold every word the shorter first, and the newest first among equals.
public struct SearchPage: Sendable, Equatable {
    /// The results.
    public var results: [SearchResult]
    /// The chats whose subject holds every word searched for (first page only, at most
    /// `limit`), most recently active first.
    public var chats: [Chat]
    /// The cursor of the next page; nil when this is the last.
    public var next: String?
}

/// A query made ready: the tokens a message must have, and the clauses its text must satisfy.
struct SearchMatch: Sendable {
    /// A run of units that must appear one after the other; the last may be a prefix.
    struct Clause: Sendable, Equatable {
        var terms: [String]
        var grams: [Bool]
        var lastIsPrefix: Bool
    }

    var clauses: [Clause]
    /// The filters that are tokens (attachment, media type).
    var filters: [(SearchKey.Kind, String)]
    /// The filters the message row answers: its chat, its sender, when it was sent.
    var chatID: String?
    var sender: String?
    var since: Date?
    var until: Date?

    /// Parses `query`; refuses what cannot be searched for with `invalidArgument`, and a query
    /// with no words and no filter.
    init(_ query: SearchQuery) throws {
        guard query.text.count <= SearchQuery.longestText else {
            throw MessagingError(.invalidArgument, "a search is at most \(SearchQuery.longestText) characters")
        }
        guard (1...100).contains(query.limit) else {
            throw MessagingError(.invalidArgument, "a page of results holds 1 to 100")
        }
        clauses = try Self.clauses(of: query.text)
        filters = []
        if let mediaType = query.mediaType {
            let type = mediaType.lowercased()
            guard !type.isEmpty, type.utf8.count <= 255 else {
                throw MessagingError(.invalidArgument, "a media type filter is a type (image/png) or its first part (image)")
            }
            filters.append(type.contains("/") ? (.mediaType, type) : (.majorType, type))
        } else if query.hasAttachment {
            filters.append((.attachment, ""))
        }
        chatID = query.chatID
        sender = query.sender
        since = query.since
        until = query.until
        guard !clauses.isEmpty || !filters.isEmpty else {
            throw MessagingError(.invalidArgument, "a search needs a word to look for (or an attachment filter)")
        }
    }

    /// The clauses of a query's text: a quoted phrase is one; outside quotes each piece between
    /// spaces is one (a piece of several units, `e-mail` or `東京`, must match them in a row).
    static func clauses(of text: String) throws -> [Clause] {
        var clauses: [Clause] = []
        let pieces = text.split(separator: "\"", omittingEmptySubsequences: false)
        for (index, piece) in pieces.enumerated() {
            if index % 2 == 1 {
                if let clause = try clause(String(piece), prefix: false) { clauses.append(clause) }
                continue
            }
            for word in piece.split(whereSeparator: { $0.isWhitespace }) {
                let prefix = word.hasSuffix("*")
                if let clause = try clause(String(word), prefix: prefix) { clauses.append(clause) }
            }
        }
        return clauses
    }

    private static func clause(_ text: String, prefix: Bool) throws -> Clause? {
        let units = SearchText.units(of: text)
        guard let last = units.last else { return nil }
        // A prefix of a word: the index holds each word's first three characters.
        let isPrefix = prefix && !last.isGram
        if isPrefix, SearchKey.prefix(of: last.term) == nil {
            throw MessagingError(
                .invalidArgument, "a prefix search needs at least \(SearchKey.prefixLength) letters before the *")
        }
        return Clause(terms: units.map(\.term), grams: units.map(\.isGram), lastIsPrefix: isPrefix)
    }

    /// A term a message must have: one token, or (`lun*`) every term that begins with a
    /// prefix's code.
    enum Term: Hashable, Sendable {
        case token(SearchToken)
        case prefix(UInt64)
    }

    /// Every term a message must have.
    func terms(_ key: SearchKey) -> [Term] {
        var terms: [Term] = []
        for clause in clauses {
            var index = 0
            while index < clause.terms.count {
                if clause.grams[index] {
                    // A run of characters of a script without spaces: its pairs, or the one.
                    var end = index
                    while end + 1 < clause.terms.count, clause.grams[end + 1] { end += 1 }
                    if end == index {
                        terms.append(.token(SearchToken(key.code(.gram, clause.terms[index]))))
                    } else {
                        for pair in index..<end {
                            terms.append(.token(SearchToken(key.code(.pair, clause.terms[pair] + clause.terms[pair + 1]))))
                        }
                    }
                    index = end + 1
                    continue
                }
                let term = clause.terms[index]
                if clause.lastIsPrefix, index == clause.terms.count - 1 {
                    // At least `prefixLength` scalars (checked when parsed); a longer prefix is
                    // checked on the text.
                    terms.append(.prefix(key.code(.prefix, SearchKey.prefix(of: term) ?? term)))
                } else {
                    terms.append(.token(key.wordToken(term)))
                }
                index += 1
            }
        }
        for (kind, value) in filters { terms.append(.token(SearchToken(key.code(kind, value)))) }
        return Array(Set(terms))
    }

    /// The FTS5 expression of `terms`: each term's hex (a prefix's followed by `*`), joined by
    /// `AND`. Nothing of the query's text is in it.
    static func expression(_ terms: [Term]) -> String {
        terms.map { term in
            switch term {
            case .token(let token): token.text
            case .prefix(let code): SearchToken(code).text + "*"
            }
        }.sorted().joined(separator: " AND ")
    }

    /// The units of `text` that the clauses match, or nil when a clause matches none of them
    /// (the index's tokens are necessary, not sufficient: a prefix, a phrase or a substring is
    /// checked here, on the message's text).
    func matches(in units: [SearchText.Unit]) -> Set<Int>? {
        var marked: Set<Int> = []
        for clause in clauses {
            var found = false
            let count = clause.terms.count
            if units.count >= count {
                for start in 0...(units.count - count) where matches(clause, units, at: start) {
                    found = true
                    marked.formUnion(start..<(start + count))
                }
            }
            if !found { return nil }
        }
        return marked
    }

    private func matches(_ clause: Clause, _ units: [SearchText.Unit], at start: Int) -> Bool {
        for (offset, term) in clause.terms.enumerated() {
            let unit = units[start + offset]
            if unit.isGram != clause.grams[offset] { return false }
            if clause.lastIsPrefix, offset == clause.terms.count - 1 {
                if !unit.term.hasPrefix(term) { return false }
            } else if unit.term != term {
                return false
            }
            // Characters of a script without spaces match as a substring: side by side.
            if offset > 0, unit.isGram, units[start + offset - 1].range.upperBound != unit.range.lowerBound { return false }
        }
        return true
    }

    /// Whether `document` satisfies every clause, with its snippet: the first field that
    /// matched, around the first match, each match between `marks`.
    func snippet(of document: SearchDocument, marks: (open: String, close: String)) -> String? {
        var best: (field: String, units: [SearchText.Unit], marked: Set<Int>)?
        if clauses.isEmpty {
            let field = document.fields.first ?? ""
            return Self.snippet(field, units: SearchText.units(of: field), marked: [], marks: marks)
        }
        // Every clause must match within one field (a phrase does not run from the text into the
        // file name); the snippet shows the first field that matched.
        let fields = document.fields.map { ($0, SearchText.units(of: $0)) }
        for (field, units) in fields {
            if let marked = matches(in: units) {
                best = (field, units, marked)
                break
            }
        }
        if best == nil {
            // Words may be spread over the text and the file name: each clause in one of them.
            var union: [Int: Set<Int>] = [:]
            for clause in clauses {
                let single = SearchMatch(clauses: [clause])
                guard
                    let (index, marked) = fields.enumerated().lazy.compactMap({ index, field in
                        single.matches(in: field.1).map { (index, $0) }
                    }).first
                else { return nil }
                union[index, default: []].formUnion(marked)
            }
            let first = union.keys.min() ?? 0
            best = (fields[first].0, fields[first].1, union[first] ?? [])
        }
        guard let best else { return nil }
        return Self.snippet(best.field, units: best.units, marked: best.marked, marks: marks)
    }

    private init(clauses: [Clause]) {
        self.clauses = clauses
        filters = []
    }

    /// Units shown before the first match, and in all.
    static let snippetLead = 6
    static let snippetUnits = 24

    private static func snippet(
        _ text: String, units: [SearchText.Unit], marked: Set<Int>, marks: (open: String, close: String)
    ) -> String {
        guard !units.isEmpty else { return String(text.prefix(120)) }
        let first = marked.min() ?? 0
        let start = max(0, first - snippetLead)
        let end = min(units.count, start + snippetUnits)
        var snippet = start > 0 ? "…" : ""
        var position = start > 0 ? units[start].range.lowerBound : text.startIndex
        for index in start..<end {
            let unit = units[index]
            snippet += text[position..<unit.range.lowerBound]
            if marked.contains(index) {
                snippet += marks.open + text[unit.range] + marks.close
            } else {
                snippet += text[unit.range]
            }
            position = unit.range.upperBound
        }
        if end < units.count {
            snippet += "…"
        } else {
            snippet += text[position...]
        }
        return snippet
    }
}
