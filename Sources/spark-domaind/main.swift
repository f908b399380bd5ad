// spark-domaind: the domain as a network service.
import Dispatch
import Foundation
import SparkCLI
import SparkDomain
import SparkDomainEngine
import SparkDomainServer

let usage = """
    usage: spark-domaind COMMAND [ARGUMENTS]

    commands:
      init DIR [--domain ID] [--sandbox] [--hostname NAME]... [--port N] [--database CONNINFO]
                  create a domain in DIR (mode 0700): its database and issuer keys, an operator
                  credential (DIR/operator.credential), a private CA (DIR/ca.pem, ten years) and
                  a server certificate for the host names (default localhost and 127.0.0.1; 824
                  days, which serve renews from the CA 60 days before its end), and
                  DIR/ConfigSettings.plist, a client configuration pointing at it. Without
                  --sandbox users must authenticate (the sign-up assistant or your own issuer).
                  --database makes the domain in PostgreSQL instead of DIR/domain.sqlite: a libpq
                  connection string or postgresql:// URI (several hosts with
                  target_session_attrs=read-write allowed), kept in DIR/database.conninfo.
      serve DIR [--listen HOST:PORT] [--certificate PEM --key PEM] [--plain]
                [--threads N] [--max-connections N] [--max-connections-per-address N]
                [--max-body BYTES] [--idle-timeout S] [--head-timeout S] [--min-body-rate B]
                [--body-buffer BYTES] [--body-buffer-per-address BYTES]
                [--prune-interval S] [--proxy-from ADDR[,ADDR...]] [--rate-limits A,N]
                [--ipv6-prefix BITS] [--quiet]
                  serve the domain in DIR over HTTPS (default --listen 0.0.0.0:8443); prints
                  "listening on https://HOST:PORT" once ready; SIGTERM stops it gracefully.
                  Every --prune-interval seconds (600) it deletes mailbox entries older than
                  the policy's retention, read or not.
                  Slow and unauthenticated clients are bounded: one client address holds at
                  most --max-connections-per-address connections (default 1/64 of
                  --max-connections, from 16 to 256; raise it when many devices share an
                  address without a proxy naming them); a request's head must be whole within
                  --head-timeout seconds of its first byte (10; a TLS handshake too), and a body
                  must come at --min-body-rate bytes a second or faster after as long a grace
                  (1024); a body still to come is read only once its route and token pass
                  (401, 403, 404 otherwise, its bytes never buffered), and bodies held at once
                  are capped at --body-buffer bytes in all (256 MiB: 503 past it) and
                  --body-buffer-per-address (16 MiB: 429 past it).
                  --proxy-from names the proxies (haproxy with send-proxy-v2) that open each
                  connection with a PROXY protocol v2 header: the client address it names is
                  the one the per-address limits count. From other addresses no header is read.
                  --rate-limits sets how many guessing calls (logins, sign-ups, codes, mail,
                  key fetches, passcode evaluations, test tokens) one client address (A) and
                  one account or user (N) may make a minute, each also its burst (default
                  30,10); raise A when many users share an address.
                  Every per-address limit counts an IPv6 client by its first --ipv6-prefix bits
                  (64: the subnet any IPv6 host picks its addresses from; 128 counts each
                  address alone), IPv4 clients by their address.
                  --plain serves plain HTTP, allowed only on a loopback address. Any number of
                  instances may serve one PostgreSQL domain (copies of DIR).
      passcode-keys DIR [list | rotate | retire KEY | transparency]
                  the OPRF secrets that harden users' passcodes (DIR/passcode.keys, mode 0600,
                  never in the database): list their ids and which is current; rotate adds a
                  new current key (devices re-wrap under it at their next unlock; restart the
                  instances, each with a copy of the file); retire drops an old key, after which
                  backups still under it no longer open. rotate also makes the file when a
                  directory from before it has none. transparency prints the key-transparency
                  public keys (adding them to a file from before key transparency), for
                  spark-kt-auditor init. Beside the file, DIR/passcode.keys.kt-head keeps the
                  last transparency head the domain signed: copy it with the file, never back.
      openapi     print the OpenAPI document of the /v1 wire
      help        show this text

    exit status: 0 success, 1 failure, 64 usage error
    """

enum Failure: Error {
    case failed(String)
}

func standardError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

