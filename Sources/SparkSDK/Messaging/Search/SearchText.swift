import Foundation
import SparkCrypto

/// Text as search sees it: units, normalised terms, and the keyed tokens the index holds.
///
/// - A **unit** is a word (a run of letters and digits) or one character of a script written
///   without spaces (Han, Hiragana, Katakana, Thai, Lao, Khmer, Myanmar, Tibetan), which search
///   finds by substring.
/// - A unit's **term** is its text in compatibility composition (NFKC), case-folded, without
///   diacritics and at one width: `Crème`, `CRÈME` and `creme` are one term.
/// - The index holds **keyed tokens** only: `SipHash-2-4(indexKey, kind ‖ 0x00 ‖ term)`, a
///   64-bit pseudorandom function, in hex. Without the key a token says nothing of its word;
///   with the key a query's tokens are computed the same way (``SearchMatch``), so the query's
///   own text never reaches the index's query syntax.
///
/// What one message puts in the index (``SearchDocument``): each word as one term, its first
/// three characters' code then its own (`p`, `w`: a prefix query is a range of terms, as in a
/// plaintext index), or its own alone when shorter; `g1` each character of a script
/// without spaces and `g2` each two such characters in a row (substrings), `a` when it has an
/// attachment, `m` its media type and `t` the type's first part (filters; chat, sender and time
/// are the message row's). See `docs/SEARCH.md`.
enum SearchText {
    /// A word, or one character of a script without spaces, in a text.
    struct Unit: Sendable, Equatable {
        /// Where it is in the text searched.
        var range: Range<String.Index>
        /// Its normalised form.
        var term: String
        /// One character of a script written without spaces.
        var isGram: Bool
    }

    /// The most Unicode scalars of a word that make its term (a longer one is cut there).
    static let longestTerm = 64

    /// The units of `text`, in order. Walked by Unicode scalar (a combining mark stays with the
    /// word before it; in a script without spaces each scalar is a unit), which is several times
    /// faster than by `Character` on Linux.
    static func units(of text: String) -> [Unit] {
        var units: [Unit] = []
        var wordStart: String.Index?
        let scalars = text.unicodeScalars
        var index = scalars.startIndex
        func closeWord(at end: String.Index) {
            guard let start = wordStart else { return }
            units.append(Unit(range: start..<end, term: normalize(text[start..<end]), isGram: false))
            wordStart = nil
        }
        while index < scalars.endIndex {
            let scalar = scalars[index]
            let next = scalars.index(after: index)
            let value = scalar.value
            if value < 0x80 {
                if (0x30...0x39).contains(value) || (0x41...0x5A).contains(value) || (0x61...0x7A).contains(value) {
                    if wordStart == nil { wordStart = index }
                } else {
                    closeWord(at: index)
                }
            } else if isWrittenWithoutSpaces(scalar) {
                closeWord(at: index)
                // Each scalar alone, its script's combining vowels and tone marks too: a substring
                // may end inside a cluster (`คร` in `ครับ`).
                units.append(Unit(range: index..<next, term: normalize(text[index..<next]), isGram: true))
            } else if scalar.properties.isAlphabetic || scalar.properties.numericType != nil {
                if wordStart == nil { wordStart = index }
            } else if isMark(scalar), wordStart != nil {
                // A combining mark inside a word stays with it.
            } else {
                closeWord(at: index)
            }
            index = next
        }
        closeWord(at: scalars.endIndex)
        return units
    }

