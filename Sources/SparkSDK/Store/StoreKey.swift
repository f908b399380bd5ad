import CSparkSecret
public import Foundation
public import SparkCrypto

/// Where the key that encrypts the endpoint store's secrets comes from. The key is never in the
/// store's own file, so a copy of the data directory alone opens nothing.
///
/// - `automatic` (the default): the desktop Secret Service (GNOME Keyring, KWallet) when the
///   session has one, else a key file in a directory of its own (weaker: it protects only
///   against a copy of the data directory, not against the user's account).
/// - `provided`: the app's key, for example one a service keeps sealed to the TPM with
///   `systemd-creds` and hands over at start.
/// - `keyFile`: only a key file in `directory`.
public enum StoreKeySource: Sendable {
    /// The Secret Service when reachable, else a key file in `keyDirectory`
    /// (`$XDG_CONFIG_HOME/spark-sdk/store-keys` by default).
    case automatic(keyDirectory: URL? = nil)
    /// A 256-bit key the app keeps; ``BBMEnterpriseService/resetService()`` cannot destroy it.
    case provided(SymmetricKey)
    /// A key file in `directory` (created 0700, the file 0600).
    case keyFile(directory: URL)

    /// The default: the Secret Service, else a key file.
    public static var automatic: StoreKeySource { .automatic(keyDirectory: nil) }
}

/// Encrypts and decrypts the endpoint store's secret values: AES-256-GCM per value, with the
/// table, column and row bound in (so a value moved to another row or column does not open),
/// as matrix-rust-sdk's store encryption does. Layout: `0x01 ‖ nonce (12) ‖ ciphertext ‖ tag (16)`.
struct StoreSealer: Sendable {
    let key: SymmetricKey
    /// The key of the search index's tokens, derived from the store key.
    let searchKey: SearchKey

    init(key: SymmetricKey) {
        self.key = key
        searchKey = SearchKey(key: key)
    }

    func seal(_ plaintext: Data, _ context: String) throws -> Data {
        let box = try AESGCM.seal(plaintext, using: key, authenticating: Data(context.utf8))
        return Data([1]) + box.nonce.bytes + box.ciphertext + box.tag
    }

    func open(_ sealed: Data, _ context: String) throws -> Data {
        guard sealed.count >= 29, sealed.first == 1 else {
            throw AuthError(.storeLocked, "a value in the endpoint store is not sealed by this SDK (\(context))")
        }
        let bytes = Data(sealed.dropFirst())
        do {
            let box = try AESGCM.SealedBox(
                nonce: AESGCM.Nonce(bytes.prefix(12)), ciphertext: bytes.dropFirst(12).dropLast(16), tag: bytes.suffix(16))
            return try AESGCM.open(box, using: key, authenticating: Data(context.utf8)).unsafeData()
        } catch {
            throw AuthError(.storeLocked, "a value in the endpoint store does not open with the store key (\(context))")
        }
    }

    func seal(_ text: String, _ context: String) throws -> Data { try seal(Data(text.utf8), context) }

    /// A sealed text, decrypted straight into the string's storage (the store reads many at once:
    /// a page of messages is fifty of them).
    func openText(_ sealed: Data, _ context: String) throws -> String {
        try sealed.withUnsafeBytes { sealed in try openText(sealed, context) }
    }

    /// ``openText(_:_:)`` of sealed bytes where they lie (a column of the store's row, read in
    /// place).
    func openText(_ sealed: UnsafeRawBufferPointer, _ context: String) throws -> String {
        guard sealed.count >= 29, sealed.first == 1 else {
            throw AuthError(.storeLocked, "a value in the endpoint store is not sealed by this SDK (\(context))")
        }
        var context = context
        var opened = false
        let text = context.withUTF8 { aad in
            String(unsafeUninitializedCapacity: max(sealed.count - 29, 1)) { output in
                guard
                    let count = try? AESGCM.open(
                        combined: UnsafeRawBufferPointer(rebasing: sealed.dropFirst()), using: key,
                        authenticating: UnsafeRawBufferPointer(aad), into: UnsafeMutableRawBufferPointer(output))
                else { return 0 }
                opened = true
                return count
            }
        }
        guard opened else {
            throw AuthError(.storeLocked, "a value in the endpoint store does not open with the store key (\(context))")
        }
        return text
    }

    /// What the check row holds: proof that a key is this store's, without any secret.
    static let checkContext = "spark-endpoint-store-v1/check"
    static let checkValue = Data("the key of this endpoint store".utf8)
}

