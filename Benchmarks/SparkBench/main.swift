// spark-bench: runs SparkSDK's benchmarks beside their references in one run and prints the ratio.
//
//   swift run -c release spark-bench [--json PATH] [--filter TEXT] [--list]
//
// Rows whose ratio column reads "ours/ref" compare like with like; the direction column says
// whether a higher number is better (throughput) or worse (time).
import Foundation

// Child modes used by the silent-sign-in row.
if CommandLine.arguments.count >= 2, CommandLine.arguments[1] == "--child-noop" { exit(0) }
if CommandLine.arguments.count == 4, CommandLine.arguments[1] == "--child-silent-sign-in" {
    exit(await SetupBenchmarks.childSilentSignIn(domainPath: CommandLine.arguments[2], dataDirectory: CommandLine.arguments[3]))
}

if CommandLine.arguments.count == 5, CommandLine.arguments[1] == "--child-receive", let count = Int(CommandLine.arguments[4]) {
    exit(
        await MessagingBenchmarks.childReceive(
            domainPath: CommandLine.arguments[2], dataDirectory: CommandLine.arguments[3], count: count))
}

if CommandLine.arguments.count == 4, CommandLine.arguments[1] == "--child-many-chats", let count = Int(CommandLine.arguments[3]) {
    exit(ChatScaleBenchmarks.childManyChats(directory: CommandLine.arguments[2], chats: count))
}

let benchmarks =
    CryptoBenchmarks.all + ObservationBenchmarks.all + AuthBenchmarks.all + SetupBenchmarks.all + MessagingBenchmarks.all
    + DomainServerBenchmarks.all + PostgreSQLBenchmarks.all + MLSBenchmarks.all + ChatScaleBenchmarks.all
    + AttachmentBenchmarks.all + CAPIBenchmarks.all + CatchUpBenchmarks.all + SearchBenchmarks.all
    + TransparencyBenchmarks.all + KEMBenchmarks.all

var jsonPath: String?
var filters: [String] = []
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--json":
        guard let path = arguments.popFirst() else { usage("--json needs a path") }
        jsonPath = path
    case "--filter":
        guard let text = arguments.popFirst() else { usage("--filter needs text") }
        filters.append(text)
    case "--list":
        for benchmark in benchmarks { print(benchmark.name) }
        exit(0)
    case "--help", "-h":
        usage(nil)
    default:
        usage("unknown argument \(argument)")
    }
}

func usage(_ problem: String?) -> Never {
    if let problem { FileHandle.standardError.write(Data("spark-bench: \(problem)\n".utf8)) }
    let text = "usage: spark-bench [--json PATH] [--filter TEXT|^PREFIX]... [--list]\n"
    if problem == nil {
        print(text, terminator: "")
        exit(0)
    }
    FileHandle.standardError.write(Data(text.utf8))
    exit(64)
}

#if DEBUG
    FileHandle.standardError.write(Data("spark-bench: this is a debug build; use `swift run -c release spark-bench`\n".utf8))
#endif

// A filter matches names containing it; one starting with `^`, names starting with the rest.
let selected = benchmarks.filter { benchmark in
    filters.isEmpty
        || filters.contains { $0.hasPrefix("^") ? benchmark.name.hasPrefix($0.dropFirst()) : benchmark.name.contains($0) }
}
if selected.isEmpty { usage("no benchmark matches \(filters)") }

func format(_ value: Double) -> String {
    if value.isNaN { return "n/a" }
    if value >= 1000 { return String(format: "%.0f", value) }
    if value >= 10 { return String(format: "%.1f", value) }
    return String(format: "%.3f", value)
}

func pad(_ text: String, _ width: Int, right: Bool = false) -> String {
    let padding = String(repeating: " ", count: max(0, width - text.count))
    return right ? padding + text : text + padding
}

print(
    pad("name", 36) + pad("ours", 14, right: true) + pad("reference", 14, right: true) + pad("ratio", 9, right: true) + "  "
        + pad("unit", 10) + "better  reference")
var results: [BenchmarkResult] = []
var failures = 0
for benchmark in selected {
    do {
        let result = try benchmark.run()
        results.append(result)
        print(
            pad(result.name, 36) + pad(format(result.ours), 14, right: true) + pad(format(result.reference), 14, right: true)
                + pad(String(format: "%.3f", result.ratio), 9, right: true) + "  " + pad(result.unit, 10)
                + pad(result.higherIsBetter ? "higher" : "lower", 8) + result.referenceName)
    } catch {
        failures += 1
        print(pad(benchmark.name, 36) + "  failed: \(error)")
    }
}

if let jsonPath {
    struct Report: Encodable { var results: [BenchmarkResult] }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    do {
        try encoder.encode(Report(results: results)).write(to: URL(fileURLWithPath: jsonPath))
    } catch {
        FileHandle.standardError.write(Data("spark-bench: cannot write \(jsonPath): \(error)\n".utf8))
        exit(1)
    }
}
exit(failures == 0 ? 0 : 1)
