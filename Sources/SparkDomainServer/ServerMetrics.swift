import Foundation
import SparkLock

/// What `/metrics` shows, in Prometheus's text format: requests by route and status, a latency
/// histogram, open long-polls and connections, and store errors.
package final class ServerMetrics: Sendable {
    private struct State {
        var requests: [String: [Int: Int]] = [:]
        var buckets = [Int](repeating: 0, count: ServerMetrics.bounds.count)
        var count = 0
        var sum = 0.0
        var storeErrors = 0
    }

    /// Latency bucket bounds in seconds.
    static let bounds: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

    private let state = Locked(State())

    /// Empty counters.
    package init() {}

    /// Counts one answered request; long-polls are left out of the latency histogram (they
    /// wait on purpose).
    package func record(route: String, status: Int, seconds: Double, isLongPoll: Bool, isStoreError: Bool) {
        state.withLock { state in
            state.requests[route, default: [:]][status, default: 0] += 1
            if isStoreError { state.storeErrors += 1 }
            guard !isLongPoll else { return }
            state.count += 1
            state.sum += seconds
            for (index, bound) in Self.bounds.enumerated() where seconds <= bound { state.buckets[index] += 1 }
        }
    }

    /// The requests counted for `route` with `status`.
    package func requests(route: String, status: Int) -> Int {
        state.withLock { $0.requests[route]?[status] ?? 0 }
    }

    /// The text of `/metrics`.
    package func text(longPolls: Int, connections: Int) -> String {
        state.withLock { state in
            var lines = [
                "# HELP spark_requests_total Requests answered, by route and status.",
                "# TYPE spark_requests_total counter",
            ]
            for route in state.requests.keys.sorted() {
                for (status, count) in state.requests[route]!.sorted(by: { $0.key < $1.key }) {
                    lines.append("spark_requests_total{route=\"\(route)\",status=\"\(status)\"} \(count)")
                }
            }
            lines += [
                "# HELP spark_request_duration_seconds Time to answer, long-polls excluded.",
                "# TYPE spark_request_duration_seconds histogram",
            ]
            for (index, bound) in Self.bounds.enumerated() {
                lines.append("spark_request_duration_seconds_bucket{le=\"\(bound)\"} \(state.buckets[index])")
            }
            lines += [
                "spark_request_duration_seconds_bucket{le=\"+Inf\"} \(state.count)",
                "spark_request_duration_seconds_sum \(state.sum)",
                "spark_request_duration_seconds_count \(state.count)",
                "# HELP spark_long_polls Mailbox reads waiting for an entry.",
                "# TYPE spark_long_polls gauge",
                "spark_long_polls \(longPolls)",
                "# HELP spark_connections Open HTTP connections.",
                "# TYPE spark_connections gauge",
                "spark_connections \(connections)",
                "# HELP spark_store_errors_total Requests that failed in the domain's store.",
                "# TYPE spark_store_errors_total counter",
                "spark_store_errors_total \(state.storeErrors)",
            ]
            return lines.joined(separator: "\n") + "\n"
        }
    }
}
