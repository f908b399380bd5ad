// spark-admin: the domain operator's tool, for an embedded file or a spark-domaind.
import Foundation
import SparkCLI
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkSDK

let usage = """
    usage: spark-admin [--domain PATH | --config PLIST [--operator FILE]] COMMAND [ARGUMENTS]

    The domain is the embedded file --domain PATH, else the one --config PLIST names (default:
    ./ConfigSettings.plist): its domainURL, a spark-domaind, with the operator credential
    --operator FILE (spark-domaind init wrote DIR/operator.credential), or else its
    embeddedDomainPath.

    commands:
      create DOMAIN_ID [--user-auth on|off] [--max-endpoints N] [--single-endpoint | --multiple-endpoints]
                                  create an embedded domain (user authentication off by default:
                                  sandbox); a served one is made by `spark-domaind init`
      policy                      show the domain's policy
      policy set [--user-auth on|off] [--max-endpoints N] [--single-endpoint | --multiple-endpoints]
                 [--posted-bytes-per-minute BYTES] [--unread-bytes-per-sender BYTES]
                                  change the policy (the bytes one user's posts may write into
                                  mailboxes a minute, 64 MiB; and one sender may leave unread
                                  for one user, 32 MiB)
      users                       list the accounts of the sign-up assistant and the users with endpoints
      endpoints USER_ID           list a user's endpoints
      deregister ENDPOINT_ID      remove an endpoint (it learns on its next call)
      status USER_ID              show a user's moderation status and infractions
      infraction USER_ID REASON   issue an infraction (a warning the user sees)
      timeout USER_ID SECONDS REASON
                                  time a user out: their messages are refused meanwhile
      ban USER_ID REASON          ban a user: their messages are refused
      unban USER_ID               lift a ban and any timeout
      outbox [--to EMAIL] [--limit N]
      reports [--limit N]             what users reported, with the messages they revealed
                                  show the mail the domain sent (activation and reset codes)
      issuer add ISSUER AUDIENCE JWKS_PATH
                                  trust an external identity provider's tokens
      issuer add --discover ISSUER_URL --audience CLIENT_ID [--user-claim sub|email|preferred_username] [--ca FILE]
                                  trust an OpenID provider: the domain fetches its discovery
                                  document and keys itself, and again when they rotate
      issuer list                 list the trusted external issuers
      issuer remove ISSUER        stop trusting an external issuer
      transparency auditor add KEY NAME
                                  register a key-transparency auditor (KEY: base64, as
                                  `spark-kt-auditor init` prints it); only registered auditors'
                                  co-signatures are taken
      transparency auditor list   list the registered auditors and the head each co-signed
      transparency auditor remove KEY
                                  remove an auditor and its co-signature
      jwks test|accounts          print the public keys of the domain's own issuer
      token USER_ID               issue a test token (sandbox domains only)
      help                        show this text

    exit status: 0 success, 1 failure, 64 usage error
    """

enum AdminFailure: Error {
    case usage(String)
    case failed(String)
}

/// Where the commands go: an embedded file, or a spark-domaind with the operator credential.
enum Target {
    case embedded(String)
    case remote(RemoteAdministration)
}

func target(_ arguments: inout Arguments) throws -> Target {
    if let path = try arguments.option("--domain") { return .embedded(path) }
    let config = try arguments.option("--config") ?? "ConfigSettings.plist"
    let credentialFile = try arguments.option("--operator")
    let settings: ConfigSettings
    do {
        settings = try ConfigSettings.load(from: URL(fileURLWithPath: config))
    } catch let error as ConfigError {
        throw AdminFailure.failed(error.reason)
    }
    guard let url = settings.domainURL, let trust = settings.domainTrust else {
        if credentialFile != nil {
            throw Arguments.UsageError(message: "--operator is for a served domain; \(config) has no domainURL")
        }
        return .embedded(settings.embeddedDomainPath.path)
    }
    guard let credentialFile else {
        throw Arguments.UsageError(
            message: "\(config) names a served domain (\(url.absoluteString)): pass --operator FILE (its operator.credential)")
    }
    guard let data = FileManager.default.contents(atPath: credentialFile) else {
        throw AdminFailure.failed("the operator credential \(credentialFile) cannot be read")
    }
    let credential = String(decoding: data, as: UTF8.self)
    return .remote(
        try RemoteAdministration(urls: settings.domainURLs, domainID: settings.domain, trust: trust, credential: credential))
}