func initialize(_ arguments: inout Arguments) throws {
    let directory = try arguments.next("the domain directory")
    let domainID = try arguments.option("--domain") ?? "spark"
    let sandbox = arguments.flag("--sandbox")
    var hostnames: [String] = []
    while let name = try arguments.option("--hostname") { hostnames.append(name) }
    let port = try arguments.integer("--port", in: 1...65535) ?? DomainDirectory.defaultPort
    let database = try arguments.option("--database")
    try arguments.finish()
    let made = try DomainDirectory.create(
        at: URL(fileURLWithPath: directory), domainID: domainID, sandbox: sandbox,
        hostnames: hostnames.isEmpty ? ["localhost", "127.0.0.1"] : hostnames, port: port, database: database)
    if let database { print("database: PostgreSQL, \(PostgreSQLDomainStore.redact(database))") }
    print(
        """
        created domain '\(domainID)' (\(sandbox ? "sandbox: test tokens for any user id" : "user authentication on")) in \(made.url.path)
        operator credential: \(made.credentialPath)
        clients trust: \(made.caPath)
        client configuration: \(made.clientConfigurationPath)
        serve it with: spark-domaind serve \(made.url.path)
        """)
}

func passcodeKeys(_ arguments: inout Arguments) throws {
    let directory = try DomainDirectory(existing: URL(fileURLWithPath: try arguments.next("the domain directory")))
    let action = arguments.isEmpty ? "list" : try arguments.next("list, rotate, retire or transparency")
    let path = directory.passcodeKeysPath
    switch action {
    case "list":
        try arguments.finish()
        let keys = try PasscodeKeys.load(from: path)
        for id in keys.keyIDs { print(id == keys.currentKeyID ? "\(id) (current)" : id) }
    case "rotate":
        try arguments.finish()
        let keys = FileManager.default.fileExists(atPath: path) ? try PasscodeKeys.load(from: path).rotated() : .generate()
        try keys.write(to: path)
        print("current passcode key: \(keys.currentKeyID); restart every instance with this file")
    case "retire":
        let id = try arguments.next("the key to retire")
        try arguments.finish()
        let keys = try PasscodeKeys.load(from: path).retiring(id)
        try keys.write(to: path)
        print("retired \(id); keys now: \(keys.keyIDs.joined(separator: ", "))")
    case "transparency":
        try arguments.finish()
        let keys = try PasscodeKeys.load(from: path)
        let added = try keys.withTransparency()
        if keys.transparency == nil {
            try added.write(to: path)
            print("added transparency keys; give every instance this file, then restart them")
        }
        if let published = added.transparency?.publicKeys {
            print("vrf key:  \(published.vrfKey.base64EncodedString())")
            print("head key: \(published.headKey.base64EncodedString())")
        }
    default:
        throw Arguments.UsageError(
            message: "passcode-keys takes list, rotate, retire KEY or transparency, not '\(action)'")
    }
}

/// `HOST:PORT`, `[V6]:PORT` or `:PORT`.
/// Whether `text` is an IPv4 or IPv6 address.
func isIPAddress(_ text: String) -> Bool {
    var buffer = [UInt8](repeating: 0, count: 16)
    return inet_pton(AF_INET, text, &buffer) == 1 || inet_pton(AF_INET6, text, &buffer) == 1
}

/// Raises the soft limit on open descriptors to the hard limit; returns the limit in force.
func raiseDescriptorLimit() -> Int {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
    if limit.rlim_cur < limit.rlim_max {
        var raised = limit
        raised.rlim_cur = limit.rlim_max
        if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
    }
    return Int(clamping: limit.rlim_cur)
}

/// `--rate-limits A,N`: calls a minute (and burst) per client address and per name.
func parseRateLimits(_ text: String) throws -> RequestLimits.Policy {
    let parts = text.split(separator: ",", omittingEmptySubsequences: false).map { Int($0) }
    guard parts.count == 2, let perAddress = parts[0], let perName = parts[1],
        (1...1_000_000_000).contains(perAddress), (1...1_000_000_000).contains(perName)
    else {
        throw Arguments.UsageError(
            message: "--rate-limits takes calls a minute per address and per name, e.g. 30,10, not '\(text)'")
    }
    return RequestLimits.Policy(
        perAddress: .init(burst: Double(perAddress), perMinute: Double(perAddress)),
        perName: .init(burst: Double(perName), perMinute: Double(perName)))
}

