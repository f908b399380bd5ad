package import Foundation

/// A JSON schema of the wire, small enough to write by hand beside each operation.
package indirect enum WireSchema: Sendable {
    /// A string.
    case string
    /// An integer (64-bit).
    case integer
    /// true or false.
    case boolean
    /// Bytes, base64.
    case bytes
    /// An RFC 3339 time.
    case time
    /// An array of one kind.
    case array(WireSchema)
    /// An object with these fields (name, schema, required) and no others.
    case object([(String, WireSchema, Bool)])
    /// One of the named schemas in the document's components.
    case ref(String)

    /// The fields, when an object.
    package var fields: [(name: String, schema: WireSchema, required: Bool)] {
        if case .object(let fields) = self { return fields.map { ($0.0, $0.1, $0.2) } }
        return []
    }

    var json: [String: Any] {
        switch self {
        case .string: return ["type": "string"]
        case .integer: return ["type": "integer", "format": "int64"]
        case .boolean: return ["type": "boolean"]
        case .bytes: return ["type": "string", "contentEncoding": "base64"]
        case .time: return ["type": "string", "format": "date-time"]
        case .array(let element): return ["type": "array", "items": element.json]
        case .object(let fields):
            var properties: [String: Any] = [:]
            for (name, schema, _) in fields { properties[name] = schema.json }
            var object: [String: Any] = ["type": "object", "properties": properties, "additionalProperties": false]
            let required = fields.filter(\.2).map(\.0)
            if !required.isEmpty { object["required"] = required }
            return object
        case .ref(let name): return ["$ref": "#/components/schemas/\(name)"]
        }
    }
}