func applyPolicyOptions(_ arguments: inout Arguments, to policy: inout DomainPolicy) throws {
    if let userAuth = try arguments.onOff("--user-auth") { policy.userAuthenticationEnabled = userAuth }
    if let maximum = try arguments.integer("--max-endpoints", in: 1...100) { policy.maximumEndpoints = maximum }
    if let bytes = try arguments.integer("--posted-bytes-per-minute", in: (1 << 20)...(1 << 40)) {
        policy.postedBytesPerMinute = bytes
    }
    if let bytes = try arguments.integer("--unread-bytes-per-sender", in: (1 << 20)...(1 << 40)) {
        policy.unreadBytesPerSender = bytes
    }
    let single = arguments.flag("--single-endpoint")
    let multiple = arguments.flag("--multiple-endpoints")
    if single && multiple { throw Arguments.UsageError(message: "--single-endpoint and --multiple-endpoints exclude each other") }
    if single { policy.multipleActiveEndpoints = false }
    if multiple { policy.multipleActiveEndpoints = true }
    // For tests only: a cheap password hash. Named unsafe on purpose.
    if let iterations = try arguments.integer("--unsafe-password-iterations", in: 1...10_000_000) {
        policy.passwordIterations = iterations
    }
}

func describe(_ policy: DomainPolicy) -> String {
    """
    user authentication: \(policy.userAuthenticationEnabled ? "on (test tokens refused)" : "off (sandbox: test tokens accepted)")
    maximum endpoints per user: \(policy.maximumEndpoints)
    active endpoints per user: \(policy.multipleActiveEndpoints ? "several" : "one (a new device must take the profile over)")
    password hashing: PBKDF2-HMAC-SHA-256, \(policy.passwordIterations) iterations
    token lifetime: \(policy.tokenLifetime) s; refresh tokens: \(policy.refreshTokenLifetime / 86400) days
    codes: activation \(policy.activationCodeLifetime / 3600) h, reset \(policy.resetCodeLifetime / 60) min, \(policy.codeAttempts) tries
    login throttling after \(policy.loginAttemptsBeforeThrottle) failures
    posts per user: \(policy.postsPerMinute) a minute, \(policy.postedBytesPerMinute) bytes a minute into mailboxes, \(policy.unreadBytesPerSender) bytes left unread for one user
    """
}

