// spark-mls: an MLS (RFC 9420) client on SparkMLS that exchanges raw TLS-encoded MLSMessage files
// with any other implementation, as the working group's interop harness drives its clients.
//
//   spark-mls create DIR --identity NAME [--group-id HEX]
//   spark-mls keypackage DIR OUT [--identity NAME]
//   spark-mls add DIR KEYPACKAGE COMMIT_OUT WELCOME_OUT
//   spark-mls join DIR WELCOME [--ratchet-tree FILE]
//   spark-mls process DIR MESSAGE
//   spark-mls protect DIR TEXT OUT
//   spark-mls update DIR COMMIT_OUT
//   spark-mls remove DIR LEAF COMMIT_OUT
//   spark-mls group-info DIR OUT
//   spark-mls epoch DIR
//
// DIR holds one client: its signature key and credential (`signer`), its group (`group`) and the
// private halves of its KeyPackages (`keypackages/`), all mode 0600. Basic credentials, suite 1.
// Exit status: 0 success, 1 a message or operation MLS refused, 64 bad usage.
import Foundation
import SparkCLI
import SparkCrypto
import SparkMLS

let usageText = """
    usage: spark-mls create DIR --identity NAME [--group-id HEX]
           spark-mls keypackage DIR OUT [--identity NAME]
           spark-mls add DIR KEYPACKAGE COMMIT_OUT WELCOME_OUT
           spark-mls join DIR WELCOME [--ratchet-tree FILE]
           spark-mls process DIR MESSAGE
           spark-mls protect DIR TEXT OUT
           spark-mls update DIR COMMIT_OUT
           spark-mls remove DIR LEAF COMMIT_OUT
           spark-mls group-info DIR OUT
           spark-mls epoch DIR

    """

struct Client {
    let directory: URL

    var signerFile: URL { directory.appendingPathComponent("signer") }
    var groupFile: URL { directory.appendingPathComponent("group") }
    var keyPackages: URL { directory.appendingPathComponent("keypackages") }

