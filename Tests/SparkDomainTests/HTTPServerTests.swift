import CSparkHTTP
import Foundation
import SparkDomainServer
import SparkLock
import SparkTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// spark-domaind's own HTTP/1.1 server (CSparkHTTP.c): how it frames requests, refuses what two
/// parsers could read two ways, and keeps a connection's requests in order.
@Suite("spark-domaind: the HTTP server")
struct HTTPServerTests {
    /// Frames `text` as the server would: 1 whole, 0 more needed, or minus the refusal's status.
    static func frame(_ text: String, maximumBody: Int = 1 << 20) -> (result: Int32, consumed: Int, body: Int) {
        let bytes = Array(text.utf8)
        var consumed = 0
        var body = 0
        let result = spark_http_parse(bytes, bytes.count, maximumBody, &consumed, &body)
        return (result, consumed, body)
    }

    /// Frames `text` as the server does when it arrives `piece` bytes at a time.
    static func frameInPieces(_ text: String, piece: Int, maximumBody: Int = 1 << 20) -> [Int] {
        let bytes = Array(text.utf8)
        var consumed = 0
        var body = 0
        let result = spark_http_parse_in_pieces(bytes, bytes.count, maximumBody, min(piece, bytes.count + 1), &consumed, &body)
        return [Int(result), consumed, body]
    }

    /// A C error message is checked as it is formatted: a name that would be cut is refused with
    /// a message saying so (never a CA named by a cut name), and the message fits its buffer.
    @Test func aCertificateNameTooLongIsRefusedNotCut() {
        var error = [CChar](repeating: 0x7F, count: 40)
        var ca: UnsafeMutablePointer<CChar>?
        var caKey: UnsafeMutablePointer<CChar>?
        var server: UnsafeMutablePointer<CChar>?
        var serverKey: UnsafeMutablePointer<CChar>?
        let name = String(repeating: "a", count: 400)
        let ok = name.withCString { common in
            spark_tls_make_certificates(common, [], 0, 10, 10, &ca, &caKey, &server, &serverKey, &error, 39)
        }
        #expect(ok == 0)
        #expect(ca == nil && caKey == nil && server == nil && serverKey == nil)
        let message = String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        #expect(message.hasPrefix("the common name is longer") && message.hasSuffix("..."), "\(message)")
        #expect(message.utf8.count == 38 && error[39] == 0x7F, "within its 39 bytes")
    }

