import Foundation
import SparkDomain
import SparkDomainEngine

/// One request being routed: its credential, input and rate limit, read by its ``Route``.
struct Call {
    let operation: DomainOperation
    let request: HTTPRequest
    let router: DomainRouter

    init(operation: DomainOperation, request: HTTPRequest, router: DomainRouter) throws {
        self.operation = operation
        self.request = request
        self.router = router
        if operation.method == "POST", let type = request.headers["content-type"],
            !type.lowercased().hasPrefix("application/json")
        {
            throw DomainError(.invalidRequest, "the body must be application/json, not \(type)")
        }
        if operation.method == "PUT", request.headers["content-type"]?.lowercased().hasPrefix("application/octet-stream") != true
        {
            throw DomainError(.invalidRequest, "the body must be application/octet-stream")
        }
        if operation.access == .anyone, request.body.count > DomainRouter.anonymousBodyLimit {
            throw DomainError(
                .tooLarge, "\(operation.path) takes at most \(DomainRouter.anonymousBodyLimit) bytes without a token")
        }
    }

    /// The bearer token.
    func token() throws -> String {
        guard let header = request.headers["authorization"] else {
            throw DomainError(.invalidToken, "this call needs a token: Authorization: Bearer TOKEN")
        }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer", !parts[1].isEmpty else {
            throw DomainError(.invalidToken, "the Authorization header is not 'Bearer TOKEN'")
        }
        return String(parts[1])
    }

    /// The bearer token and the calling endpoint.
    func credential() throws -> (String, String) {
        let token = try token()
        guard let endpoint = request.headers["spark-endpoint"], !endpoint.isEmpty else {
            throw DomainError(.invalidRequest, "this call needs the calling endpoint's id in the Spark-Endpoint header")
        }
        return (token, endpoint)
    }

    func requireOperator() throws { try router.requireOperator(request) }

    /// The caller, resolved once: the credential's headers read, the call counted against its
    /// rate limit by endpoint (before any signature is checked), then the token validated.
    func caller() async throws -> DomainEngine.Caller {
        let (token, endpoint) = try credential()
        try limit(name: endpoint)
        return try await router.domain.caller(token: token, endpointID: endpoint)
    }

    /// The operation's input, decoded strictly as its request kind says: nothing, the query's
    /// fields, a JSON body, or an upload's query fields.
    func input<T: Codable>(_ type: T.Type) throws -> T {
        switch operation.request {
        case .none:
            try none()
            return try QueryDecoder.decode(T.self, from: [:])
        case .query: return try query(T.self)
        case .body: return try body(T.self)
        case .upload: return try parameters(T.self)
        }
    }

    /// Refuses a body or query where the operation takes none.
    func none() throws {
        guard request.body.isEmpty else { throw DomainError(.invalidRequest, "\(operation.path) takes no body") }
        guard request.queryNames.isEmpty else {
            throw DomainError(.invalidRequest, "unknown query parameter '\(request.queryNames[0])'")
        }
    }

    /// The JSON body, decoded strictly.
    func body<T: Codable>(_ type: T.Type) throws -> T {
        guard request.queryNames.isEmpty else {
            throw DomainError(.invalidRequest, "unknown query parameter '\(request.queryNames[0])'")
        }
        guard !request.body.isEmpty else { throw DomainError(.invalidRequest, "the body is missing: send a JSON object") }
        return try WireCoder.decode(T.self, from: request.body)
    }

    /// The query's parameters as `T`, checked against the operation's schema.
    func query<T: Codable>(_ type: T.Type) throws -> T {
        guard request.body.isEmpty else { throw DomainError(.invalidRequest, "a GET takes no body") }
        return try parameters(type)
    }

    /// The query's parameters as `T` beside a body of bytes (an upload).
    func parameters<T: Codable>(_ type: T.Type) throws -> T {
        let fields = operation.request.schema?.fields ?? []
        var values: [String: QueryDecoder.Value] = [:]
        for name in request.queryNames {
            guard let field = fields.first(where: { $0.name == name }) else {
                throw DomainError(.invalidRequest, "unknown query parameter '\(name)'")
            }
            guard values[name] == nil else { throw DomainError(.invalidRequest, "query parameter '\(name)' is repeated") }
            let value = request.query[name] ?? ""
            if case .integer = field.schema {
                guard let number = Int64(value) else {
                    throw DomainError(.invalidRequest, "query parameter '\(name)' must be an integer")
                }
                values[name] = .integer(number)
            } else {
                values[name] = .string(value)
            }
        }
        do {
            return try QueryDecoder.decode(T.self, from: values)
        } catch let error as DecodingError {
            throw WireCoder.refusal(error)
        }
    }

    /// Counts the call against its rate limits.
    func limit(name: String?) throws {
        guard let kind = RequestLimits.kind(of: operation) else { return }
        if let wait = router.limits.take(kind, address: request.clientAddress, name: name) {
            throw DomainError(.tooManyAttempts, "too many \(kind) requests; try again in \(wait) s", retryAfter: wait)
        }
    }
}
