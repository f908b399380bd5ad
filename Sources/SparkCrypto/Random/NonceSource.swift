internal import COpenSSL
import Foundation
import SparkLock
import Synchronization

/// Random bytes for public values such as AES-GCM nonces, drawn from `RAND_bytes` in 4 KiB
/// batches.
///
/// One `RAND_bytes` call for 12 bytes took about 0.8 µs here, a fifth of sealing a 16 KiB message;
/// a batch amortises it. The batch holds only values that are published anyway (nonces), never
/// key material, and is discarded in a forked child (a `pthread_atfork` handler bumps a
/// generation counter that every draw compares), so parent and child never hand out the same
/// nonce.
enum NonceSource {
    private struct Pool {
        var bytes = [UInt8](repeating: 0, count: 4096)
        var offset = 4096
        var generation = -1
    }

    private static let pool = Locked(Pool())
    private static let forkGeneration = Atomic<Int>(0)
    private static let registerForkHandler: Void = {
        pthread_atfork(nil, nil) { NonceSource.forkGeneration.add(1, ordering: .relaxed) }
    }()

    /// Fills `buffer` (at most 64 bytes) with random bytes.
    static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        precondition(buffer.count <= 64, "NonceSource is for short public values")
        _ = registerForkHandler
        let generation = forkGeneration.load(ordering: .relaxed)
        pool.withLock { pool in
            if pool.generation != generation || pool.offset + buffer.count > pool.bytes.count {
                pool.bytes.withUnsafeMutableBytes { SystemRandom.fill($0) }
                pool.offset = 0
                pool.generation = generation
            }
            pool.bytes.withUnsafeBytes { source in
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[pool.offset..<pool.offset + buffer.count]))
            }
            pool.offset += buffer.count
        }
    }
}
