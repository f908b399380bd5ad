import Foundation
import Testing

@testable import SparkDomain

@Suite("the /v1 wire's coder")
struct WireCoderTests {
    private let foundation = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    /// The wire's own time formatter writes what Foundation's ISO 8601 style writes, to the
    /// millisecond, truncation included: the edges of days, months, leap years and centuries,
    /// fractions a hair below and above a millisecond, and random times from 1970 to 9999.
    @Test func timesAreWrittenAsFoundationWritesThem() {
        var times: [TimeInterval] = [
            0, 0.0004, 0.0005, 0.0015, 0.9999, 1.9996, 59.999, 86_399.9999, 86_400, 951_782_400, 951_868_799.999,
            4_107_542_400, 1_764_587_403.25, 1_764_587_403.249_999_9, 1_764_587_403.9999, 253_402_300_799.999,
            978_307_200, 978_307_200.0005, 978_307_199.9995,
        ]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            times.append(Double.random(in: 0..<253_402_300_800, using: &generator))
            // Whole milliseconds, and a millisecond's neighbours, where truncation decides.
            let milliseconds = Double(Int.random(in: 0..<4_102_444_800_000, using: &generator)) / 1000
            times += [milliseconds, milliseconds.nextDown, milliseconds.nextUp]
        }
        for time in times {
            let date = Date(timeIntervalSince1970: time)
            #expect(WireCoder.time(date) == date.formatted(foundation), "at \(time)")
        }
    }

    /// Outside the years 1970 to 9999 the wire's times are Foundation's (its calendar turns Julian
    /// before 1582), and they read back.
    @Test func timesOutsideTheUsualYearsGoToFoundation() throws {
        for time in [-1.5, -62_135_596_800, -12_219_292_800, 253_402_300_800, 300_000_000_000] {
            let date = Date(timeIntervalSince1970: time)
            #expect(WireCoder.time(date) == date.formatted(foundation))
        }
        struct Stamp: Codable, Equatable { var at: Date }
        let stamp = Stamp(at: Date(timeIntervalSince1970: 1_764_587_403.25))
        #expect(String(decoding: try WireCoder.encode(stamp), as: UTF8.self) == #"{"at":"2025-12-01T11:10:03.250Z"}"#)
        #expect(try WireCoder.decode(Stamp.self, from: try WireCoder.encode(stamp)) == stamp)
    }
}