    static func read(_ path: String, _ what: String) throws -> Data {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw Arguments.UsageError(message: "cannot read \(what) \(path)")
        }
        return data
    }

    static func write(_ data: some ContiguousBytes, to url: URL, private isPrivate: Bool = false) throws {
        let bytes = data.withUnsafeBytes { Data($0) }
        let temporary = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(getpid())")
        guard
            FileManager.default.createFile(
                atPath: temporary.path, contents: bytes, attributes: isPrivate ? [.posixPermissions: 0o600] : nil)
        else { throw Arguments.UsageError(message: "cannot write \(url.path)") }
        guard rename(temporary.path, url.path) == 0 else { throw Arguments.UsageError(message: "cannot write \(url.path)") }
    }

    func prepare() throws {
        try FileManager.default.createDirectory(
            at: keyPackages, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    /// The client's signer: made for `identity` on first use, then read back (and checked against
    /// `identity` when one is given).
    func signer(identity: String?) throws -> MLSSigner {
        if let stored = FileManager.default.contents(atPath: signerFile.path) {
            guard stored.count > 32 else { throw Arguments.UsageError(message: "\(signerFile.path) is damaged") }
            let key = try Ed25519.PrivateKey(rawRepresentation: stored.prefix(32))
            let name = Data(stored.dropFirst(32))
            if let identity, Data(identity.utf8) != name {
                throw Arguments.UsageError(
                    message: "\(directory.path) belongs to '\(String(decoding: name, as: UTF8.self))', not '\(identity)'")
            }
            return MLSSigner(credential: MLSCredential(identity: name), key: key)
        }
        guard let identity, !identity.isEmpty else { throw Arguments.UsageError(message: "a new client needs --identity NAME") }
        try prepare()
        let key = try Ed25519.PrivateKey()
        try Self.write(key.rawRepresentation.unsafeData() + Data(identity.utf8), to: signerFile, private: true)
        return MLSSigner(credential: MLSCredential(identity: Data(identity.utf8)), key: key)
    }

    func group() throws -> MLSGroup {
        guard let stored = FileManager.default.contents(atPath: groupFile.path) else {
            throw Arguments.UsageError(message: "no group in \(directory.path): run create or join first")
        }
        return try MLSGroup(serialized: stored)
    }

    func save(_ group: MLSGroup) throws { try Self.write(group.serialized(), to: groupFile, private: true) }
}

func hex(_ data: Data) -> String { data.map { String(format: "%02x", $0) }.joined() }

func run(_ words: [String]) throws -> Int32 {
    if let first = words.first, ["--help", "-h", "help"].contains(first) {
        print(usageText, terminator: "")
        return 0
    }
    var arguments = Arguments(words)
    let command = try arguments.next("a command")
    var random = MLSSystemRandom()
    let now = Date()
    switch command {
    case "create":
        let client = Client(directory: URL(fileURLWithPath: try arguments.next("DIR")))
        let identity = try arguments.option("--identity")
        let groupIDText = try arguments.option("--group-id")
        try arguments.finish()
        guard identity != nil || FileManager.default.fileExists(atPath: client.signerFile.path) else {
            throw Arguments.UsageError(message: "create needs --identity NAME")
        }
        if FileManager.default.fileExists(atPath: client.groupFile.path) {
            throw Arguments.UsageError(message: "\(client.directory.path) already has a group")
        }
        var groupID = Data((0..<16).map { _ in UInt8.random(in: 0...255) })
        if let groupIDText {
            guard let parsed = Data(hexString: groupIDText), !parsed.isEmpty else {
                throw Arguments.UsageError(message: "--group-id takes hex, not '\(groupIDText)'")
            }
            groupID = parsed
        }
        let group = try MLSGroup.create(groupID: groupID, signer: try client.signer(identity: identity), random: &random)
        try client.save(group)
        print(hex(groupID))
    case "keypackage":
        let client = Client(directory: URL(fileURLWithPath: try arguments.next("DIR")))
        let output = URL(fileURLWithPath: try arguments.next("OUT"))
        let identity = try arguments.option("--identity")
        try arguments.finish()
        let bundle = try MLSKeyPackageBundle(signer: try client.signer(identity: identity), now: now, random: &random)
        try client.prepare()
        try Client.write(bundle.serialized(), to: client.keyPackages.appendingPathComponent(hex(bundle.reference)), private: true)
        try Client.write(bundle.keyPackage, to: output)
        print(hex(bundle.reference))
    case "add":
        let client = Client(directory: URL(fileURLWithPath: try arguments.next("DIR")))
        let keyPackage = try Client.read(try arguments.next("KEYPACKAGE"), "KeyPackage")
        let commitOut = URL(fileURLWithPath: try arguments.next("COMMIT_OUT"))
        let welcomeOut = URL(fileURLWithPath: try arguments.next("WELCOME_OUT"))
        try arguments.finish()
        let result = try client.group().commit(adding: [keyPackage], now: now, random: &random)
        try Client.write(result.commit, to: commitOut)
        try Client.write(result.welcome ?? Data(), to: welcomeOut)
        try client.save(result.group)
        print("epoch \(result.group.epoch)")
    case "update", "remove":
        let client = Client(directory: URL(fileURLWithPath: try arguments.next("DIR")))
        var removing: [UInt32] = []
        if command == "remove" {
            let text = try arguments.next("LEAF")
            guard let leaf = UInt32(text) else { throw Arguments.UsageError(message: "LEAF is a leaf index, not '\(text)'") }
            removing = [leaf]
        }
        let commitOut = URL(fileURLWithPath: try arguments.next("COMMIT_OUT"))
        try arguments.finish()
        let result = try client.group().commit(removing: removing, now: now, random: &random)
        try Client.write(result.commit, to: commitOut)
        try client.save(result.group)
        print("epoch \(result.group.epoch)")
    case "join":
        let client = Client(directory: URL(fileURLWithPath: try arguments.next("DIR")))
        let welcome = try Client.read(try arguments.next("WELCOME"), "Welcome")
        let tree = try arguments.option("--ratchet-tree").map { try Client.read($0, "ratchet tree") }
        try arguments.finish()
        if FileManager.default.fileExists(atPath: client.groupFile.path) {
            throw Arguments.UsageError(message: "\(client.directory.path) already has a group")
        }
        let stored = (try? FileManager.default.contentsOfDirectory(atPath: client.keyPackages.path)) ?? []
        var lastError: (any Error)?
        for name in stored.sorted() {
            guard let bytes = FileManager.default.contents(atPath: client.keyPackages.appendingPathComponent(name).path),
                let bundle = try? MLSKeyPackageBundle(serialized: bytes)
            else { continue }
            do {
                let group = try MLSGroup.join(welcome: welcome, bundle: bundle, ratchetTree: tree)
                try client.save(group)
                // A KeyPackage is used once.
                try? FileManager.default.removeItem(at: client.keyPackages.appendingPathComponent(name))
                print("epoch \(group.epoch)")
                return 0
            } catch let error as MLSError where error.code == .wrongGroup {
                lastError = error
            }
        }
        throw lastError ?? MLSError(.wrongGroup, "no KeyPackage of \(client.directory.path) is invited by this Welcome")
    case "process":
        let client = Client(directory: URL(fileURLWithPath: try arguments.next("DIR")))
        let message = try Client.read(try arguments.next("MESSAGE"), "message")
        try arguments.finish()
        var group = try client.group()
        let received = try group.process(message, now: now)
        try client.save(group)
        switch received {
        case .application(let data, _, _): FileHandle.standardOutput.write(data + Data("\n".utf8))
        case .proposal: print("proposal")
        case .commit(let epoch, _, _): print("epoch \(epoch)")
        case .removed: print("removed")
        }
    case "protect":
        let client = Client(directory: URL(fileURLWithPath: try arguments.next("DIR")))
        let text = try arguments.next("TEXT")
        let output = URL(fileURLWithPath: try arguments.next("OUT"))
        try arguments.finish()
        var group = try client.group()
        let message = try group.protect(Data(text.utf8), random: &random)
        try client.save(group)
        try Client.write(message, to: output)
    case "group-info":
        let client = Client(directory: URL(fileURLWithPath: try arguments.next("DIR")))
        let output = URL(fileURLWithPath: try arguments.next("OUT"))
        try arguments.finish()
        try Client.write(try client.group().groupInfo(), to: output)
    case "epoch":
        let client = Client(directory: URL(fileURLWithPath: try arguments.next("DIR")))
        try arguments.finish()
        let group = try client.group()
        print("\(group.epoch) \(hex(group.epochAuthenticator))")
    default:
        throw Arguments.UsageError(message: "unknown command '\(command)'")
    }
    return 0
}

extension Data {
    init?(hexString: String) {
        guard hexString.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        var index = hexString.startIndex
        while index < hexString.endIndex {
            let next = hexString.index(index, offsetBy: 2)
            guard let byte = UInt8(hexString[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        self.init(bytes)
    }
}

do {
    exit(try run(Array(CommandLine.arguments.dropFirst())))
} catch let error as Arguments.UsageError {
    FileHandle.standardError.write(Data("spark-mls: \(error.message)\n\(usageText)".utf8))
    exit(64)
} catch let error as MLSError {
    FileHandle.standardError.write(Data("spark-mls: refused: \(error.reason) (\(error.code.rawValue))\n".utf8))
    exit(1)
} catch {
    FileHandle.standardError.write(Data("spark-mls: \(error)\n".utf8))
    exit(1)
}
