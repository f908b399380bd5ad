import Foundation
import SparkLock

/// The calls of the `/v1` wire, shared by ``RemoteDomain`` and ``RemoteAdministration``:
/// encoding, headers, timeouts, retries and errors.
///
/// A client may know several instances of one domain (``RemoteDomain/init(urls:domainID:trust:)``):
/// it sends to one until it fails (no connection, or a 503) and then moves to the next, which
/// serves the same domain from the same database.
final class WireClient: Sendable {
    /// The base URLs without a trailing slash, in the order given.
    let bases: [String]
    /// The instance calls go to now.
    private let current = Locked(0)
    let transport: HTTPTransport
    /// The operator credential, for ``RemoteAdministration``.
    let credential: String?
    private let reachable = Locked<Bool?>(nil)

    /// The time a call may take besides a long-poll's wait, unless the client was made with
    /// another (``requestTimeout``).
    static let defaultRequestTimeout: Duration = .seconds(15)
    /// The time a call of this client may take besides a long-poll's wait.
    let requestTimeout: Duration
    /// Attempts per call, the first included.
    static let attempts = 4
    /// The longest `Retry-After` waited out here; a longer one reaches the caller.
    static let longestRetryAfter = 2

    convenience init(url: URL, trust: DomainTrust, credential: String? = nil) throws {
        try self.init(urls: [url], trust: trust, credential: credential)
    }

    init(
        urls: [URL], trust: DomainTrust, credential: String? = nil, requestTimeout: Duration = WireClient.defaultRequestTimeout
    ) throws {
        self.requestTimeout = requestTimeout
        guard !urls.isEmpty else { throw DomainError(.invalidRequest, "a domain client needs at least one URL") }
        bases = try urls.map { try Self.base(of: $0, trust: trust) }
        transport = try HTTPTransport(trust: trust)
        self.credential = credential
    }

    /// The instance calls go to now (the first URL until one fails).
    var base: String { bases[current.withLock { $0 }] }

    /// Moves from the instance at `index` to the next (unless another call moved already).
    private func moveOn(from index: Int) {
        current.withLock { current in if current == index { current = (index + 1) % bases.count } }
    }

    private static func base(of url: URL, trust: DomainTrust) throws -> String {
        guard let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else {
            throw DomainError(.invalidRequest, "a domain URL is https://HOST[:PORT], not '\(url.absoluteString)'")
        }
        switch (scheme, trust) {
        case ("https", .plainLoopback):
            throw DomainError(.invalidRequest, "an https domain URL needs a CA file or a pinned key to trust")
        case ("https", _): break
        case ("http", .plainLoopback):
            guard ["127.0.0.1", "::1", "[::1]", "localhost"].contains(host.lowercased()) else {
                throw DomainError(.invalidRequest, "plain HTTP is allowed only to a loopback address, not \(host)")
            }
        default:
            throw DomainError(.invalidRequest, "a domain URL is https:// (http:// only on loopback), not '\(url.absoluteString)'")
        }
        var text = url.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        return text
    }

    var isReachable: Bool? { reachable.withLock { $0 } }

    /// Calls `operation` with `body` (query parameters for a `GET`) and decodes the answer.
    func call<Body: Encodable, Answer: Decodable>(
        _ operation: DomainOperation, _ body: Body, token: String? = nil, endpoint: String? = nil,
        extraTime: Duration = .zero
    ) async throws -> Answer {
        var path = operation.path
        var payload: Data?
        let encoded = try WireCoder.encode(body)
        if operation.method == "GET" {
            path += try Self.query(encoded)
        } else {
            payload = encoded
        }
        var headers = ["Accept: application/json"]
        if payload != nil { headers.append("Content-Type: application/json") }
        let response = try await exchange(
            operation, path: path, headers: headers, payload: payload, token: token, endpoint: endpoint, extraTime: extraTime)
        do {
            return try WireCoder.decoder().decode(Answer.self, from: response.body)
        } catch {
            throw DomainError(.unavailable, "the domain's answer to \(operation.rawValue) is malformed: \(error)")
        }
    }

    /// Calls an `upload` operation: `query` as its parameters, `bytes` as its body.
    func upload<Query: Encodable, Answer: Decodable>(
        _ operation: DomainOperation, _ query: Query, bytes: Data, token: String, endpoint: String
    ) async throws -> Answer {
        let response = try await exchange(
            operation, path: operation.path + (try Self.query(try WireCoder.encode(query))),
            headers: ["Accept: application/json", "Content-Type: application/octet-stream"], payload: bytes, token: token,
            endpoint: endpoint)
        do {
            return try WireCoder.decoder().decode(Answer.self, from: response.body)
        } catch {
            throw DomainError(.unavailable, "the domain's answer to \(operation.rawValue) is malformed: \(error)")
        }
    }

