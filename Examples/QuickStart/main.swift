// quickstart: SparkSDK's example app. It signs a user in, walks the setup with them, and opens
// a chat shell; `quickstart demo` runs a scripted story with two users and three endpoints.
import Foundation
import SparkSDK

let usage = """
    usage: quickstart [--config PLIST] [--data-dir DIR] [--user USER_ID] [--passcode-fd N]
           quickstart demo [--keep DIR | --config PLIST --operator FILE]
           quickstart --help

    Signs in with the provider of ConfigSettings.plist (./ConfigSettings.plist by default),
    sets this device up (passcodes are asked for, never taken from the command line), then opens
    a chat shell (type `help` there). Two terminals with two --data-dir values are two devices.

      --config PLIST    the configuration file
      --data-dir DIR    this device's data directory (default: the plist's dataDirectory)
      --user USER_ID    the user id for test auth (asked for otherwise)
      --passcode-fd N   read passcodes from file descriptor N instead of standard input
      demo              run the scripted story in a temporary domain and print its timeline
      --keep DIR        (demo) keep the demo's domain and data in DIR
      --operator FILE   (demo) run it on the served domain --config names, moderating with the
                        operator credential FILE (spark-domaind init wrote DIR/operator.credential)

    exit status: 0 success, 1 failure, 64 usage error
    """

struct Options {
    var config = "ConfigSettings.plist"
    var configGiven = false
    var dataDirectory: String?
    var user: String?
    var passcodeDescriptor: Int32?
    var demo = false
    var keep: String?
    var operatorCredential: String?
}

func usageError(_ message: String) -> Never {
    FileHandle.standardError.write(Data("quickstart: \(message)\n\n\(usage)\n".utf8))
    exit(64)
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("quickstart: \(message)\n".utf8))
    exit(1)
}

func parse(_ arguments: [String]) -> Options {
    var options = Options()
    var index = 0
    func value(_ name: String) -> String {
        index += 1
        guard index < arguments.count, !arguments[index].hasPrefix("--") else { usageError("\(name) needs a value") }
        return arguments[index]
    }
    while index < arguments.count {
        switch arguments[index] {
        case "--help", "-h", "help":
            print(usage)
            exit(0)
        case "--config":
            options.config = value("--config")
            options.configGiven = true
        case "--data-dir": options.dataDirectory = value("--data-dir")
        case "--user": options.user = value("--user")
        case "--passcode-fd":
            let text = value("--passcode-fd")
            guard let descriptor = Int32(text), descriptor >= 0 else {
                usageError("--passcode-fd takes a file descriptor number, not '\(text)'")
            }
            options.passcodeDescriptor = descriptor
        case "--keep": options.keep = value("--keep")
        case "--operator": options.operatorCredential = value("--operator")
        case "demo": options.demo = true
        default:
            let argument = arguments[index]
            usageError(argument.hasPrefix("-") ? "unknown option \(argument)" : "unknown command '\(argument)'")
        }
        index += 1
    }
    if options.keep != nil, !options.demo { usageError("--keep goes with demo") }
    // The demo changes its domain's policy and moderates its users: it runs in a domain of
    // its own, never in the one a plist names, and says so rather than ignore the flag.
    if options.operatorCredential != nil, !(options.demo && options.configGiven) {
        usageError("--operator goes with demo and --config PLIST")
    }
    if options.demo, options.configGiven, options.operatorCredential == nil {
        usageError(
            "demo runs in a temporary domain of its own; on a served domain it needs --config PLIST --operator FILE (use --keep DIR to keep a local one)"
        )
    }
    if options.demo, options.keep != nil, options.configGiven { usageError("--keep is for the local demo, not --config") }
    if options.demo, options.dataDirectory != nil || options.user != nil || options.passcodeDescriptor != nil {
        usageError("demo takes only --keep DIR")
    }
    return options
}

let options = parse(Array(CommandLine.arguments.dropFirst()))

if options.demo {
    let remote = options.operatorCredential.map { (config: options.config, credential: $0) }
    exit(await Demo(keep: options.keep, remote: remote).run() ? 0 : 1)
}
let console = Console(passcodeDescriptor: options.passcodeDescriptor)
do {
    try await QuickStart(options: options, console: console).run()
    exit(0)
} catch let error as ConfigError {
    fail(error.reason)
} catch let error as QuickStartExit {
    fail(error.message)
} catch {
    fail("\(error)")
}
