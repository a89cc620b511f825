import Foundation

/// How `Date` values are written into and read from documents (as JSON strings).
///
/// The default is ISO 8601 in UTC with milliseconds (`2026-11-22T02:30:55.123Z`); reading also
/// accepts ISO 8601 without fractional seconds.
public struct DateFormat: Sendable {
    let format: @Sendable (Date) -> String
    let parse: @Sendable (String) -> Date?

    /// A custom format.
    public static func custom(format: @escaping @Sendable (Date) -> String,
                              parse: @escaping @Sendable (String) -> Date?) -> DateFormat {
        DateFormat(format: format, parse: parse)
    }

    /// ISO 8601, UTC, with milliseconds.
    public static let iso8601: DateFormat = {
        let fractional = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        let whole = Date.ISO8601FormatStyle()
        return DateFormat(
            format: { fractional.format($0) },
            parse: { text in (try? fractional.parse(text)) ?? (try? whole.parse(text)) }
        )
    }()

    /// Seconds since 1970 as a number is not a string format; this writes them as a decimal string.
    public static let secondsSince1970 = DateFormat(
        format: { String($0.timeIntervalSince1970) },
        parse: { Double($0).map(Date.init(timeIntervalSince1970:)) }
    )

    /// The string for `date`.
    public func string(from date: Date) -> String { format(date) }

    /// The date written as `text`, if it is in this format.
    public func date(from text: String) -> Date? { parse(text) }
}
