// spark-kt-auditor: a third-party auditor of a domain's key-transparency log.
import Foundation
import SparkCLI
import SparkCrypto
import SparkDomain

let usage = """
    usage: spark-kt-auditor COMMAND DIR [ARGUMENTS]

    A third party (another organisation) runs this against a domain's spark-domaind: it follows
    the domain's transparency log, rebuilds it from its updates (VRF outputs and commitments: it
    learns no user and no key), checks that every signed head is the root of the log so far and
    that the log only grows, and co-signs each head it checked. Devices whose plist names the
    auditor's key (transparencyAuditorKey) accept only heads it co-signed.

    commands:
      init DIR --vrf-key BASE64 --head-key BASE64
                                  make the auditor's key in DIR (mode 0700) for the domain whose
                                  transparency keys these are (`spark-domaind passcode-keys DOMAIN_DIR
                                  transparency` prints them); prints the auditor's public key,
                                  which the domain's operator registers (`spark-admin
                                  transparency auditor add KEY NAME`) before its co-signatures
                                  are taken
      key DIR                     print the auditor's public key (for the devices' plist)
      run DIR --domain URL [--ca FILE] [--once] [--interval SECONDS]
                                  follow the log: check and co-sign every interval (10 s), or once;
                                  a log that rewrote its past or forked is reported and never
                                  signed again (exit status 2)
    """

/// What the auditor keeps in DIR/auditor.json (mode 0600).
struct State: Codable {
    var key: String
    var vrfKey: String
    var headKey: String
    /// The last head co-signed: size, root, timestamp, signature (base64).
    var lastSigned: [String: String]?
}

func statePath(_ directory: String) -> String { (directory as NSString).appendingPathComponent("auditor.json") }

func load(_ directory: String) throws -> State {
    guard let data = FileManager.default.contents(atPath: statePath(directory)),
        let state = try? JSONDecoder().decode(State.self, from: data)
    else { throw Arguments.UsageError(message: "\(statePath(directory)) is missing or malformed: run init first") }
    return state
}

func save(_ state: State, _ directory: String) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    let path = statePath(directory)
    let temporary = path + ".new"
    let previous = umask(0o077)
    defer { umask(previous) }
    guard FileManager.default.createFile(atPath: temporary, contents: try encoder.encode(state)), rename(temporary, path) == 0
    else { throw Arguments.UsageError(message: "cannot write \(path)") }
}

func signer(_ state: State) throws -> P256.SigningKey {
    guard let scalar = Data(base64Encoded: state.key) else { throw Arguments.UsageError(message: "the auditor key is malformed") }
    return try P256.SigningKey(rawRepresentation: scalar)
}

func publicKey(_ key: P256.SigningKey) -> String { (key.publicKey.x + key.publicKey.y).base64EncodedString() }

func initialize(_ arguments: inout Arguments) throws {
    let directory = try arguments.next("the auditor's directory")
    let vrf = try arguments.option("--vrf-key")
    let head = try arguments.option("--head-key")
    try arguments.finish()
    guard let vrf, let head, let vrfKey = Data(base64Encoded: vrf), let headKey = Data(base64Encoded: head) else {
        throw Arguments.UsageError(message: "init takes --vrf-key and --head-key, each base64")
    }
    let keys = TransparencyKeys(vrfKey: vrfKey, headKey: headKey)
    guard (try? keys.vrf()) != nil, (try? keys.head()) != nil else {
        throw Arguments.UsageError(message: "those are not the domain's transparency keys (33 and 64 bytes of P-256)")
    }
    if FileManager.default.fileExists(atPath: statePath(directory)) {
        throw Arguments.UsageError(message: "\(statePath(directory)) exists already")
    }
    try FileManager.default.createDirectory(
        atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    let key = try P256.SigningKey()
    let scalar = key.rawRepresentation.withUnsafeBytes { Data($0) }
    try save(State(key: scalar.base64EncodedString(), vrfKey: vrf, headKey: head, lastSigned: nil), directory)
    print(publicKey(key))
}

func run(_ arguments: inout Arguments) async throws -> Int32 {
    let directory = try arguments.next("the auditor's directory")
    let domain = try arguments.option("--domain")
    let ca = try arguments.option("--ca")
    let once = arguments.flag("--once")
    let interval = try arguments.integer("--interval", in: 1...86_400) ?? 10
    try arguments.finish()
    guard let domain, let url = URL(string: domain) else { throw Arguments.UsageError(message: "run takes --domain URL") }
    var state = try load(directory)
    let keys = TransparencyKeys(
        vrfKey: Data(base64Encoded: state.vrfKey) ?? Data(), headKey: Data(base64Encoded: state.headKey) ?? Data())
    let trust: DomainTrust =
        if let ca { .certificateAuthority(path: ca) } else if url.scheme == "http" { .plainLoopback } else {
            .certificateAuthority(path: "/etc/ssl/certs/ca-certificates.crt")
        }
    let remote = try RemoteDomain(url: url, domainID: "audited", trust: trust)
    var last: TreeHead?
    if let saved = state.lastSigned, let size = saved["size"].flatMap(UInt64.init),
        let root = saved["root"].flatMap({ Data(base64Encoded: $0) }),
        let timestamp = saved["timestamp"].flatMap(UInt64.init),
        let signature = saved["signature"].flatMap({ Data(base64Encoded: $0) })
    {
        last = TreeHead(size: size, root: root, timestamp: timestamp, signature: signature)
    }
    let auditor = TransparencyAuditor(source: remote, keys: keys, signer: try signer(state), lastSigned: last)
    while true {
        do {
            if let head = try await auditor.step() {
                print("co-signed the head of \(head.size) entries (root \(head.root.base64EncodedString()))")
                state.lastSigned = [
                    "size": "\(head.size)", "root": head.root.base64EncodedString(), "timestamp": "\(head.timestamp)",
                    "signature": head.signature.base64EncodedString(),
                ]
                try save(state, directory)
            }
        } catch let error as CryptoError {
            FileHandle.standardError.write(Data("spark-kt-auditor: ALARM: \(error.reason)\n".utf8))
            return 2
        } catch {
            FileHandle.standardError.write(Data("spark-kt-auditor: \(error)\n".utf8))
            if once { return 1 }
        }
        if once { return 0 }
        try await Task.sleep(for: .seconds(interval))
    }
}

func main() async -> Int32 {
    var arguments = Arguments(Array(CommandLine.arguments.dropFirst()))
    do {
        guard !arguments.isEmpty else {
            print(usage)
            return 64
        }
        switch try arguments.next("a command") {
        case "init": try initialize(&arguments)
        case "key":
            let directory = try arguments.next("the auditor's directory")
            try arguments.finish()
            print(publicKey(try signer(try load(directory))))
        case "run": return try await run(&arguments)
        case "help", "--help", "-h": print(usage)
        case let command: throw Arguments.UsageError(message: "unknown command '\(command)'")
        }
        return 0
    } catch let error as Arguments.UsageError {
        FileHandle.standardError.write(Data("spark-kt-auditor: \(error.message)\n\n\(usage)\n".utf8))
        return 64
    } catch {
        FileHandle.standardError.write(Data("spark-kt-auditor: \(error)\n".utf8))
        return 1
    }
}

exit(await main())
