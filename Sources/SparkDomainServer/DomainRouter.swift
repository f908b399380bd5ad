import Foundation
import SparkCrypto
import SparkDomain
package import SparkDomainEngine
import SparkLock

/// The `/v1` routes of `spark-domaind` over one domain: each request is matched to its
/// ``DomainOperation``, its credential taken from the headers, its fields decoded strictly, its
/// rate limit checked, and the domain's answer (or refusal) encoded. Every rule stays in the
/// domain; the router only translates. No client input gets a 5xx: malformed input is 400,
/// unknown routes 404, the domain's own trouble 503 with `Retry-After`.
package final class DomainRouter: Sendable {
    /// The domain served.
    package let domain: DomainEngine
    /// Counters for `/metrics`.
    package let metrics = ServerMetrics()
    let limits: RequestLimits
    private let operatorCredentialHash: Data
    /// Where each request's line goes; nil when nothing is logged (`--quiet`), so that no line
    /// is made.
    fileprivate let log: (@Sendable (String) -> Void)?
    private let draining = Locked(false)
    /// The server, once listening (for the connection gauge).
    let server = Locked<HTTPServer?>(nil)

    /// A router for `domain`, admitting operators who present `operatorCredential`, logging one
    /// line per request to `log` (none when it is nil).
    package init(
        domain: DomainEngine, operatorCredential: String, limits: RequestLimits = RequestLimits(),
        log: (@Sendable (String) -> Void)? = nil
    ) {
        self.domain = domain
        operatorCredentialHash = SHA256.hash(Data(operatorCredential.utf8))
        self.limits = limits
        self.log = log
    }

    /// Gives the router its server, for the connection gauge of `/metrics`.
    package func attach(_ server: HTTPServer) { self.server.withLock { $0 = server } }

    /// Ends every long-poll now (empty) and refuses new ones: the daemon is shutting down.
    package func drain() {
        draining.withLock { $0 = true }
        domain.mailboxWaiters.endAll()
    }

    /// Answers one request.
    package func handle(_ request: HTTPRequest) async -> HTTPResponse {
        let clock = ContinuousClock()
        let started = clock.now
        var route = "unknown"
        let response: HTTPResponse
        var isLongPoll = false
        var isStoreError = false
        switch (request.method, request.path) {
        case ("GET", "/healthz"):
            route = "healthz"
            response = await health()
        case ("GET", "/metrics"):
            // Operators only: the counters tell who is busy and when.
            route = "metrics"
            do {
                try requireOperator(request)
                response = HTTPResponse(
                    status: 200, contentType: "text/plain; version=0.0.4",
                    body: Data(
                        metrics.text(
                            longPolls: domain.mailboxWaiters.waiting,
                            connections: server.withLock { $0?.connections ?? 0 }
                        ).utf8))
            } catch {
                response = Self.refusal(error as? DomainError ?? DomainError(.forbidden, "operator calls only"))
            }
        case ("GET", "/v1/openapi.json"):
            route = "openapi"
            response = HTTPResponse(status: 200, body: OpenAPIDocument.json())
        default:
            if let operation = DomainOperation.matching(method: request.method, path: request.path) {
                route = operation.rawValue
                isLongPoll = operation == .readMailbox && (Int(request.query["wait"] ?? "") ?? 0) > 0
                do {
                    let call = try Call(operation: operation, request: request, router: self)
                    switch try await Self.routes[operation]!.run(self, call) {
                    case .json(let body):
                        response = HTTPResponse(status: 200, body: body)
                    case .response(let answer):
                        response = answer
                    case .wait(let poll):
                        // A long-poll that waits is answered later; its request is not kept.
                        return deferred(poll, Finish(started: started, method: request.method, address: request.clientAddress))
                    }
                } catch {
                    (response, isStoreError) = refusal(for: error, route: route)
                }
            } else if DomainOperation.hasPath(request.path) {
                response = Self.refusal(
                    DomainError(.invalidRequest, "\(request.method) is not allowed on \(request.path)"), status: 405)
            } else {
                response = Self.refusal(DomainError(.notFound, "no route \(request.method) \(request.path)"))
            }
        }
        Finish(started: started, method: request.method, address: request.clientAddress).record(
            route: route, response: response, isLongPoll: isLongPoll, isStoreError: isStoreError, router: self)
        return response
    }

    /// The most an operation open to anyone (sign-up, log-in, a test token: the calls before a
    /// token) may send: their bodies are a few names and a password.
    package static let anonymousBodyLimit = 16 * 1024

    /// Checks a request whose body is still to come, before the server reads any of it or makes
    /// room for it: its route, then its credential as far as that is known without the store
    /// (``DomainEngine/precheck(token:)``). nil admits the body; an answer refuses the request,
    /// and the server sends it and closes the connection unread. A body that came whole with its
    /// head is not checked here (holding it costs nothing more); ``handle(_:)`` checks every
    /// request in full either way.
    package func admit(_ request: HTTPRequest) -> HTTPResponse? {
        if case .refuse(let refusal) = verdict(request) { return refusal }
        return nil
    }

    /// ``admit(_:)`` as the server takes it: a refusal, or the body admitted and charged to the
    /// token's user as well as to the address (so one token sent from many addresses holds one
    /// address's share of the body budget, not one per address).
    package func verdict(_ request: HTTPRequest) -> HTTPServer.HeadVerdict {
        let refusal: HTTPResponse?
        var route = "unknown"
        var user: String?
        if let operation = DomainOperation.matching(method: request.method, path: request.path) {
            route = operation.rawValue
            let admitted = admission(operation, request)
            refusal = admitted.refusal.map { Self.refusal($0) }
            user = admitted.user
        } else if ["/healthz", "/metrics", "/v1/openapi.json"].contains(request.path) && request.method == "GET" {
            refusal = Self.refusal(DomainError(.invalidRequest, "\(request.path) takes no body"))
        } else if DomainOperation.hasPath(request.path) {
            refusal = Self.refusal(
                DomainError(.invalidRequest, "\(request.method) is not allowed on \(request.path)"), status: 405)
        } else {
            refusal = Self.refusal(DomainError(.notFound, "no route \(request.method) \(request.path)"))
        }
        if let refusal {
            Finish(started: .now, method: request.method, address: request.clientAddress).record(
                route: route, response: refusal, isLongPoll: false, isStoreError: false, router: self)
            return .refuse(refusal)
        }
        return .admit(chargedTo: user)
    }

    /// Why `operation` may not have its body read, if it may not, and the token's user when one
    /// passed.
    private func admission(_ operation: DomainOperation, _ request: HTTPRequest) -> (refusal: DomainError?, user: String?) {
        switch operation.request {
        case .none, .query: return (DomainError(.invalidRequest, "\(operation.path) takes no body"), nil)
        case .body, .upload: break
        }
        do {
            switch operation.access {
            case .anyone:
                if let length = request.headers["content-length"].flatMap({ Int($0) }), length > Self.anonymousBodyLimit {
                    return (
                        DomainError(
                            .tooLarge, "\(operation.path) takes at most \(Self.anonymousBodyLimit) bytes without a token"),
                        nil
                    )
                }
                return (nil, nil)
            case .operator:
                try requireOperator(request)
                return (nil, nil)
            case .user, .endpoint:
                let token = try Call(operation: operation, request: request, router: self).token()
                return domain.precheckUser(token: token)
            }
        } catch {
            return (error as? DomainError ?? DomainError(.invalidRequest, "\(error)"), nil)
        }
    }

    /// What a request's metrics and log line need once it is answered (all a long-poll keeps
    /// of its request while it waits).
    private struct Finish: Sendable {
        let started: ContinuousClock.Instant
        let method: String
        let address: String

        func record(route: String, response: HTTPResponse, isLongPoll: Bool, isStoreError: Bool, router: DomainRouter) {
            let seconds = (ContinuousClock.now - started) / .seconds(1)
            router.metrics.record(
                route: route, status: response.status, seconds: seconds, isLongPoll: isLongPoll, isStoreError: isStoreError)
            // One line per request: never a token, code, password or key, only what happened.
            if let log = router.log {
                let hundredths = Int((seconds * 100_000).rounded())
                let milliseconds = "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100)"
                log(
                    #"{"route":"\#(route)","method":"\#(method)","status":\#(response.status),"ms":\#(milliseconds),"address":"\#(address)"}"#
                )
            }
        }
    }

    /// The refusal a failed call gets, and whether the store failed.
    private func refusal(for error: any Error, route: String) -> (HTTPResponse, Bool) {
        switch error {
        case let error as DomainError:
            if error.httpStatus == 503 { logFailure(route, error.reason) }
            return (Self.refusal(error), error.code == .storageFailure)
        case is CancellationError:
            return (Self.refusal(DomainError(.unavailable, "the domain is shutting down", retryAfter: 1)), false)
        default:
            logFailure(route, "\(error)")
            return (Self.refusal(DomainError(.unavailable, "the domain failed", retryAfter: 1)), true)
        }
    }

    /// A mailbox read's answer.
    private static func answer(_ entries: [MailboxEntry]) throws -> HTTPResponse {
        HTTPResponse(status: 200, body: try WireCoder.encode(Wire.Entries(entries: entries)))
    }

    /// A long-poll's answer after its wait: what came, or another wait.
    private func deferred(_ poll: DomainEngine.MailboxPoll, _ finish: Finish) -> HTTPResponse {
        let domain = domain
        return HTTPResponse(
            deferred: HTTPResponse.Deferred(
                park: { wake in domain.parkMailboxWait(poll, wake: wake) },
                then: { [self] in
                    let route = DomainOperation.readMailbox.rawValue
                    let response: HTTPResponse
                    var isStoreError = false
                    do {
                        switch try await domain.continueMailboxRead(poll) {
                        case .entries(let entries): response = try Self.answer(entries)
                        case .wait(let next): return deferred(next, finish)
                        }
                    } catch {
                        (response, isStoreError) = refusal(for: error, route: route)
                    }
                    finish.record(route: route, response: response, isLongPoll: true, isStoreError: isStoreError, router: self)
                    return response
                }))
    }

    /// `/healthz`: 200 when the store answers, 503 otherwise or while draining.
    private func health() async -> HTTPResponse {
        if draining.withLock({ $0 }) {
            return HTTPResponse(status: 503, body: Data(#"{"status":"draining"}"#.utf8), headers: [("Retry-After", "1")])
        }
        do {
            _ = try domain.storedPolicy()
            return HTTPResponse(status: 200, body: Data(#"{"status":"ok"}"#.utf8))
        } catch {
            return HTTPResponse(status: 503, body: Data(#"{"status":"store unavailable"}"#.utf8), headers: [("Retry-After", "1")])
        }
    }

    /// Logs why the domain could not answer (the client gets a fixed message: the database's
    /// text says how the server is built and what it holds).
    private func logFailure(_ route: String, _ reason: String) {
        let quoted = (try? JSONEncoder().encode(reason)).map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
        log?(#"{"route":"\#(route)","failure":\#(quoted)}"#)
    }

    /// What a client is told when the domain cannot answer (503), whatever the cause.
    package static let unavailableMessage = "the domain cannot answer now; try again shortly"

    /// An error's wire form: `{"code","message","retryAfter"}` with its status and, for 429 and
    /// 503, `Retry-After`. A 503 carries ``unavailableMessage``, never the cause (it is logged).
    /// The bytes of lower- or upper-case hex; nil for anything else.
    static func hexBytes(_ hex: String) -> Data? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0, digits.count <= 256 else { return nil }
        func value(_ digit: UInt8) -> UInt8? {
            switch digit {
            case 48...57: digit - 48
            case 97...102: digit - 87
            case 65...70: digit - 55
            default: nil
            }
        }
        var bytes = Data(capacity: digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    /// A log size named in a query: absent, or 0 and up.
    static func logSize(_ value: Int64?) throws -> UInt64? {
        guard let value else { return nil }
        guard value >= 0 else { throw DomainError(.invalidRequest, "a log size is 0 or more") }
        return UInt64(value)
    }

    static func refusal(_ error: DomainError, status: Int? = nil) -> HTTPResponse {
        let status = status ?? error.httpStatus
        var headers: [(String, String)] = []
        var error = status == 503 ? DomainError(error.code, Self.unavailableMessage, retryAfter: error.retryAfter) : error
        if status == 503 || status == 429 {
            let seconds = error.retryAfter ?? 1
            headers.append(("Retry-After", String(seconds)))
            if error.retryAfter == nil { error = DomainError(error.code, error.reason, retryAfter: seconds) }
        }
        let body = (try? WireCoder.encode(error)) ?? Data(#"{"code":"unavailable","message":"unencodable"}"#.utf8)
        return HTTPResponse(status: status, body: body, headers: headers)
    }

    /// The start and end (if given) of a single `bytes=START-END` range; nil for anything else.
    package static func byteRange(_ header: String) -> (Int64, Int64?)? {
        guard header.hasPrefix("bytes=") else { return nil }
        let parts = header.dropFirst(6).split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        // Digits only: `Int64("+1")` would take a sign, which RFC 9110's grammar has not.
        let digits = { (part: Substring) in part.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") } }
        guard parts.count == 2, parts[0].utf8.count <= 18, parts[1].utf8.count <= 18, !parts[0].isEmpty,
            digits(parts[0]), digits(parts[1]), let start = Int64(parts[0])
        else { return nil }
        if parts[1].isEmpty { return (start, nil) }
        guard let end = Int64(parts[1]), end >= start else { return nil }
        return (start, end)
    }

    /// Refuses a request without the operator credential (401 without one, 403 with another).
    func requireOperator(_ request: HTTPRequest) throws {
        guard let header = request.headers["authorization"] else {
            throw DomainError(.invalidToken, "operator calls need the operator credential: Authorization: Bearer CREDENTIAL")
        }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer", isOperator(String(parts[1])) else {
            throw DomainError(.forbidden, "operator calls need the operator credential; a user's token is not one")
        }
    }

    /// Checks the operator credential in constant time.
    private func isOperator(_ credential: String) -> Bool {
        SecureBytes(SHA256.hash(Data(credential.utf8))) == SecureBytes(operatorCredentialHash)
    }
}