@Suite("the /v1 wire's coder: bodies without fields")
struct WireEmptyBodyTests {
    /// `{}` with any JSON whitespace is the empty body; anything else takes the strict path and
    /// is refused as before (a field, another shape, broken JSON).
    @Test func onlyAnEmptyObjectIsTheEmptyBody() throws {
        for body in ["{}", " { } ", "\n{\r\n\t}\n"] {
            #expect(try WireCoder.decode(Wire.Empty.self, from: Data(body.utf8)) == Wire.Empty())
        }
        for (body, reason) in [
            (#"{"a":1}"#, "unknown field 'a'"), ("[]", ""), ("{", ""), ("{}}", ""), ("{ }x", ""), ("null", ""),
        ] {
            let error = #expect(throws: DomainError.self, "\(body)") {
                try WireCoder.decode(Wire.Empty.self, from: Data(body.utf8))
            }
            #expect(error?.code == .invalidRequest, "\(body)")
            if !reason.isEmpty { #expect(error?.reason.contains(reason) == true, "\(body): \(error?.reason ?? "")") }
        }
    }
}

@Suite("the /v1 wire's coder: answers written straight")
struct WireJSONTests {
    /// Strings with everything the encoder escapes or leaves: quotes, backslashes, slashes,
    /// every control character, DEL, and characters beyond ASCII.
    private static func text(_ generator: inout some RandomNumberGenerator) -> String {
        let pieces =
            ["a", "Z", "\"", "\\", "/", "é", "💬", "\u{7F}", "\u{2028}", "\u{FEFF}", " "]
            + (0..<32).map { String(UnicodeScalar(UInt8($0))) }
        return (0..<Int.random(in: 0...12, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
    }

    private static func bytes(_ generator: inout some RandomNumberGenerator) -> Data {
        Data((0..<Int.random(in: 0...40, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    private static func time(_ generator: inout some RandomNumberGenerator) -> Date {
        Date(timeIntervalSince1970: Double.random(in: 0..<4_102_444_800, using: &generator))
    }

    private func expectSame(_ value: some WireWritable) throws {
        let written = WireJSON.encode(value)
        let encoded = try WireCoder.encoder().encode(value)
        #expect(written == encoded, "\(String(decoding: written, as: UTF8.self)) != \(String(decoding: encoded, as: UTF8.self))")
    }

    /// Each writer writes exactly what `JSONEncoder` writes for its type, for random values
    /// with and without their optional fields, and `WireCoder.encode` takes the writer.
    @Test func writersMatchTheEncoderByteForByte() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            let endpoint = EndpointInfo(
                endpointID: Self.text(&generator), registrationID: Int64.random(in: .min ... .max, using: &generator),
                description: Self.text(&generator), nickname: Self.text(&generator), isActive: Bool.random(using: &generator),
                createdAt: Self.time(&generator), lastSeen: Self.time(&generator),
                credential: Bool.random(using: &generator) ? Self.bytes(&generator) : nil,
                approvals: (0..<Int.random(in: 0...3, using: &generator)).map { _ in Self.bytes(&generator) })
            try expectSame(endpoint)
            #expect(try WireCoder.encode(endpoint) == WireJSON.encode(endpoint))

            func evaluation() -> PasscodeEvaluation.Evaluation {
                .init(
                    keyID: Self.text(&generator), publicKey: Self.bytes(&generator), element: Self.bytes(&generator),
                    proof: Self.bytes(&generator))
            }
            try expectSame(
                PasscodeEvaluation(
                    requested: evaluation(), current: Bool.random(using: &generator) ? evaluation() : nil,
                    challenge: Self.bytes(&generator), attemptsLeft: Int.random(in: -5...1000, using: &generator)))

            let entries = (0..<Int.random(in: 0...3, using: &generator)).map { _ in
                MailboxEntry(
                    sequence: Int64.random(in: 0...Int64.max, using: &generator), chatID: Self.text(&generator),
                    sender: Self.text(&generator),
                    kind: [.membership, .devices, .message, .receipt, .event, .identityReset, .commit, .welcome, .ephemeral]
                        .randomElement()!,
                    messageNumber: Bool.random(using: &generator) ? Int64.random(in: 1...1_000_000, using: &generator) : nil,
                    payload: Self.bytes(&generator),
                    members: Bool.random(using: &generator)
                        ? (0..<Int.random(in: 0...3, using: &generator)).map { _ in
                            ChatMember(userID: Self.text(&generator), isAdmin: Bool.random(using: &generator))
                        } : nil,
                    postedAt: Self.time(&generator),
                    epoch: Bool.random(using: &generator) ? Int64.random(in: 0...99, using: &generator) : nil)
            }
            try expectSame(Wire.Entries(entries: entries))

            // One post's copies in several mailboxes share one encoding: each answer still
            // says exactly what the encoder writes for it, its own sequence included, and a
            // copy changed after it was shared is written afresh, not from the shared bytes.
            guard let post = entries.first else { continue }
            let shared = SharedEntryEncoding()
            var copies = (0..<3).map { index in
                var copy = post
                copy.sequence = Int64(index) * 7 + 1
                copy.shared = shared
                return copy
            }
            try expectSame(Wire.Entries(entries: copies))
            copies[1].payload = Self.bytes(&generator) + Data([1])
            copies[2].sender += "x"
            try expectSame(Wire.Entries(entries: copies))
            try expectSame(Wire.Entries(entries: copies.reversed()))
        }
    }
}
