import Foundation
import SparkDomain

/// The checks the sign-up and login assistant applies to each field, each with its own error.
package enum AccountPolicy {
    /// User names: 3–32 characters of `a-z 0-9 . _ -`, starting with a letter or digit.
    package static func checkUserName(_ name: String) throws {
        let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789._-")
        guard (3...32).contains(name.count), name.allSatisfy(allowed.contains), let first = name.first,
            first.isLetter || first.isNumber
        else {
            throw DomainError(
                .nameInvalid, "a user name is 3 to 32 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit")
        }
    }

    /// Email addresses: one `@`, a local part and a dotted domain, no spaces, at most 254 bytes.
    package static func checkEmail(_ email: String) throws {
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        let valid =
            email.utf8.count <= 254 && parts.count == 2 && !parts[0].isEmpty && parts[0].count <= 64
            && parts[1].contains(".") && !parts[1].hasPrefix(".") && !parts[1].hasSuffix(".") && !parts[1].contains("..")
            && !email.contains(where: { $0.isWhitespace || $0 == "," || $0 == "<" || $0 == ">" })
            && parts[1].allSatisfy { $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" }
        guard valid else { throw DomainError(.emailMalformed, "'\(email.prefix(64))' is not a valid email address") }
    }

    /// Passwords: at least 10 characters and at most 256; at least three of lowercase, uppercase,
    /// digits and symbols (or 16 characters and more, for passphrases); not containing the user
    /// name; not one of the most common passwords.
    package static func checkPassword(_ password: String, userName: String) throws {
        try checkPassword(password)
        try checkPassword(password, omits: userName)
    }

    /// The rules that do not depend on whose password it is (checked before anything that
    /// could tell whether an account exists).
    package static func checkPassword(_ password: String) throws {
        guard password.count >= 10 else { throw DomainError(.passwordTooWeak, "a password needs at least 10 characters") }
        guard password.count <= 256 else { throw DomainError(.passwordTooWeak, "a password has at most 256 characters") }
        var classes = 0
        if password.contains(where: \.isLowercase) { classes += 1 }
        if password.contains(where: \.isUppercase) { classes += 1 }
        if password.contains(where: \.isNumber) { classes += 1 }
        if password.contains(where: { !$0.isLetter && !$0.isNumber }) { classes += 1 }
        guard classes >= 3 || password.count >= 16 else {
            throw DomainError(
                .passwordTooWeak, "a password under 16 characters needs three of: lowercase, uppercase, digits, symbols")
        }
        guard !commonPasswords.contains(password.lowercased()) else {
            throw DomainError(.passwordTooWeak, "that password is one of the most common ones")
        }
    }

    /// The rule that mentions the user name: the password must not contain it.
    package static func checkPassword(_ password: String, omits userName: String) throws {
        guard userName.count < 3 || !password.lowercased().contains(userName.lowercased()) else {
            throw DomainError(.passwordTooWeak, "a password must not contain the user name")
        }
    }

    /// Ages 13 to 120 (13 is the usual minimum age for online accounts).
    package static func checkAge(_ age: Int) throws {
        guard (13...120).contains(age) else { throw DomainError(.ageOutOfRange, "age must be between 13 and 120") }
    }

    /// Countries: an ISO 3166-1 alpha-2 code such as `CA` or `DE`.
    package static func checkCountry(_ country: String) throws {
        guard isoCountries.contains(country) else {
            throw DomainError(.countryInvalid, "'\(country.prefix(8))' is not an ISO 3166-1 alpha-2 country code")
        }
    }

    static let commonPasswords: Set<String> = [
        "password123", "1234567890", "qwertyuiop", "password1!", "iloveyou12", "123456789a", "qwerty1234",
        "1q2w3e4r5t", "passw0rd12", "welcome123", "abc123456789", "administrator", "password12", "letmein123",
        "p@ssw0rd123", "changeme123",
    ]

    static let isoCountries: Set<String> = Set(
        """
        AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW BY BZ \
        CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO FR \
        GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE JM JO \
        JP KE KG KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO MP MQ MR \
        MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM PN PR PS PT PW PY QA RE RO \
        RS RU RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ TC TD TF TG TH TJ TK TL TM TN TO TR TT TV \
        TW TZ UA UG UM US UY UZ VA VC VE VG VI VN VU WF WS YE YT ZA ZM ZW
        """.split(separator: " ").map { String($0).trimmingCharacters(in: .whitespacesAndNewlines) })
}