    @Test func framingRefusesWhatTwoParsersCouldReadTwoWays() {
        let host = "Host: x\r\n"
        let cases: [(String, Int32)] = [
            ("GET / HTTP/1.1\r\n\(host)\r\n", 1),
            ("GET / HTTP/1.0\r\n\r\n", 1),
            ("GET / HTTP/1.1\r\n\(host)", 0),
            ("GET / HTTP/1.1\r\n\r\n", -400),  // no Host
            ("GET / HTTP/1.1\r\n\(host)\(host)\r\n", -400),
            ("POST / HTTP/1.1\r\n\(host)Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n", -400),
            ("POST / HTTP/1.1\r\n\(host)Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", -400),
            ("POST / HTTP/1.1\r\n\(host)Transfer-Encoding: gzip, chunked\r\n\r\n", -400),
            ("POST / HTTP/1.1\r\n\(host)Content-Length: 2\r\nContent-Length: 3\r\n\r\nabc", -400),
            ("POST / HTTP/1.1\r\n\(host)Content-Length: 2\r\nContent-Length: 2\r\n\r\nab", 1),
            ("POST / HTTP/1.1\r\n\(host)Content-Length: +2\r\n\r\nab", -400),
            ("POST / HTTP/1.1\r\n\(host)Content-Length: 2, 2\r\n\r\nab", -400),
            ("POST / HTTP/1.1\r\n\(host)Content-Length: 99999999999999999999\r\n\r\n", -413),
            ("POST / HTTP/1.1\r\n\(host)Content-Length: 2000000\r\n\r\n", -413),
            ("GET / HTTP/1.1\n\(host)\r\n", -400),  // a bare LF
            ("GET / HTTP/1.1\r\n\(host)X: a\rb\r\n\r\n", -400),  // a bare CR
            ("GET / HTTP/1.1\r\n\(host)X : a\r\n\r\n", -400),  // whitespace before the colon
            ("GET / HTTP/1.1\r\n\(host)X: a\r\n folded\r\n\r\n", -400),
            ("GET / HTTP/1.1\r\n\(host)X: a\u{1}b\r\n\r\n", -400),
            ("GET / HTTP/2.0\r\n\(host)\r\n", -400),
            ("GET / HTTX/1.1\r\n\(host)\r\n", -400),
            ("GET http://x/ HTTP/1.1\r\n\(host)\r\n", -400),
            ("GET  / HTTP/1.1\r\n\(host)\r\n", -400),
            ("G(T / HTTP/1.1\r\n\(host)\r\n", -400),
            ("GET /%00 HTTP/1.1\r\n\(host)\r\n", -400),
            ("GET /?a=%00 HTTP/1.1\r\n\(host)\r\n", -400),
            ("GET /?\(String(repeating: "a", count: 4097)) HTTP/1.1\r\n\(host)\r\n", -414),
            ("GET /?\((0..<65).map { "p\($0)=1" }.joined(separator: "&")) HTTP/1.1\r\n\(host)\r\n", -400),
            ("GET /\(String(repeating: "a", count: 9000))", -414),
            ("GET / HTTP/1.1\r\n\(host)X: \(String(repeating: "a", count: 9000))", -431),
            ("GET / HTTP/1.1\r\n\(host)\((0..<65).map { "X\($0): 1\r\n" }.joined())\r\n", -431),
            ("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", -400),
        ]
        for (request, expected) in cases {
            #expect(Self.frame(request).result == expected, "\(request.debugDescription)")
            // Read a few bytes at a time, the framing resumed at each read, the answer is the same.
            let whole = Self.frameInPieces(request, piece: Int.max)
            for piece in [1, 2, 3, 7, 64] {
                let pieces = Self.frameInPieces(request, piece: piece)
                #expect(pieces == whole, "\(request.debugDescription) in pieces of \(piece)")
            }
        }
        // A sized body is framed by its length, and what follows is the next request's.
        let two = "POST / HTTP/1.1\r\n\(host)Content-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\n\r\n"
        let framed = Self.frame(two)
        #expect(framed.result == 1 && framed.body == 3 && framed.consumed == two.utf8.count - 18)
    }

    @Test func chunkedBodiesDecodeWhateverTheSplit() {
        let request =
            "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1\r\n,\r\nA\r\n0123456789\r\n0\r\nTrailer: t\r\n\r\n"
        let whole = Self.frame(request + "GET")
        #expect(whole.result == 1 && whole.body == 16 && whole.consumed == request.utf8.count, "\(whole)")
        for piece in [1, 2, 5, 13, 200] {
            #expect(Self.frameInPieces(request + "GET", piece: piece) == [1, request.utf8.count, 16], "pieces of \(piece)")
        }
        // Every prefix is "more needed", never a refusal nor a request.
        let bytes = Array(request.utf8)
        for cut in 0..<bytes.count {
            var consumed = 0
            var body = 0
            #expect(spark_http_parse(Array(bytes[0..<cut]), cut, 1 << 20, &consumed, &body) == 0, "cut at \(cut)")
        }
        let head = "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        #expect(Self.frame(head + "5\r\nhelloXY0\r\n\r\n").result == -400, "data longer than its size")
        #expect(Self.frame(head + "g\r\n").result == -400, "a size that is not hex")
        #expect(Self.frame(head + "\r\n").result == -400, "an empty size")
        #expect(Self.frame(head + "ffffffffffffffffff\r\n").result == -413, "a size past 64 bits")
        #expect(Self.frame(head + "41\r\n", maximumBody: 64).result == -413, "a chunk past the cap")
        #expect(Self.frame(head + "40\r\n", maximumBody: 64).result == 0, "a chunk up to the cap")
        #expect(Self.frame(head + "20\r\n" + String(repeating: "a", count: 32) + "\r\n21\r\n", maximumBody: 64).result == -413)
        #expect(Self.frame(head + "1\r\n" + String(repeating: "a", count: 2000)).result == -400)
        // A size line is hex digits, then optional whitespace and ";extensions", nothing else; no
        // control byte in an extension or a trailer.
        #expect(Self.frame(head + "5 zz\r\nhello\r\n0\r\n\r\n").result == -400, "a size followed by junk")
        #expect(Self.frame(head + "5 ;a=b\r\nhello\r\n0\r\n\r\n").result == 1, "whitespace before an extension")
        #expect(Self.frame(head + "5;a=\u{0}\r\nhello\r\n0\r\n\r\n").result == -400, "a NUL in an extension")
        #expect(Self.frame(head + "5\r\nhello\r\n0\r\nT: a\u{0}b\r\n\r\n").result == -400, "a NUL in a trailer")
    }

