internal import COpenSSL
public import Foundation

/// A buffer for secrets: wiped with `OPENSSL_cleanse` when its last copy is released, compared in
/// constant time, and never printed.
///
/// It has value semantics (copy-on-write). Read it through ``withUnsafeBytes(_:)``.
public struct SecureBytes: Sendable {
    private var storage: Storage

    /// Creates `count` zero bytes.
    public init(zeroes count: Int) {
        storage = Storage(count: count)
    }

    /// Creates `count` bytes from the system's cryptographically secure generator.
    public init(randomCount count: Int) {
        storage = Storage(count: count)
        storage.withUnsafeMutableBytes { SystemRandom.fill($0) }
    }

    /// Copies the given bytes into a new secure buffer.
    public init(_ bytes: some ContiguousBytes) {
        storage = bytes.withUnsafeBytes { source in
            let storage = Storage(count: source.count)
            storage.withUnsafeMutableBytes { $0.copyMemory(from: source) }
            return storage
        }
    }

    /// Creates a buffer of `count` bytes filled by `initializer`.
    public init(count: Int, initializingWith initializer: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        storage = Storage(count: count)
        try storage.withUnsafeMutableBytes(initializer)
    }

    /// The number of bytes.
    public var count: Int { storage.count }

    /// Whether the buffer holds no bytes.
    public var isEmpty: Bool { count == 0 }

    /// Calls `body` with the bytes; the pointer must not escape.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try storage.withUnsafeBytes(body)
    }

    /// Calls `body` with mutable bytes, copying first if this storage is shared.
    public mutating func withUnsafeMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        if !isKnownUniquelyReferenced(&storage) {
            storage = storage.copy()
        }
        return try storage.withUnsafeMutableBytes(body)
    }

    /// Appends another buffer's bytes.
    public mutating func append(_ other: some ContiguousBytes) {
        other.withUnsafeBytes { tail in
            let joined = Storage(count: count + tail.count)
            joined.withUnsafeMutableBytes { target in
                storage.withUnsafeBytes { head in
                    UnsafeMutableRawBufferPointer(rebasing: target[0..<head.count]).copyMemory(from: head)
                }
                UnsafeMutableRawBufferPointer(rebasing: target[count...]).copyMemory(from: tail)
            }
            storage = joined
        }
    }

    /// A sub-range copied into a new secure buffer.
    public func slice(_ range: Range<Int>) -> SecureBytes {
        precondition(range.lowerBound >= 0 && range.upperBound <= count, "SecureBytes slice out of range")
        return withUnsafeBytes { SecureBytes(UnsafeRawBufferPointer(rebasing: $0[range])) }
    }

    /// The bytes as `Data`. The copy is not wiped on release; use it only for values that stop
    /// being secret (for example when handing a plaintext to the app).
    public func unsafeData() -> Data { withUnsafeBytes { Data($0) } }
}

extension SecureBytes: ContiguousBytes {}

extension SecureBytes: Equatable {
    /// Constant-time comparison (`CRYPTO_memcmp`); only the lengths may leak.
    public static func == (lhs: SecureBytes, rhs: SecureBytes) -> Bool {
        guard lhs.count == rhs.count else { return false }
        if lhs.count == 0 { return true }
        return lhs.withUnsafeBytes { a in
            rhs.withUnsafeBytes { b in CRYPTO_memcmp(a.baseAddress, b.baseAddress, a.count) == 0 }
        }
    }
}

extension SecureBytes: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Shows the length only, never the contents.
    public var description: String { "SecureBytes(\(count) bytes)" }
    /// Shows the length only, never the contents.
    public var debugDescription: String { description }
    /// Hides the contents from `dump` and debuggers' mirrors.
    public var customMirror: Mirror { Mirror(self, children: ["count": count]) }
}

extension SecureBytes {
    /// The heap buffer: the only owner of its memory, which it wipes before freeing.
    // @unchecked Sendable: the memory is only written through SecureBytes' copy-on-write path,
    // which first makes the storage uniquely referenced, or before it is shared at all.
    fileprivate final class Storage: @unchecked Sendable {
        private let pointer: UnsafeMutableRawBufferPointer
        let count: Int

        init(count: Int) {
            precondition(count >= 0, "negative SecureBytes count")
            pointer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 16)
            pointer.initializeMemory(as: UInt8.self, repeating: 0)
            self.count = count
        }

        func copy() -> Storage {
            let copy = Storage(count: count)
            copy.withUnsafeMutableBytes { target in withUnsafeBytes { target.copyMemory(from: $0) } }
            return copy
        }

        func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
            try body(UnsafeRawBufferPointer(rebasing: pointer[0..<count]))
        }

        func withUnsafeMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
            try body(UnsafeMutableRawBufferPointer(rebasing: pointer[0..<count]))
        }

        deinit {
            OPENSSL_cleanse(pointer.baseAddress, pointer.count)
            pointer.deallocate()
        }
    }
}
