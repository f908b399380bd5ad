import Foundation
import SparkDomain
import SparkDomainEngine
import Testing

@testable import SparkDomainServer

/// What a refused request tells the client.
@Suite("spark-domaind: refusals")
struct RefusalBodyTests {
    /// A 503 says the domain cannot answer and nothing of why: the store's error text (its
    /// engine, its statements, its tables) goes to the log only.
    @Test func aStoreFailureTellsTheClientNothingOfTheStore() throws {
        let causes = [
            DomainError(
                .storageFailure, "domain storage failed: SQLite 11: database disk image is malformed in SELECT hash FROM accounts"
            ),
            DomainError(.unavailable, "the domain file was written by a newer version: schema 14, this is 12"),
        ]
        for cause in causes {
            let response = DomainRouter.refusal(cause)
            let body = String(decoding: response.body, as: UTF8.self)
            #expect(response.status == 503 && response.headers.contains { $0.0 == "Retry-After" })
            #expect(body.contains(DomainRouter.unavailableMessage), "\(body)")
            for leak in ["SQLite", "SELECT", "accounts", "schema"] { #expect(!body.contains(leak), "\(leak) in \(body)") }
            let decoded = try WireCoder.decode(DomainError.self, from: response.body)
            #expect(decoded.code == cause.code, "the code still says what kind of failure it was")
        }
        // Other refusals keep their reason: it is about the request, not the server.
        let refused = DomainRouter.refusal(DomainError(.notAMember, "the caller is not a member of this chat"))
        #expect(String(decoding: refused.body, as: UTF8.self).contains("not a member"))
    }
}

/// The blob routes' own HTTP: bytes up with a `PUT`, bytes down by `Range` as a 206, and every
/// malformed range or body refused with a 4xx.
@Suite("spark-domaind: blob routes")
struct BlobRouteTests {
    @Test func rangesAreOneStartAndAnOptionalEnd() {
        #expect(DomainRouter.byteRange("bytes=0-99")! == (0, 99))
        #expect(DomainRouter.byteRange("bytes=5-")! == (5, nil))
        for bad in [
            "bytes=-5", "bytes=9-5", "bytes=0-1,4-5", "items=0-1", "bytes=a-b", "bytes= 1-2", "bytes=99999999999999999999-",
        ] {
            #expect(DomainRouter.byteRange(bad) == nil, "\(bad)")
        }
    }

    @Test func bytesGoUpByPutAndComeDownByRange() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("blob-routes-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let domain = try EmbeddedDomain.create(at: directory.appendingPathComponent("d.sqlite").path, domainID: "routes")
        let router = DomainRouter(domain: domain, operatorCredential: "operator")
        var tokens: [String: String] = [:]
        for user in ["alice", "bob"] {
            let token = try await domain.testToken(userID: user).token
            _ = try await domain.registerEndpoint(
                token: token, registration: EndpointRegistration(endpointID: "\(user)-1", description: user))
            tokens[user] = token
        }
        _ = try await domain.createChat(
            token: tokens["alice"]!, endpointID: "alice-1", chatID: "c", participants: ["bob"], posts: [])
        let blobID = String(repeating: "0f", count: 16)
        _ = try await domain.createBlob(token: tokens["alice"]!, endpointID: "alice-1", chatID: "c", blobID: blobID, size: 20)
        func headers(_ user: String, _ extra: [String: String] = [:]) -> [String: String] {
            ["authorization": "Bearer \(tokens[user]!)", "spark-endpoint": "\(user)-1"].merging(extra) { $1 }
        }
        let bytes = Data((0..<20).map { UInt8($0) })
        let query = ["blobID": blobID, "offset": "0"]
        let json = await router.handle(
            HTTPRequest(
                method: "PUT", path: "/v1/blobs/upload", headers: headers("alice", ["content-type": "application/json"]),
                query: query, body: bytes))
        #expect(json.status == 400, "an upload's body is octet-stream")
        let stored = await router.handle(
            HTTPRequest(
                method: "PUT", path: "/v1/blobs/upload",
                headers: headers("alice", ["content-type": "application/octet-stream"]), query: query, body: bytes))
        #expect(stored.status == 200 && String(decoding: stored.body, as: UTF8.self).contains("\"received\":20"))

        func download(_ range: String?) async -> HTTPResponse {
            await router.handle(
                HTTPRequest(
                    method: "GET", path: "/v1/blobs/download", headers: headers("bob", range.map { ["range": $0] } ?? [:]),
                    query: ["blobID": blobID]))
        }
        let middle = await download("bytes=5-9")
        #expect(middle.status == 206 && middle.body == bytes[5...9] && middle.contentType == "application/octet-stream")
        #expect(middle.headers.contains { $0 == ("Content-Range", "bytes 5-9/20") })
        let whole = await download(nil)
        #expect(whole.status == 206 && whole.body == bytes)
        let tail = await download("bytes=15-")
        #expect(tail.body == bytes.suffix(5) && tail.headers.contains { $0 == ("Content-Range", "bytes 15-19/20") })
        for bad in ["bytes=20-", "bytes=-3", "bytes=1-2,4-5"] {
            #expect(await download(bad).status == 416, "\(bad)")
        }
    }
}

@Suite("spark-domaind: query parameters")
struct QueryDecoderTests {
    /// A query's parameters decode straight into the request type; one missing or of the
    /// wrong kind is refused by name, as a body's field is.
    @Test func parametersDecodeStraightAndAreRefusedByName() throws {
        #expect(
            try QueryDecoder.decode(
                Wire.MailboxQuery.self, from: ["after": .integer(5), "limit": .integer(10), "wait": .integer(30)])
                == Wire.MailboxQuery(after: 5, limit: 10, wait: 30))
        let outbox = try QueryDecoder.decode(Wire.OutboxQuery.self, from: ["limit": .integer(3)])
        #expect(outbox.recipient == nil && outbox.limit == 3)
        // Every integer width decodes (a UInt16 once recursed without end), in its range only.
        #expect(try QueryDecoder.decode(Wire.KeyPackageSuite.self, from: ["suite": .integer(0xF768)]).suite == 0xF768)
        #expect(try QueryDecoder.decode(Wire.KeyPackageSuite.self, from: [:]).suite == nil)
        #expect(throws: DecodingError.self) {
            try QueryDecoder.decode(Wire.KeyPackageSuite.self, from: ["suite": .integer(70_000)])
        }
        #expect(
            try QueryDecoder.decode(Wire.OutboxQuery.self, from: ["limit": .integer(3), "recipient": .string("a@b")])
                .recipient == "a@b")
        func refusal(_ values: [String: QueryDecoder.Value]) -> String {
            do {
                _ = try QueryDecoder.decode(Wire.MailboxQuery.self, from: values)
                return "decoded"
            } catch let error as DecodingError {
                return WireCoder.refusal(error).reason
            } catch {
                return "\(error)"
            }
        }
        #expect(refusal(["after": .integer(5), "limit": .integer(10)]) == "field 'wait' is missing")
        #expect(
            refusal(["after": .integer(5), "limit": .string("ten"), "wait": .integer(0)]) == "field 'limit' must be an integer")
        #expect(
            refusal(["after": .string("5"), "limit": .integer(1), "wait": .integer(0)]) == "field 'after' must be an integer")
    }
}

