import CSparkHTTP
package import Foundation
import SparkDomain
import SparkLock

/// A request as the server received it, whole (body within the size cap).
package struct HTTPRequest: Sendable {
    /// `GET`, `POST`, …
    package var method: String
    /// The path without the query.
    package var path: String
    /// The headers the routes read (names lowercased): authorization, spark-endpoint,
    /// content-type, range.
    package var headers: [String: String]
    /// The query's arguments, decoded, and their names in order (a name may repeat).
    package var query: [String: String]
    /// The query's argument names as sent.
    package var queryNames: [String]
    /// The body.
    package var body: Data
    /// The client's address.
    package var clientAddress: String

    /// A request (tests build them to call a router directly).
    package init(
        method: String, path: String, headers: [String: String] = [:], query: [String: String] = [:],
        queryNames: [String]? = nil, body: Data = Data(), clientAddress: String = "127.0.0.1"
    ) {
        self.method = method
        self.path = path
        self.headers = headers
        self.query = query
        self.queryNames = queryNames ?? query.keys.sorted()
        self.body = body
        self.clientAddress = clientAddress
    }
}

/// An answer.
package struct HTTPResponse: Sendable {
    /// The status.
    package var status: Int
    /// The content type.
    package var contentType: String
    /// The body.
    package var body: Data
    /// Extra headers.
    package var headers: [(String, String)]
    /// Set when the answer is not ready: the server waits, then asks for it (a long-poll).
    package var deferred: Deferred?

    /// An answer that comes after a wait with no task: the request's task ends (its frames and
    /// the request let go), `park` is given a wake-up to call once when the answer may be ready,
    /// and a new task then asks `then` for it. A waiting long-poll so holds only what `park` and
    /// `then` capture (a task's async frames stay allocated as long as the task lives).
    package struct Deferred: Sendable {
        /// Keeps `wake` and calls it once, from any thread, when the answer may be ready.
        package var park: @Sendable (_ wake: @escaping @Sendable () -> Void) -> Void
        /// The answer, or another deferral.
        package var then: @Sendable () async -> HTTPResponse

        /// A deferral.
        package init(
            park: @escaping @Sendable (_ wake: @escaping @Sendable () -> Void) -> Void,
            then: @escaping @Sendable () async -> HTTPResponse
        ) {
            self.park = park
            self.then = then
        }
    }

    /// An answer.
    package init(status: Int, contentType: String = "application/json", body: Data, headers: [(String, String)] = []) {
        self.status = status
        self.contentType = contentType
        self.body = body
        self.headers = headers
    }

    /// An answer that comes from `deferred.then`, after `deferred.park`'s wake-up.
    package init(deferred: Deferred) {
        self.init(status: 0, body: Data())
        self.deferred = deferred
    }
}

