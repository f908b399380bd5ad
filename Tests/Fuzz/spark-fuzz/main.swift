// spark-fuzz: libFuzzer harnesses over every public decoder of the SDK. One binary, one harness
// per run:
//
//   spark-fuzz HARNESS [libFuzzer flags] [CORPUS…]   fuzz (built with -sanitize=fuzzer,address)
//   spark-fuzz HARNESS CORPUS…                       replay the corpus (a normal build)
//   spark-fuzz --list                                the harnesses
//   spark-fuzz --make-seeds DIRECTORY                write valid inputs for each harness
//
// scripts/fuzz.sh builds and runs it; Tests/Fuzz/corpus/<harness>/ keeps the seeds and every
// input that once crashed, replayed by `swift test`. A harness must never crash: a decoder
// answers hostile input with an error, which the harness ignores.
import CSparkFuzz
import CSparkHTTP
import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkDomainServer
import SparkLock
import SparkMLS
@_spi(Fuzzing) import SparkSDK

/// Fixed keys, so that seeds made by `--make-seeds` verify and decrypt in every run.
enum Fixture {
    static let alice = try! UnlockedKeys(
        userID: "alice", signing: Ed25519.PrivateKey(rawRepresentation: Data(repeating: 1, count: 32)),
        encryption: X25519.PrivateKey(rawRepresentation: Data(repeating: 2, count: 32)), keyVersion: 1)
    static let bob = try! UnlockedKeys(
        userID: "bob", signing: Ed25519.PrivateKey(rawRepresentation: Data(repeating: 3, count: 32)),
        encryption: X25519.PrivateKey(rawRepresentation: Data(repeating: 4, count: 32)), keyVersion: 1)
    static let chatKey = SymmetricKey(data: Data(repeating: 5, count: 32))
    static let jwsKeys: [JWS.VerificationKey] = [
        JWS.VerificationKey(alice.signing.publicKey, keyID: "k1"),
        JWS.VerificationKey(try! P256.PublicKey(x: p256X, y: p256Y), keyID: "p1"),
    ]
    // A point on P-256 (the generator).
    static let p256X = Data(hexadecimal: "6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296")
    static let p256Y = Data(hexadecimal: "4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5")
    static let issuer = TokenIssuer(issuer: "https://idp.example", key: alice.signing, keyID: "k1")
    static let oprfKey = try! OPRF.passcodeHardening.deriveKey(seed: Data(repeating: 6, count: 32), info: Data("alice".utf8))
    static let blinded = try! OPRF.passcodeHardening.blind(
        Data("stretched".utf8), unsafeBlind: Data(repeating: 7, count: 32))
    static let validator = TokenValidator(issuers: [issuer.trusted(audience: "fuzz", kind: .external)])
}

/// A transparency log of alice's identity under fixed keys, and its proof (the `kt-proof` seeds).
enum TransparencyFixture {
    static let vrf = try! ECVRF.PrivateKey(rawRepresentation: Data(repeating: 8, count: 32))
    static let head = try! P256.SigningKey(rawRepresentation: Data(repeating: 9, count: 32))
    static let keys = TransparencyKeys(vrfKey: vrf.publicKey.compressed, headKey: head.publicKey.x + head.publicKey.y)
    static let auditor = head.publicKey.x + head.publicKey.y
    static let proof: IdentityProof = {
        var tree = CombinedTree(vrf: vrf)
        _ = try! tree.append(
            label: IdentityProof.label(of: "alice"), value: try! IdentityProof.value(of: try! Fixture.alice.publishedIdentity()))
        _ = try! tree.append(label: IdentityProof.label(of: "bob"), value: Data("bob".utf8))
        let root = tree.root!
        let signature = try! head.signature(
            for: TreeHead.signedBytes(size: tree.size, root: root, timestamp: 1, vrfKey: keys.vrfKey))
        let treeHead = TreeHead(size: tree.size, root: root, timestamp: 1, signature: signature)
        return IdentityProof(
            head: treeHead, consistency: [], search: try! tree.searchLatest(IdentityProof.label(of: "alice")),
            auditorSignature: try! head.signature(for: TransparencyAudit.signedBytes(treeHead, vrfKey: keys.vrfKey)))
    }()
}

