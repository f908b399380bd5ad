import Foundation
import SparkCrypto
import SparkDomain
import SparkSDK

/// Attachments through `spark-domaind` over TLS: a file sealed, uploaded, read back and opened
/// by two SDK endpoints in this process, against the same bytes moved by the usual tools.
enum AttachmentBenchmarks {
    static let all = [
        Benchmark(name: "attachment-100MiB", run: hundredMebibytes),
        Benchmark(name: "attachment-1GiB-rss", run: gibibyteResidentGrowth),
    ]

    /// A daemon whose policy admits big files, and alice and bob in a chat on it.
    struct Scene {
        let served: DomainServerBenchmarks.Served
        let directory: URL
        let alice: BBMAccess
        let bob: BBMAccess
        let chatID: String

        init() throws {
            served = try DomainServerBenchmarks.Served(["--threads", "2"])
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("spark-bench-files-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let (served, directory) = (served, directory)
            (alice, bob, chatID) = try SetupBenchmarks.blocking {
                var policy = DomainPolicy.bench
                policy.maximumAttachmentSize = 4 << 30
                policy.attachmentQuota = 1 << 40
                try await served.administration().setPolicy(policy)
                let domain = try served.client()
                let alice = try await MessagingBenchmarks.setUp("alice", directory: directory, domain: domain)
                let bob = try await MessagingBenchmarks.setUp("bob", directory: directory, domain: domain)
                let chat = try await alice.startChat(with: ["bob"])
                return (alice, bob, chat.chatID)
            }
        }

        /// A file of `size` random bytes, written a piece at a time (never all in memory).
        func file(_ name: String, size: Int) throws -> URL {
            let url = directory.appendingPathComponent(name)
            _ = FileManager.default.createFile(atPath: url.path, contents: nil)
            let handle = try FileHandle(forWritingTo: url)
            defer { try? handle.close() }
            var left = size
            while left > 0 {
                let piece = min(left, 16 << 20)
                try handle.write(contentsOf: SystemRandom.bytes(count: piece))
                left -= piece
            }
            return url
        }

        /// Sends `file` from alice and saves it on bob's device at `target`.
        func sendAndSave(_ file: URL, to target: URL) throws {
            let (alice, bob, chatID) = (alice, bob, chatID)
            try SetupBenchmarks.blocking {
                let message = try await alice.sendFile(at: file.path, to: chatID).value
                let messages = try await bob.messages(in: chatID)
                let deadline = ContinuousClock.now + .seconds(60)
                while !messages.value.contains(where: { $0.id == message.id }) {
                    guard ContinuousClock.now < deadline else { throw BenchError("bob never got the file's message") }
                    try await Task.sleep(for: .milliseconds(5))
                }
                try await bob.saveAttachment(of: message.id, to: target.path).value
            }
        }

        func stop() {
            served.stop()
            try? FileManager.default.removeItem(at: directory)
        }
    }

