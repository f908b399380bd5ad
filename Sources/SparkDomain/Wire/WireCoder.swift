package import Foundation

/// The one JSON coder of the `/v1` wire, used by ``RemoteDomain`` and `spark-domaind` alike.
///
/// Times are RFC 3339 strings with milliseconds (`2026-12-01T11:10:03.250Z`; integer Unix
/// seconds are accepted too), bytes are base64, keys are sorted. Decoding is strict: a field the
/// type does not have is refused by name (``DomainError/Code/invalidRequest``), as are missing
/// or mistyped fields, so a typo in a client never silently drops a value.
package enum WireCoder {
    /// An encoder with the wire's conventions.
    package static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(time(date))
        }
        return encoder
    }

    /// A decoder with the wire's conventions (lenient about unknown fields; ``decode(_:from:)``
    /// adds the strict check).
    package static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            if let seconds = try? container.decode(Int64.self) { return Date(timeIntervalSince1970: TimeInterval(seconds)) }
            let text = try container.decode(String.self)
            if let date = try? timeStyle.parse(text) { return date }
            if let date = try? Date.ISO8601FormatStyle().parse(text) { return date }
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "expected an RFC 3339 time or integer seconds")
        }
        return decoder
    }

    private static let timeStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    /// A time as the wire writes it, `2026-12-01T11:10:03.250Z`: exactly what
    /// `Date.ISO8601FormatStyle(includingFractionalSeconds: true)` writes (milliseconds
    /// truncated), without its calendar. Foundation's goes through a Gregorian calendar's
    /// components for every time; this is arithmetic on the seconds (the civil-from-days
    /// algorithm of Howard Hinnant's `chrono` date library). Times
    /// before 1970 or after 9999 (none the domain makes) go to Foundation, whose calendar turns
    /// Julian before 1582.
    package static func time(_ date: Date) -> String {
        // The fraction as Foundation's calendar takes it: from the seconds since 2001, in whole
        // nanoseconds, truncated.
        let reference = date.timeIntervalSinceReferenceDate
        let whole = reference.rounded(.down)
        guard whole >= -978_307_200, whole < 252_423_993_600 else { return date.formatted(timeStyle) }
        let milliseconds = Int((reference - whole) * 1_000_000_000) / 1_000_000
        let seconds = Int(whole) + 978_307_200
        let (days, second) = seconds.quotientAndRemainder(dividingBy: 86_400)
        // Days since 0000-03-01 in 400-year eras, so that the leap day ends a year.
        let shifted = days + 719_468
        let era = shifted / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthFromMarch = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthFromMarch + 2) / 5 + 1
        let month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return String(unsafeUninitializedCapacity: 24) { buffer in
            var index = 0
            func put(_ value: Int, digits: Int, then separator: UInt8?) {
                var value = value
                for offset in stride(from: digits - 1, through: 0, by: -1) {
                    buffer[index + offset] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
                index += digits
                if let separator {
                    buffer[index] = separator
                    index += 1
                }
            }
            put(year, digits: 4, then: UInt8(ascii: "-"))
            put(month, digits: 2, then: UInt8(ascii: "-"))
            put(day, digits: 2, then: UInt8(ascii: "T"))
            put(second / 3_600, digits: 2, then: UInt8(ascii: ":"))
            put(second / 60 % 60, digits: 2, then: UInt8(ascii: ":"))
            put(second % 60, digits: 2, then: UInt8(ascii: "."))
            put(milliseconds, digits: 3, then: UInt8(ascii: "Z"))
            return index
        }
    }

    /// Encodes a value for the wire.
    package static func encode(_ value: some Encodable) throws -> Data {
        if let writable = value as? any WireWritable { return WireJSON.encode(writable) }
        do {
            return try encoder().encode(value)
        } catch {
            throw DomainError(.invalidRequest, "a value cannot be encoded for the wire: \(error)")
        }
    }

    /// Decodes `data` as `type`, refusing malformed JSON, missing or mistyped fields and
    /// fields the type does not have, each by name.
    package static func decode<T: Codable>(_ type: T.Type, from data: Data) throws -> T {
        // The calls that take no fields (a check-in) send `{}`: known at a glance, where the
        // general path below is a decode, two parses and an encode.
        if T.self == Wire.Empty.self, isEmptyObject(data), let empty = Wire.Empty() as? T { return empty }
        let value: T
        do {
            value = try decoder().decode(T.self, from: data)
        } catch let error as DecodingError {
            throw refusal(error)
        } catch {
            throw DomainError(.invalidRequest, "the body is not JSON: \(error)")
        }
        // A field the type does not know does not survive a round trip: find it by name.
        guard let given = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]),
            let known = try? JSONSerialization.jsonObject(with: try encoder().encode(value), options: [.fragmentsAllowed])
        else { throw DomainError(.invalidRequest, "the body is not JSON") }
        if let unknown = firstUnknownField(given, known, path: "") {
            throw DomainError(.invalidRequest, "unknown field '\(unknown)'")
        }
        return value
    }

    /// Whether `data` is `{}`, with JSON's whitespace around and between the braces.
    private static func isEmptyObject(_ data: Data) -> Bool {
        let significant = data.lazy.filter { !(" \t\n\r".utf8.contains($0)) }
        return significant.elementsEqual("{}".utf8)
    }

    private static func firstUnknownField(_ given: Any, _ known: Any, path: String) -> String? {
        switch (given, known) {
        case (let given as [String: Any], let known as [String: Any]):
            for key in given.keys.sorted() {
                let name = path.isEmpty ? key : "\(path).\(key)"
                guard let inner = known[key] else {
                    // An explicit null for an optional the encoder leaves out is no new field.
                    if given[key] is NSNull { continue }
                    return name
                }
                if let found = firstUnknownField(given[key]!, inner, path: name) { return found }
            }
            return nil
        case (let given as [Any], let known as [Any]) where given.count == known.count:
            for (index, pair) in zip(given, known).enumerated() {
                if let found = firstUnknownField(pair.0, pair.1, path: "\(path)[\(index)]") { return found }
            }
            return nil
        default:
            return nil
        }
    }

    /// The refusal of a request that does not decode: which field is missing or mistyped.
    package static func refusal(_ error: DecodingError) -> DomainError { DomainError(.invalidRequest, describe(error)) }

    private static func describe(_ error: DecodingError) -> String {
        func name(_ path: [any CodingKey], _ key: (any CodingKey)? = nil) -> String {
            let all = path + (key.map { [$0] } ?? [])
            guard !all.isEmpty else { return "the body" }
            let text = all.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            return "field '\(text.hasPrefix(".") ? String(text.dropFirst()) : text)'"
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "\(name(context.codingPath, key)) is missing"
        case .typeMismatch(let type, let context):
            return "\(name(context.codingPath)) must be \(describe(type))"
        case .valueNotFound(let type, let context):
            return "\(name(context.codingPath)) must be \(describe(type)), not null"
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty { return "the body is not valid JSON" }
            return "\(name(context.codingPath)) is invalid: \(context.debugDescription)"
        @unknown default:
            return "the body does not match: \(error)"
        }
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "true or false"
        case is Int.Type, is Int64.Type, is UInt64.Type: "an integer"
        case is Double.Type: "a number"
        case is [Any].Type: "an array"
        default: "an object"
        }
    }
}

