public import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Plain HTTP/1.1 over a raw socket, for tests that send what no well-behaved client would:
/// malformed requests, bodies cut off, connections held open.
public enum RawHTTP {
    /// An answer: its status (0 when none came), headers (names lowercased) and body.
    public struct Answer: Sendable {
        /// The status code.
        public var status: Int
        /// The headers.
        public var headers: [String: String]
        /// The body.
        public var body: String
    }

    /// Opens a TCP connection to 127.0.0.1:`port`, from `source` (another loopback address,
    /// such as 127.0.0.2, to stand for another client) when given; -1 when it cannot.
    public static func connect(port: Int, from source: String? = nil) -> Int32 {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return -1 }
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0 else {
                close(socket)
                return -1
            }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if connected != 0 {
            close(socket)
            return -1
        }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return socket
    }

    /// Writes bytes to a socket.
    @discardableResult
    public static func write(_ socket: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written <= 0 { return false }
            offset += written
        }
        return true
    }

    /// Reads one response (headers and a Content-Length body) from a socket, on a thread of
    /// its own (the read blocks).
    public static func read(_ socket: Int32) async -> Answer {
        await Fixtures.onThread { readBlocking(socket) }
    }

    /// ``read(_:)``, with how long the read itself took, timed on its own thread (so the time
    /// the awaiting task then waits for a thread of the cooperative pool is not counted).
    public static func timedRead(_ socket: Int32) async -> (answer: Answer, took: Duration) {
        await Fixtures.onThread {
            let clock = ContinuousClock()
            let started = clock.now
            let answer = readBlocking(socket)
            return (answer, clock.now - started)
        }
    }

    static func readBlocking(_ socket: Int32) -> Answer {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        var headerEnd: Int?
        var expected = Int.max
        while received.count < expected {
            let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            received += buffer[0..<count]
            if headerEnd == nil, let end = find([13, 10, 13, 10], in: received) {
                headerEnd = end + 4
                let head = String(decoding: received[0..<end], as: UTF8.self)
                let length =
                    head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                    .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
                expected = end + 4 + length
            }
        }
        guard let headerEnd else { return Answer(status: 0, headers: [:], body: "") }
        let head = String(decoding: received[0..<(headerEnd - 4)], as: UTF8.self).split(separator: "\r\n")
        let status = head.first.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return Answer(status: status, headers: headers, body: String(decoding: received[headerEnd...], as: UTF8.self))
    }

    /// One request on a new connection, answered and closed (waiting on a thread of its own).
    public static func request(
        port: Int, method: String, path: String, headers: [String: String] = [:], body: Data = Data()
    ) async -> Answer {
        await Fixtures.onThread { requestBlocking(port: port, method: method, path: path, headers: headers, body: body) }
    }

    static func requestBlocking(port: Int, method: String, path: String, headers: [String: String], body: Data) -> Answer {
        let socket = connect(port: port)
        guard socket >= 0 else { return Answer(status: 0, headers: [:], body: "cannot connect") }
        defer { close(socket) }
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if !body.isEmpty || method == "POST" { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        write(socket, Array(head.utf8) + Array(body))
        return readBlocking(socket)
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for index in 0...(haystack.count - needle.count) where Array(haystack[index..<(index + needle.count)]) == needle {
            return index
        }
        return nil
    }
}