    /// Whether `scalar` is a combining mark (it stays with the word before it).
    static func isMark(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .spacingMark, .enclosingMark: true
        default: false
        }
    }

    /// A unit's term: NFKC, case-folded, without diacritics, at one width, at most
    /// ``longestTerm`` scalars. ASCII takes a shorter path to the same result.
    static func normalize(_ text: Substring) -> String {
        // At most `longestTerm` scalars (a text of that many bytes has no more).
        var cut = text
        if text.utf8.count > longestTerm,
            let end = text.unicodeScalars.index(
                text.unicodeScalars.startIndex, offsetBy: longestTerm, limitedBy: text.unicodeScalars.endIndex)
        {
            cut = text[..<end]
        }
        if cut.utf8.allSatisfy({ $0 < 0x80 }) {
            let count = cut.utf8.count
            return String(unsafeUninitializedCapacity: count) { output in
                for (index, byte) in cut.utf8.enumerated() { output[index] = (65...90).contains(byte) ? byte + 32 : byte }
                return count
            }
        }
        // Latin letters with diacritics (U+00C0–U+017F) from a table made once by the same rule.
        if cut.unicodeScalars.allSatisfy({ $0.value < 0x80 || latinLetter($0) != nil }) {
            var folded: [UInt8] = []
            for scalar in cut.unicodeScalars {
                if scalar.value < 0x80 {
                    folded.append((65...90).contains(scalar.value) ? UInt8(scalar.value + 32) : UInt8(scalar.value))
                } else {
                    folded += latinLetter(scalar)!.bytes
                }
            }
            return String(decoding: folded, as: UTF8.self)
        }
        return fold(String(cut))
    }

    /// The rule, for any text.
    private static func fold(_ text: String) -> String {
        text.precomposedStringWithCompatibilityMapping
            .folding(options: [.caseInsensitive, .diacriticInsensitive, .widthInsensitive], locale: nil)
            .precomposedStringWithCanonicalMapping
    }

    /// Each Latin-1 and Latin Extended-A letter (U+00C0–U+017F), folded by the rule: its UTF-8
    /// and where each of its scalars ends in it (`é` → `e`; `Ĳ` → `ij`, two), by value − 0xC0;
    /// nil for what is not a letter.
    static let latin: [(bytes: [UInt8], scalarEnds: [Int])?] = (UInt32(0xC0)...0x17F).map { value in
        guard let scalar = Unicode.Scalar(value), scalar.properties.isAlphabetic else { return nil }
        let folded = fold(String(Character(scalar)))
        var ends: [Int] = []
        var end = 0
        for scalar in folded.unicodeScalars {
            end += String(scalar).utf8.count
            ends.append(end)
        }
        return (Array(folded.utf8), ends)
    }

    /// The folded form of a Latin letter `scalar`, if it is one.
    static func latinLetter(_ scalar: Unicode.Scalar) -> (bytes: [UInt8], scalarEnds: [Int])? {
        (0xC0...0x17F).contains(scalar.value) ? latin[Int(scalar.value - 0xC0)] : nil
    }

    /// Whether `scalar` belongs to a script written without spaces between words.
    static func isWrittenWithoutSpaces(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x0E00...0x0EFF,  // Thai, Lao
            0x0F00...0x0FFF,  // Tibetan
            0x1000...0x109F,  // Myanmar
            0x1780...0x17FF,  // Khmer
            0x2E80...0x2FDF,  // CJK radicals
            0x3005...0x3007, 0x3021...0x3029, 0x3031...0x3035,  // ideographic marks
            0x3040...0x30FF,  // Hiragana, Katakana
            0x31F0...0x31FF,  // Katakana extensions
            0x3400...0x4DBF,  // CJK extension A
            0x4E00...0x9FFF,  // CJK unified ideographs
            0xF900...0xFAFF,  // CJK compatibility ideographs
            0xFF66...0xFF9F,  // half-width Katakana
            0x20000...0x3134F:  // CJK extensions B–G
            return true
        default:
            return false
        }
    }
}

/// The key the index's tokens are made with: a SipHash-2-4 key derived from the store key
/// (HKDF-SHA256, info `spark search index v2`), so that a store whose key is gone (a reset) has an
/// index nobody can query.
struct SearchKey: Sendable {
    private let hash: SipHash24

    /// The kinds of token (see ``SearchText``).
    enum Kind: String, Sendable {
        case word = "w"
        case prefix = "p"
        case gram = "g1"
        case pair = "g2"
        case attachment = "a"
        case mediaType = "m"
        case majorType = "t"
    }

    /// The length of a prefix token's prefix, in Unicode scalars of the term, and so the shortest
    /// prefix a query may use.
    static let prefixLength = 3

    /// The first ``prefixLength`` scalars of `term`, when it has as many.
    static func prefix(of term: String) -> String? {
        let utf8 = term.utf8
        if utf8.count >= prefixLength, utf8.prefix(prefixLength).allSatisfy({ $0 < 0x80 }) {
            return String(term.utf8.prefix(prefixLength))
        }
        let scalars = term.unicodeScalars
        guard let end = scalars.index(scalars.startIndex, offsetBy: prefixLength, limitedBy: scalars.endIndex) else {
            return nil
        }
        return String(scalars[..<end])
    }