/// The OpenAPI 3.1 document of the `/v1` wire, generated from ``DomainOperation``:
/// `docs/openapi.json` is this document (`spark-domaind openapi` prints it) and the daemon
/// serves it at `/v1/openapi.json`.
package enum OpenAPIDocument {
    /// The document as JSON (sorted keys, so it is stable byte for byte).
    package static func json() -> Data {
        let data = try? JSONSerialization.data(
            withJSONObject: document, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
        return (data ?? Data()) + Data("\n".utf8)
    }

    private static var document: [String: Any] {
        var paths: [String: Any] = [:]
        for operation in DomainOperation.allCases {
            let refused: [String: Any] = [
                "description": "Refused: the code says why (see DomainError)",
                "content": ["application/json": ["schema": WireSchema.ref("Error").json]],
            ]
            let answered: [String: Any] =
                operation.answersBytes
                ? [
                    "206": [
                        "description": "The bytes of the range (Content-Range says which)",
                        "headers": ["Content-Range": ["schema": ["type": "string"]]],
                        "content": ["application/octet-stream": ["schema": ["type": "string", "format": "binary"]]],
                    ]
                ]
                : ["200": ["description": "Done", "content": ["application/json": ["schema": operation.response.json]]]]
            var entry: [String: Any] = [
                "operationId": operation.rawValue,
                "summary": operation.summary,
                "responses": answered.merging(["default": refused]) { $1 },
            ]
            switch operation.access {
            case .anyone: entry["security"] = [[String: Any]]()
            case .user: entry["security"] = [["user": [String]()]]
            case .endpoint:
                entry["security"] = [["user": [String](), "endpoint": [String]()]]
            case .operator: entry["security"] = [["operator": [String]()]]
            }
            switch operation.request {
            case .none: break
            case .query(let schema):
                entry["parameters"] = parameters(schema)
                if operation.answersBytes {
                    entry["parameters"] =
                        parameters(schema) + [
                            [
                                "name": "Range", "in": "header", "required": false,
                                "schema": ["type": "string", "pattern": "^bytes=[0-9]+-[0-9]*$"],
                            ]
                        ]
                }
            case .body(let schema):
                entry["requestBody"] = ["required": true, "content": ["application/json": ["schema": schema.json]]]
            case .upload(let schema):
                entry["parameters"] = parameters(schema)
                entry["requestBody"] = [
                    "required": true,
                    "content": ["application/octet-stream": ["schema": ["type": "string", "format": "binary"]]],
                ]
            }
            paths[operation.path] = [operation.method.lowercased(): entry]
        }
        return [
            "openapi": "3.1.0",
            "info": [
                "title": "Spark domain",
                "version": "1",
                "description":
                    "The contract between Spark SDK endpoints and their domain (spark-domaind). Users send their token as a bearer token and their endpoint id in Spark-Endpoint; operators send the operator credential as a bearer token.",
            ],
            "paths": paths,
            "components": [
                "securitySchemes": [
                    "user": ["type": "http", "scheme": "bearer", "bearerFormat": "JWT"],
                    "endpoint": ["type": "apiKey", "in": "header", "name": "Spark-Endpoint"],
                    "operator": ["type": "http", "scheme": "bearer"],
                ],
                "schemas": components.mapValues(\.json).merging(handWritten) { $1 },
            ],
        ]
    }

    private static func parameters(_ schema: WireSchema) -> [[String: Any]] {
        schema.fields.map { field in
            ["name": field.name, "in": "query", "required": field.required, "schema": field.schema.json] as [String: Any]
        }
    }

    private static let components: [String: WireSchema] = [
        "Error": .object([("code", .string, true), ("message", .string, true), ("retryAfter", .integer, false)]),
        "DomainPolicy": .object(
            [
                "userAuthenticationEnabled", "multipleActiveEndpoints", "requirePostQuantum",
            ].map { ($0, WireSchema.boolean, false) }
                + [
                    "maximumEndpoints", "passwordIterations", "tokenLifetime", "refreshTokenLifetime", "activationCodeLifetime",
                    "resetCodeLifetime", "codeAttempts", "loginAttemptsBeforeThrottle", "unlockAttemptsPerHour",
                    "identityResetDelay",
                    "codeAttemptsPerHour", "mailboxRetention", "postsPerMinute", "postedBytesPerMinute", "unreadBytesPerSender",
                    "commitsPerMinute",
                    "chatsPerHour", "maximumAttachmentSize", "attachmentQuota",
                ].map { ($0, WireSchema.integer, false) }),
        "BlobStatus": .object([
            ("blobID", .string, true), ("chatID", .string, true), ("size", .integer, true), ("received", .integer, true),
            ("partSize", .integer, true),
        ]),
        "IssuedToken": .object([("token", .string, true), ("expiresAt", .time, true), ("refreshToken", .string, false)]),
        "SignUpRequest": .object([
            ("userName", .string, true), ("password", .string, true), ("email", .string, true), ("country", .string, true),
            ("age", .integer, true),
        ]),
        "EndpointRegistration": .object([
            ("endpointID", .string, true), ("description", .string, true), ("nickname", .string, true),
            ("takeOver", .boolean, true), ("replacing", .string, false),
        ]),
        "EndpointInfo": .object([
            ("endpointID", .string, true), ("registrationID", .integer, true), ("description", .string, true),
            ("nickname", .string, true), ("isActive", .boolean, true), ("createdAt", .time, true), ("lastSeen", .time, true),
            ("credential", .bytes, false), ("approvals", .array(.bytes), false),
        ]),
        "KeyBlob": .object([("name", .string, true), ("data", .bytes, true), ("version", .integer, true)]),
        "BlobFetch": .object([("blob", .ref("KeyBlob"), false)]),
        "KeyBlobWrite": .object([("name", .string, true), ("data", .bytes, true), ("expectedVersion", .integer, false)]),
        "KeyBlobProof": .object([("challenge", .bytes, true), ("signature", .bytes, true)]),
        "PasscodeKeyEvaluation": .object([
            ("keyID", .string, true), ("publicKey", .bytes, true), ("element", .bytes, true), ("proof", .bytes, true),
        ]),
        "PasscodeEvaluation": .object([
            ("requested", .ref("PasscodeKeyEvaluation"), true), ("current", .ref("PasscodeKeyEvaluation"), false),
            ("challenge", .bytes, true), ("attemptsLeft", .integer, true),
        ]),
        "PendingIdentityReset": .object([
            ("endpointID", .string, true), ("requestedAt", .time, true), ("effectiveAt", .time, true),
        ]),
        "PublishedIdentity": .object([
            ("userID", .string, true), ("signingKey", .bytes, true), ("encryptionKey", .bytes, true),
            ("keyVersion", .integer, true), ("signature", .bytes, true),
        ]),
        "ClaimedKeyPackage": .object([
            ("endpointID", .string, true), ("keyPackage", .bytes, true), ("lastResort", .boolean, true),
        ]),
        "ChatPost": .object([("kind", .ref("MailboxKind"), true), ("payload", .bytes, true), ("recipient", .string, false)]),
        "TransparencyKeys": .object([("vrfKey", .bytes, true), ("headKey", .bytes, true)]),
        "ChatMember": .object([("userID", .string, true), ("isAdmin", .boolean, true)]),
        "ChatInfo": .object([
            ("chatID", .string, true), ("members", .array(.ref("ChatMember")), true), ("epoch", .integer, false),
        ]),
        "MessagePost": .object([("clientID", .string, true), ("payload", .bytes, true)]),
        "PostReceipt": .object([("messageNumber", .integer, false), ("postedAt", .time, true)]),
        "MailboxEntry": .object([
            ("sequence", .integer, true), ("chatID", .string, true), ("sender", .string, true),
            ("kind", .ref("MailboxKind"), true), ("messageNumber", .integer, false), ("payload", .bytes, true),
            ("members", .array(.ref("ChatMember")), false), ("postedAt", .time, true), ("epoch", .integer, false),
        ]),
        "Infraction": .object([("id", .integer, true), ("reason", .string, true), ("issuedAt", .time, true)]),
        "AccountSummary": .object([
            ("userName", .string, true), ("email", .string, true), ("country", .string, true), ("age", .integer, true),
            ("activated", .boolean, true),
        ]),
        "EndpointUser": .object([("userID", .string, true), ("endpoints", .integer, true)]),
        "ReportedMessage": .object([
            ("id", .string, true), ("sender", .string, true), ("number", .integer, false), ("content", .string, true),
            ("sentAt", .time, true),
        ]),
        "Report": .object([
            ("id", .integer, true), ("reporter", .string, true), ("reported", .string, true), ("chatID", .string, true),
            ("reason", .string, true), ("messages", .array(.ref("ReportedMessage")), true), ("createdAt", .time, true),
        ]),
        "Mail": .object([("to", .string, true), ("subject", .string, true), ("body", .string, true), ("sentAt", .time, true)]),
        "RegisteredAuditor": .object([
            ("auditorKey", .bytes, true), ("name", .string, true), ("addedAt", .time, true), ("cosignedSize", .integer, false),
        ]),
        "ExternalIssuer": .object([
            ("issuer", .string, true), ("audience", .string, true), ("jwksPath", .string, true), ("userClaim", .string, false),
            ("jwksURI", .string, false), ("keysFreshUntil", .string, false), ("lastFetchError", .string, false),
        ]),
    ]

    /// The schemas the small language above does not express: enums and tagged unions.
    private static var handWritten: [String: Any] {
        func tagged(_ tag: String, _ value: String, _ fields: [(String, WireSchema)]) -> [String: Any] {
            var properties: [String: Any] = [tag: ["const": value]]
            for (name, schema) in fields { properties[name] = schema.json }
            return [
                "type": "object", "properties": properties, "required": [tag] + fields.map(\.0),
                "additionalProperties": false,
            ]
        }
        return [
            "MailboxKind": [
                "type": "string",
                "enum": [
                    "membership", "devices", "message", "receipt", "event", "identityReset", "commit", "welcome", "ephemeral",
                ],
            ],
            "VerifiedIdentity": [
                "type": "object", "additionalProperties": false,
                "required": ["userID", "issuer", "issuerKind", "expiresAt"],
                "properties": [
                    "userID": ["type": "string"], "issuer": ["type": "string"],
                    "issuerKind": ["type": "string", "enum": ["test", "accounts", "external"]],
                    "expiresAt": WireSchema.time.json, "name": ["type": "string"], "email": ["type": "string"],
                ],
            ],
            "RegistrationOutcome": [
                "oneOf": [
                    tagged("outcome", "registered", [("endpoint", .ref("EndpointInfo"))]),
                    tagged("outcome", "deviceSwitchRequired", [("active", .array(.ref("EndpointInfo")))]),
                    tagged("outcome", "full", [("endpoints", .array(.ref("EndpointInfo"))), ("maximum", .integer)]),
                ]
            ],
            "IdentityResetOutcome": [
                "oneOf": [
                    tagged("outcome", "completed", []),
                    tagged("outcome", "pending", [("pending", .ref("PendingIdentityReset"))]),
                ]
            ],
            "UserStatus": [
                "type": "object", "additionalProperties": false, "required": ["state", "infractions"],
                "properties": [
                    "state": [
                        "oneOf": [
                            tagged("state", "valid", []),
                            tagged("state", "timeout", [("until", .time), ("reason", .string)]),
                            tagged("state", "banned", [("reason", .string)]),
                        ]
                    ],
                    "infractions": WireSchema.array(.ref("Infraction")).json,
                ],
            ],
            "JWKSet": [
                "type": "object", "required": ["keys"],
                "properties": ["keys": ["type": "array", "items": ["type": "object"]]],
            ],
        ]
    }
}
