import CSparkCurl
import Foundation
import SparkLock

/// How a client trusts its domain's TLS certificate: only what its configuration names, never
/// the machine's store (a domain is its own authority).
public enum DomainTrust: Sendable, Equatable {
    /// Certificates chaining to this PEM CA file (`spark-domaind init` writes `ca.pem`), with
    /// the host name checked.
    case certificateAuthority(path: String)
    /// A server whose public key has this SHA-256 (base64, as curl's `sha256//…` pins): the key
    /// is the trust, chain and name are not checked.
    case pinnedKey(sha256: String)
    /// Both: the CA and the key.
    case certificateAuthorityAndPin(path: String, sha256: String)
    /// Plain HTTP, allowed only to a loopback address (development and tests).
    case plainLoopback
}

/// HTTP requests over libcurl's multi interface on a thread of its own (see `CSparkCurl.h`):
/// connections stay open and are reused, long-polls hold no thread, and a cancelled task
/// stops waiting at once (its transfer ends by its own timeout).
final class HTTPTransport: Sendable {
    struct Response: Sendable {
        var status: Int
        var body: Data
        var retryAfter: String?
        var cacheControl: String? = nil
    }

    /// No response arrived: the connection failed, timed out or was refused.
    struct Failure: Error {
        var reason: String
        /// The connection was never made (refused, unresolvable): the request was not sent.
        var nothingSent = false
    }

    /// The C client; freed in `deinit`, used from any thread (the C side locks).
    nonisolated(unsafe) private let client: OpaquePointer

    convenience init(trust: DomainTrust, connectTimeout: Duration = .seconds(5)) throws {
        try self.init(trust: trust, systemStore: false, connectTimeout: connectTimeout)
    }

    /// A client that trusts the machine's CA store (`systemStore`), for a server on the public
    /// internet such as an identity provider, or what `trust` names.
    init(trust: DomainTrust, systemStore: Bool, connectTimeout: Duration) throws {
        let caFile: String?
        let pin: String?
        switch trust {
        case .certificateAuthority(let path): (caFile, pin) = (path, nil)
        case .pinnedKey(let sha256): (caFile, pin) = (nil, "sha256//" + sha256)
        case .certificateAuthorityAndPin(let path, let sha256): (caFile, pin) = (path, "sha256//" + sha256)
        case .plainLoopback: (caFile, pin) = (nil, nil)
        }
        let milliseconds = Int(connectTimeout.components.seconds * 1000)
        guard let client = spark_curl_client_new(caFile, pin, systemStore ? 1 : 0, milliseconds) else {
            throw DomainError(.unavailable, "libcurl cannot start")
        }
        self.client = client
    }

    deinit { spark_curl_client_free(client) }

    /// One request; throws ``Failure`` when no response came, `CancellationError` on cancel.
    /// At most `maximumResponse` bytes of body are read (nil: 64 MiB); a larger answer fails.
    func send(
        method: String, url: String, headers: [String], body: Data?, timeout: Duration, maximumResponse: Int? = nil
    ) async throws -> Response {
        let box = Pending()
        let timeoutMilliseconds = Int(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Response, any Error>) in
                guard box.store(continuation) else { return }
                let context = Unmanaged.passRetained(box).toOpaque()
                let started = withCStrings(headers) { lines in
                    (body ?? Data()).withUnsafeBytes { bytes in
                        spark_curl_request(
                            client, method, url, lines, lines.count, bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count,
                            timeoutMilliseconds, maximumResponse ?? 0, transportDone, context)
                    }
                }
                if started == 0 {
                    Unmanaged<Pending>.fromOpaque(context).release()
                    box.finish(.failure(Failure(reason: "the request could not be queued")))
                }
            }
        } onCancel: {
            box.finish(.failure(CancellationError()))
        }
    }

    /// The continuation of one request, resumed exactly once: by the answer or by cancellation.
    final class Pending: Sendable {
        private let state = Locked<(continuation: CheckedContinuation<Response, any Error>?, done: Bool)>((nil, false))

        /// Keeps the continuation; false (and resumed with cancellation) if already cancelled.
        func store(_ continuation: CheckedContinuation<Response, any Error>) -> Bool {
            let cancelled = state.withLock { state -> Bool in
                if state.done { return true }
                state.continuation = continuation
                return false
            }
            if cancelled { continuation.resume(throwing: CancellationError()) }
            return !cancelled
        }

        func finish(_ result: Result<Response, any Error>) {
            let continuation = state.withLock { state -> CheckedContinuation<Response, any Error>? in
                defer {
                    state.continuation = nil
                    state.done = true
                }
                return state.continuation
            }
            continuation?.resume(with: result)
        }
    }
}

/// Called by the C client on its thread when a request ends.
private func transportDone(
    _ context: UnsafeMutableRawPointer?, _ status: Int, _ body: UnsafePointer<UInt8>?, _ length: Int,
    _ retryAfter: UnsafePointer<CChar>?, _ cacheControl: UnsafePointer<CChar>?, _ error: UnsafePointer<CChar>?
) {
    guard let context else { return }
    let box = Unmanaged<HTTPTransport.Pending>.fromOpaque(context).takeRetainedValue()
    if status <= 0 {
        // -6 and -7: CURLE_COULDNT_RESOLVE_HOST and CURLE_COULDNT_CONNECT.
        box.finish(
            .failure(
                HTTPTransport.Failure(
                    reason: error.map { String(cString: $0) } ?? "no response", nothingSent: status == -6 || status == -7)))
        return
    }
    let data = body.map { Data(bytes: $0, count: length) } ?? Data()
    box.finish(
        .success(
            .init(
                status: status, body: data, retryAfter: retryAfter.map { String(cString: $0) },
                cacheControl: cacheControl.map { String(cString: $0) })))
}

/// Runs `body` with `strings` as an array of C strings.
private func withCStrings<T>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) -> T) -> T {
    let copies = strings.map { strdup($0) }
    defer { for copy in copies { free(copy) } }
    return body(copies.map { UnsafePointer($0) })
}
