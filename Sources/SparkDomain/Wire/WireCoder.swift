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
            try container.encode(date.formatted(timeStyle))
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

    /// Encodes a value for the wire.
    package static func encode(_ value: some Encodable) throws -> Data {
        do {
            return try encoder().encode(value)
        } catch {
            throw DomainError(.invalidRequest, "a value cannot be encoded for the wire: \(error)")
        }
    }

    /// Decodes `data` as `type`, refusing malformed JSON, missing or mistyped fields and
    /// fields the type does not have, each by name.
    package static func decode<T: Codable>(_ type: T.Type, from data: Data) throws -> T {
        let value: T
        do {
            value = try decoder().decode(T.self, from: data)
        } catch let error as DecodingError {
            throw DomainError(.invalidRequest, describe(error))
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