/// Bob's device's view of a chat with alice, from fixed keys (`ChatProbe`).
enum ChatFixture {
    static let value = try! ChatProbe.fixture()
}

/// A two-member MLS group made from fixed randomness, so the seeds `--make-seeds` writes are the
/// messages these states expect in every run.
enum MLSFixture {
    static let now = Date(timeIntervalSince1970: 1_790_000_000)
    static func signer(_ name: String, _ byte: UInt8) -> MLSSigner {
        MLSSigner(
            credential: MLSCredential(identity: Data(name.utf8)),
            key: try! Ed25519.PrivateKey(rawRepresentation: Data(repeating: byte, count: 32)))
    }
    static let bobBundle: MLSKeyPackageBundle = {
        var random = MLSSeededRandom(seed: "fuzz bob")
        return try! MLSKeyPackageBundle(signer: signer("bob", 11), now: now, random: &random)
    }()
    static let carolBundle: MLSKeyPackageBundle = {
        var random = MLSSeededRandom(seed: "fuzz carol")
        return try! MLSKeyPackageBundle(signer: signer("carol", 12), now: now, random: &random)
    }()
    /// Alice's group with Bob, and the Welcome that brought Bob in.
    static let (alice, welcome): (MLSGroup, Data) = {
        var random = MLSSeededRandom(seed: "fuzz alice")
        let group = try! MLSGroup.create(groupID: Data("fuzz group".utf8), signer: signer("alice", 10), random: &random)
        let result = try! group.commit(adding: [bobBundle.keyPackage], now: now, random: &random)
        return (result.group, result.welcome!)
    }()
    static let bob = try! MLSGroup.join(welcome: welcome, bundle: bobBundle)
    /// Messages from Alice that Bob's state accepts: an application message, an Update proposal,
    /// a commit adding Carol (with its Welcome) and a GroupInfo.
    static func messages() -> (application: Data, proposal: Data, commit: Data, welcome: Data, groupInfo: Data) {
        var random = MLSSeededRandom(seed: "fuzz messages")
        var sender = alice
        let application = try! sender.protect(Data("hello".utf8), random: &random)
        var proposer = alice
        let proposal = try! proposer.proposeUpdate(random: &random)
        let added = try! alice.commit(adding: [carolBundle.keyPackage], now: now, random: &random)
        return (application, proposal, added.commit, added.welcome!, try! alice.groupInfo())
    }
}

extension Data {
    init(hexadecimal: String) {
        self.init(stride(from: 0, to: hexadecimal.count, by: 2).map { UInt8(hexadecimal.dropFirst($0).prefix(2), radix: 16)! })
    }
    var text: String { String(decoding: self, as: UTF8.self) }
}

/// spark-domaind's router over a throwaway embedded domain, with one registered user whose
/// credential every fuzzed request carries (so input reaches the domain's own checks).
enum Served {
    /// Its own each run: a directory named by the process id alone was found left over from an
    /// earlier process with the same id, holding a domain already.
    static let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
        "spark-fuzz-\(getpid())-\(UUID().uuidString)")
    static let (router, token): (DomainRouter, String) = {
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("domain.sqlite").path
        _ = try! EmbeddedDomain.create(at: path, domainID: "fuzz")
        let domain = try! EmbeddedDomain.open(at: path, sharedWithOtherProcesses: false)
        let token = blocking { try! await domain.testToken(userID: "alice").token }
        _ = blocking { try! await domain.registerEndpoint(token: token, registration: .init(endpointID: "a1", description: "a")) }
        let bob = blocking { try! await domain.testToken(userID: "bob").token }
        _ = blocking { try! await domain.registerEndpoint(token: bob, registration: .init(endpointID: "b1", description: "b")) }
        _ = blocking { try! await domain.createChat(token: token, endpointID: "a1", chatID: "c1", participants: ["bob"]) }
        return (DomainRouter(domain: domain, operatorCredential: "operator"), token)
    }()

    /// Runs async work to its end from the fuzzer's synchronous callback.
    static func blocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
        let done = DispatchSemaphore(value: 0)
        let result = Locked<T?>(nil)
        Task {
            let value = await body()
            result.withLock { $0 = value }
            done.signal()
        }
        done.wait()
        return result.withLock { $0! }
    }
}