/// Finds, makes and destroys the store key of one data directory.
struct StoreKeyring: Sendable {
    let source: StoreKeySource
    let directory: URL

    /// The name the key has in the Secret Service and in a key directory: a digest of the data
    /// directory's path, so each device directory has its own key.
    var keyName: String {
        SHA256.hash(Data(directory.standardizedFileURL.path.utf8)).prefix(12).map { String(format: "%02x", $0) }.joined()
    }

    var keyDirectory: URL? {
        switch source {
        case .provided: return nil
        case .keyFile(let directory): return directory
        case .automatic(let directory?): return directory
        case .automatic(nil): return Self.defaultKeyDirectory(environment: ProcessInfo.processInfo.environment)
        }
    }

    /// The XDG Base Directory rule for the keys: `$XDG_CONFIG_HOME/spark-sdk/store-keys`, else
    /// `$HOME/.config/spark-sdk/store-keys` (the data follows `$HOME`, so do its keys); a relative
    /// path in either is ignored, as the specification says; the passwd entry's home last.
    static func defaultKeyDirectory(environment: [String: String]) -> URL {
        func absolute(_ name: String) -> URL? {
            environment[name].flatMap { $0.hasPrefix("/") ? URL(fileURLWithPath: $0, isDirectory: true) : nil }
        }
        let base =
            absolute("XDG_CONFIG_HOME")
            ?? (absolute("HOME") ?? FileManager.default.homeDirectoryForCurrentUser).appendingPathComponent(".config")
        return base.appendingPathComponent("spark-sdk/store-keys")
    }

    var keyFile: URL? { keyDirectory?.appendingPathComponent("\(keyName).key") }

    /// Where the key is looked for, in words (never the key).
    var place: String {
        switch source {
        case .provided: return "the app's store key"
        case .automatic where usesSecretService: return "the Secret Service entry \(keyName), or \(keyFile?.path ?? "")"
        default: return keyFile.map { "the key file \($0.path)" } ?? "the key file"
        }
    }

    private var usesSecretService: Bool {
        if case .automatic = source { return SecretService.isAvailable }
        return false
    }

    /// The stored key, if any.
    func existingKey() throws -> SymmetricKey? {
        if case .provided(let key) = source { return key }
        if usesSecretService, let secret = SecretService.lookup(name: keyName) {
            return try decode(secret, from: "the Secret Service")
        }
        guard let file = keyFile, let data = FileManager.default.contents(atPath: file.path) else { return nil }
        return try decode(String(decoding: data, as: UTF8.self), from: file.path)
    }

    /// Makes and keeps a new key (for a store that holds no secrets yet).
    func makeKey() throws -> SymmetricKey {
        if case .provided(let key) = source { return key }
        let key = SymmetricKey(size: .bits256)
        let text = key.secureBytes.unsafeData().base64EncodedString()
        if usesSecretService, SecretService.store(name: keyName, secret: text, label: "SparkSDK endpoint store \(directory.path)")
        {
            return key
        }
        guard let keyDirectory, let file = keyFile else { return key }
        do {
            try FileManager.default.createDirectory(
                at: keyDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: keyDirectory.path)
            guard
                FileManager.default.createFile(
                    atPath: file.path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
            else { throw CocoaError(.fileWriteUnknown) }
        } catch {
            throw AuthError(.storeLocked, "cannot keep the endpoint store's key in \(keyDirectory.path): \(error)")
        }
        return key
    }

    /// Destroys the kept key (`resetService()`); an app's own key is the app's to destroy.
    func destroyKey() {
        if case .provided = source { return }
        if usesSecretService { SecretService.clear(name: keyName) }
        if let file = keyFile { try? FileManager.default.removeItem(at: file) }
    }

    private func decode(_ text: String, from place: String) throws -> SymmetricKey {
        guard let data = Data(base64Encoded: text.trimmingCharacters(in: .whitespacesAndNewlines)), data.count == 32 else {
            throw AuthError(.storeLocked, "the endpoint store's key in \(place) is malformed")
        }
        return SymmetricKey(data: data)
    }
}

/// The desktop Secret Service, when the session has one (see `CSparkSecret`).
enum SecretService {
    static var isAvailable: Bool { spark_secret_available() == 1 }

    static func lookup(name: String) -> String? {
        guard let found = spark_secret_lookup(name) else { return nil }
        defer { spark_secret_free(found) }
        return String(cString: found)
    }

    static func store(name: String, secret: String, label: String) -> Bool { spark_secret_store(name, secret, label) == 1 }

    static func clear(name: String) { _ = spark_secret_clear(name) }
}