    /// Calls an operation that answers bytes, for the `length` of them from `offset`.
    func download<Query: Encodable>(
        _ operation: DomainOperation, _ query: Query, offset: Int64, length: Int, token: String, endpoint: String
    ) async throws -> Data {
        let response = try await exchange(
            operation, path: operation.path + (try Self.query(try WireCoder.encode(query))),
            headers: ["Accept: application/octet-stream", "Range: bytes=\(offset)-\(offset + Int64(length) - 1)"],
            payload: nil, token: token, endpoint: endpoint)
        guard response.status == 206 else {
            throw DomainError(.unavailable, "the domain answered \(operation.rawValue) with \(response.status), not 206")
        }
        return response.body
    }

    /// Sends one request until an instance answers it (see the type's notes on retries), and
    /// returns the answer when it is a success.
    private func exchange(
        _ operation: DomainOperation, path: String, headers: [String], payload: Data?, token: String?, endpoint: String?,
        extraTime: Duration = .zero
    ) async throws -> HTTPTransport.Response {
        var headers = headers
        if let bearer = credential ?? token { headers.append("Authorization: Bearer \(bearer)") }
        if let endpoint { headers.append("Spark-Endpoint: \(endpoint)") }

        // Each instance gets the usual attempts' worth of chances.
        let attempts = Self.attempts + bases.count - 1
        for attempt in 1...attempts {
            let last = attempt == attempts
            let index = current.withLock { $0 }
            let base = bases[index]
            let response: HTTPTransport.Response
            do {
                response = try await transport.send(
                    method: operation.method, url: base + path, headers: headers, body: payload,
                    timeout: requestTimeout + extraTime)
            } catch let failure as HTTPTransport.Failure {
                reachable.withLock { $0 = false }
                moveOn(from: index)
                // Without an answer nobody knows whether the call was made: only a call that
                // was never sent, or that may safely happen twice, is sent again.
                if failure.nothingSent || operation.isIdempotent, !last {
                    // Straight to the next instance; the same one again after a pause.
                    if bases.count == 1 || attempt >= bases.count { try await Self.backOff(attempt) }
                    continue
                }
                throw DomainError(.unavailable, "the domain at \(base) is unreachable: \(failure.reason)")
            }
            reachable.withLock { $0 = true }
            if (200..<300).contains(response.status) { return response }
            let error = Self.error(from: response)
            // 503 and 429 mean nothing was done: any call may go again after a short wait, and
            // a 503 (draining, or its database out of reach) straight away to another instance.
            if response.status == 503, bases.count > 1, !last {
                moveOn(from: index)
                if attempt < bases.count { continue }
            }
            if response.status == 503 || response.status == 429, !last {
                if let seconds = error.retryAfter ?? Int(response.retryAfter ?? "") {
                    if seconds <= Self.longestRetryAfter {
                        try await Task.sleep(for: .seconds(max(seconds, 0)) + .milliseconds(Int.random(in: 0...100)))
                        continue
                    }
                } else if response.status == 503 {
                    try await Self.backOff(attempt)
                    continue
                }
            }
            throw error
        }
        throw DomainError(.unavailable, "the domain at \(base) did not answer")
    }

    /// The domain's error from a refusal, or a description of what answered instead.
    static func error(from response: HTTPTransport.Response) -> DomainError {
        if let error = try? WireCoder.decoder().decode(DomainError.self, from: response.body) {
            if error.retryAfter == nil, let header = response.retryAfter, let seconds = Int(header) {
                return DomainError(error.code, error.reason, retryAfter: seconds)
            }
            return error
        }
        let code: DomainError.Code =
            switch response.status {
            case 401: .invalidToken
            case 403: .forbidden
            case 404: .notFound
            case 413: .tooLarge
            case 429: .tooManyAttempts
            case 400..<500: .invalidRequest
            default: .unavailable
            }
        return DomainError(
            code, "the domain answered HTTP \(response.status)", retryAfter: response.retryAfter.flatMap { Int($0) })
    }

    /// Exponential backoff with full jitter: up to 0.2 s, 0.4 s, 0.8 s … (at most 3 s).
    static func backOff(_ attempt: Int) async throws {
        let ceiling = min(0.2 * Double(1 << (attempt - 1)), 3)
        try await Task.sleep(for: .seconds(Double.random(in: 0...ceiling)))
    }

    /// `?a=1&b=x` from an encoded object of strings and integers (absent optionals left out);
    /// every byte but the unreserved ones is percent-encoded (`+` included, which many servers
    /// read as a space).
    static func query(_ encoded: Data) throws -> String {
        guard let object = try JSONSerialization.jsonObject(with: encoded) as? [String: Any] else { return "" }
        let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        func escape(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "" }
        let pairs = object.keys.sorted().compactMap { key -> String? in
            switch object[key] {
            case let text as String: "\(escape(key))=\(escape(text))"
            case let number as NSNumber: "\(escape(key))=\(number.stringValue)"
            default: nil
            }
        }
        return pairs.isEmpty ? "" : "?" + pairs.joined(separator: "&")
    }
}