/// The keys the `kem` harness decapsulates with (fixed seeds: a run replays exactly).
enum KEMFixture {
    static let mlkem = try! MLKEM768.PrivateKey(seed: SecureBytes(Data(repeating: 7, count: 64)))
    static let xwing = try! XWing.PrivateKey(seed: SecureBytes(Data(repeating: 9, count: 32)))

    /// The input's first byte chooses what its rest is: an ML-KEM encapsulation key (checked,
    /// then encapsulated to), an ML-KEM ciphertext, an expanded ML-KEM private key (checked,
    /// then decapsulating its own ciphertext), an X-Wing public key, an X-Wing ciphertext.
    static func run(_ data: Data) {
        guard let selector = data.first else { return }
        let rest = data.dropFirst()
        switch selector % 5 {
        case 0: _ = try? MLKEM768.PublicKey(rawRepresentation: rest).encapsulate()
        case 1: _ = try? mlkem.decapsulate(rest)
        case 2:
            if let key = try? MLKEM768.PrivateKey(expandedRepresentation: rest),
                let (_, ciphertext) = try? key.publicKey.encapsulate()
            {
                _ = try? key.decapsulate(ciphertext)
            }
        case 3: _ = try? XWing.PublicKey(rawRepresentation: rest).encapsulate()
        default: _ = try? xwing.decapsulate(rest)
        }
    }
}

