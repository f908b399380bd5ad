import SparkObservable
import SparkTestSupport

/// What the tracker reported, for every test at once. Its handler is process-wide and tests run
/// in parallel, so a test that swapped it in and out took the reports of another test's monitor
/// (and lost its own to the other test). Tests install this one handler and read only the
/// reports about their own monitor.
enum Diagnostics {
    private static let all: Box<[String]> = {
        let box = Box<[String]>([])
        ObservableTracker.diagnosticHandler = { message in box.update { $0.append(message) } }
        return box
    }()

    /// Installs the shared handler (once; later calls do nothing).
    static func install() { _ = all }

    /// The reports about the monitor named `name`.
    static func about(monitor name: String) -> [String] {
        all.value.filter { $0.contains("ObservableMonitor '\(name)'") }
    }
}
