// A helper for SparkCryptoTests: exits while four threads are busy inside OpenSSL, as an app
// does that quits with a token check or a message seal in flight.
// Usage: crypto-exit   (exit status 0; a crash in OpenSSL's exit-time cleanup is a signal)
import Foundation
import SparkCrypto

let key = try Ed25519.PrivateKey()
let started = DispatchSemaphore(value: 0)
for _ in 0..<4 {
    Thread.detachNewThread {
        started.signal()
        while true {
            _ = try? key.signature(for: Data("in flight".utf8))
            _ = SHA256.hash(Data(count: 64))
        }
    }
}
for _ in 0..<4 { started.wait() }
usleep(20_000)
exit(0)
