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
                    if operation.answersBytes {
                        response = try await downloadBlob(try Call(operation: operation, request: request, router: self))
                    } else if operation == .readMailbox {
                        switch try await readMailbox(try Call(operation: operation, request: request, router: self)) {
                        case .entries(let entries):
                            response = try Self.answer(entries)
                        case .wait(let poll):
                            // A long-poll that waits is answered later; its request is not kept.
                            return deferred(
                                poll, Finish(started: started, method: request.method, address: request.clientAddress))
                        }
                    } else {
                        response = HTTPResponse(status: 200, body: try await dispatch(operation, request))
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
        let refusal: HTTPResponse?
        var route = "unknown"
        if let operation = DomainOperation.matching(method: request.method, path: request.path) {
            route = operation.rawValue
            refusal = admission(operation, request).map { Self.refusal($0) }
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
        }
        return refusal
    }

    /// Why `operation` may not have its body read, if it may not.
    private func admission(_ operation: DomainOperation, _ request: HTTPRequest) -> DomainError? {
        switch operation.request {
        case .none, .query: return DomainError(.invalidRequest, "\(operation.path) takes no body")
        case .body, .upload: break
        }
        do {
            switch operation.access {
            case .anyone:
                if let length = request.headers["content-length"].flatMap({ Int($0) }), length > Self.anonymousBodyLimit {
                    return DomainError(
                        .tooLarge, "\(operation.path) takes at most \(Self.anonymousBodyLimit) bytes without a token")
                }
                return nil
            case .operator:
                try requireOperator(request)
                return nil
            case .user, .endpoint:
                let token = try Call(operation: operation, request: request, router: self).token()
                return domain.precheck(token: token)
            }
        } catch {
            return error as? DomainError ?? DomainError(.invalidRequest, "\(error)")
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

    // MARK: Dispatch

    private func dispatch(_ operation: DomainOperation, _ request: HTTPRequest) async throws -> Data {
        let call = try Call(operation: operation, request: request, router: self)
        switch operation {
        case .policy:
            try call.none()
            return try WireCoder.encode(try await domain.policy())
        case .validate:
            try call.none()
            return try WireCoder.encode(try await domain.validate(token: try call.token()))
        case .testToken:
            let body = try call.body(Wire.UserID.self)
            try call.limit(name: body.userID)
            return try WireCoder.encode(try await domain.testToken(userID: body.userID))
        case .signUp:
            let body = try call.body(SignUpRequest.self)
            try call.limit(name: body.userName)
            try await domain.signUp(body)
            return try call.empty()
        case .activate:
            let body = try call.body(Wire.Activation.self)
            try call.limit(name: body.userName)
            try await domain.activate(userName: body.userName, code: body.code)
            return try call.empty()
        case .resendActivationCode:
            let body = try call.body(Wire.UserName.self)
            try call.limit(name: body.userName)
            try await domain.resendActivationCode(userName: body.userName)
            return try call.empty()
        case .logIn:
            let body = try call.body(Wire.LogIn.self)
            try call.limit(name: body.userName)
            return try WireCoder.encode(try await domain.logIn(userName: body.userName, password: body.password))
        case .refresh:
            let body = try call.body(Wire.RefreshToken.self)
            return try WireCoder.encode(try await domain.refresh(refreshToken: body.refreshToken))
        case .revoke:
            let body = try call.body(Wire.RefreshToken.self)
            try await domain.revoke(refreshToken: body.refreshToken)
            return try call.empty()
        case .requestPasswordReset:
            let body = try call.body(Wire.Email.self)
            try call.limit(name: body.email)
            try await domain.requestPasswordReset(email: body.email)
            return try call.empty()
        case .resetPassword:
            let body = try call.body(Wire.PasswordReset.self)
            try call.limit(name: body.email)
            try await domain.resetPassword(email: body.email, code: body.code, newPassword: body.newPassword)
            return try call.empty()
        case .registerEndpoint:
            let body = try call.body(EndpointRegistration.self)
            return try WireCoder.encode(try await domain.registerEndpoint(token: try call.token(), registration: body))
        case .endpoints:
            try call.none()
            let (token, endpoint) = try call.credential()
            return try WireCoder.encode(Wire.Endpoints(endpoints: try await domain.endpoints(token: token, endpointID: endpoint)))
        case .setEndpointNickname:
            let body = try call.body(Wire.Nickname.self)
            let (token, endpoint) = try call.credential()
            try await domain.setEndpointNickname(token: token, endpointID: endpoint, target: body.target, nickname: body.nickname)
            return try call.empty()
        case .deregisterEndpoint:
            let body = try call.body(Wire.Removal.self)
            let (token, endpoint) = try call.credential()
            try await domain.deregisterEndpoint(
                token: token, endpointID: endpoint, target: body.target, signature: body.signature)
            return try call.empty()
        case .publishEndpointCredential:
            let body = try call.body(Wire.Credential.self)
            let (token, endpoint) = try call.credential()
            try await domain.publishEndpointCredential(token: token, endpointID: endpoint, credential: body.credential)
            return try call.empty()
        case .approveEndpoint:
            let body = try call.body(Wire.Approval.self)
            let (token, endpoint) = try call.credential()
            try await domain.approveEndpoint(token: token, endpointID: endpoint, target: body.target, approval: body.approval)
            return try call.empty()
        case .checkIn:
            _ = try call.body(Wire.Empty.self)
            let (token, endpoint) = try call.credential()
            return try WireCoder.encode(try await domain.checkIn(token: token, endpointID: endpoint))
        case .fetchKeyBlob:
            let body = try call.body(Wire.BlobName.self)
            let (token, endpoint) = try call.credential()
            try call.limit(name: endpoint)
            return try WireCoder.encode(try await domain.fetchKeyBlob(token: token, endpointID: endpoint, name: body.name))
        case .putKeyBlob:
            let body = try call.body(Wire.PutBlob.self)
            let (token, endpoint) = try call.credential()
            let version = try await domain.putKeyBlob(
                token: token, endpointID: endpoint, name: body.name, data: body.data, expectedVersion: body.expectedVersion)
            return try WireCoder.encode(Wire.Version(version: version))
        case .putKeyBlobs:
            let body = try call.body(Wire.PutBlobs.self)
            let (token, endpoint) = try call.credential()
            return try WireCoder.encode(
                Wire.Versions(versions: try await domain.putKeyBlobs(token: token, endpointID: endpoint, writes: body.writes)))
        case .evaluatePasscode:
            let body = try call.body(Wire.BlindedPasscode.self)
            let (token, endpoint) = try call.credential()
            try call.limit(name: endpoint)
            return try WireCoder.encode(
                try await domain.evaluatePasscode(
                    token: token, endpointID: endpoint, blindedElement: body.blindedElement, keyID: body.keyID))
        case .retirePasscodeKeys:
            let body = try call.body(Wire.PasscodeRetirement.self)
            let (token, endpoint) = try call.credential()
            try await domain.retirePasscodeKeys(
                token: token, endpointID: endpoint, challenge: body.challenge, signature: body.signature, version: body.version)
            return try call.empty()
        case .proveUnlock:
            let body = try call.body(Wire.UnlockProof.self)
            let (token, endpoint) = try call.credential()
            try await domain.proveUnlock(token: token, endpointID: endpoint, challenge: body.challenge, signature: body.signature)
            return try call.empty()
        case .publishIdentity:
            let body = try call.body(PublishedIdentity.self)
            let (token, endpoint) = try call.credential()
            try await domain.publishIdentity(token: token, endpointID: endpoint, identity: body)
            return try call.empty()
        case .identity:
            let query = try call.query(Wire.UserID.self)
            let (token, endpoint) = try call.credential()
            let identity = try await domain.identity(token: token, endpointID: endpoint, userID: query.userID)
            return try WireCoder.encode(Wire.Identity(identity: identity))
        case .resetIdentity:
            let body = try call.body(Wire.ResetRequest.self)
            let (token, endpoint) = try call.credential()
            return try WireCoder.encode(
                try await domain.resetIdentity(token: token, endpointID: endpoint, signature: body.signature))
        case .cancelIdentityReset:
            _ = try call.body(Wire.Empty.self)
            let (token, endpoint) = try call.credential()
            try await domain.cancelIdentityReset(token: token, endpointID: endpoint)
            return try call.empty()
        case .pendingIdentityReset:
            let query = try call.query(Wire.UserID.self)
            let (token, endpoint) = try call.credential()
            return try WireCoder.encode(
                Wire.PendingReset(
                    pending: try await domain.pendingIdentityReset(token: token, endpointID: endpoint, userID: query.userID)))
        case .transparencyKeys:
            try call.none()
            let (token, endpoint) = try call.credential()
            return try WireCoder.encode(try await domain.transparencyKeys(token: token, endpointID: endpoint))
        case .identityProof:
            let query = try call.query(Wire.IdentityProofQuery.self)
            let (token, endpoint) = try call.credential()
            var auditor: Data?
            if let hex = query.auditor {
                guard let key = Self.hexBytes(hex), key.count == 64 else {
                    throw DomainError(.invalidRequest, "an auditor key is 64 bytes in hex (P-256 x ‖ y)")
                }
                auditor = key
            }
            let proof = try await domain.identityProof(
                token: token, endpointID: endpoint, userID: query.userID, since: try Self.logSize(query.since),
                auditor: auditor)
            return try WireCoder.encode(Wire.EncodedProof(proof: TransparencyCodec.encode(proof)))
        case .transparencyUpdates:
            let query = try call.query(Wire.UpdatesQuery.self)
            let found = try await domain.transparencyUpdates(after: query.after, limit: query.limit)
            return try WireCoder.encode(
                Wire.EncodedUpdates(
                    updates: TransparencyAudit.encode(found.updates), head: found.head.map(TransparencyCodec.encode)))
        case .postAudit:
            let body = try call.body(Wire.Audit.self)
            guard body.size >= 1 else { throw DomainError(.invalidRequest, "a head has 1 entry or more") }
            try await domain.recordAudit(size: UInt64(body.size), auditorKey: body.auditorKey, signature: body.signature)
            return try call.empty()
        case .transparencyHeads:
            let query = try call.query(Wire.HeadsQuery.self)
            let (token, endpoint) = try call.credential()
            let heads = try await domain.transparencyHeads(
                token: token, endpointID: endpoint, since: try Self.logSize(query.since))
            return try WireCoder.encode(
                Wire.EncodedHeads(
                    latest: TransparencyCodec.encode(heads.latest),
                    consistency: TransparencyCodec.encode(nodes: heads.consistency),
                    at: heads.at.map(TransparencyCodec.encode)))
        case .identityKeyVersion:
            try call.none()
            let (token, endpoint) = try call.credential()
            return try WireCoder.encode(
                Wire.Version(version: try await domain.identityKeyVersion(token: token, endpointID: endpoint)))
        case .postCommit:
            let body = try call.body(Wire.PostCommit.self)
            let (token, endpoint) = try call.credential()
            return try WireCoder.encode(
                Wire.Epoch(
                    epoch: try await domain.postCommit(
                        token: token, endpointID: endpoint, chatID: body.chatID, epoch: body.epoch, commit: body.commit,
                        welcome: body.welcome, add: body.add, remove: body.remove,
                        replacingRefused: body.replacingRefused ?? false)))
        case .publishKeyPackages:
            let body = try call.body(Wire.PublishKeyPackages.self)
            let (token, endpoint) = try call.credential()
            return try WireCoder.encode(
                Wire.Count(
                    count: try await domain.publishKeyPackages(
                        token: token, endpointID: endpoint, keyPackages: body.keyPackages, lastResort: body.lastResort)))
        case .claimKeyPackages:
            let body = try call.body(Wire.UserID.self)
            let (token, endpoint) = try call.credential()
            return try WireCoder.encode(
                Wire.ClaimedKeyPackages(
                    keyPackages: try await domain.claimKeyPackages(token: token, endpointID: endpoint, userID: body.userID)))
        case .keyPackageCount:
            try call.none()
            let (token, endpoint) = try call.credential()
            return try WireCoder.encode(Wire.Count(count: try await domain.keyPackageCount(token: token, endpointID: endpoint)))
        case .createChat:
            let body = try call.body(Wire.CreateChat.self)
            let (token, endpoint) = try call.credential()
            return try WireCoder.encode(
                try await domain.createChat(
                    token: token, endpointID: endpoint, chatID: body.chatID, participants: body.participants, posts: body.posts))
        case .updateMembers:
            let body = try call.body(Wire.UpdateMembers.self)
            let (token, endpoint) = try call.credential()
            return try WireCoder.encode(
                try await domain.updateMembers(
                    token: token, endpointID: endpoint, chatID: body.chatID, add: body.add, remove: body.remove, posts: body.posts
                ))
        case .post:
            let body = try call.body(Wire.Post.self)
            let (token, endpoint) = try call.credential()
            return try WireCoder.encode(
                try await domain.post(
                    token: token, endpointID: endpoint, chatID: body.chatID, kind: body.kind, payload: body.payload,
                    recipient: body.recipient, clientID: body.clientID))
        case .readMailbox:
            // `handle` begins mailbox reads itself (a long-poll's answer is deferred); here the
            // read is whole, waiting inside it.
            let read = try mailboxRead(call)
            return try WireCoder.encode(
                Wire.Entries(
                    entries: try await domain.readMailbox(
                        token: read.token, endpointID: read.endpoint, after: read.query.after, limit: read.query.limit,
                        wait: .seconds(read.query.wait))))
        case .chat:
            let query = try call.query(Wire.ChatID.self)
            let (token, endpoint) = try call.credential()
            return try WireCoder.encode(try await domain.chat(token: token, endpointID: endpoint, chatID: query.chatID))
        case .userStatus:
            try call.none()
            let (token, endpoint) = try call.credential()
            return try WireCoder.encode(try await domain.userStatus(token: token, endpointID: endpoint))
        case .dismissInfraction:
            let body = try call.body(Wire.InfractionID.self)
            let (token, endpoint) = try call.credential()
            try await domain.dismissInfraction(token: token, endpointID: endpoint, id: body.id)
            return try call.empty()
        case .report:
            let body = try call.body(Wire.ReportRequest.self)
            let (token, endpoint) = try call.credential()
            let id = try await domain.report(
                token: token, endpointID: endpoint, chatID: body.chatID, user: body.userID, reason: body.reason,
                messages: body.messages)
            return try WireCoder.encode(Wire.ReportID(id: id))
        case .createBlob:
            let body = try call.body(Wire.CreateBlob.self)
            let (token, endpoint) = try call.credential()
            return try WireCoder.encode(
                try await domain.createBlob(
                    token: token, endpointID: endpoint, chatID: body.chatID, blobID: body.blobID, size: body.size))
        case .uploadBlob:
            let query = try call.parameters(Wire.BlobPart.self)
            let (token, endpoint) = try call.credential()
            guard !call.request.body.isEmpty else { throw DomainError(.invalidRequest, "an upload's body is the part's bytes") }
            return try WireCoder.encode(
                try await domain.uploadBlob(
                    token: token, endpointID: endpoint, blobID: query.blobID, offset: query.offset, bytes: call.request.body))
        case .blobStatus:
            let query = try call.query(Wire.BlobID.self)
            let (token, endpoint) = try call.credential()
            return try WireCoder.encode(try await domain.blobStatus(token: token, endpointID: endpoint, blobID: query.blobID))
        case .setBlocked:
            let body = try call.body(Wire.SetBlocked.self)
            let (token, endpoint) = try call.credential()
            try await domain.setBlocked(token: token, endpointID: endpoint, userID: body.userID, blocked: body.blocked)
            return try call.empty()
        case .blockedUsers:
            try call.none()
            let (token, endpoint) = try call.credential()
            return try WireCoder.encode(
                Wire.BlockedUsers(users: try await domain.blockedUsers(token: token, endpointID: endpoint)))
        case .deleteBlob:
            let body = try call.body(Wire.BlobID.self)
            let (token, endpoint) = try call.credential()
            try await domain.deleteBlob(token: token, endpointID: endpoint, blobID: body.blobID)
            return try call.empty()
        default:
            return try await administer(operation, call)
        }
    }

    /// `GET /v1/blobs/download`: the `Range` asked (`bytes=START-END` or `bytes=START-`; at most
    /// a part of it, the first part without one) as a 206 with `Content-Range`.
    private func downloadBlob(_ call: Call) async throws -> HTTPResponse {
        let query = try call.query(Wire.BlobID.self)
        let (token, endpoint) = try call.credential()
        var offset: Int64 = 0
        var length = DomainEngine.blobPartSize
        if let range = call.request.headers["range"] {
            guard let (start, end) = Self.byteRange(range) else {
                throw DomainError(.rangeNotSatisfiable, "a Range is one 'bytes=START-END' or 'bytes=START-'")
            }
            offset = start
            if let end { length = Int(min(end - start + 1, Int64(DomainEngine.blobPartSize))) }
        }
        let (bytes, size) = try await domain.readBlob(
            token: token, endpointID: endpoint, blobID: query.blobID, offset: offset, length: length)
        return HTTPResponse(
            status: 206, contentType: "application/octet-stream", body: bytes,
            headers: [("Content-Range", "bytes \(offset)-\(offset + Int64(bytes.count) - 1)/\(size)")])
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

    private func administer(_ operation: DomainOperation, _ call: Call) async throws -> Data {
        try call.requireOperator()
        switch operation {
        case .adminPolicy:
            try call.none()
            return try WireCoder.encode(try domain.storedPolicy())
        case .adminSetPolicy:
            try domain.setPolicy(try call.body(DomainPolicy.self))
            return try call.empty()
        case .adminAccounts:
            try call.none()
            return try WireCoder.encode(Wire.Accounts(accounts: try domain.accounts()))
        case .adminEndpoints:
            let query = try call.query(Wire.UserID.self)
            return try WireCoder.encode(Wire.Endpoints(endpoints: try domain.endpoints(of: query.userID)))
        case .adminEndpointUsers:
            try call.none()
            return try WireCoder.encode(Wire.EndpointUsers(users: try domain.endpointUsers()))
        case .adminIdentity:
            let query = try call.query(Wire.UserID.self)
            return try WireCoder.encode(Wire.Identity(identity: try domain.publishedIdentity(of: query.userID)))
        case .adminDeregister:
            try domain.deregisterEndpoint(try call.body(Wire.EndpointID.self).endpointID)
            return try call.empty()
        case .adminModeration:
            return try WireCoder.encode(try domain.moderationStatus(of: try call.query(Wire.UserID.self).userID))
        case .adminInfraction:
            let body = try call.body(Wire.Sanction.self)
            return try WireCoder.encode(try domain.issueInfraction(to: body.userID, reason: body.reason))
        case .adminTimeOut:
            let body = try call.body(Wire.TimeOut.self)
            try domain.timeOut(body.userID, for: body.seconds, reason: body.reason)
            return try call.empty()
        case .adminBan:
            let body = try call.body(Wire.Sanction.self)
            try domain.ban(body.userID, reason: body.reason)
            return try call.empty()
        case .adminUnban:
            try domain.unban(try call.body(Wire.UserID.self).userID)
            return try call.empty()
        case .adminOutbox:
            let query = try call.query(Wire.OutboxQuery.self)
            guard (1...1000).contains(query.limit) else { throw DomainError(.invalidRequest, "limit is 1 to 1,000") }
            return try WireCoder.encode(Wire.Mails(mails: try domain.outbox(recipient: query.recipient, limit: query.limit)))
        case .adminReports:
            let query = try call.query(Wire.ReportsQuery.self)
            guard (1...1000).contains(query.limit) else { throw DomainError(.invalidRequest, "limit is 1 to 1,000") }
            return try WireCoder.encode(Wire.Reports(reports: try domain.reports(limit: query.limit)))
        case .adminIssuers:
            try call.none()
            return try WireCoder.encode(Wire.Issuers(issuers: try domain.externalIssuers()))
        case .adminTrustIssuer:
            let body = try call.body(Wire.AddIssuer.self)
            try domain.trustIssuer(body.issuer, audience: body.audience, jwks: Data(body.jwks.utf8))
            return try call.empty()
        case .adminDiscoverIssuer:
            let body = try call.body(Wire.DiscoverIssuer.self)
            return try WireCoder.encode(
                try await domain.discoverIssuer(
                    body.issuer, audience: body.audience, userClaim: body.userClaim, caPEM: body.caPEM))
        case .adminRemoveIssuer:
            try domain.removeExternalIssuer(try call.body(Wire.IssuerName.self).issuer)
            return try call.empty()
        case .adminIssuerKeys:
            return try WireCoder.encode(try domain.issuerKeys(try call.query(Wire.IssuerKind.self).kind))
        case .adminTestToken:
            return try WireCoder.encode(try await domain.testToken(userID: try call.body(Wire.UserID.self).userID))
        default:
            throw DomainError(.notFound, "no route \(operation.path)")
        }
    }

    /// A mailbox read's credential and parameters, checked.
    private func mailboxRead(_ call: Call) throws -> (token: String, endpoint: String, query: Wire.MailboxQuery) {
        let query = try call.query(Wire.MailboxQuery.self)
        let (token, endpoint) = try call.credential()
        guard (1...1000).contains(query.limit) else { throw DomainError(.invalidRequest, "limit is 1 to 1,000") }
        return (token, endpoint, query)
    }

    /// `GET /v1/mailbox` up to its first wait (a long-poll when `wait` is above zero).
    private func readMailbox(_ call: Call) async throws -> DomainEngine.MailboxStep {
        let read = try mailboxRead(call)
        return try await domain.beginMailboxRead(
            token: read.token, endpointID: read.endpoint, after: read.query.after, limit: read.query.limit,
            wait: .seconds(read.query.wait))
    }

    /// Refuses a request without the operator credential (401 without one, 403 with another).
    fileprivate func requireOperator(_ request: HTTPRequest) throws {
        guard let header = request.headers["authorization"] else {
            throw DomainError(.invalidToken, "operator calls need the operator credential: Authorization: Bearer CREDENTIAL")
        }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer", isOperator(String(parts[1])) else {
            throw DomainError(.forbidden, "operator calls need the operator credential; a user's token is not one")
        }
    }

    /// Checks the operator credential in constant time.
    fileprivate func isOperator(_ credential: String) -> Bool {
        SecureBytes(SHA256.hash(Data(credential.utf8))) == SecureBytes(operatorCredentialHash)
    }
}

/// One request being dispatched: its credential, fields and limit.
private struct Call {
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

    func empty() throws -> Data { try WireCoder.encode(Wire.Empty()) }
}