func parseListen(_ text: String) throws -> (String, UInt16) {
    guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
        throw Arguments.UsageError(message: "--listen takes HOST:PORT, not '\(text)'")
    }
    var host = String(text[..<colon])
    if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
    return (host.isEmpty ? "0.0.0.0" : host, port)
}

func serve(_ arguments: inout Arguments) async throws {
    let path = try arguments.next("the domain directory")
    let (host, port) = try parseListen(try arguments.option("--listen") ?? "0.0.0.0:\(DomainDirectory.defaultPort)")
    let certificateOption = try arguments.option("--certificate")
    let keyOption = try arguments.option("--key")
    let plain = arguments.flag("--plain")
    let threads = try arguments.integer("--threads", in: 1...64) ?? 2
    let connections = try arguments.integer("--max-connections", in: 16...1_000_000) ?? 20_000
    let maximumBody = try arguments.integer("--max-body", in: 1024...(64 << 20)) ?? (1 << 20)
    let idleTimeout = try arguments.integer("--idle-timeout", in: 1...3600) ?? 30
    let perAddress = try arguments.integer("--max-connections-per-address", in: 1...1_000_000)
    let headTimeout = try arguments.integer("--head-timeout", in: 1...3600) ?? 10
    let minimumBodyRate = try arguments.integer("--min-body-rate", in: 0...(1 << 30)) ?? 1024
    let bodyBuffer = try arguments.integer("--body-buffer", in: (1 << 20)...(1 << 40)) ?? (256 << 20)
    let perAddressBodyBuffer = try arguments.integer("--body-buffer-per-address", in: (1 << 20)...(1 << 40)) ?? (16 << 20)
    let quiet = arguments.flag("--quiet")
    let pruneInterval = try arguments.integer("--prune-interval", in: 1...86400) ?? 600
    let proxies = (try arguments.option("--proxy-from"))?.split(separator: ",").map(String.init) ?? []
    let rateLimits = try (try arguments.option("--rate-limits")).map(parseRateLimits) ?? .standard
    let ipv6Prefix = try arguments.integer("--ipv6-prefix", in: 1...128) ?? 64
    try arguments.finish()
    if perAddressBodyBuffer < maximumBody || bodyBuffer < perAddressBodyBuffer {
        throw Arguments.UsageError(
            message: "--body-buffer-per-address must hold one --max-body, and --body-buffer one address's share")
    }
    for proxy in proxies where !isIPAddress(proxy) {
        throw Arguments.UsageError(message: "--proxy-from takes IP addresses separated by commas, not '\(proxy)'")
    }
    if (certificateOption == nil) != (keyOption == nil) {
        throw Arguments.UsageError(message: "--certificate and --key go together")
    }
    if plain, !["127.0.0.1", "::1", "localhost"].contains(host) {
        throw Arguments.UsageError(message: "--plain serves plain HTTP on a loopback address only, not \(host)")
    }
    let directory = try DomainDirectory(existing: URL(fileURLWithPath: path))
    let log: @Sendable (String) -> Void
    if quiet {
        log = { _ in }
    } else {
        log = { line in standardError(line) }
    }
    // A pool a little larger than the server's threads: requests wait on the database, not
    // on each other.
    // Requests run on threads of the server's own, as many as the store's connections (a request
    // blocked in the store holds one; see RequestExecutor).
    let storeConnections = max(4, threads * 4)
    // Each connection is a descriptor: the soft limit goes up to the hard one, and the connection
    // limit comes down to what the descriptors left allow, so that a full server refuses a
    // connection rather than failing to accept it.
    let descriptors = raiseDescriptorLimit()
    let reserved = 64 + 2 * storeConnections
    let allowedConnections = min(connections, max(16, descriptors - reserved))
    if allowedConnections < connections {
        log(
            #"{"event":"connection-limit","requested":\#(connections),"allowed":\#(allowedConnections),"descriptors":\#(descriptors)}"#
        )
    }
    let domain = try directory.openDomain(connections: storeConnections)
    if let conninfo = try directory.databaseConnection() {
        log(#"{"event":"store","kind":"postgresql","connection":"\#(PostgreSQLDomainStore.redact(conninfo))"}"#)
    }
    let credential = try directory.operatorCredential()
    let router = DomainRouter(
        domain: domain, operatorCredential: credential, limits: RequestLimits(policy: rateLimits, ipv6Prefix: ipv6Prefix),
        log: quiet ? nil : log)
    var options = HTTPServer.Options(
        host: host == "localhost" ? "127.0.0.1" : host, port: port, threads: threads, connectionLimit: allowedConnections,
        perAddressLimit: min(perAddress ?? min(256, max(16, connections / 64)), allowedConnections), idleTimeout: idleTimeout,
        maximumBody: maximumBody, headTimeout: headTimeout, minimumBodyRate: minimumBodyRate, bodyBudget: bodyBuffer,
        perAddressBodyBudget: perAddressBodyBuffer, proxyAddresses: proxies, requestThreads: storeConnections,
        ipv6Prefix: ipv6Prefix)
    if !plain {
        // The certificate `init` made is renewed from the directory's CA before it ends.
        if certificateOption == nil, try directory.renewCertificateIfDue() {
            log(#"{"event":"certificate-renewed","days":\#(DomainDirectory.serverCertificateDays)}"#)
        }
        options.certificatePEM = try DomainDirectory.readPEM(certificateOption ?? directory.certificatePath)
        options.keyPEM = try DomainDirectory.readPEM(keyOption ?? directory.keyPath)
    }
    let fixed = options
    let server = try HTTPServer(
        options: fixed, headCheck: { router.verdict($0) },
        handler: { (request: HTTPRequest) async -> HTTPResponse in
            await router.handle(request)
        })
    router.attach(server)
    // Entries older than the retention go on a timer, read or not (a read prunes only its own
    // user's mailbox). On a dispatch thread: the store's calls block, the cooperative pool must not.
    let pruning = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "spark-domaind.prune", qos: .utility))
    pruning.schedule(deadline: .now() + .seconds(pruneInterval), repeating: .seconds(pruneInterval))
    pruning.setEventHandler {
        do {
            let pruned = try domain.pruneExpiredEntries()
            if pruned > 0 { log(#"{"event":"pruned","entries":\#(pruned)}"#) }
        } catch {
            log(#"{"event":"prune-failed"}"#)
        }
    }
    pruning.resume()
    defer { pruning.cancel() }
    // Ephemeral entries (typing, live chat events) are deleted seconds after they were posted.
    let ephemeralPruning = DispatchSource.makeTimerSource(
        queue: DispatchQueue(label: "spark-domaind.prune-ephemeral", qos: .utility))
    ephemeralPruning.schedule(deadline: .now() + .seconds(5), repeating: .seconds(5))
    ephemeralPruning.setEventHandler { _ = try? domain.pruneEphemeralEntries() }
    ephemeralPruning.resume()
    defer { ephemeralPruning.cancel() }
    let shown = host.contains(":") ? "[\(host)]" : host
    FileHandle.standardOutput.write(Data("listening on \(plain ? "http" : "https")://\(shown):\(server.port)\n".utf8))

    // SIGTERM and SIGINT: stop accepting, end long-polls empty, finish what is in flight, exit.
    let stopping = AsyncStream<Int32> { continuation in
        let sources = [SIGTERM, SIGINT].map { signalNumber in
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler { continuation.yield(signalNumber) }
            source.resume()
            return source
        }
        nonisolated(unsafe) let kept = sources
        continuation.onTermination = { _ in for source in kept { source.cancel() } }
    }
    for await signalNumber in stopping {
        standardError(#"{"event":"shutdown","signal":\#(signalNumber)}"#)
        server.quiesce()
        router.drain()
        await server.stop()
        break
    }
}

func run() async -> Int32 {
    let words = Array(CommandLine.arguments.dropFirst())
    var arguments = Arguments(words)
    do {
        let command: String
        if words.isEmpty || ["--help", "-h", "help"].contains(words[0]) {
            command = "help"
        } else {
            command = try arguments.next("a command")
        }
        switch command {
        case "init": try initialize(&arguments)
        case "serve": try await serve(&arguments)
        case "passcode-keys": try passcodeKeys(&arguments)
        case "openapi":
            try arguments.finish()
            FileHandle.standardOutput.write(OpenAPIDocument.json())
        case "help", "--help", "-h":
            print(usage)
        default:
            throw Arguments.UsageError(message: "unknown command '\(command)'")
        }
        return 0
    } catch let error as Arguments.UsageError {
        standardError("spark-domaind: \(error.message)\n\n\(usage)")
        return 64
    } catch let error as DomainError {
        standardError("spark-domaind: \(error.reason)")
        return 1
    } catch {
        standardError("spark-domaind: \(error)")
        return 1
    }
}

exit(await run())