    /// The index key derived from `key` (the store key, or a test's).
    init(key: SymmetricKey) {
        let derived = try? HKDF.deriveKey(
            inputKeyMaterial: key, salt: Data(), info: Data("spark search index v2".utf8), outputByteCount: 16,
            hash: .sha256)
        // HKDF of 16 bytes never fails, and 16 bytes is SipHash's key.
        hash = try! SipHash24(key: SymmetricKey(secureBytes: derived!))
    }

    /// The code of `term` of `kind`: `SipHash-2-4(K, kind ‖ 0x00 ‖ term)`. 64 bits: two words
    /// sharing a code would only make extra candidates, which the check on the text drops.
    func code(_ kind: Kind, _ term: String) -> UInt64 {
        var term = term
        return term.withUTF8 { code(kind, $0) }
    }

    /// ``code(_:_:)`` of a term's UTF-8.
    func code(_ kind: Kind, _ term: UnsafeBufferPointer<UInt8>) -> UInt64 {
        let kindBytes = kind.rawValue.utf8
        let count = kindBytes.count + 1 + term.count
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: count) { message in
            var position = 0
            for byte in kindBytes {
                message[position] = byte
                position += 1
            }
            message[position] = 0
            _ = UnsafeMutableBufferPointer(rebasing: message[(position + 1)...]).initialize(from: term)
            return hash.value(of: UnsafeRawBufferPointer(message))
        }
    }

    /// ``wordToken(_:)`` of a word already folded, given as UTF-8 with where its third scalar
    /// ends (nil: it has fewer).
    func wordToken(folded term: UnsafeBufferPointer<UInt8>, prefixEnd: Int?) -> SearchToken {
        guard let prefixEnd else { return SearchToken(code(.word, term)) }
        return SearchToken(code(.prefix, UnsafeBufferPointer(rebasing: term[..<prefixEnd])), code(.word, term))
    }

    /// The token of a word, as the index holds it: for a word of ``prefixLength`` scalars or
    /// more, its prefix's code then its own (so that `lun*` is a range of the index's terms, as
    /// in a plaintext index); a shorter word's code alone.
    func wordToken(_ term: String) -> SearchToken {
        if let prefix = Self.prefix(of: term) { return SearchToken(code(.prefix, prefix), code(.word, term)) }
        return SearchToken(code(.word, term))
    }

    /// The token of `term` of `kind`, as the index holds it (words: ``wordToken(_:)``).
    func token(_ kind: Kind, _ term: String) -> String {
        kind == .word ? wordToken(term).text : SearchToken(code(kind, term)).text
    }
}

/// One term of the index: one 64-bit code in 16 hex digits, or two (a word's prefix, then the
/// word) in 32.
struct SearchToken: Hashable, Sendable {
    var first: UInt64
    var second: UInt64?

    init(_ first: UInt64, _ second: UInt64? = nil) {
        self.first = first
        self.second = second
    }

    private static let digits = Array("0123456789abcdef".utf8)

    /// Its text in the index.
    var text: String { Self.text([self]) }

    /// The text of `tokens`, separated by spaces: a document's text in the index.
    static func text(_ tokens: [SearchToken]) -> String {
        guard !tokens.isEmpty else { return "" }
        let capacity = tokens.reduce(0) { $0 + ($1.second == nil ? 17 : 33) }
        return String(unsafeUninitializedCapacity: capacity) { text in
            var position = 0
            func write(_ code: UInt64) {
                withUnsafeBytes(of: code) { bytes in
                    for byte in bytes {
                        text[position] = digits[Int(byte >> 4)]
                        text[position + 1] = digits[Int(byte & 15)]
                        position += 2
                    }
                }
            }
            for (index, token) in tokens.enumerated() {
                if index > 0 {
                    text[position] = 0x20
                    position += 1
                }
                write(token.first)
                if let second = token.second { write(second) }
            }
            return position
        }
    }
}

/// What one message puts in the index: its searchable text (the content, and the attachment's
/// file name) and the tokens made from it.
struct SearchDocument: Sendable, Equatable {
    /// The fields searched, in order: the content, then the file name, if any.
    var fields: [String]
    var chatID: String
    var sender: String
    /// The attachment's media type, if it has one.
    var mediaType: String?

    init(content: String, fileName: String?, mediaType: String?, chatID: String, sender: String) {
        fields = [content] + (fileName.map { [$0] } ?? [])
        self.mediaType = mediaType
        self.chatID = chatID
        self.sender = sender
    }