/// Each harness feeds one input to one decoder and everything it leads to.
let harnesses: [String: @Sendable (Data) -> Void] = [
    "kem": { data in KEMFixture.run(data) },
    "base64url": { data in
        _ = try? Data(base64URLEncoded: data.text)
        _ = try? SecureBytes(base64URLEncoded: data.text)
    },
    "jws": { data in
        if let unverified = try? JWS.Unverified(data.text) {
            _ = unverified.header
            _ = try? unverified.verify(using: Fixture.jwsKeys)
        }
        _ = try? JWS.unverifiedPayload(of: data.text)
    },
    "jwt": { data in _ = try? Fixture.validator.validate(data.text) },
    "jwe": { data in
        _ = try? JWE.header(of: data)
        _ = try? JWE.decrypt(data, keyEncryptionKey: Fixture.chatKey)
        _ = try? JWE.decrypt(data, password: Data("passcode".utf8), maximumIterations: JWE.minimumDecryptIterations)
    },
    "jwk": { data in
        guard let jwk = try? JWK(json: data) else { return }
        _ = try? jwk.ed25519PublicKey()
        _ = try? jwk.ed25519PrivateKey()
        _ = try? JWS.VerificationKey(jwk: jwk)
        _ = try? jwk.jsonData()
    },
    "jwkset": { data in
        guard let set = try? JWKSet(json: data) else { return }
        for jwk in set.keys { _ = try? JWS.VerificationKey(jwk: jwk) }
    },
    "plist": { data in
        _ = try? ConfigSettings.decode(
            data, file: "fuzz.plist", baseDirectory: URL(fileURLWithPath: "/nonexistent"), environment: [:])
    },
    "chat-payload": { data in _ = ChatProbe.decodePayload(data) },
    "search-query": { data in _ = SearchProbe.run(String(decoding: data, as: UTF8.self)) },
    "kt-proof": { data in
        if let proof = try? TransparencyCodec.decodeProof(data) {
            _ = try? proof.verify(userID: "alice", keys: TransparencyFixture.keys, previous: nil)
            _ = try? proof.verify(
                userID: "alice", keys: TransparencyFixture.keys, previous: TransparencyFixture.proof.head,
                auditor: TransparencyFixture.auditor)
        }
        if let head = try? TransparencyCodec.decodeHead(data) { _ = head.isSigned(by: TransparencyFixture.keys) }
        if let updates = try? TransparencyAudit.decode(data) {
            var audit = TransparencyAudit()
            _ = try? audit.append(updates)
        }
        _ = try? TransparencyCodec.decodeNodes(data)
    },
    "chat-entry": { data in
        // The first byte picks the entry's kind and sender; the rest is the payload.
        guard let first = data.first else { return }
        let kinds: [MailboxKind] = [.message, .event, .receipt, .commit, .ephemeral]
        let kind = kinds[Int(first) % kinds.count]
        let sender = first & 0x80 == 0 ? "alice" : "bob"
        _ = ChatProbe.receive(
            Data(data.dropFirst()), kind: kind, sender: sender, epoch: kind == .commit ? ChatFixture.value.epoch : nil,
            in: ChatFixture.value)
    },
    "mailbox-entry": { data in
        guard let entry = try? JSONDecoder().decode(MailboxEntry.self, from: data) else { return }
        switch entry.kind {
        case .message, .event, .receipt, .commit, .ephemeral:
            _ = ChatProbe.receive(
                entry.payload, kind: entry.kind, sender: entry.sender, epoch: entry.epoch, in: ChatFixture.value)
        case .devices:
            _ = ChatProbe.decodePayload(entry.payload)
        case .membership:
            _ = entry.members?.map(\.userID)
        case .identityReset:
            _ = try? JSONDecoder().decode(IdentityResetNotice.self, from: entry.payload)
        case .welcome:
            _ = try? MLSGroup.keyPackageReferences(inWelcome: entry.payload)
        }
    },
    "wire-request": { data in
        // One byte picks the operation (and whether the credential is a user's or the
        // operator's), the rest is its body, or its query for a GET. No input may get a 5xx.
        guard let first = data.first else { return }
        let operations = DomainOperation.allCases
        let operation = operations[Int(first) % operations.count]
        let rest = Data(data.dropFirst())
        var query: [String: String] = [:]
        var names: [String] = []
        if operation.method == "GET" {
            for pair in rest.text.split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                let name = String(parts.first ?? "")
                names.append(name)
                query[name] = parts.count > 1 ? String(parts[1]) : ""
            }
            // A long-poll would hold the fuzzer for up to 30 s: any numeric wait is none.
            if let wait = query["wait"], Int(wait) != nil { query["wait"] = "0" }
        }
        let bearer = first >= 128 ? "operator" : Served.token
        let request = HTTPRequest(
            method: operation.method, path: operation.path,
            headers: ["authorization": "Bearer \(bearer)", "spark-endpoint": "a1", "content-type": "application/json"],
            query: query, queryNames: names, body: operation.method == "GET" ? Data() : rest)
        let router = Served.router
        let response = Served.blocking { await router.handle(request) }
        precondition(response.status < 500, "\(operation.path) answered \(response.status): \(response.body.text)")
    },
    "oprf": { data in
        // The domain's side: a blinded element from anyone. The device's side: an evaluation
        // and proof from a hostile domain (33-byte element, then the proof).
        let oprf = OPRF.passcodeHardening
        _ = try? oprf.blindEvaluate([data.prefix(33)], key: Fixture.oprfKey)
        let evaluation = OPRF.Evaluation(elements: [Data(data.prefix(33))], proof: Data(data.dropFirst(33)))
        _ = try? oprf.finalize([Fixture.blinded], evaluation, publicKey: Fixture.oprfKey.publicKey)
        _ = try? oprf.finalize([Fixture.blinded], evaluation, publicKey: Data(data.suffix(33)))
    },
    "mls-message": { data in
        // An MLSMessage from anyone to a member: decoded, decrypted, verified, validated.
        var bob = MLSFixture.bob
        _ = try? bob.process(data, now: MLSFixture.now)
    },
    "mls-welcome": { data in
        // A Welcome for Bob's KeyPackage (or Carol's), and the tree beside it.
        _ = try? MLSGroup.join(welcome: data, bundle: MLSFixture.bobBundle)
        _ = try? MLSGroup.join(welcome: data, bundle: MLSFixture.carolBundle, ratchetTree: data)
    },
    "mls-group-info": { data in
        // A GroupInfo to join from by an external commit.
        var random = MLSSeededRandom(seed: "fuzz external")
        _ = try? MLSGroup.joinExternally(groupInfo: data, signer: MLSFixture.signer("dave", 13), random: &random)
    },
    "mls-key-package": { data in
        // A KeyPackage a member is asked to add, and a stored bundle.
        var alice = MLSFixture.alice
        var random = MLSSeededRandom(seed: "fuzz add")
        _ = try? alice.proposeAdd(keyPackage: data, now: MLSFixture.now, random: &random)
        _ = try? MLSKeyPackageBundle(serialized: data)
        _ = try? MLSGroup(serialized: data)
    },
    "wire-answer": { data in
        // What a RemoteDomain decodes from a domain's answers.
        let decoder = WireCoder.decoder()
        _ = try? decoder.decode(RegistrationOutcome.self, from: data)
        _ = try? decoder.decode(Wire.Entries.self, from: data)
        _ = try? decoder.decode(UserStatus.self, from: data)
        _ = try? decoder.decode(BlobFetch.self, from: data)
        _ = try? decoder.decode(PasscodeEvaluation.self, from: data)
        _ = try? decoder.decode(IdentityResetOutcome.self, from: data)
        _ = try? decoder.decode(DomainError.self, from: data)
        _ = try? WireCoder.decode(Wire.CreateChat.self, from: data)
        _ = try? decoder.decode(Wire.ClaimedKeyPackages.self, from: data)
        _ = try? decoder.decode(Wire.Epoch.self, from: data)
        _ = try? decoder.decode(ChatInfo.self, from: data)
    },
    "device-credential": { data in
        // A leaf's credential as a member checks it, a device approval as the user's devices
        // check it, a claimed KeyPackage read before use, and a safety number the user typed.
        let validator = DeviceCredentialValidator(identityKeys: ["alice": Fixture.alice.signing.publicKey.rawRepresentation])
        if let credential = try? DeviceCredential(encoded: data) {
            _ = validator.isValid(credential.mlsCredential, signatureKey: credential.signatureKey)
        }
        if let approval = try? DeviceApproval(encoded: data) {
            _ = approval.isSigned
            _ = DeviceApproval.code(user: approval.userID, approval.approverKey, approval.approvedKey)
        }
        _ = try? MLSKeyPackageSummary(data)
        _ = SafetyNumber(digits: String(decoding: data, as: UTF8.self))
    },
    "domain-request": { data in
        // The request types of the domain's contract, and what the domain checks of them.
        let decoder = JSONDecoder()
        if let request = try? decoder.decode(SignUpRequest.self, from: data) { _ = request.description }
        _ = try? decoder.decode(EndpointRegistration.self, from: data)
        if let identity = try? decoder.decode(PublishedIdentity.self, from: data) { _ = identity.isSelfSigned }
        if let policy = try? decoder.decode(DomainPolicy.self, from: data) { _ = try? policy.validate() }
        _ = try? decoder.decode([ChatPost].self, from: data)
        _ = try? decoder.decode(UserStatus.self, from: data)
        _ = try? WireCoder.decode(Wire.PostCommit.self, from: data)
        _ = try? WireCoder.decode(Wire.PublishKeyPackages.self, from: data)
    },
    "http-request": { data in
        // A request as spark-domaind's HTTP server frames it (head, chunked or sized body, path and
        // query decoding), with a small body cap so the cap is reached too.
        let bytes = [UInt8](data)
        var consumed = 0
        var length = 0
        let framed = spark_http_parse(bytes, bytes.count, 64, &consumed, &length)
        precondition(framed <= 1, "a result that is not a status")
        if framed == 1 {
            precondition(consumed <= bytes.count && length <= 64, "a request longer than its input or the cap")
        }
        // The same bytes arriving in pieces (the framing resumed at each read, the head parsed
        // once) frame the same way as all at once.
        if let first = bytes.first {
            var whole = (consumed: 0, length: 0)
            var pieces = (consumed: 0, length: 0)
            let all = spark_http_parse_in_pieces(bytes, bytes.count, 64, bytes.count, &whole.consumed, &whole.length)
            let split = spark_http_parse_in_pieces(bytes, bytes.count, 64, 1 + Int(first % 16), &pieces.consumed, &pieces.length)
            precondition(all == split && (all != 1 || whole == pieces), "a request framed differently when it arrives in pieces")
        }
    },
    "proxy-header": { data in
        // The PROXY protocol v2 header spark-domaind reads from its proxies.
        let bytes = [UInt8](data)
        var consumed = 0
        var address = [CChar](repeating: 0, count: 64)
        if spark_proxy_header_parse(bytes, bytes.count, &consumed, &address, address.count) == 1 {
            precondition(consumed >= 16 && consumed <= bytes.count, "a header longer than its input")
            precondition(address.contains(0), "an address without its terminator")
        }
    },
]

