import Foundation

/// What a user id may hold. Two ids that look the same must be the same id, so an id holds no
/// character that shows nothing or reorders what follows: no control or format character (the
/// zero-width space U+200B, the joiners, the bidirectional overrides and isolates U+202A–U+202E
/// and U+2066–U+2069, the byte-order mark), no line or paragraph separator, no private-use,
/// surrogate or unassigned code point, no space other than U+0020 and none at either end, and
/// none of the letters that render blank (the Hangul fillers U+115F, U+1160, U+3164, U+FFA0 and
/// the Braille blank U+2800). The domain applies it to the user claim of every token and to
/// test tokens; the sign-up assistant's names are narrower still (ASCII).
///
/// Ids registered before this rule that break it are refused at their next token: the operator
/// finds them with `spark-admin users` and moves such a user to an id without those characters
/// (docs/SECURITY.md, "User ids").
package enum UserIDs {
    /// The code points that are letters to Unicode but render as nothing.
    private static let blankLetters: Set<UInt32> = [0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800]

    /// Why `id` is not an acceptable user id, or nil when it is.
    package static func problem(_ id: String, maximumLength: Int) -> String? {
        guard !id.isEmpty, id.count <= maximumLength else { return "a user id is 1 to \(maximumLength) characters" }
        guard id.first != " ", id.last != " " else { return "a user id neither starts nor ends with a space" }
        for scalar in id.unicodeScalars {
            let hex = "U+" + String(scalar.value, radix: 16, uppercase: true)
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .privateUse, .surrogate, .unassigned:
                return "a user id holds no invisible, control or unassigned character (\(hex))"
            case .spaceSeparator where scalar != " ":
                return "a user id holds no space but U+0020 (\(hex))"
            default:
                if blankLetters.contains(scalar.value) { return "a user id holds no character that renders blank (\(hex))" }
            }
        }
        return nil
    }
}