/// spark-domaind's HTTP/1.1 server (CSparkHTTP): epoll worker threads, keep-alive, TLS by
/// OpenSSL, connection caps, idle timeouts and a body cap (413 before reading), driving a Swift
/// handler. A request is answered when its handler returns, or, when the answer is deferred (a
/// long-poll that waits), after the deferral's wake-up; the connection waits meanwhile, holding
/// no thread and no task.
package final class HTTPServer: Sendable {
    /// How the server listens.
    package struct Options: Sendable {
        /// The IP address to listen on.
        package var host: String
        /// The port (0: any free one).
        package var port: UInt16
        /// PEM certificate chain and key; nil for plain HTTP.
        package var certificatePEM: String?
        /// The key of ``certificatePEM``.
        package var keyPEM: String?
        /// Worker threads.
        package var threads: Int
        /// Open connections at most.
        package var connectionLimit: Int
        /// Open connections at most per client address.
        package var perAddressLimit: Int
        /// Seconds a connection may send nothing before it is closed.
        package var idleTimeout: Int
        /// The largest body accepted.
        package var maximumBody: Int
        /// Seconds a request's head (and a TLS handshake) may take in all, however it trickles.
        package var headTimeout: Int
        /// The slowest a body may arrive, in bytes a second from its start (after a grace of
        /// ``headTimeout``).
        package var minimumBodyRate: Int
        /// The bytes request bodies may hold in the server's buffers, all clients together.
        package var bodyBudget: Int
        /// The bytes request bodies may hold per client address.
        package var perAddressBodyBudget: Int
        /// The IP addresses of proxies that send the PROXY protocol v2 header (haproxy's
        /// `send-proxy-v2`): a connection from one must begin with it, and the client address it
        /// names is the connection's; from any other address no header is read. Empty: none.
        package var proxyAddresses: [String]
        /// The threads requests run on (``RequestExecutor``): as many as the requests that may
        /// block in the store at once, so the store's pool of connections.
        package var requestThreads: Int
        /// The bits of an IPv6 client address the per-address limits key on (1 to 128): 64, the
        /// subnet any IPv6 host picks its addresses from, unless told otherwise.
        package var ipv6Prefix: Int

        /// Options with production defaults: two threads, 20,000 connections (256 per address),
        /// 30 s idle, 10 s for a head, bodies of 1 MiB at 1 KiB/s or faster holding 256 MiB in all
        /// (16 MiB per address), no proxies.
        package init(
            host: String, port: UInt16, certificatePEM: String? = nil, keyPEM: String? = nil, threads: Int = 2,
            connectionLimit: Int = 20_000, perAddressLimit: Int = 256, idleTimeout: Int = 30, maximumBody: Int = 1 << 20,
            headTimeout: Int = 10, minimumBodyRate: Int = 1024, bodyBudget: Int = 256 << 20,
            perAddressBodyBudget: Int = 16 << 20, proxyAddresses: [String] = [], requestThreads: Int = 16,
            ipv6Prefix: Int = 64
        ) {
            self.host = host
            self.port = port
            self.certificatePEM = certificatePEM
            self.keyPEM = keyPEM
            self.threads = threads
            self.connectionLimit = connectionLimit
            self.perAddressLimit = perAddressLimit
            self.idleTimeout = idleTimeout
            self.maximumBody = maximumBody
            self.headTimeout = headTimeout
            self.minimumBodyRate = minimumBodyRate
            self.bodyBudget = bodyBudget
            self.perAddressBodyBudget = perAddressBodyBudget
            self.proxyAddresses = proxyAddresses
            self.requestThreads = requestThreads
            self.ipv6Prefix = ipv6Prefix
        }
    }

    typealias Handler = @Sendable (HTTPRequest) async -> HTTPResponse
    /// What a head check decides.
    package enum HeadVerdict: Sendable {
        /// Read the body, charged to its address's body budget and, when given, to the one of
        /// `chargedTo` (the token's user: one user's bodies share a budget from any address).
        case admit(chargedTo: String?)
        /// Refuse the request with this answer; the body is never read.
        case refuse(HTTPResponse)
    }

    /// The check of a request's head before its body is read (``DomainRouter/verdict(_:)``). It
    /// runs on a server thread: it must not block.
    package typealias HeadCheck = @Sendable (HTTPRequest) -> HeadVerdict

    /// What the C server's callback reaches through its context: the handler and the count of
    /// requests in flight. Retained by the C server until it stops.
    final class Core: Sendable {
        let handler: Handler
        let headCheck: HeadCheck?
        let inFlight = Locked(0)
        /// Where each request's task runs (off Swift's cooperative pool).
        let executor: RequestExecutor
        init(handler: @escaping Handler, headCheck: HeadCheck?, executor: RequestExecutor) {
            self.handler = handler
            self.headCheck = headCheck
            self.executor = executor
        }
    }

    private let core: Core
    private let started = Locked<OpaquePointer?>(nil)
    /// The port bound.
    package let port: UInt16

    /// Starts listening; throws with the reason when it cannot (address in use, bad key).
    /// `headCheck`, when given, sees each request whose body is still to come before any of it is
    /// read.
    package init(
        options: Options, headCheck: HeadCheck? = nil, handler: @escaping @Sendable (HTTPRequest) async -> HTTPResponse
    ) throws {
        let core = Core(
            handler: handler, headCheck: headCheck, executor: RequestExecutor(threads: max(1, options.requestThreads)))
        self.core = core
        var error = [CChar](repeating: 0, count: 512)
        let context = Unmanaged.passRetained(core).toOpaque()
        let proxies = options.proxyAddresses.map { strdup($0) }
        defer { for proxy in proxies { free(proxy) } }
        let proxyPointers = proxies.map { UnsafePointer($0) }
        let server: OpaquePointer? = options.host.withCString { host in
            withOptionalCString(options.certificatePEM) { certificate in
                withOptionalCString(options.keyPEM) { key in
                    proxyPointers.withUnsafeBufferPointer { proxyList in
                        var raw = spark_http_options(
                            host: host, port: options.port, certificate_pem: certificate, key_pem: key,
                            threads: UInt32(options.threads), connection_limit: UInt32(options.connectionLimit),
                            per_address_limit: UInt32(options.perAddressLimit), idle_timeout: UInt32(options.idleTimeout),
                            maximum_body: options.maximumBody, head_timeout: UInt32(options.headTimeout),
                            minimum_body_rate: options.minimumBodyRate, body_budget: options.bodyBudget,
                            per_address_body_budget: options.perAddressBodyBudget,
                            head_check: headCheck == nil ? nil : serverHeadCheck, proxy_addresses: proxyList.baseAddress,
                            proxy_address_count: proxyList.count, ipv6_prefix: UInt32(clamping: options.ipv6Prefix))
                        return spark_http_start(&raw, serverHandler, context, &error, error.count)
                    }
                }
            }
        }
        guard let server else {
            core.executor.shutdown()
            Unmanaged<Core>.fromOpaque(context).release()
            throw DomainError(
                .unavailable, String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        started.withLock { $0 = server }
        port = spark_http_port(server)
    }

    /// Open connections now.
    package var connections: Int {
        started.withLock { server in server.map { Int(spark_http_connections($0)) } ?? 0 }
    }

    /// Requests being handled now.
    package var requestsInFlight: Int { core.inFlight.withLock { $0 } }

    /// Stops accepting connections; open ones are still served.
    package func quiesce() {
        started.withLock { server in if let server { spark_http_quiesce(server) } }
    }

    /// Answers new requests 503 from now on, waits (at most `timeout`) for the ones in flight to
    /// be answered and their connections taken back, then stops.
    package func stop(timeout: Duration = .seconds(10)) async {
        guard let server = started.withLock({ $0 }) else { return }
        spark_http_close(server)
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while requestsInFlight > 0 || spark_http_suspended(server) > 0, clock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        // A request still out at the deadline would be answered into a stopped server: then the
        // server is left for the process's exit.
        guard requestsInFlight == 0, spark_http_suspended(server) == 0 else { return }
        started.withLock { $0 = nil }
        spark_http_stop(server)
        core.executor.shutdown()
        Unmanaged.passUnretained(core).release()
    }
}

/// The C server's check of a head: the answer's status and JSON body (cut to what fits), or 0.
private func serverHeadCheck(
    _ context: UnsafeMutableRawPointer?, _ request: OpaquePointer?, _ body: UnsafeMutablePointer<CChar>?, _ size: Int
) -> UInt32 {
    guard let request, let context, let body, size > 0 else { return 0 }
    let server = Unmanaged<HTTPServer.Core>.fromOpaque(context).takeUnretainedValue()
    guard let check = server.headCheck else { return 0 }
    let written: Data
    let status: UInt32
    switch check(incoming(request)) {
    case .admit(let chargedTo):
        guard let chargedTo else { return 0 }
        (written, status) = (Data(chargedTo.utf8.filter { $0 != 0 }), 0)
    case .refuse(let refusal):
        (written, status) = (refusal.body, UInt32(refusal.status))
    }
    let bytes = written.prefix(size - 1)
    bytes.withUnsafeBytes { raw in
        for (index, byte) in raw.enumerated() { body[index] = CChar(bitPattern: byte) }
    }
    body[bytes.count] = 0
    return status
}

/// The request the C server holds, copied out (valid during its callbacks only).
private func incoming(_ request: OpaquePointer) -> HTTPRequest {
    var headers: [String: String] = [:]
    for name in ["authorization", "spark-endpoint", "content-type", "content-length", "range"] {
        if let value = spark_http_header(request, name) { headers[name] = String(cString: value) }
    }
    // The first value of a repeated name counts; a bare name (no '=') has none.
    var query: [String: String] = [:]
    var names: [String] = []
    for index in 0..<spark_http_argument_count(request) {
        guard let name = spark_http_argument_name(request, index).map({ String(cString: $0) }) else { continue }
        names.append(name)
        if query[name] == nil, let value = spark_http_argument_value(request, index) { query[name] = String(cString: value) }
    }
    var length = 0
    let bytes = spark_http_body(request, &length)
    let body = bytes.map { Data(bytes: $0, count: length) } ?? Data()
    return HTTPRequest(
        method: String(cString: spark_http_method(request)), path: String(cString: spark_http_path(request)),
        headers: headers, query: query, queryNames: names, body: body,
        clientAddress: String(cString: spark_http_client_address(request)))
}

/// The C server's callback: copies the request out and answers it from a task.
private func serverHandler(_ context: UnsafeMutableRawPointer?, _ request: OpaquePointer?) {
    guard let request, let context else { return }
    let server = Unmanaged<HTTPServer.Core>.fromOpaque(context).takeUnretainedValue()
    let incoming = incoming(request)
    server.inFlight.withLock { $0 += 1 }
    nonisolated(unsafe) let pending = request
    let handler = server.handler
    // On the server's own threads: a request that blocks in the store holds one of them, never
    // a thread of Swift's cooperative pool. The task, and the request with it, ends once handled,
    // even when the answer is deferred.
    Task(executorPreference: server.executor) { answer(pending, with: await handler(incoming), server: server) }
}

/// Answers the request, or parks it until its deferred answer may be ready and asks for it then,
/// in a task of its own (the one that deferred it has ended).
private func answer(_ request: OpaquePointer, with response: HTTPResponse, server: HTTPServer.Core) {
    guard let deferred = response.deferred else {
        respond(request, response)
        server.inFlight.withLock { $0 -= 1 }
        return
    }
    nonisolated(unsafe) let pending = request
    deferred.park {
        Task(executorPreference: server.executor) { answer(pending, with: await deferred.then(), server: server) }
    }
}

private func respond(_ request: OpaquePointer, _ response: HTTPResponse) {
    let names = response.headers.map { strdup($0.0) }
    let values = response.headers.map { strdup($0.1) }
    defer {
        for name in names { free(name) }
        for value in values { free(value) }
    }
    let constNames = names.map { UnsafePointer($0) }
    let constValues = values.map { UnsafePointer($0) }
    response.body.withUnsafeBytes { bytes in
        spark_http_respond(
            request, UInt32(response.status), response.contentType, bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count,
            constNames, constValues, response.headers.count)
    }
}

private func withOptionalCString<T>(_ text: String?, _ body: (UnsafePointer<CChar>?) -> T) -> T {
    guard let text else { return body(nil) }
    return text.withCString { body($0) }
}