/// Valid inputs for each harness, so the fuzzer starts past the outer checks.
func seeds() throws -> [String: [Data]] {
    let chat = ChatFixture.value
    // A chat payload: version 1, a text, id "m1", content "hi", tag "Text", no data, no ref, no
    // receipt, no number.
    let chatPayloadSeed =
        Data([1, 1, 2]) + Data("m1".utf8) + Data([2]) + Data("hi".utf8) + Data([4]) + Data("Text".utf8) + Data([0, 0, 0, 0])
    let token = try Fixture.issuer.issue(subject: "carol", audience: "fuzz", lifetime: 3600, now: Date()).token
    let jwe = try JWE.encrypt(Data("secret".utf8), keyEncryptionKey: Fixture.chatKey, keyID: "k", contentType: "text")
    let encoder = JSONEncoder()
    func entry(_ kind: MailboxKind, _ payload: Data) throws -> Data {
        try JSONSerialization.data(withJSONObject: [
            "sequence": 1, "chatID": "c1", "sender": "alice", "kind": kind.rawValue, "messageNumber": 1,
            "payload": payload.base64EncodedString(), "postedAt": 0,
        ])
    }
    let plist = """
        <?xml version="1.0" encoding="UTF-8"?>
        <plist version="1.0"><dict><key>authProvider</key><string>testAuth</string>
        <key>testAuth</key><dict><key>domain</key><string>d</string><key>environment</key><string>sandbox</string></dict>
        </dict></plist>
        """
    let mls = MLSFixture.messages()
    let (_, mlkemCiphertext) = try KEMFixture.mlkem.publicKey.encapsulate()
    let (_, xwingCiphertext) = try KEMFixture.xwing.publicKey.encapsulate()
    return [
        "kem": [
            Data([0]) + KEMFixture.mlkem.publicKey.rawRepresentation, Data([1]) + mlkemCiphertext,
            Data([2]) + KEMFixture.mlkem.expandedRepresentation.unsafeData(),
            Data([3]) + KEMFixture.xwing.publicKey.rawRepresentation, Data([4]) + xwingCiphertext,
        ],
        "mls-message": [mls.application, mls.proposal, mls.commit],
        "mls-welcome": [mls.welcome, MLSFixture.welcome],
        "mls-group-info": [mls.groupInfo],
        "mls-key-package": [
            MLSFixture.carolBundle.keyPackage, MLSFixture.carolBundle.serialized().unsafeData(),
            MLSFixture.bob.serialized().unsafeData(),
        ],
        "device-credential": [
            try DeviceCredential.issue(
                userID: "alice", deviceID: "laptop", signatureKey: Fixture.bob.signing.publicKey.rawRepresentation,
                identityKeyVersion: 1, identityKey: Fixture.alice.signing
            ).encoded,
            try DeviceApproval.sign(
                approving: try DeviceCredential.issue(
                    userID: "alice", deviceID: "phone", signatureKey: MLSFixture.signer("phone", 7).signatureKey,
                    identityKeyVersion: 1, identityKey: Fixture.alice.signing),
                by: MLSFixture.signer("laptop", 8), approverID: "laptop"
            ).encoded,
            MLSFixture.carolBundle.keyPackage,
            Data("30035 44776 92869 39689 28698 76765 45825 75691 62576 84344 09180 79131".utf8),
        ],
        "base64url": [Data("aGVsbG8".utf8), Data("_-_-".utf8)],
        "jws": [Data(token.utf8)],
        "jwt": [Data(token.utf8)],
        "jwe": [jwe],
        "oprf": [
            Fixture.blinded.element,
            {
                let evaluation = try! OPRF.passcodeHardening.blindEvaluate([Fixture.blinded.element], key: Fixture.oprfKey)
                return evaluation.elements[0] + (evaluation.proof ?? Data())
            }(),
        ],
        "jwk": [try JWK(Fixture.alice.signing.publicKey, keyID: "k1").jsonData(), try JWK(Fixture.alice.signing).jsonData()],
        "jwkset": [try Fixture.issuer.jwks.jsonData()],
        "plist": [Data(plist.utf8)],
        "chat-payload": [chatPayloadSeed],
        "kt-proof": [
            TransparencyCodec.encode(TransparencyFixture.proof), TransparencyCodec.encode(TransparencyFixture.proof.head),
            TransparencyAudit.encode([
                TransparencyAudit.Update(position: 0, vrfOutput: Data(repeating: 1, count: 32), commitment: Data(count: 32))
            ]),
        ],
        "search-query": [
            Data("lunch tomorrow".utf8), Data("\"lunch tomorrow\" caf*".utf8), Data("東京 OR NEAR(a b) -x *".utf8),
        ],
        "chat-entry": [Data([0]) + chat.message, Data([3]) + chat.commit, Data([4]) + chat.ephemeral],
        "mailbox-entry": [
            try entry(.message, chat.message),
            try entry(
                .identityReset,
                Data(#"{"state":"pending","pending":{"endpointID":"e","requestedAt":0,"effectiveAt":604800}}"#.utf8)),
        ],
        "wire-request": [
            Data([UInt8(DomainOperation.allCases.firstIndex(of: .post)!)])
                + Data(
                    #"{"chatID":"c1","kind":"message","payload":"aGk=","clientID":"x"}"#.utf8),
            Data([UInt8(DomainOperation.allCases.firstIndex(of: .readMailbox)!)]) + Data("after=0&limit=10&wait=0".utf8),
            Data([UInt8(DomainOperation.allCases.firstIndex(of: .createChat)!)])
                + Data(
                    #"{"chatID":"c2","participants":["bob"],"posts":[]}"#.utf8),
            Data([UInt8(128 + DomainOperation.allCases.firstIndex(of: .adminTimeOut)!)])
                + Data(
                    #"{"userID":"bob","seconds":5,"reason":"r"}"#.utf8),
        ],
        "wire-answer": [
            try WireCoder.encode(RegistrationOutcome.full(endpoints: [], maximum: 2)),
            Data(#"{"state":{"state":"timeout","until":"2026-12-01T10:00:00.000Z","reason":"r"},"infractions":[]}"#.utf8),
            try WireCoder.encode(DomainError(.tooManyAttempts, "slow down", retryAfter: 3)),
        ],
        "http-request": [
            Data("GET /v1/mailbox?after=0&limit=10&wait=25 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n\r\n".utf8),
            Data("POST /v1/chats/post HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}".utf8),
            Data("POST /a%20b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2;x=y\r\n{}\r\n0\r\nT: v\r\n\r\n".utf8),
        ],
        "proxy-header": [
            Data([0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A, 0x21, 0x11, 0, 12])
                + Data([203, 0, 113, 7, 127, 0, 0, 1, 0x30, 0x39, 0x20, 0xFB]) + Data("GET / HTTP/1.1\r\n\r\n".utf8)
        ],
        "domain-request": [
            try encoder.encode(SignUpRequest(userName: "u", password: "p", email: "e@x.y", country: "CA", age: 30)),
            try encoder.encode(DomainPolicy()),
            try encoder.encode(Fixture.alice.publishedIdentity()),
        ],
    ]
}

/// The harness of this run; the C callback cannot capture it.
nonisolated(unsafe) var selected: (@Sendable (Data) -> Void)?

let callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32 = { bytes, size in
    let data = bytes.map { Data(bytes: $0, count: size) } ?? Data()
    selected?(data)
    return 0
}

var arguments = CommandLine.arguments
guard arguments.count >= 2 else {
    FileHandle.standardError.write(Data("usage: spark-fuzz HARNESS [FLAGS] [CORPUS…] | --list | --make-seeds DIR\n".utf8))
    exit(64)
}
let command = arguments.remove(at: 1)
switch command {
case "--list":
    print(harnesses.keys.sorted().joined(separator: "\n"))
    exit(0)
case "--make-seeds":
    guard arguments.count >= 2 else { exit(64) }
    let root = URL(fileURLWithPath: arguments[1])
    for (name, inputs) in try seeds() {
        let directory = root.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for (index, input) in inputs.enumerated() {
            try input.write(to: directory.appendingPathComponent("seed-\(index + 1)"))
        }
    }
    exit(0)
default:
    guard let harness = harnesses[command] else {
        FileHandle.standardError.write(Data("spark-fuzz: no harness '\(command)'; see --list\n".utf8))
        exit(64)
    }
    selected = harness
}
var count = Int32(arguments.count)
var pointers = arguments.map { strdup($0) } + [nil]
let status = pointers.withUnsafeMutableBufferPointer { buffer -> Int32 in
    var argv = buffer.baseAddress
    return LLVMFuzzerRunDriver(&count, &argv, callback)
}
exit(status)
