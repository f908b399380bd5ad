internal import COpenSSL

/// Helpers shared by the OpenSSL backends.
enum OpenSSL {
    /// Drains OpenSSL's thread-local error queue and returns its entries as text. OpenSSL's own
    /// messages name functions and reasons, never data, so they are safe to keep in an error.
    static func drainErrors() -> String {
        var messages: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            messages.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return messages.isEmpty ? "no OpenSSL error queued" : messages.joined(separator: "; ")
    }

    /// A library failure carrying OpenSSL's drained error queue.
    static func failure(_ what: String, file: String = #fileID, line: UInt = #line) -> CryptoError {
        CryptoError(.libraryFailure, "\(what) failed: \(drainErrors())", file: file, line: line)
    }

    /// Clears the error queue after an expected failure (a bad tag, a bad signature), so that a
    /// later real failure does not report stale entries.
    static func clearErrors() { ERR_clear_error() }

    /// Throws a library failure unless `result` is 1, OpenSSL's success value.
    static func check(_ result: Int32, _ what: String, file: String = #fileID, line: UInt = #line) throws {
        guard result == 1 else { throw failure(what, file: file, line: line) }
    }
}

extension UnsafeRawBufferPointer {
    /// The base address as a `UInt8` pointer, or a pointer to a static zero byte when empty, since
    /// some OpenSSL functions refuse a null pointer even with a zero length.
    var bytePointer: UnsafePointer<UInt8> {
        guard let base = baseAddress, count > 0 else { return OpenSSL.emptyByte }
        return base.assumingMemoryBound(to: UInt8.self)
    }
}

extension UnsafeMutableRawBufferPointer {
    /// The base address as a mutable `UInt8` pointer (non-empty buffers only).
    var mutableBytePointer: UnsafeMutablePointer<UInt8> {
        baseAddress!.assumingMemoryBound(to: UInt8.self)
    }
}

extension OpenSSL {
    /// One readable zero byte, handed to OpenSSL for empty inputs.
    nonisolated(unsafe) static let emptyByte: UnsafePointer<UInt8> = {
        let pointer = UnsafeMutablePointer<UInt8>.allocate(capacity: 1)
        pointer.initialize(to: 0)
        return UnsafePointer(pointer)
    }()
}
