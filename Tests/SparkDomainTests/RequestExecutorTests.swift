import Foundation
import SparkDomainEngine
import SparkDomainServer
import SparkLock
import SparkTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 28: the store's calls block their thread. On Swift's cooperative pool (a thread per
/// core) as many slow queries as cores stalled every other request and every long-poll wake-up
/// of the instance. Requests now run on the server's own threads (``RequestExecutor``): more
/// blocked requests than this machine has cores hold some of them, and a quick request and a
/// long-poll's wake-up are still served while they block.
@Suite("Requests off the cooperative pool")
struct RequestExecutorTests {
    @Test func blockedRequestsDelayNoOtherRequestNorAWakeUp() async throws {
        let blockers = ProcessInfo.processInfo.activeProcessorCount + 2
        let released = Locked(false)
        // Were the requests run on the cooperative pool, they would block it whole, the test's
        // task included: there they give up 60 s after that task last moved, so the test fails
        // rather than hangs. On the request threads, where they belong, they wait to be released
        // (ten minutes at most): a neighbour holding the pool for over a minute under
        // AddressSanitizer once made them give up before the test could see them block.
        let lastMoved = Locked(Date())
        @Sendable func moved() { lastMoved.withLock { $0 = Date() } }
        let blocking = Locked(0)
        let waiter = Locked<CheckedContinuation<Void, Never>?>(nil)
        let server = try HTTPServer(
            options: HTTPServer.Options(
                host: "127.0.0.1", port: 0, idleTimeout: 60, headTimeout: 60, requestThreads: blockers + 4),
            handler: { request in
                switch request.path {
                case "/block":
                    // A slow query: the thread is held until the test lets go (or its task stalled).
                    blocking.withLock { $0 += 1 }
                    defer { blocking.withLock { $0 -= 1 } }
                    let giveUpAfter: TimeInterval = isRequestThread() ? 600 : patience(60)
                    while !released.withLock({ $0 }), Date().timeIntervalSince(lastMoved.withLock { $0 }) < giveUpAfter {
                        usleep(1000)
                    }
                    return HTTPResponse(status: 200, contentType: "text/plain", body: Data("done".utf8))
                case "/wait":
                    // A long-poll: waits without a thread until another request wakes it.
                    await withCheckedContinuation { continuation in waiter.withLock { $0 = continuation } }
                    return HTTPResponse(status: 200, contentType: "text/plain", body: Data("woken".utf8))
                case "/wake":
                    let continuation = waiter.withLock { current in
                        defer { current = nil }
                        return current
                    }
                    continuation?.resume()
                    return HTTPResponse(
                        status: 200, contentType: "text/plain", body: Data(continuation == nil ? "none".utf8 : "ok".utf8))
                default:
                    return HTTPResponse(status: 200, contentType: "text/plain", body: Data("fast".utf8))
                }
            })
        func send(_ path: String) -> Int32 {
            let socket = RawHTTP.connect(port: Int(server.port))
            RawHTTP.write(socket, Array("GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            return socket
        }
        let held = (0..<blockers).map { _ in send("/block") }
        defer { for socket in held { close(socket) } }
        #expect(await eventually(seconds: 10) { blocking.withLock { $0 } == blockers }, "every blocking request runs at once")
        moved()
        // While they block: a quick request is answered, and a long-poll is woken by another.
        let quick = send("/fast")
        defer { close(quick) }
        let fast = await RawHTTP.read(quick)
        moved()
        #expect(fast.status == 200 && fast.body == "fast", "a quick request waits for no blocked one")
        #expect(blocking.withLock { $0 } == blockers, "answered while every blocking request still blocks")
        let poll = send("/wait")
        defer { close(poll) }
        #expect(await eventually(seconds: 10) { waiter.withLock { $0 != nil } }, "the long-poll waits")
        moved()
        let wake = send("/wake")
        defer { close(wake) }
        #expect(await RawHTTP.read(wake).body == "ok")
        moved()
        #expect(await RawHTTP.read(poll).body == "woken", "the long-poll's wake-up waits for no blocked request")
        #expect(blocking.withLock { $0 } == blockers && !released.withLock { $0 }, "all still blocked meanwhile")
        released.withLock { $0 = true }
        for socket in held { #expect(await RawHTTP.read(socket).body == "done") }
        await server.stop()
    }
}

/// Whether the calling thread is one of a ``RequestExecutor``'s: each allows transactions to
/// block it, and no thread of the cooperative pool does.
private func isRequestThread() -> Bool { TransactionThreads.mayBlockHere() }