func run(_ words: [String]) async throws {
    var arguments = Arguments(words)
    if words.isEmpty || words.contains("--help") || words.contains("-h") || words.first == "help" {
        print(usage)
        return
    }
    let target = try target(&arguments)
    let command = try arguments.next("a command")
    let unsafeHashing = words.contains("--unsafe-password-iterations")
    if command == "create" {
        guard case .embedded(let path) = target else {
            throw Arguments.UsageError(message: "create makes an embedded domain; a served one is made by `spark-domaind init`")
        }
        let id = try arguments.next("the domain id")
        var policy = DomainPolicy()
        try applyPolicyOptions(&arguments, to: &policy)
        try arguments.finish()
        let domain = try EmbeddedDomain.create(at: path, domainID: id, policy: policy, allowUnsafePasswordHashing: unsafeHashing)
        print("created domain \(domain.domainID) at \(path)")
        print(describe(policy))
        return
    }
    // Opened once the command's arguments are checked: a usage mistake is told as one.
    func open() throws -> any DomainAdministration {
        switch target {
        case .embedded(let path): try EmbeddedDomain.open(at: path, allowUnsafePasswordHashing: unsafeHashing)
        case .remote(let remote): remote
        }
    }
    switch command {
    case "policy":
        var policy = try await open().policy()
        if arguments.isEmpty {
            print(describe(policy))
            return
        }
        let verb = try arguments.next("set")
        guard verb == "set" else { throw Arguments.UsageError(message: "unknown policy command '\(verb)'") }
        try applyPolicyOptions(&arguments, to: &policy)
        try arguments.finish()
        try await open().setPolicy(policy)
        print(describe(policy))
    case "users":
        try arguments.finish()
        let accounts = try await open().accounts()
        print(accounts.isEmpty ? "no accounts" : "accounts:")
        for account in accounts {
            let state = account.activated ? "active" : "not activated"
            print("\(account.userName)\t\(account.email)\t\(account.country)\tage \(account.age)\t\(state)")
        }
        let users = try await open().endpointUsers()
        print(users.isEmpty ? "no users with endpoints" : "users with endpoints:")
        for user in users { print("\(user.userID)\t\(user.endpoints) endpoint\(user.endpoints == 1 ? "" : "s")") }
    case "endpoints":
        let user = try arguments.next("the user id")
        try arguments.finish()
        let endpoints = try await open().endpoints(of: user)
        if endpoints.isEmpty { print("\(user) has no endpoints") }
        let formatter = ISO8601DateFormatter()
        for endpoint in endpoints {
            let nickname = endpoint.nickname.isEmpty ? "" : " (\(endpoint.nickname))"
            let active = endpoint.isActive ? "active" : "inactive"
            print(
                "\(endpoint.endpointID)\tregId \(endpoint.registrationID)\t\(endpoint.description)\(nickname)\t\(active)"
                    + "\tlast seen \(formatter.string(from: endpoint.lastSeen))")
        }
    case "deregister":
        let endpoint = try arguments.next("the endpoint id")
        try arguments.finish()
        try await open().deregisterEndpoint(endpoint)
        print("deregistered \(endpoint)")
    case "status":
        let user = try arguments.next("the user id")
        try arguments.finish()
        let status = try await open().moderationStatus(of: user)
        switch status.state {
        case .valid: print("\(user): valid")
        case .timeout(let until, let reason):
            print("\(user): timed out until \(ISO8601DateFormatter().string(from: until)) (\(reason))")
        case .banned(let reason): print("\(user): banned (\(reason))")
        }
        for infraction in status.infractions { print("infraction \(infraction.id): \(infraction.reason)") }
    case "infraction":
        let user = try arguments.next("the user id")
        let reason = try arguments.next("the reason")
        try arguments.finish()
        let infraction = try await open().issueInfraction(to: user, reason: reason)
        print("infraction \(infraction.id) issued to \(user)")
    case "timeout":
        let user = try arguments.next("the user id")
        let secondsText = try arguments.next("the seconds")
        guard let seconds = Int(secondsText), (1...(366 * 86400)).contains(seconds) else {
            throw Arguments.UsageError(message: "SECONDS must be a whole number from 1 to 31622400, not '\(secondsText)'")
        }
        let reason = try arguments.next("the reason")
        try arguments.finish()
        try await open().timeOut(user, for: seconds, reason: reason)
        print("\(user) is timed out for \(seconds) s")
    case "ban":
        let user = try arguments.next("the user id")
        let reason = try arguments.next("the reason")
        try arguments.finish()
        try await open().ban(user, reason: reason)
        print("\(user) is banned")
    case "unban":
        let user = try arguments.next("the user id")
        try arguments.finish()
        try await open().unban(user)
        print("\(user) may post again")
    case "reports":
        let limit = try arguments.integer("--limit", in: 1...1000) ?? 20
        try arguments.finish()
        let reports = try await open().reports(limit: limit)
        if reports.isEmpty { print("no reports") }
        let formatter = ISO8601DateFormatter()
        for report in reports {
            print(
                "report \(report.id) at \(formatter.string(from: report.createdAt)): \(report.reporter) reports \(report.reported) "
                    + "in chat \(report.chatID): \(report.reason)")
            for message in report.messages {
                print("  #\(message.number.map(String.init) ?? "-") \(message.sender): \(message.content)")
            }
        }
    case "outbox":
        let recipient = try arguments.option("--to")
        let limit = try arguments.integer("--limit", in: 1...1000) ?? 20
        try arguments.finish()
        let mail = try await open().outbox(recipient: recipient, limit: limit)
        if mail.isEmpty { print("the outbox is empty") }
        let formatter = ISO8601DateFormatter()
        for message in mail {
            print("--- \(formatter.string(from: message.sentAt)) to \(message.to)\nsubject: \(message.subject)\n\(message.body)")
        }
    case "transparency":
        let noun = try arguments.next("auditor")
        guard noun == "auditor" else { throw Arguments.UsageError(message: "unknown transparency command '\(noun)'") }
        func auditorKey() throws -> Data {
            let text = try arguments.next("the auditor's key (base64)")
            guard let key = Data(base64Encoded: text), key.count == 64 else {
                throw Arguments.UsageError(message: "an auditor's key is 64 bytes in base64, as spark-kt-auditor init prints it")
            }
            return key
        }
        let verb = try arguments.next("add, list or remove")
        switch verb {
        case "add":
            let key = try auditorKey()
            let name = try arguments.next("the auditor's name")
            try arguments.finish()
            try await open().addTransparencyAuditor(key, name: name)
            print("registered auditor \(name): \(key.base64EncodedString())")
        case "list":
            try arguments.finish()
            let auditors = try await open().transparencyAuditors()
            if auditors.isEmpty { print("no auditors registered") }
            let formatter = ISO8601DateFormatter()
            for auditor in auditors {
                let cosigned = auditor.cosignedSize.map { "co-signed the head of \($0) entries" } ?? "has co-signed nothing yet"
                print(
                    "\(auditor.auditorKey.base64EncodedString())\t\(auditor.name)\tadded \(formatter.string(from: auditor.addedAt))\t\(cosigned)"
                )
            }
        case "remove":
            let key = try auditorKey()
            try arguments.finish()
            try await open().removeTransparencyAuditor(key)
            print("removed auditor \(key.base64EncodedString())")
        default:
            throw Arguments.UsageError(message: "unknown transparency auditor command '\(verb)'")
        }
    case "issuer":
        let verb = try arguments.next("add, list or remove")
        switch verb {
        case "add":
            if let discover = try arguments.option("--discover") {
                guard let audience = try arguments.option("--audience") else {
                    throw Arguments.UsageError(message: "issuer add --discover needs --audience CLIENT_ID")
                }
                let userClaim = try arguments.option("--user-claim") ?? "sub"
                let caPEM = try arguments.option("--ca").map { path -> String in
                    guard let data = FileManager.default.contents(atPath: path) else {
                        throw AdminFailure.failed("the CA file \(path) cannot be read")
                    }
                    return String(decoding: data, as: UTF8.self)
                }
                try arguments.finish()
                let trusted = try await open().discoverIssuer(discover, audience: audience, userClaim: userClaim, caPEM: caPEM)
                print(
                    "trusting \(trusted.issuer) for audience \(audience), user id from \(userClaim), keys from \(trusted.jwksURI ?? "")"
                )
                return
            }
            let issuer = try arguments.next("the issuer (iss)")
            let audience = try arguments.next("the audience")
            let jwks = try arguments.next("the JWKS file")
            try arguments.finish()
            let absolute = URL(fileURLWithPath: jwks).standardizedFileURL.path
            if let embedded = try open() as? EmbeddedDomain {
                // In place: the domain rereads the file when it changes (key rotation).
                try embedded.addExternalIssuer(.init(issuer: issuer, audience: audience, jwksPath: absolute))
                print("trusting \(issuer) for audience \(audience) with keys from \(absolute)")
            } else {
                guard let keys = FileManager.default.contents(atPath: absolute) else {
                    throw AdminFailure.failed("the JWKS file \(absolute) cannot be read")
                }
                try await open().trustIssuer(issuer, audience: audience, jwks: keys)
                print("trusting \(issuer) for audience \(audience) with the keys of \(absolute) (sent to the domain)")
            }
        case "list":
            try arguments.finish()
            let issuers = try await open().externalIssuers()
            if issuers.isEmpty { print("no external issuers") }
            let formatter = ISO8601DateFormatter()
            for issuer in issuers {
                guard let jwksURI = issuer.jwksURI else {
                    print("\(issuer.issuer)\taudience \(issuer.audience)\t\(issuer.jwksPath)")
                    continue
                }
                let fresh = issuer.keysFreshUntil.map { formatter.string(from: $0) } ?? "?"
                print(
                    "\(issuer.issuer)\taudience \(issuer.audience)\tuser \(issuer.userClaim)\tdiscovered, keys from \(jwksURI) fresh until \(fresh)"
                        + (issuer.lastFetchError.map { "\tlast fetch failed: \($0)" } ?? ""))
            }
        case "remove":
            let issuer = try arguments.next("the issuer (iss)")
            try arguments.finish()
            try await open().removeExternalIssuer(issuer)
            print("no longer trusting \(issuer)")
        default:
            throw Arguments.UsageError(message: "unknown issuer command '\(verb)'")
        }
    case "jwks":
        let which = try arguments.next("test or accounts")
        try arguments.finish()
        guard which == "test" || which == "accounts" else {
            throw Arguments.UsageError(message: "jwks takes test or accounts, not '\(which)'")
        }
        print(String(decoding: try await open().issuerKeys(which).jsonData(), as: UTF8.self))
    case "token":
        let user = try arguments.next("the user id")
        try arguments.finish()
        print(try await open().testToken(userID: user).token)
    default:
        throw Arguments.UsageError(message: "unknown command '\(command)'")
    }
}

do {
    try await run(Array(CommandLine.arguments.dropFirst()))
} catch let error as Arguments.UsageError {
    FileHandle.standardError.write(Data("spark-admin: \(error.message)\n\n\(usage)\n".utf8))
    exit(64)
} catch AdminFailure.failed(let message) {
    FileHandle.standardError.write(Data("spark-admin: \(message)\n".utf8))
    exit(1)
} catch let error as DomainError {
    FileHandle.standardError.write(Data("spark-admin: \(error.reason) (\(error.code))\n".utf8))
    exit(1)
} catch {
    FileHandle.standardError.write(Data("spark-admin: \(error)\n".utf8))
    exit(1)
}
