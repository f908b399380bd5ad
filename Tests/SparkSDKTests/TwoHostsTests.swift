import Foundation
import SparkDomain
import SparkTestSupport
import Testing

/// Three hosts on one machine: the daemon and two SDK processes each in a network namespace of
/// its own, joined by a bridge (veth pairs), so the only way between them is the network.
/// Without namespaces (not root, no iproute2) the test says so and runs on loopback instead.
@Suite("Two hosts: spark-domaind and two SDK processes in separate network namespaces")
struct TwoHostsTests {
    /// The namespaces and bridge of one run, torn down by `remove()`.
    struct Hosts {
        let domain: String
        let alice: String
        let bob: String
        let bridge: String
        let subnet: String

        var names: [String] { [domain, alice, bob] }
        func address(_ index: Int) -> String { "\(subnet).\(index)" }

        static let ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }

        /// Makes them, or says why it cannot.
        static func make() async -> Result<Hosts, DaemonError> {
            guard getuid() == 0 else { return .failure(DaemonError("not root")) }
            guard let ip = ip else { return .failure(DaemonError("no ip command (iproute2)")) }
            let tag = String(getpid() % 100_000)
            let hosts = Hosts(
                domain: "sdd\(tag)", alice: "sda\(tag)", bob: "sdb\(tag)", bridge: "sdbr\(tag)",
                subnet: "10.\(200 + Int(getpid() % 50)).\(Int(getpid() / 50 % 250))")
            var commands = [
                ["link", "add", hosts.bridge, "type", "bridge"],
                ["addr", "add", "\(hosts.address(254))/24", "dev", hosts.bridge],
                ["link", "set", hosts.bridge, "up"],
            ]
            for (index, name) in hosts.names.enumerated() {
                commands += [
                    ["netns", "add", name], ["link", "add", "\(name)r", "type", "veth", "peer", "name", "\(name)n"],
                    ["link", "set", "\(name)n", "netns", name], ["link", "set", "\(name)r", "master", hosts.bridge],
                    ["link", "set", "\(name)r", "up"],
                    ["-n", name, "addr", "add", "\(hosts.address(index + 1))/24", "dev", "\(name)n"],
                    ["-n", name, "link", "set", "\(name)n", "up"], ["-n", name, "link", "set", "lo", "up"],
                ]
            }
            for command in commands {
                guard let result = try? await Fixtures.run(URL(fileURLWithPath: ip), command), result.status == 0 else {
                    await hosts.remove()
                    return .failure(DaemonError("`ip \(command.joined(separator: " "))` failed"))
                }
            }
            return .success(hosts)
        }

        func remove() async {
            guard let ip = Self.ip else { return }
            for name in names { _ = try? await Fixtures.run(URL(fileURLWithPath: ip), ["netns", "del", name]) }
            _ = try? await Fixtures.run(URL(fileURLWithPath: ip), ["link", "del", bridge])
        }

        func launcher(_ namespace: String) -> [String] { [Self.ip ?? "ip", "netns", "exec", namespace] }
    }

    @Test func twoUsersOnTwoHostsChatThroughTheDomainOnAThird() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let made = await Hosts.make()
            let hosts = try? made.get()
            if case .failure(let reason) = made {
                print("two hosts: network namespaces are unavailable (\(reason)); running on loopback instead")
            }
            do {
                try await Self.chat(directory, hosts)
            } catch {
                await hosts?.remove()
                throw error
            }
            await hosts?.remove()
        }
    }

    static func chat(_ directory: URL, _ hosts: Hosts?) async throws {
        do {
            let daemon = try await DomainDaemon.start(
                in: directory, domainID: "two-hosts", host: hosts?.address(1) ?? "127.0.0.1",
                hostnames: hosts.map { [$0.address(1)] } ?? [], launcher: hosts.map { $0.launcher($0.domain) } ?? [])
            let plist: [String: Any] = [
                "authProvider": "testAuth", "testAuth": ["domain": "two-hosts", "environment": "sandbox"],
                "domainURL": daemon.url.absoluteString,
                "domainCAFile": daemon.directory.appendingPathComponent("ca.pem").path,
            ]
            let config = directory.appendingPathComponent("ConfigSettings.plist")
            try PropertyListSerialization.data(fromPropertyList: plist, format: .xml, options: 0).write(to: config)
            let peer = Fixtures.executable("sdk-peer").path
            func run(_ namespace: String?, _ arguments: [String], passcode: String) async throws -> (
                status: Int32, stdout: String, stderr: String
            ) {
                let command = (namespace.map { hosts!.launcher($0) } ?? []) + [peer] + arguments
                return try await Fixtures.run(
                    URL(fileURLWithPath: command[0]), Array(command.dropFirst()), input: Data("\(passcode)\n".utf8))
            }
            if let hosts {
                // The hosts reach each other only through the bridge: bob's host is not the domain's.
                #expect(daemon.url.host == hosts.address(1))
            }
            async let bob = run(
                hosts?.bob, [config.path, directory.appendingPathComponent("bob").path, "bob", "--serve", "10"],
                passcode: "bob-passcode")
            let admin = try daemon.administration()
            var ready = false
            for _ in 0..<600 where !ready {
                ready = (try? await admin.endpointUsers().contains { $0.userID == "bob" }) == true
                if !ready { try await Task.sleep(for: .milliseconds(100)) }
            }
            try await Task.sleep(for: .milliseconds(500))
            let alice = try await run(
                hosts?.alice, [config.path, directory.appendingPathComponent("alice").path, "alice", "--send", "bob", "10"],
                passcode: "alice-passcode")
            #expect(alice.status == 0 && alice.stdout.contains("acked 10 duplicates 0"), "\(alice.stdout) \(alice.stderr)")
            let served = try await bob
            #expect(served.status == 0 && served.stdout.contains("served 10"), "\(served.stdout) \(served.stderr)")
            if let hosts {
                // The daemon saw the peers' own addresses, not loopback.
                #expect(
                    daemon.log.contains(hosts.address(2)) && daemon.log.contains(hosts.address(3)), "\(daemon.log.suffix(500))")
            }
            await daemon.stop()
        }
    }
}
