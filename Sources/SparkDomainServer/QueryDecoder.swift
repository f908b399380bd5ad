import SparkDomain

/// Decodes a request type from its query parameters, already checked against the operation's
/// schema (every name known, none repeated, integers parsed): a flat object of strings and
/// integers, decoded straight, with no JSON in between. A mailbox long-poll is the most frequent
/// request there is, and going through JSON (made, parsed, decoded, encoded again for the strict
/// check) was a twelfth of an instance's time under an organisation's load.
struct QueryDecoder: Decoder {
    /// One parameter's value.
    enum Value {
        case integer(Int64)
        case string(String)
    }

    let values: [String: Value]
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    /// Decodes `type` from `values`.
    static func decode<T: Decodable>(_ type: T.Type, from values: [String: Value]) throws -> T {
        try T(from: QueryDecoder(values: values))
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(Fields<Key>(values: values, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw DecodingError.typeMismatch([Any].self, .init(codingPath: codingPath, debugDescription: "a query is not a list"))
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        throw DecodingError.typeMismatch(
            Value.self, .init(codingPath: codingPath, debugDescription: "a query is named parameters"))
    }

    private struct Fields<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let values: [String: Value]
        let codingPath: [any CodingKey]
        var allKeys: [Key] { values.keys.compactMap { Key(stringValue: $0) } }

        func contains(_ key: Key) -> Bool { values[key.stringValue] != nil }
        func decodeNil(forKey key: Key) throws -> Bool { values[key.stringValue] == nil }

        private func value(_ key: Key) throws -> Value {
            guard let value = values[key.stringValue] else {
                throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "missing"))
            }
            return value
        }

        private func mismatch(_ key: Key, _ type: Any.Type) -> DecodingError {
            .typeMismatch(type, .init(codingPath: codingPath + [key], debugDescription: "mistyped"))
        }

        /// Every field, a string, an integer or a string-backed value, decodes from its one value.
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            try T(from: Single(value: try value(key), codingPath: codingPath + [key]))
        }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
            -> KeyedDecodingContainer<NestedKey>
        {
            throw mismatch(key, [String: Any].self)
        }

        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            throw mismatch(key, [Any].self)
        }

        func superDecoder() throws -> any Decoder { QueryDecoder(values: values, codingPath: codingPath) }
        func superDecoder(forKey key: Key) throws -> any Decoder { throw mismatch(key, [String: Any].self) }
    }

    /// One parameter as a decoder of a single value.
    private struct Single: Decoder, SingleValueDecodingContainer {
        let value: Value
        let codingPath: [any CodingKey]
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
            throw DecodingError.typeMismatch([String: Any].self, .init(codingPath: codingPath, debugDescription: "mistyped"))
        }
        func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
            throw DecodingError.typeMismatch([Any].self, .init(codingPath: codingPath, debugDescription: "mistyped"))
        }
        func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

        func decodeNil() -> Bool { false }
        func decode(_ type: String.Type) throws -> String {
            guard case .string(let text) = value else { throw mismatch(type) }
            return text
        }
        // Every integer width has its own witness: the generic one below would call the type's
        // `init(from:)`, which asks this container again, without end.
        func decode(_ type: Int.Type) throws -> Int { try integer(type) }
        func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
        func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
        func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
        func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
        func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
        func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
        func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
        func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
        func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }
        func decode(_ type: Float.Type) throws -> Float { throw mismatch(type) }
        func decode(_ type: Bool.Type) throws -> Bool { throw mismatch(type) }
        func decode(_ type: Double.Type) throws -> Double { throw mismatch(type) }
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try T(from: self) }

        private func integer<T: BinaryInteger>(_ type: T.Type) throws -> T {
            guard case .integer(let number) = value, let exact = T(exactly: number) else { throw mismatch(type) }
            return exact
        }
        private func mismatch(_ type: Any.Type) -> DecodingError {
            .typeMismatch(type, .init(codingPath: codingPath, debugDescription: "mistyped"))
        }
    }
}