    /// A server answering with the method, the path, the query and the body it was given. Its idle
    /// and head timeouts are long (the head's is also a body's grace): the test's task, between
    /// two steps of a conversation, may wait a while for a thread of the cooperative pool when
    /// the whole suite runs.
    static func echoServer(idleTimeout: Int = 600) throws -> HTTPServer {
        try HTTPServer(
            options: HTTPServer.Options(
                host: "127.0.0.1", port: 0, idleTimeout: idleTimeout, headTimeout: idleTimeout, requestThreads: 2),
            handler: { request in
                let query = request.queryNames.map { "\($0)=\(request.query[$0] ?? "nil")" }.joined(separator: "&")
                let text = "\(request.method) \(request.path) \(query) \(String(decoding: request.body, as: UTF8.self))"
                return HTTPResponse(status: 200, contentType: "text/plain", body: Data(text.utf8))
            })
    }

    @Test func aConnectionsRequestsAreAnsweredInTheirOrder() async throws {
        let server = try Self.echoServer()
        let socket = RawHTTP.connect(port: Int(server.port))
        // Three requests in one write: a sized body, a chunked one, and one without.
        RawHTTP.write(
            socket,
            Array(
                ("POST /a%20b?x=1+2&y=%41&bare HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"
                    + "POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
                    + "GET /e HTTP/1.1\r\nHost: h\r\n\r\n").utf8))
        // The three answers, read to the last one's body.
        let received = await Fixtures.onThread { () -> String in
            var text = ""
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !text.hasSuffix("GET /e  ") {
                let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
                if count <= 0 { break }
                text += String(decoding: buffer[0..<count], as: UTF8.self)
            }
            return text
        }
        let bodies = received.components(separatedBy: "HTTP/1.1 200 OK\r\n").dropFirst().map {
            $0.components(separatedBy: "\r\n\r\n").last ?? ""
        }
        #expect(bodies == ["POST /a%20b x=1 2&y=A&bare=nil hello", "POST /c  abcde", "GET /e  "], "\(received)")
        close(socket)
        // HEAD: the length GET would send, and no body (read to the end of the connection).
        let head = RawHTTP.connect(port: Int(server.port))
        RawHTTP.write(head, Array("HEAD /d HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n".utf8))
        let answer = await RawHTTP.read(head)
        #expect(answer.status == 200 && answer.headers["content-length"] == "9" && answer.body.isEmpty, "\(answer)")
        close(head)
        await server.stop()
    }

    @Test func expectContinueIsAnsweredBeforeTheBody() async throws {
        let server = try Self.echoServer()
        let socket = RawHTTP.connect(port: Int(server.port))
        RawHTTP.write(socket, Array("PUT /f HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n".utf8))
        let interim = await RawHTTP.read(socket)
        #expect(interim.status == 100, "\(interim)")
        RawHTTP.write(socket, Array("ok".utf8))
        let answer = await RawHTTP.read(socket)
        #expect(answer.status == 200 && answer.body == "PUT /f  ok")
        // Too large: refused at once, without waiting for the body, and the connection closes.
        RawHTTP.write(socket, Array("PUT /f HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 9999999\r\n\r\n".utf8))
        let refused = await RawHTTP.read(socket)
        #expect(refused.status == 413 && refused.headers["connection"] == "close")
        close(socket)
        await server.stop()
    }