/// The route table: one row per operation, each checking the credential its operation's access
/// names before its handler runs.
@Suite("spark-domaind: route table")
struct RouteTableTests {
    @Test func everyOperationHasARowWithItsAccess() {
        #expect(DomainRouter.routes.count == DomainOperation.allCases.count)
        for operation in DomainOperation.allCases {
            #expect(DomainRouter.routes[operation]?.access == operation.access, "\(operation)")
        }
    }

    /// An attacker names alice's endpoint with a token that is not alice's (garbage, or signed
    /// by another domain's issuer): no endpoint call runs its handler; each is refused as an
    /// invalid token, whatever the endpoint says. A user's token is no operator credential.
    @Test func noEndpointCallRunsWithoutAValidatedCaller() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("route-table-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let domain = try EmbeddedDomain.create(at: directory.appendingPathComponent("d.sqlite").path, domainID: "routes")
        let other = try EmbeddedDomain.create(at: directory.appendingPathComponent("o.sqlite").path, domainID: "other")
        let router = DomainRouter(domain: domain, operatorCredential: "operator")
        let token = try await domain.testToken(userID: "alice").token
        _ = try await domain.registerEndpoint(
            token: token, registration: EndpointRegistration(endpointID: "alice-1", description: "alice"))
        let forged = [
            "eyJhbGciOiJFZERTQSIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhbGljZSJ9.AAAA", try await other.testToken(userID: "alice").token,
        ]
        // The GET calls that need no parameter (none, or only optional ones).
        let emptyCalls = DomainOperation.allCases.filter { operation in
            guard operation.access == .endpoint, operation.method == "GET" else { return false }
            switch operation.request.schema {
            case nil: return true
            case .object(let fields)?: return !fields.contains { $0.2 }
            default: return false
            }
        }
        #expect(emptyCalls.count >= 5)
        for operation in emptyCalls {
            let headers = { (token: String) in ["authorization": "Bearer \(token)", "spark-endpoint": "alice-1"] }
            let good = await router.handle(HTTPRequest(method: "GET", path: operation.path, headers: headers(token)))
            #expect(good.status == 200 || good.status == 404, "\(operation) with alice's token: \(good.status)")
            for bad in forged {
                let refused = await router.handle(HTTPRequest(method: "GET", path: operation.path, headers: headers(bad)))
                #expect(refused.status == 401, "\(operation) with a forged token: \(refused.status)")
            }
        }
        let admin = await router.handle(
            HTTPRequest(method: "GET", path: DomainOperation.adminAccounts.path, headers: ["authorization": "Bearer \(token)"]))
        #expect(admin.status == 403)
    }

    /// The head check names the token's user for the server's per-user body budget (issuer and
    /// user id), and nobody for a call without a token or a refused one.
    @Test func theHeadCheckChargesABodyToItsTokensUser() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("verdict-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let domain = try EmbeddedDomain.create(at: directory.appendingPathComponent("d.sqlite").path, domainID: "routes")
        let router = DomainRouter(domain: domain, operatorCredential: "operator")
        let token = try await domain.testToken(userID: "mallory").token
        _ = try await domain.registerEndpoint(
            token: token, registration: EndpointRegistration(endpointID: "m-1", description: "m"))
        func verdict(_ headers: [String: String], path: String = "/v1/chats/post") -> HTTPServer.HeadVerdict {
            router.verdict(HTTPRequest(method: "POST", path: path, headers: headers.merging(["content-length": "100"]) { $1 }))
        }
        guard case .admit(let charged) = verdict(["authorization": "Bearer \(token)", "spark-endpoint": "m-1"]) else {
            Issue.record("a good token's body was refused")
            return
        }
        #expect(charged?.hasSuffix("\nmallory") == true, "\(String(describing: charged))")
        guard case .admit(let anonymous) = verdict([:], path: "/v1/accounts/log-in") else {
            Issue.record("a log-in's small body was refused")
            return
        }
        #expect(anonymous == nil)
        guard case .refuse = verdict(["authorization": "Bearer not-a-token", "spark-endpoint": "m-1"]) else {
            Issue.record("a bad token's body was admitted")
            return
        }
    }
}