/// Hand-written wire forms for the contract's enums with associated values: a discriminator
/// field and named fields, never Swift's synthesized `_0`.
extension RegistrationOutcome {
    private enum CodingKeys: String, CodingKey { case outcome, endpoint, active, endpoints, maximum }

    /// Decodes `{"outcome":"registered","endpoint":…}`, `{"outcome":"deviceSwitchRequired",
    /// "active":[…]}` or `{"outcome":"full","endpoints":[…],"maximum":N}`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        switch try container.decode(String.self, forKey: .outcome) {
        case "registered": self = .registered(try container.decode(EndpointInfo.self, forKey: .endpoint))
        case "deviceSwitchRequired":
            self = .deviceSwitchRequired(active: try container.decode([EndpointInfo].self, forKey: .active))
        case "full":
            self = .full(
                endpoints: try container.decode([EndpointInfo].self, forKey: .endpoints),
                maximum: try container.decode(Int.self, forKey: .maximum))
        case let other:
            throw DecodingError.dataCorruptedError(
                forKey: .outcome, in: container, debugDescription: "unknown outcome '\(other)'")
        }
    }

    /// Encodes the forms ``init(from:)`` reads.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .registered(let endpoint):
            try container.encode("registered", forKey: .outcome)
            try container.encode(endpoint, forKey: .endpoint)
        case .deviceSwitchRequired(let active):
            try container.encode("deviceSwitchRequired", forKey: .outcome)
            try container.encode(active, forKey: .active)
        case .full(let endpoints, let maximum):
            try container.encode("full", forKey: .outcome)
            try container.encode(endpoints, forKey: .endpoints)
            try container.encode(maximum, forKey: .maximum)
        }
    }
}

extension IdentityResetOutcome {
    private enum CodingKeys: String, CodingKey { case outcome, pending }

    /// Decodes `{"outcome":"completed"}` or `{"outcome":"pending","pending":{…}}`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        switch try container.decode(String.self, forKey: .outcome) {
        case "completed": self = .completed
        case "pending": self = .pending(try container.decode(PendingIdentityReset.self, forKey: .pending))
        case let other:
            throw DecodingError.dataCorruptedError(
                forKey: .outcome, in: container, debugDescription: "unknown outcome '\(other)'")
        }
    }

    /// Encodes the forms ``init(from:)`` reads.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .completed: try container.encode("completed", forKey: .outcome)
        case .pending(let pending):
            try container.encode("pending", forKey: .outcome)
            try container.encode(pending, forKey: .pending)
        }
    }
}

extension UserStatus.State {
    private enum CodingKeys: String, CodingKey { case state, until, reason }

    /// Decodes `{"state":"valid"}`, `{"state":"timeout","until":…,"reason":…}` or
    /// `{"state":"banned","reason":…}`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        switch try container.decode(String.self, forKey: .state) {
        case "valid": self = .valid
        case "timeout":
            self = .timeout(
                until: try container.decode(Date.self, forKey: .until), reason: try container.decode(String.self, forKey: .reason)
            )
        case "banned": self = .banned(reason: try container.decode(String.self, forKey: .reason))
        case let other:
            throw DecodingError.dataCorruptedError(forKey: .state, in: container, debugDescription: "unknown state '\(other)'")
        }
    }

    /// Encodes the forms ``init(from:)`` reads.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .valid:
            try container.encode("valid", forKey: .state)
        case .timeout(let until, let reason):
            try container.encode("timeout", forKey: .state)
            try container.encode(until, forKey: .until)
            try container.encode(reason, forKey: .reason)
        case .banned(let reason):
            try container.encode("banned", forKey: .state)
            try container.encode(reason, forKey: .reason)
        }
    }
}
