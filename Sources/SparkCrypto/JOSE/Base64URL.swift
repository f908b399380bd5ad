public import Foundation

/// Base64url without padding (RFC 4648 §5, as RFC 7515 §2 uses it), decoded strictly.
extension Data {
    /// Decodes unpadded base64url. Refuses padding, whitespace, characters outside the URL-safe
    /// alphabet, impossible lengths and non-canonical encodings (unused trailing bits set).
    public init(base64URLEncoded text: some StringProtocol) throws {
        let utf8 = text.utf8
        guard utf8.count % 4 != 1 else {
            throw CryptoError(.malformedInput, "base64url text of length \(utf8.count) cannot be decoded")
        }
        // Bytes are collected in an array and wrapped once: appending to `Data` byte by byte
        // dominated token verification.
        var output = [UInt8]()
        output.reserveCapacity(utf8.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for character in utf8 {
            let value = Base64URL.decodeTable[Int(character)]
            guard value != 0xFF else {
                throw CryptoError(.malformedInput, "base64url text contains a character outside its alphabet")
            }
            accumulator = (accumulator << 6) | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        guard accumulator & ((1 << UInt32(bits)) - 1) == 0 else {
            throw CryptoError(.malformedInput, "base64url text is not canonical (unused bits are set)")
        }
        self = Data(output)
    }

    /// Encodes as unpadded base64url.
    public func base64URLEncodedString() -> String {
        var output = [UInt8]()
        output.reserveCapacity((count * 4 + 2) / 3)
        withUnsafeBytes { bytes in
            var index = 0
            while index + 3 <= bytes.count {
                let chunk = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
                for shift in [18, 12, 6, 0] { output.append(Base64URL.alphabet[Int((chunk >> UInt32(shift)) & 63)]) }
                index += 3
            }
            let rest = bytes.count - index
            if rest == 1 {
                let chunk = UInt32(bytes[index]) << 16
                for shift in [18, 12] { output.append(Base64URL.alphabet[Int((chunk >> UInt32(shift)) & 63)]) }
            } else if rest == 2 {
                let chunk = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
                for shift in [18, 12, 6] { output.append(Base64URL.alphabet[Int((chunk >> UInt32(shift)) & 63)]) }
            }
        }
        return String(decoding: output, as: UTF8.self)
    }
}

extension SecureBytes {
    /// Decodes unpadded base64url straight into secure memory (see `Data(base64URLEncoded:)`).
    public init(base64URLEncoded text: some StringProtocol) throws {
        var decoded = try Data(base64URLEncoded: text)
        self.init(decoded)
        decoded.resetBytes(in: 0..<decoded.count)
    }

    /// Encodes as unpadded base64url. The returned string is not wiped; use only for output
    /// that is itself protected (a JWK inside a JWE).
    public func base64URLEncodedString() -> String { withUnsafeBytes { Data($0) }.base64URLEncodedString() }
}

enum Base64URL {
    static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    static let decodeTable: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, character) in alphabet.enumerated() { table[Int(character)] = UInt8(index) }
        return table
    }()
}