    /// The document of `message`.
    init(_ message: ChatMessage) {
        self.init(
            content: message.content, fileName: message.attachment?.fileName, mediaType: message.attachment?.mediaType,
            chatID: message.chatID, sender: message.sender)
    }

    /// Its tokens, each once, in the order first met (``SearchToken/text(_:)`` of them is its
    /// text in the index; the same text again takes it out, see `SQLiteMessagingStore+Search`).
    func tokens(_ key: SearchKey) -> [SearchToken] {
        var seen: Set<SearchToken> = []
        var tokens: [SearchToken] = []
        func add(_ token: SearchToken) {
            if seen.insert(token).inserted { tokens.append(token) }
        }
        func add(_ kind: SearchKey.Kind, _ term: String) { add(SearchToken(key.code(kind, term))) }
        for field in fields {
            // Latin text, the usual case: words folded in place and hashed from their bytes, the
            // same tokens as `SearchText.units` makes.
            if Self.latinWords(of: field, { word, prefixEnd in add(key.wordToken(folded: word, prefixEnd: prefixEnd)) }) {
                continue
            }
            var previousGram: SearchText.Unit?
            for unit in SearchText.units(of: field) {
                if unit.isGram {
                    add(.gram, unit.term)
                    if let previous = previousGram, previous.range.upperBound == unit.range.lowerBound {
                        add(.pair, previous.term + unit.term)
                    }
                    previousGram = unit
                } else {
                    previousGram = nil
                    add(key.wordToken(unit.term))
                }
            }
        }
        if let mediaType {
            let type = mediaType.lowercased()
            add(.attachment, "")
            add(.mediaType, type)
            add(.majorType, String(type.prefix { $0 != "/" }))
        }
        return tokens
    }

    /// Calls `body` with each word of `text` folded (its UTF-8, and where its third folded scalar
    /// ends, if it has three), as ``SearchText/units(of:)`` and ``SearchText/normalize(_:)``
    /// would make it, when every letter and digit of `text` is ASCII or a Latin letter of
    /// U+00C0–U+017F; otherwise calls nothing and returns false (the general path then runs).
    static func latinWords(of text: String, _ body: (UnsafeBufferPointer<UInt8>, Int?) -> Void) -> Bool {
        func isWordPart(_ scalar: Unicode.Scalar) -> Bool {
            scalar.properties.isAlphabetic || scalar.properties.numericType != nil || SearchText.isMark(scalar)
        }
        for scalar in text.unicodeScalars where scalar.value >= 0x80 && SearchText.latinLetter(scalar) == nil {
            if SearchText.isWrittenWithoutSpaces(scalar) || isWordPart(scalar) { return false }
        }
        let capacity = SearchText.longestTerm * 4
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { word in
            var (length, scalars, folded, prefixEnd) = (0, 0, 0, Int?.none)
            func close() {
                if scalars > 0 { body(UnsafeBufferPointer(rebasing: word[..<length]), prefixEnd) }
                (length, scalars, folded, prefixEnd) = (0, 0, 0, nil)
            }
            func append(_ bytes: [UInt8], ends: [Int]) {
                for (index, end) in ends.enumerated() {
                    let start = index == 0 ? 0 : ends[index - 1]
                    for byte in bytes[start..<end] {
                        word[length] = byte
                        length += 1
                    }
                    folded += 1
                    if folded == SearchKey.prefixLength { prefixEnd = length }
                }
            }
            for scalar in text.unicodeScalars {
                let value = scalar.value
                if value < 0x80 {
                    let byte: UInt8
                    switch value {
                    case 0x30...0x39, 0x61...0x7A: byte = UInt8(value)
                    case 0x41...0x5A: byte = UInt8(value + 32)
                    default:
                        close()
                        continue
                    }
                    // The general path cuts a word at `longestTerm` scalars of the text, then folds.
                    if scalars < SearchText.longestTerm {
                        word[length] = byte
                        length += 1
                        folded += 1
                        if folded == SearchKey.prefixLength { prefixEnd = length }
                    }
                    scalars += 1
                } else if let letter = SearchText.latinLetter(scalar) {
                    if scalars < SearchText.longestTerm { append(letter.bytes, ends: letter.scalarEnds) }
                    scalars += 1
                } else {
                    close()
                }
            }
            close()
        }
        return true
    }
}
