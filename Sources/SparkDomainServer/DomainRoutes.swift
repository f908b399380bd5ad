import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine

/// One row of the route table: who may call an operation, what it takes, and its handler. The
/// row's builder checks the credential its access names (the caller resolved once, before the
/// handler, for an endpoint's call), decodes the input strictly by the operation's schema, and
/// encodes the answer; a handler only maps the decoded input onto the domain.
struct Route: Sendable {
    /// Who may call it; equal to the operation's ``DomainOperation/access`` (checked by a test).
    let access: DomainOperation.Access
    /// Runs a request of the operation.
    let run: @Sendable (DomainRouter, Call) async throws -> Answer

    /// What a handler answers.
    enum Answer: Sendable {
        /// A JSON body (200).
        case json(Data)
        /// A whole response of its own (a download's 206).
        case response(HTTPResponse)
        /// A long-poll that waits: answered later (``DomainRouter/handle(_:)`` defers it).
        case wait(DomainEngine.MailboxPoll)
    }

    /// A call open to anyone, counted against its rate limit under the name `name` gives.
    static func anyone<Input: Codable & Sendable, Output: Encodable & Sendable>(
        _ input: Input.Type, limitedBy name: (@Sendable (Input) -> String)? = nil,
        _ handler: @escaping @Sendable (DomainEngine, Input) async throws -> Output
    ) -> Route {
        Route(access: .anyone) { router, call in
            let input = try call.input(Input.self)
            try call.limit(name: name?(input))
            return .json(try WireCoder.encode(try await handler(router.domain, input)))
        }
    }

    /// A call with a user's token, before the user has an endpoint here: the token validated
    /// into its user first.
    static func user<Input: Codable & Sendable, Output: Encodable & Sendable>(
        _ input: Input.Type, _ handler: @escaping @Sendable (DomainEngine, VerifiedIdentity, Input) async throws -> Output
    ) -> Route {
        Route(access: .user) { router, call in
            let input = try call.input(Input.self)
            let identity = try await router.domain.validate(token: try call.token())
            return .json(try WireCoder.encode(try await handler(router.domain, identity, input)))
        }
    }

    /// A call from one of a user's endpoints: the caller resolved once (token validated,
    /// endpoint named), counted against the operation's rate limit by endpoint.
    static func endpoint<Input: Codable & Sendable, Output: Encodable & Sendable>(
        _ input: Input.Type, _ handler: @escaping @Sendable (DomainEngine, DomainEngine.Caller, Input) async throws -> Output
    ) -> Route {
        Route(access: .endpoint) { router, call in
            let input = try call.input(Input.self)
            return .json(try WireCoder.encode(try await handler(router.domain, try await call.caller(), input)))
        }
    }

    /// An endpoint's call that sends bytes (a `PUT`): its query's fields and the body's bytes.
    static func upload<Input: Codable & Sendable, Output: Encodable & Sendable>(
        _ input: Input.Type,
        _ handler: @escaping @Sendable (DomainEngine, DomainEngine.Caller, Input, Data) async throws -> Output
    ) -> Route {
        Route(access: .endpoint) { router, call in
            let input = try call.input(Input.self)
            guard !call.request.body.isEmpty else { throw DomainError(.invalidRequest, "an upload's body is the part's bytes") }
            let caller = try await call.caller()
            return .json(try WireCoder.encode(try await handler(router.domain, caller, input, call.request.body)))
        }
    }

    /// An operator's call (the operator credential, checked in constant time, before anything
    /// of the request is read).
    static func `operator`<Input: Codable & Sendable, Output: Encodable & Sendable>(
        _ input: Input.Type, _ handler: @escaping @Sendable (DomainEngine, Input) async throws -> Output
    ) -> Route {
        Route(access: .operator) { router, call in
            try call.requireOperator()
            let input = try call.input(Input.self)
            return .json(try WireCoder.encode(try await handler(router.domain, input)))
        }
    }
}

extension DomainRouter {
    /// Every operation's row, made once.
    static let routes: [DomainOperation: Route] = Dictionary(
        uniqueKeysWithValues: DomainOperation.allCases.map { ($0, route($0)) })