    /// One token sent from many addresses: each address has a budget of its own, but the head
    /// check charges the body to the token's user too, so the user's bodies held at once stop at
    /// one address's share (4 MiB here, 1 MiB each: four admitted, the fifth 429) wherever they
    /// come from; another user, from another address, is admitted; and a body that ends gives
    /// its room back.
    @Test func oneUsersBodiesShareOneBudgetFromAnyAddress() async throws {
        let server = try HTTPServer(
            options: HTTPServer.Options(
                host: "127.0.0.1", port: 0, idleTimeout: 600, maximumBody: 2 << 20, headTimeout: 600,
                minimumBodyRate: 0, perAddressBodyBudget: 4 << 20, requestThreads: 2),
            headCheck: { request in .admit(chargedTo: request.headers["authorization"]) },
            handler: { request in HTTPResponse(status: 200, contentType: "text/plain", body: Data("\(request.body.count)".utf8)) }
        )
        func start(_ user: String, from address: String) async -> (socket: Int32, status: Int) {
            let socket = RawHTTP.connect(port: Int(server.port), from: address)
            RawHTTP.write(
                socket,
                Array(
                    "PUT /u HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer \(user)\r\nExpect: 100-continue\r\nContent-Length: \(1 << 20)\r\n\r\n"
                        .utf8))
            return (socket, await RawHTTP.read(socket).status)
        }
        var held: [Int32] = []
        var statuses: [Int] = []
        for index in 1...5 {
            let (socket, status) = await start("mallory", from: "127.0.0.\(10 + index)")
            held.append(socket)
            statuses.append(status)
        }
        #expect(statuses == [100, 100, 100, 100, 429], "one user from five addresses: \(statuses)")
        let other = await start("alice", from: "127.0.0.20")
        #expect(other.status == 100, "another user has a budget of her own")
        held.append(other.socket)
        // One of mallory's bodies ends: its room comes back.
        RawHTTP.write(held[0], [UInt8](repeating: 0x61, count: 1 << 20))
        #expect(await RawHTTP.read(held[0]).body == "\(1 << 20)")
        let again = await start("mallory", from: "127.0.0.30")
        #expect(again.status == 100, "room again once a body ended")
        held.append(again.socket)
        // And one address's budget holds whatever users it names.
        var fromOne: [Int] = []
        for index in 1...5 {
            let (socket, status) = await start("user\(index)", from: "127.0.0.40")
            held.append(socket)
            fromOne.append(status)
        }
        #expect(fromOne == [100, 100, 100, 100, 429], "five users from one address: \(fromOne)")
        for socket in held { close(socket) }
        await server.stop()
    }

    @Test func aClientGoneWhileItsRequestIsOutIsClosedAndItsAnswerDropped() async throws {
        let release = Locked<CheckedContinuation<Void, Never>?>(nil)
        let answered = Locked(0)
        let server = try HTTPServer(
            options: HTTPServer.Options(host: "127.0.0.1", port: 0, idleTimeout: 600, headTimeout: 600, requestThreads: 2),
            handler: { _ in
                await withCheckedContinuation { continuation in release.withLock { $0 = continuation } }
                answered.withLock { $0 += 1 }
                return HTTPResponse(status: 200, body: Data("late".utf8))
            })
        let socket = RawHTTP.connect(port: Int(server.port))
        RawHTTP.write(socket, Array("GET /wait HTTP/1.1\r\nHost: h\r\n\r\n".utf8))
        #expect(await eventually(seconds: 10) { release.withLock { $0 != nil } })
        #expect(server.connections == 1)
        // A reset (linger 0): the server lets the connection go though its request is out.
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(socket, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        close(socket)
        #expect(await eventually(seconds: 10) { server.connections == 0 }, "the reset connection is closed")
        // The answer then goes nowhere, and the server still serves and stops cleanly.
        release.withLock { $0 }?.resume()
        #expect(await eventually(seconds: 10) { answered.withLock { $0 } == 1 && server.requestsInFlight == 0 })
        await server.stop()
    }
}
