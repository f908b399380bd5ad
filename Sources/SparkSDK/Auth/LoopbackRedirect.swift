import Foundation
import SparkDomain
import SparkLock

#if canImport(Glibc)
    import Glibc
#endif

/// The loopback redirect of a native app's authorization request (RFC 8252 §7.3): a listener on
/// `127.0.0.1` on a port the system picks, for the one request the browser makes to it after
/// the user signed in. It runs on a thread of its own (its `accept` and `read` block), answers
/// the browser with a short page, and hands over the query of the first request to its path
/// that carries this sign-in's `state`.
///
/// Any local process can find the port (`/proc/net/tcp`) and connect: a request with another
/// state (or none) is answered and ignored, and the listener keeps waiting until the sign-in's
/// own deadline; each connection is read on a thread of its own within
/// ``connectionDeadline``, at most ``maximumConnections`` at once, so a connection that trickles
/// holds nothing but itself.
final class LoopbackRedirect: Sendable {
    /// What the provider sent back: the query's parameters.
    typealias Answer = [String: String]

    /// How long one connection has to send its request's head.
    static let connectionDeadline: Duration = .seconds(2)
    /// The most connections read at once (more are closed at once).
    static let maximumConnections = 16

    /// The URI to register with the provider and send as `redirect_uri`.
    let redirectURI: String
    private let socket: Int32
    private let path: String
    /// The state the answer must carry.
    private let expectedState: String
    /// The connections being read now.
    private let reading = Locked(0)
    /// The waiting task, the outcome, and whether the listening socket is closed: the socket is
    /// shut down (to wake `accept`) and closed only under this lock, so neither happens to a
    /// descriptor number the process has since reused.
    private let state = Locked<
        (waiter: CheckedContinuation<Answer, any Error>?, result: Result<Answer, any Error>?, closed: Bool)
    >((nil, nil, false))

    /// A listener on `127.0.0.1:port` (`0`: a free port), answering at `path` the request that
    /// carries `state`.
    init(port: UInt16 = 0, path: String = "/callback", state: String) throws {
        let descriptor = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw AuthError(.storageFailure, "cannot open a loopback socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(descriptor, 8) == 0 else {
            Glibc.close(descriptor)
            throw AuthError(.storageFailure, "cannot listen on 127.0.0.1:\(port): errno \(errno)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        socket = descriptor
        self.path = path
        expectedState = state
        redirectURI = "http://127.0.0.1:\(UInt16(bigEndian: address.sin_port))\(path)"
        let thread = Thread { [self] in serve() }
        thread.name = "spark-oidc-redirect"
        thread.start()
    }

    /// Waits for the browser's request; throws `CancellationError` when cancelled (the listener
    /// then closes).
    func answer() async throws -> Answer {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Answer, any Error>) in
                let ready = state.withLock { state -> Result<Answer, any Error>? in
                    if let result = state.result { return result }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            finish(.failure(CancellationError()))
        }
    }

    /// Stops listening (the waiting task, if any, is told it was cancelled).
    func close() { finish(.failure(CancellationError())) }

    private func finish(_ result: Result<Answer, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<Answer, any Error>? in
            guard state.result == nil else { return nil }
            state.result = result
            // Wakes the accept loop, which then closes the socket.
            if !state.closed { shutdown(socket, Int32(SHUT_RDWR)) }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(with: result)
    }

    private var isFinished: Bool { state.withLock { $0.result != nil } }

    private func serve() {
        defer {
            state.withLock { state in
                state.closed = true
                Glibc.close(socket)
            }
        }
        while !isFinished {
            let connection = accept(socket, nil, nil)
            if connection < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return
            }
            _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
            let admitted = reading.withLock { count -> Bool in
                guard count < Self.maximumConnections else { return false }
                count += 1
                return true
            }
            guard admitted else {
                Glibc.close(connection)
                continue
            }
            let thread = Thread { [self] in
                if let query = handle(connection) { finish(.success(query)) }
                Glibc.close(connection)
                reading.withLock { $0 -= 1 }
            }
            thread.name = "spark-oidc-redirect-connection"
            thread.start()
        }
    }

    /// Reads one request's head (bounded, within ``connectionDeadline`` in all), answers it, and
    /// returns the query of a GET to the redirect path that carries this sign-in's state.
    private func handle(_ connection: Int32) -> Answer? {
        let deadline = ContinuousClock.now + Self.connectionDeadline
        var head = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while head.count < 16 * 1024, !head.containsTerminator {
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { break }
            let (seconds, attoseconds) = left.components
            var timeout = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
            if timeout.tv_sec == 0, timeout.tv_usec == 0 { timeout.tv_usec = 1 }
            setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let count = read(connection, &buffer, buffer.count)
            guard count > 0 else { break }
            head += buffer[..<count]
        }
        let line = String(decoding: head.prefix { $0 != 0x0D && $0 != 0x0A }, as: UTF8.self)
        let parts = line.split(separator: " ")
        guard parts.count == 3, parts[0] == "GET", let components = URLComponents(string: String(parts[1])),
            components.path == path
        else {
            respond(connection, status: "404 Not Found", "Not found.")
            return nil
        }
        var query: Answer = [:]
        for item in components.queryItems ?? [] where query[item.name] == nil { query[item.name] = item.value ?? "" }
        // RFC 6749 §10.12: only this sign-in's answer ends it; another is told and ignored.
        guard let state = query["state"], IDTokenCheck.constantTimeEqual(state, expectedState) else {
            respond(connection, status: "400 Bad Request", "This is not the answer to this sign-in.")
            return nil
        }
        let signedIn = query["code"] != nil
        respond(
            connection, status: "200 OK",
            signedIn ? "You are signed in. You can close this window and return to the app." : "Sign-in did not complete.")
        return query
    }

    private func respond(_ connection: Int32, status: String, _ message: String) {
        let body = "<!doctype html><meta charset=utf-8><title>Spark</title><p>\(message)</p>"
        let response =
            "HTTP/1.1 \(status)\r\nContent-Type: text/html; charset=utf-8\r\nCache-Control: no-store\r\n"
            + "Referrer-Policy: no-referrer\r\nConnection: close\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
        _ = Array(response.utf8).withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
    }
}

extension [UInt8] {
    fileprivate var containsTerminator: Bool {
        guard count >= 4 else { return false }
        for index in 0...(count - 4)
        where self[index] == 0x0D && self[index + 1] == 0x0A && self[index + 2] == 0x0D && self[index + 3] == 0x0A {
            return true
        }
        return false
    }
}