    /// The route table: one row per operation (the switch is exhaustive, so an operation without
    /// a handler does not build).
    // swift-format-ignore
    static func route(_ operation: DomainOperation) -> Route {
        typealias Empty = Wire.Empty
        let done = Empty()
        switch operation {
        // The calls before a token.
        case .policy: return .anyone(Empty.self) { domain, _ in try await domain.policy() }
        case .testToken: return .anyone(Wire.UserID.self, limitedBy: \.userID) { domain, body in try await domain.testToken(userID: body.userID) }
        case .signUp: return .anyone(SignUpRequest.self, limitedBy: \.userName) { domain, body in try await domain.signUp(body); return done }
        case .activate: return .anyone(Wire.Activation.self, limitedBy: \.userName) { domain, body in try await domain.activate(userName: body.userName, code: body.code); return done }
        case .resendActivationCode: return .anyone(Wire.UserName.self, limitedBy: \.userName) { domain, body in try await domain.resendActivationCode(userName: body.userName); return done }
        case .logIn: return .anyone(Wire.LogIn.self, limitedBy: \.userName) { domain, body in try await domain.logIn(userName: body.userName, password: body.password) }
        case .refresh: return .anyone(Wire.RefreshToken.self) { domain, body in try await domain.refresh(refreshToken: body.refreshToken) }
        case .revoke: return .anyone(Wire.RefreshToken.self) { domain, body in try await domain.revoke(refreshToken: body.refreshToken); return done }
        case .requestPasswordReset: return .anyone(Wire.Email.self, limitedBy: \.email) { domain, body in try await domain.requestPasswordReset(email: body.email); return done }
        case .resetPassword: return .anyone(Wire.PasswordReset.self, limitedBy: \.email) { domain, body in try await domain.resetPassword(email: body.email, code: body.code, newPassword: body.newPassword); return done }
        case .transparencyUpdates:
            return Route(access: .anyone) { router, call in
                let query = try call.input(Wire.UpdatesQuery.self)
                if query.auditor != nil || query.at != nil || query.signature != nil {
                    // A registered auditor pages freely; a request that claims to be one and is
                    // not is counted as an anonymous one before it is refused.
                    guard let auditor = query.auditor.flatMap({ try? Data(base64URLEncoded: $0) }), let at = query.at,
                        let signature = query.signature.flatMap({ try? Data(base64URLEncoded: $0) })
                    else {
                        try call.limit(name: nil)
                        throw DomainError(.invalidRequest, "an auditor's request has auditor, at and signature, in base64url")
                    }
                    do {
                        try await router.domain.checkAuditorRequest(auditorKey: auditor, at: at, signature: signature, after: query.after, limit: query.limit)
                    } catch let error as DomainError where error.code == .invalidProof {
                        try call.limit(name: nil)
                        throw error
                    }
                } else {
                    try call.limit(name: nil)
                    guard query.limit <= TransparencyAudit.anonymousPageLimit else {
                        throw DomainError(.invalidRequest, "an anonymous request reads at most \(TransparencyAudit.anonymousPageLimit) updates; a registered auditor signs its requests for more")
                    }
                }
                let found = try await router.domain.transparencyUpdates(after: query.after, limit: query.limit)
                return .json(try WireCoder.encode(Wire.EncodedUpdates(updates: TransparencyAudit.encode(found.updates), head: found.head.map(TransparencyCodec.encode))))
            }
        case .postAudit:
            return .anyone(Wire.Audit.self) { domain, body in
                guard body.size >= 1 else { throw DomainError(.invalidRequest, "a head has 1 entry or more") }
                try await domain.recordAudit(size: UInt64(body.size), auditorKey: body.auditorKey, signature: body.signature)
                return done
            }

        // A user's token, before an endpoint.
        case .validate: return .user(Empty.self) { _, identity, _ in identity }
        case .registerEndpoint: return .user(EndpointRegistration.self) { domain, identity, body in try await domain.registerEndpoint(as: identity, registration: body) }

        // Endpoints.
        case .endpoints: return .endpoint(Empty.self) { domain, caller, _ in Wire.Endpoints(endpoints: try await domain.endpoints(as: caller)) }
        case .setEndpointNickname: return .endpoint(Wire.Nickname.self) { domain, caller, body in try await domain.setEndpointNickname(as: caller, target: body.target, nickname: body.nickname); return done }
        case .deregisterEndpoint: return .endpoint(Wire.Removal.self) { domain, caller, body in try await domain.deregisterEndpoint(as: caller, target: body.target, signature: body.signature); return done }
        case .publishEndpointCredential: return .endpoint(Wire.Credential.self) { domain, caller, body in try await domain.publishEndpointCredential(as: caller, credential: body.credential); return done }
        case .approveEndpoint: return .endpoint(Wire.Approval.self) { domain, caller, body in try await domain.approveEndpoint(as: caller, target: body.target, approval: body.approval); return done }
        case .checkIn: return .endpoint(Empty.self) { domain, caller, _ in try await domain.checkIn(as: caller) }

        // Keys and identities.
        case .fetchKeyBlob: return .endpoint(Wire.BlobName.self) { domain, caller, body in try await domain.fetchKeyBlob(as: caller, name: body.name) }
        case .putKeyBlob: return .endpoint(Wire.PutBlob.self) { domain, caller, body in Wire.Version(version: try await domain.putKeyBlob(as: caller, name: body.name, data: body.data, expectedVersion: body.expectedVersion, proof: body.proof)) }
        case .putKeyBlobs: return .endpoint(Wire.PutBlobs.self) { domain, caller, body in Wire.Versions(versions: try await domain.putKeyBlobs(as: caller, writes: body.writes, proof: body.proof)) }
        case .evaluatePasscode: return .endpoint(Wire.BlindedPasscode.self) { domain, caller, body in try await domain.evaluatePasscode(as: caller, blindedElement: body.blindedElement, keyID: body.keyID) }
        case .retirePasscodeKeys: return .endpoint(Wire.PasscodeRetirement.self) { domain, caller, body in try await domain.retirePasscodeKeys(as: caller, challenge: body.challenge, signature: body.signature, version: body.version); return done }
        case .proveUnlock: return .endpoint(Wire.UnlockProof.self) { domain, caller, body in try await domain.proveUnlock(as: caller, challenge: body.challenge, signature: body.signature); return done }
        case .publishIdentity: return .endpoint(PublishedIdentity.self) { domain, caller, body in try await domain.publishIdentity(as: caller, identity: body); return done }
        case .identity: return .endpoint(Wire.UserID.self) { domain, caller, query in Wire.Identity(identity: try await domain.identity(as: caller, userID: query.userID)) }
        case .resetIdentity: return .endpoint(Wire.ResetRequest.self) { domain, caller, body in try await domain.resetIdentity(as: caller, signature: body.signature) }
        case .cancelIdentityReset: return .endpoint(Empty.self) { domain, caller, _ in try await domain.cancelIdentityReset(as: caller); return done }
        case .pendingIdentityReset: return .endpoint(Wire.UserID.self) { domain, caller, query in Wire.PendingReset(pending: try await domain.pendingIdentityReset(as: caller, userID: query.userID)) }
        case .identityKeyVersion: return .endpoint(Empty.self) { domain, caller, _ in Wire.Version(version: try await domain.identityKeyVersion(as: caller)) }

        // Key transparency.
        // Public: no account needed (an auditor, a verifier written from the docs).
        case .transparencyKeys: return .anyone(Empty.self) { domain, _ in domain.transparency.keys }
        case .identityProof:
            return .endpoint(Wire.IdentityProofQuery.self) { domain, caller, query in
                var auditor: Data?
                if let text = query.auditor {
                    // base64url, as every other key on the wire; hex as before.
                    guard let key = (text.count == 128 ? hexBytes(text) : nil) ?? (try? Data(base64URLEncoded: text)),
                        key.count == 64
                    else {
                        throw DomainError(.invalidRequest, "an auditor key is 64 bytes (P-256 x ‖ y) in base64url or hex")
                    }
                    auditor = key
                }
                let proof = try await domain.identityProof(as: caller, userID: query.userID, since: try logSize(query.since), auditor: auditor)
                return Wire.EncodedProof(proof: TransparencyCodec.encode(proof))
            }
        case .transparencyHeads:
            return .anyone(Wire.HeadsQuery.self) { domain, query in
                let heads = try await domain.transparencyHeads(since: try logSize(query.since))
                return Wire.EncodedHeads(
                    latest: TransparencyCodec.encode(heads.latest), consistency: TransparencyCodec.encode(nodes: heads.consistency),
                    at: heads.at.map(TransparencyCodec.encode))
            }

        // KeyPackages and chats.
        case .publishKeyPackages: return .endpoint(Wire.PublishKeyPackages.self) { domain, caller, body in Wire.Count(count: try await domain.publishKeyPackages(as: caller, keyPackages: body.keyPackages, lastResort: body.lastResort)) }
        case .claimKeyPackages: return .endpoint(Wire.KeyPackageClaim.self) { domain, caller, body in Wire.ClaimedKeyPackages(keyPackages: try await domain.claimKeyPackages(as: caller, userID: body.userID, suite: body.suite ?? DomainEngine.classicSuite)) }
        case .keyPackageCount: return .endpoint(Wire.KeyPackageSuite.self) { domain, caller, body in Wire.Count(count: try await domain.keyPackageCount(as: caller, suite: body.suite ?? DomainEngine.classicSuite)) }
        case .postMessages: return .endpoint(Wire.PostMessages.self) { domain, caller, body in try await domain.postMessages(as: caller, chatID: body.chatID, messages: body.messages) }
        case .postCommit:
            return .endpoint(Wire.PostCommit.self) { domain, caller, body in
                Wire.Epoch(
                    epoch: try await domain.postCommit(
                        as: caller, chatID: body.chatID, epoch: body.epoch, commit: body.commit, welcome: body.welcome, add: body.add,
                        remove: body.remove, replacingRefused: body.replacingRefused ?? false))
            }
        case .createChat: return .endpoint(Wire.CreateChat.self) { domain, caller, body in try await domain.createChat(as: caller, chatID: body.chatID, participants: body.participants, posts: body.posts) }
        case .updateMembers: return .endpoint(Wire.UpdateMembers.self) { domain, caller, body in try await domain.updateMembers(as: caller, chatID: body.chatID, add: body.add, remove: body.remove, posts: body.posts) }
        case .post: return .endpoint(Wire.Post.self) { domain, caller, body in try await domain.post(as: caller, chatID: body.chatID, kind: body.kind, payload: body.payload, recipient: body.recipient, clientID: body.clientID) }
        case .readMailbox:
            // Up to its first wait: a long-poll that waits is answered later (see `handle`).
            return Route(access: .endpoint) { router, call in
                let query = try call.input(Wire.MailboxQuery.self)
                guard (1...1000).contains(query.limit) else { throw DomainError(.invalidRequest, "limit is 1 to 1,000") }
                let caller = try await call.caller()
                switch try await router.domain.beginMailboxRead(as: caller, after: query.after, limit: query.limit, wait: .seconds(query.wait)) {
                case .entries(let entries): return .json(try WireCoder.encode(Wire.Entries(entries: entries)))
                case .wait(let poll): return .wait(poll)
                }
            }
        case .chat: return .endpoint(Wire.ChatID.self) { domain, caller, query in try await domain.chat(as: caller, chatID: query.chatID) }
        case .userStatus: return .endpoint(Empty.self) { domain, caller, _ in try await domain.userStatus(as: caller) }
        case .dismissInfraction: return .endpoint(Wire.InfractionID.self) { domain, caller, body in try await domain.dismissInfraction(as: caller, id: body.id); return done }
        case .report: return .endpoint(Wire.ReportRequest.self) { domain, caller, body in Wire.ReportID(id: try await domain.report(as: caller, chatID: body.chatID, user: body.userID, reason: body.reason, messages: body.messages)) }
        case .setBlocked: return .endpoint(Wire.SetBlocked.self) { domain, caller, body in try await domain.setBlocked(as: caller, userID: body.userID, blocked: body.blocked); return done }
        case .blockedUsers: return .endpoint(Empty.self) { domain, caller, _ in Wire.BlockedUsers(users: try await domain.blockedUsers(as: caller)) }

        // Attachments.
        case .createBlob: return .endpoint(Wire.CreateBlob.self) { domain, caller, body in try await domain.createBlob(as: caller, chatID: body.chatID, blobID: body.blobID, size: body.size) }
        case .uploadBlob: return .upload(Wire.BlobPart.self) { domain, caller, query, bytes in try await domain.uploadBlob(as: caller, blobID: query.blobID, offset: query.offset, bytes: bytes) }
        case .blobStatus: return .endpoint(Wire.BlobID.self) { domain, caller, query in try await domain.blobStatus(as: caller, blobID: query.blobID) }
        case .deleteBlob: return .endpoint(Wire.BlobID.self) { domain, caller, body in try await domain.deleteBlob(as: caller, blobID: body.blobID); return done }
        case .downloadBlob:
            // The `Range` asked (`bytes=START-END` or `bytes=START-`; at most a part of it, the
            // first part without one) as a 206 with `Content-Range`.
            return Route(access: .endpoint) { router, call in
                let query = try call.input(Wire.BlobID.self)
                let caller = try await call.caller()
                var offset: Int64 = 0
                var length = DomainEngine.blobPartSize
                if let range = call.request.headers["range"] {
                    guard let (start, end) = byteRange(range) else {
                        throw DomainError(.rangeNotSatisfiable, "a Range is one 'bytes=START-END' or 'bytes=START-'")
                    }
                    offset = start
                    if let end { length = Int(min(end - start + 1, Int64(DomainEngine.blobPartSize))) }
                }
                let (bytes, size) = try await router.domain.readBlob(as: caller, blobID: query.blobID, offset: offset, length: length)
                return .response(
                    HTTPResponse(
                        status: 206, contentType: "application/octet-stream", body: bytes,
                        headers: [("Content-Range", "bytes \(offset)-\(offset + Int64(bytes.count) - 1)/\(size)")]))
            }

        // The operator's.
        case .adminPolicy: return .operator(Empty.self) { domain, _ in try domain.storedPolicy() }
        case .adminSetPolicy: return .operator(DomainPolicy.self) { domain, body in try domain.setPolicy(body); return done }
        case .adminAccounts: return .operator(Empty.self) { domain, _ in Wire.Accounts(accounts: try domain.accounts()) }
        case .adminEndpoints: return .operator(Wire.UserID.self) { domain, query in Wire.Endpoints(endpoints: try domain.endpoints(of: query.userID)) }
        case .adminEndpointUsers: return .operator(Empty.self) { domain, _ in Wire.EndpointUsers(users: try domain.endpointUsers()) }
        case .adminIdentity: return .operator(Wire.UserID.self) { domain, query in Wire.Identity(identity: try domain.publishedIdentity(of: query.userID)) }
        case .adminDeregister: return .operator(Wire.EndpointID.self) { domain, body in try domain.deregisterEndpoint(body.endpointID); return done }
        case .adminModeration: return .operator(Wire.UserID.self) { domain, query in try domain.moderationStatus(of: query.userID) }
        case .adminInfraction: return .operator(Wire.Sanction.self) { domain, body in try domain.issueInfraction(to: body.userID, reason: body.reason) }
        case .adminTimeOut: return .operator(Wire.TimeOut.self) { domain, body in try domain.timeOut(body.userID, for: body.seconds, reason: body.reason); return done }
        case .adminBan: return .operator(Wire.Sanction.self) { domain, body in try domain.ban(body.userID, reason: body.reason); return done }
        case .adminUnban: return .operator(Wire.UserID.self) { domain, body in try domain.unban(body.userID); return done }
        case .adminOutbox:
            return .operator(Wire.OutboxQuery.self) { domain, query in
                guard (1...1000).contains(query.limit) else { throw DomainError(.invalidRequest, "limit is 1 to 1,000") }
                return Wire.Mails(mails: try domain.outbox(recipient: query.recipient, limit: query.limit))
            }
        case .adminReports:
            return .operator(Wire.ReportsQuery.self) { domain, query in
                guard (1...1000).contains(query.limit) else { throw DomainError(.invalidRequest, "limit is 1 to 1,000") }
                return Wire.Reports(reports: try domain.reports(limit: query.limit))
            }
        case .adminIssuers: return .operator(Empty.self) { domain, _ in Wire.Issuers(issuers: try domain.externalIssuers()) }
        case .adminTrustIssuer: return .operator(Wire.AddIssuer.self) { domain, body in try domain.trustIssuer(body.issuer, audience: body.audience, jwks: Data(body.jwks.utf8)); return done }
        case .adminDiscoverIssuer: return .operator(Wire.DiscoverIssuer.self) { domain, body in try await domain.discoverIssuer(body.issuer, audience: body.audience, userClaim: body.userClaim, caPEM: body.caPEM) }
        case .adminRemoveIssuer: return .operator(Wire.IssuerName.self) { domain, body in try domain.removeExternalIssuer(body.issuer); return done }
        case .adminIssuerKeys: return .operator(Wire.IssuerKind.self) { domain, query in try domain.issuerKeys(query.kind) }
        case .adminAuditors: return .operator(Empty.self) { domain, _ in Wire.Auditors(auditors: try domain.transparencyAuditors()) }
        case .adminAddAuditor: return .operator(Wire.AddAuditor.self) { domain, body in try domain.addTransparencyAuditor(body.auditorKey, name: body.name); return done }
        case .adminRemoveAuditor: return .operator(Wire.AuditorKey.self) { domain, body in try domain.removeTransparencyAuditor(body.auditorKey); return done }
        case .adminTestToken: return .operator(Wire.UserID.self) { domain, body in try await domain.testToken(userID: body.userID) }
        }
    }
}
