import CSparkPowerCut
public import Foundation

/// Power cuts for the durability tests: a SQLite VFS (`CSparkPowerCut`) that becomes the
/// process's default, wraps the one before it, and keeps the writes of watched files since
/// their last sync apart, with the bytes each overwrote. A cut throws those writes away (all,
/// or a random half, as SQLite's own crash tests do) and makes every handle open on the files
/// fail from then on, as if the process that held them had died with the machine; what was
/// synced stays. The test then drops what held the files (closing fails nothing) and opens them
/// again.
public enum PowerCut {
    /// Starts keeping the unsynced writes of every file under `directory` (installing the VFS
    /// the first time); returns the key the other calls take.
    @discardableResult
    public static func watch(_ directory: URL) throws -> String {
        guard spark_powercut_install() == 0 else { throw PowerCutError("cannot install the power-cut VFS") }
        let prefix = directory.resolvingSymlinksInPath().standardizedFileURL.path + "/"
        spark_powercut_watch(prefix)
        return prefix
    }

    /// Cuts the power of `prefix`'s files now; returns how many writes were lost.
    @discardableResult
    public static func cut(_ prefix: String, seed: UInt64, losingAll: Bool) -> Int {
        Int(spark_powercut_cut(prefix, seed, losingAll ? 1 : 0))
    }

    /// Arms a cut of `prefix`'s files at their `countdown`-th write, truncation or sync from now.
    public static func arm(_ prefix: String, at countdown: Int64, seed: UInt64, losingAll: Bool) {
        spark_powercut_arm(prefix, countdown, seed, losingAll ? 1 : 0)
    }

    /// How many cuts `prefix`'s files have had.
    public static func cuts(_ prefix: String) -> Int { Int(spark_powercut_cuts(prefix)) }

    /// How many writes, truncations and syncs `prefix`'s files have had since they were watched.
    public static func operations(_ prefix: String) -> Int64 { spark_powercut_operations(prefix) }
}

/// The power-cut VFS could not be installed.
public struct PowerCutError: Error, CustomStringConvertible {
    /// What went wrong.
    public let description: String

    init(_ description: String) { self.description = description }
}
