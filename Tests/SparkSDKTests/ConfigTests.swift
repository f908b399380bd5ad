import Foundation
import SparkDomain
import SparkSDK
import SparkTestSupport
import Testing

@Suite("ConfigSettings.plist")
struct ConfigTests {
    static let environment = ["HOME": "/home/ada", "XDG_DATA_HOME": "/data/ada"]

    static func plist(_ body: String) -> Data {
        Data(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0"><dict>\(body)</dict></plist>
            """.utf8)
    }

    static let testAuth =
        "<key>testAuth</key><dict><key>clientId</key><string>c</string><key>domain</key><string>d1</string><key>environment</key><string>sandbox</string></dict>"

    static func decode(_ body: String) throws -> ConfigSettings {
        try ConfigSettings.decode(
            plist(body), file: "ConfigSettings.plist", baseDirectory: URL(fileURLWithPath: "/etc/app"), environment: environment)
    }

    static func error(_ body: String) -> ConfigError? {
        do {
            _ = try decode(body)
            return nil
        } catch let error as ConfigError {
            return error
        } catch {
            return nil
        }
    }

    @Test func theRepositoryPlistLoadsWithDefaults() throws {
        let settings = try ConfigSettings.load(
            from: Fixtures.repositoryRoot.appendingPathComponent("ConfigSettings.plist"), environment: Self.environment)
        #expect(settings.authProvider == .testAuth && settings.useBlackBerryKMS)
        #expect(settings.domain == "spark-sandbox" && settings.provider.environment == .sandbox)
        #expect(settings.dataDirectory.path == "/data/ada/spark-sdk/spark-sandbox/device")
        #expect(settings.embeddedDomainPath.path == "/data/ada/spark-sdk/domains/spark-sandbox.sqlite")
        #expect(settings.tokenLeeway == 60 && settings.passcodeIterations == 600_000)
        #expect(settings.endpointDescription.hasPrefix("SparkSDK on "))
        #expect(settings.ownDeviceApproval == .required)
    }

    @Test func explicitValuesAndPaths() throws {
        let settings = try Self.decode(
            "<key>authProvider</key><string>testAuth</string>\(Self.testAuth)"
                + "<key>dataDirectory</key><string>devices/a</string><key>embeddedDomainPath</key><string>~/d.sqlite</string>"
                + "<key>tokenLeewaySeconds</key><integer>0</integer><key>passcodeIterations</key><integer>1000000</integer>"
                + "<key>endpointDescription</key><string>Ada's laptop</string><key>useBlackBerryKMS</key><false/>"
                + "<key>ownDeviceApproval</key><string>automatic</string>")
        #expect(settings.dataDirectory.path == "/etc/app/devices/a")
        #expect(settings.embeddedDomainPath.path == "/home/ada/d.sqlite")
        #expect(settings.tokenLeeway == 0 && settings.passcodeIterations == 1_000_000 && !settings.useBlackBerryKMS)
        #expect(settings.endpointDescription == "Ada's laptop" && settings.ownDeviceApproval == .automatic)
        // Without XDG_DATA_HOME the default is ~/.local/share.
        let plain = try ConfigSettings.decode(
            Self.plist("<key>authProvider</key><string>testAuth</string>\(Self.testAuth)"), file: "x.plist",
            baseDirectory: URL(fileURLWithPath: "/"), environment: ["HOME": "/home/bob"])
        #expect(plain.dataDirectory.path == "/home/bob/.local/share/spark-sdk/d1/device")
    }

    @Test func severalDomainURLsAreTriedInOrderAndEachIsChecked() throws {
        let pin = "<key>domainPublicKeyPin</key><string>\(Data(repeating: 7, count: 32).base64EncodedString())</string>"
        func urls(_ items: String...) -> String {
            "<key>domainURLs</key><array>" + items.map { "<string>\($0)</string>" }.joined() + "</array>"
        }
        let base = "<key>authProvider</key><string>testAuth</string>\(Self.testAuth)"
        let settings = try Self.decode(base + pin + urls("https://a.example:8443", "https://b.example:8443"))
        #expect(settings.domainURLs.map(\.absoluteString) == ["https://a.example:8443", "https://b.example:8443"])
        #expect(settings.domainURL?.absoluteString == "https://a.example:8443")
        let remote = try #require(try settings.openDomain() as? RemoteDomain)
        #expect(remote.urls == settings.domainURLs, "the client gets every instance, in order")

        #expect(Self.error(base + pin + urls())?.keyPath == "domainURLs", "an empty list")
        #expect(
            Self.error(base + pin + urls("https://a.example") + "<key>domainURL</key><string>https://b.example</string>")?
                .keyPath == "domainURLs", "both keys")
        #expect(Self.error(base + pin + urls("https://a.example", "ftp://b.example"))?.keyPath == "domainURLs.1")
        #expect(Self.error(base + urls("http://127.0.0.1:1", "http://10.0.0.2:1"))?.keyPath == "domainURLs.1", "plain to a host")
        #expect(Self.error(base + pin + urls("https://a.example", "http://127.0.0.1:1"))?.keyPath == "domainURLs", "mixed")
    }

    @Test func missingFileAndNotAPlist() {
        #expect(throws: ConfigError(.missingFile, file: "", keyPath: "", "")) {
            try ConfigSettings.load(from: URL(fileURLWithPath: "/nonexistent/ConfigSettings.plist"))
        }
        #expect(throws: ConfigError(.notAPlist, file: "", keyPath: "", "")) {
            try ConfigSettings.decode(Data("{ not: a plist".utf8), file: "f", baseDirectory: URL(fileURLWithPath: "/"))
        }
        #expect(throws: ConfigError(.notAPlist, file: "", keyPath: "", "")) {
            try ConfigSettings.decode(
                Data("<?xml version=\"1.0\"?><plist version=\"1.0\"><array/></plist>".utf8), file: "f",
                baseDirectory: URL(fileURLWithPath: "/"))
        }
    }

    /// An `oidc` dictionary with `extra` keys, and without the keys named in `without`.
    static func openID(_ extra: [String: String] = [:], without: Set<String> = []) -> String {
        var keys = [
            "domain": "acme", "environment": "production", "issuer": "https://id.example.com", "clientId": "spark-app",
        ]
        keys.merge(extra) { $1 }
        let body = keys.filter { !without.contains($0.key) }.sorted { $0.key < $1.key }
            .map { "<key>\($0.key)</key><string>\($0.value)</string>" }.joined()
        return "<key>authProvider</key><string>oidc</string><key>oidc</key><dict>\(body)</dict>"
    }

    @Test func anOpenIDProviderIsConfiguredAndItsBadKeysAreNamed() throws {
        let settings = try Self.decode(Self.openID(["userClaim": "email", "flow": "device"]))
        let openID = try #require(settings.provider.openID)
        #expect(openID.issuer == "https://id.example.com" && openID.clientID == "spark-app")
        #expect(openID.userClaim == "email" && openID.flow == .device && openID.trust == .systemStore)
        #expect(openID.scopes == ["openid", "profile", "email"])
        #expect(settings.domain == "acme")
        for (body, keyPath) in [
            (Self.openID(without: ["clientId"]), "oidc.clientId"),
            (Self.openID(["issuer": "http://id.example.com"]), "oidc.issuer"),
            (Self.openID(["issuer": "not a url"]), "oidc.issuer"),
            (Self.openID(["userClaim": "name"]), "oidc.userClaim"),
            (Self.openID(["flow": "implicit"]), "oidc.flow"),
            (Self.openID(["caFile": "/nonexistent/ca.pem"]), "oidc.caFile"),
            (Self.openID(["redirectUri": "x"]), "oidc.redirectUri"),
        ] {
            let error = try #require(Self.error(body), "\(keyPath) was accepted")
            #expect(error.keyPath == keyPath, "\(error)")
        }
        // http is for a provider on this machine only.
        let loopback = try Self.decode(Self.openID(["issuer": "http://127.0.0.1:5556/dex"]))
        #expect(loopback.provider.openID?.trust == .plainLoopback)
    }

    @Test func everyKindOfBadValueNamesItsKey() throws {
        let missingDomain = try #require(
            Self.error(
                "<key>authProvider</key><string>testAuth</string><key>testAuth</key><dict><key>environment</key><string>sandbox</string></dict>"
            ))
        #expect(missingDomain.code == .missingKey && missingDomain.keyPath == "testAuth.domain")
        #expect(
            missingDomain.reason
                == "ConfigSettings.plist: key 'testAuth.domain' is missing (expected a string: the domain id)")

        let missingProvider = try #require(Self.error(Self.testAuth))
        #expect(missingProvider.code == .missingKey && missingProvider.keyPath == "authProvider")

        let missingDictionary = try #require(Self.error("<key>authProvider</key><string>accounts</string>\(Self.testAuth)"))
        #expect(missingDictionary.code == .missingKey && missingDictionary.keyPath == "accounts")

        let wrongType = try #require(Self.error("<key>authProvider</key><integer>3</integer>\(Self.testAuth)"))
        #expect(wrongType.code == .wrongType && wrongType.keyPath == "authProvider")
        #expect(wrongType.description.contains("expected a string: testAuth, accounts, custom or oidc"))

        let nestedType = try #require(
            Self.error(
                "<key>authProvider</key><string>testAuth</string><key>testAuth</key><dict><key>domain</key><true/><key>environment</key><string>sandbox</string></dict>"
            ))
        #expect(nestedType.code == .wrongType && nestedType.keyPath == "testAuth.domain")

        let unknown = try #require(Self.error("<key>authProvidr</key><string>testAuth</string>\(Self.testAuth)"))
        #expect(unknown.code == .unknownKey && unknown.keyPath == "authProvidr")
        #expect(unknown.message.contains("known keys: accounts, authProvider,"))

        let nestedUnknown = try #require(
            Self.error(
                "<key>authProvider</key><string>testAuth</string><key>testAuth</key><dict><key>domian</key><string>x</string></dict>"
            ))
        #expect(nestedUnknown.code == .unknownKey && nestedUnknown.keyPath == "testAuth.domian")

        let provider = try #require(Self.error("<key>authProvider</key><string>google</string>\(Self.testAuth)"))
        #expect(provider.code == .outOfRange && provider.keyPath == "authProvider")

        let environment = try #require(
            Self.error(
                "<key>authProvider</key><string>testAuth</string><key>testAuth</key><dict><key>domain</key><string>d</string><key>environment</key><string>staging</string></dict>"
            ))
        #expect(environment.code == .outOfRange && environment.keyPath == "testAuth.environment")

        let leeway = try #require(
            Self.error(
                "<key>authProvider</key><string>testAuth</string>\(Self.testAuth)<key>tokenLeewaySeconds</key><integer>9999</integer>"
            ))
        #expect(leeway.code == .outOfRange && leeway.keyPath == "tokenLeewaySeconds")

        let approval = try #require(
            Self.error(
                "<key>authProvider</key><string>testAuth</string>\(Self.testAuth)<key>ownDeviceApproval</key><string>never</string>"
            ))
        #expect(approval.code == .outOfRange && approval.keyPath == "ownDeviceApproval")

        let floor = try #require(
            Self.error(
                "<key>authProvider</key><string>testAuth</string>\(Self.testAuth)<key>passcodeIterations</key><integer>1000</integer>"
            ))
        #expect(floor.code == .securityFloor && floor.keyPath == "passcodeIterations")
        #expect(floor.description.contains("below the security floor of 600000"))

        let customIssuer = try #require(
            Self.error(
                "<key>authProvider</key><string>custom</string><key>custom</key><dict><key>domain</key><string>d</string><key>environment</key><string>sandbox</string></dict>"
            ))
        #expect(customIssuer.code == .missingKey && customIssuer.keyPath == "custom.issuer")

        let badDomain = try #require(
            Self.error(
                "<key>authProvider</key><string>testAuth</string><key>testAuth</key><dict><key>domain</key><string>a b</string><key>environment</key><string>sandbox</string></dict>"
            ))
        #expect(badDomain.code == .outOfRange && badDomain.keyPath == "testAuth.domain")
    }
}