    /// 100 MiB encrypted, uploaded, downloaded and decrypted between two endpoints through the
    /// daemon over TLS, against `openssl enc` (AES-256-CTR) and `curl` putting the file into
    /// nginx (WebDAV PUT, TLS, same certificate) and getting it back, then `openssl enc -d`.
    static func hundredMebibytes() throws -> BenchmarkResult {
        let scene = try Scene()
        defer { scene.stop() }
        let size = 100 << 20
        let file = try scene.file("file.bin", size: size)
        let target = scene.directory.appendingPathComponent("saved.bin")
        let ours = try Harness.bestTime(repeats: 2) { try scene.sendAndSave(file, to: target) }
        guard FileManager.default.contentsEqual(atPath: file.path, andPath: target.path) else {
            throw BenchError("the saved file differs from the sent one")
        }

        // nginx's workers (another user when the bench runs as root) write the upload there.
        let web = scene.directory.appendingPathComponent("web")
        let uploads = scene.directory.appendingPathComponent("uploads")
        for directory in [web, uploads] {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: directory.path)
        }
        let port = scene.served.port + 1
        let configuration = """
            worker_processes 2;
            daemon off;
            pid \(scene.directory.path)/nginx.pid;
            error_log \(scene.directory.path)/error.log;
            events { worker_connections 1024; }
            http {
                access_log off;
                client_body_temp_path \(uploads.path);
                proxy_temp_path \(scene.directory.path);
                fastcgi_temp_path \(scene.directory.path);
                uwsgi_temp_path \(scene.directory.path);
                scgi_temp_path \(scene.directory.path);
                server {
                    listen 127.0.0.1:\(port) ssl;
                    ssl_certificate \(scene.served.home.path)/server.pem;
                    ssl_certificate_key \(scene.served.home.path)/server.key;
                    root \(web.path);
                    client_max_body_size 0;
                    location / { dav_methods PUT; }
                }
            }
            """
        let server = try Harness.nginx(configuration: configuration, in: scene.directory, port: port)
        defer {
            server.terminate()
            server.waitUntilExit()
        }
        let key = SystemRandom.bytes(count: 32).map { String(format: "%02x", $0) }.joined()
        let iv = SystemRandom.bytes(count: 16).map { String(format: "%02x", $0) }.joined()
        let sealed = scene.directory.appendingPathComponent("file.enc").path
        let fetched = scene.directory.appendingPathComponent("fetched.enc").path
        let opened = scene.directory.appendingPathComponent("opened.bin").path
        let url = "https://127.0.0.1:\(port)/file.enc"
        let reference = try Harness.bestTime(repeats: 2) {
            _ = try Harness.run(
                "/usr/bin/env", ["openssl", "enc", "-aes-256-ctr", "-K", key, "-iv", iv, "-in", file.path, "-out", sealed])
            _ = try Harness.run("/usr/bin/env", ["curl", "-sf", "--cacert", scene.served.ca, "-T", sealed, url])
            _ = try Harness.run("/usr/bin/env", ["curl", "-sf", "--cacert", scene.served.ca, "-o", fetched, url])
            _ = try Harness.run(
                "/usr/bin/env", ["openssl", "enc", "-d", "-aes-256-ctr", "-K", key, "-iv", iv, "-in", fetched, "-out", opened])
        }
        guard FileManager.default.contentsEqual(atPath: file.path, andPath: opened) else {
            throw BenchError("the reference's round trip changed the file")
        }
        let mebibytes = Double(size) / Double(1 << 20)
        return Harness.result(
            "attachment-100MiB", unit: "MiB/s", ours: mebibytes / ours, reference: mebibytes / reference, higherIsBetter: true,
            referenceName: "openssl enc + curl PUT/GET through nginx over TLS (goal ≥ 0.5)")
    }

    /// The growth of this process's peak resident memory while alice sends 1 GiB and bob saves
    /// it, both in this process, against the goal of 64 MB.
    static func gibibyteResidentGrowth() throws -> BenchmarkResult {
        let scene = try Scene()
        defer { scene.stop() }
        let file = try scene.file("big.bin", size: 1 << 30)
        let target = scene.directory.appendingPathComponent("big-saved.bin")
        // A warm-up moves a small file, so what the first transfer sets up once is not counted.
        try scene.sendAndSave(try scene.file("small.bin", size: 1 << 20), to: target)
        let before = residentBytes("VmRSS")
        // Linux resets the peak (VmHWM) to the current size on "5".
        try "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
        try scene.sendAndSave(file, to: target)
        let peak = residentBytes("VmHWM")
        let sizes = try [file, target].map { try FileManager.default.attributesOfItem(atPath: $0.path)[.size] as? Int }
        guard sizes[0] == 1 << 30, sizes[1] == 1 << 30 else { throw BenchError("the saved file is not 1 GiB: \(sizes)") }
        return Harness.result(
            "attachment-1GiB-rss", unit: "MB", ours: max(0, peak - before) / 1e6, reference: 64, higherIsBetter: false,
            referenceName: "the goal: ≤ 64 MB of peak RSS growth to send and save 1 GiB")
    }

    /// This process's `VmRSS` or `VmHWM`, in bytes.
    static func residentBytes(_ field: String) -> Double {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("\(field):") } ?? ""
        return (Double(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
    }
}
