import Foundation
import SparkLock

#if canImport(Glibc)
    import Glibc
#endif

/// The loopback redirect of a native app's authorization request (RFC 8252 §7.3): a listener on
/// `127.0.0.1` on a port the system picks, for the one request the browser makes to it after
/// the user signed in. It runs on a thread of its own (its `accept` and `read` block), answers
/// the browser with a short page, and hands over the query of the first request to its path.
final class LoopbackRedirect: Sendable {
    /// What the provider sent back: the query's parameters.
    typealias Answer = [String: String]

    /// The URI to register with the provider and send as `redirect_uri`.
    let redirectURI: String
    private let socket: Int32
    private let path: String
    /// The waiting task, the outcome, and whether the listening socket is closed: the socket is
    /// shut down (to wake `accept`) and closed only under this lock, so neither happens to a
    /// descriptor number the process has since reused.
    private let state = Locked<
        (waiter: CheckedContinuation<Answer, any Error>?, result: Result<Answer, any Error>?, closed: Bool)
    >((nil, nil, false))

    /// A listener on `127.0.0.1:port` (`0`: a free port), answering at `path`.
    init(port: UInt16 = 0, path: String = "/callback") throws {
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
                if errno == EINTR { continue }
                return
            }
            if let query = handle(connection) {
                finish(.success(query))
            }
            Glibc.close(connection)
        }
    }

    /// Reads one request's head (bounded, with a timeout), answers it, and returns the query of
    /// a GET to the redirect path.
    private func handle(_ connection: Int32) -> Answer? {
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var head = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while head.count < 16 * 1024, !head.containsTerminator {
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
