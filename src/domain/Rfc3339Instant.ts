import { ParseResult, Schema } from "effect"

/** The earliest instant accepted: the epoch, 1970-01-01T00:00:00Z (0 ms). */
export const EarliestInstant = new Date(0)

/**
 * The latest instant accepted, 9999-12-31T23:59:59.999Z: the last that `toISOString`
 * writes with a four-digit year, which is all RFC 3339's `date-fullyear` can hold.
 */
export const LatestInstant = new Date(Date.UTC(9999, 11, 31, 23, 59, 59, 999))

// RFC 3339 §5.6 `date-time`, with the letters in either case (its ABNF strings are
// case-insensitive, and §5.6's note allows `t` and `z`). `\d` is ASCII-only without the u flag.
const dateTime = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/

const daysIn = (year: number, month: number): number =>
  month === 2
    ? (year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28)
    : [4, 6, 9, 11].includes(month)
    ? 30
    : 31

/** Why `text` is not an instant this schema accepts, or the instant in ms since the epoch. */
const parseInstant = (text: string): { readonly ms: number } | { readonly refusal: string } => {
  const m = dateTime.exec(text)
  if (m === null) {
    return {
      refusal: "must be an RFC 3339 date-time such as 2026-11-29T12:00:00Z: YYYY-MM-DD, T, hh:mm:ss, " +
        "an optional fraction, then Z or ±hh:mm (RFC 3339 §5.6)"
    }
  }
  // The optional groups (fraction, offset) are undefined when absent; the others always match.
  const [, yyyy = "", mo = "", dd = "", hh = "", mi = "", ss = "", fraction = "", sign, oh = "00", om = "00"] = m
  const [year, month, day, hour, minute, second] = [yyyy, mo, dd, hh, mi, ss].map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number
  ]
  if (month < 1 || month > 12) return { refusal: `has month ${mo}; a month is 01–12 (RFC 3339 §5.6)` }
  if (day < 1 || day > daysIn(year, month)) {
    return { refusal: `has day ${dd}, and ${yyyy}-${mo} has ${daysIn(year, month)} days (RFC 3339 §5.7)` }
  }
  if (hour > 23) return { refusal: `has hour ${hh}; an hour is 00–23 (RFC 3339 §5.6)` }
  if (minute > 59) return { refusal: `has minute ${mi}; a minute is 00–59 (RFC 3339 §5.6)` }
  if (second === 60) {
    return {
      refusal: "has second 60, a leap second, which is not accepted: an instant is held in ms since the epoch, " +
        "which counts no leap seconds (RFC 3339 §5.7)"
    }
  }
  if (second > 59) return { refusal: `has second ${ss}; a second is 00–59 (RFC 3339 §5.6)` }
  const [offsetHours, offsetMinutes] = [Number(oh), Number(om)]
  if (offsetHours > 23 || offsetMinutes > 59) {
    return { refusal: `has offset ${sign}${oh}:${om}; an offset is at most ±23:59 (RFC 3339 §5.6)` }
  }
  const utc = new Date(0)
  // setUTCFullYear takes the year as written; Date.UTC would read 0000–0099 as 1900–1999.
  utc.setUTCFullYear(year, month - 1, day)
  // Digits past the millisecond are dropped: the instant is held in whole ms.
  utc.setUTCHours(hour, minute, second, Number((fraction + "000").slice(0, 3)))
  const ms = utc.getTime() - (sign === "-" ? -1 : 1) * (offsetHours * 60 + offsetMinutes) * 60_000
  if (ms < EarliestInstant.getTime()) {
    return { refusal: "is before 1970-01-01T00:00:00Z, the earliest instant accepted" }
  }
  if (ms > LatestInstant.getTime()) {
    return { refusal: "is after 9999-12-31T23:59:59.999Z, the latest instant accepted" }
  }
  return { ms }
}

/**
 * An instant written as an RFC 3339 §5.6 `date-time`, e.g. `2026-11-29T12:00:00.000Z`,
 * decoded to a `Date`. Accepted, and nothing else:
 * - `YYYY-MM-DD`, `T` or `t`, `hh:mm:ss`, an optional fraction of any number of digits
 *   (those past the millisecond are dropped), then `Z`, `z` or a numeric offset `±hh:mm`
 *   (`-00:00`, RFC 3339 §4.3, is UTC too). No space for `T`, no missing offset or
 *   seconds, no week or ordinal dates, nothing else `Date.parse` would guess at (`"1"`,
 *   `"March 7"`);
 * - a day that exists in its month (RFC 3339 §5.7: 2024-02-29 yes, 2026-02-30 no), hours
 *   00–23, minutes and seconds 00–59, offsets up to ±23:59. Second 60 (a leap second) is
 *   refused: a `Date` counts no leap seconds, and the kit writes none;
 * - an instant from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z (`EarliestInstant`,
 *   `LatestInstant`), after applying the offset: a publication before the epoch means a
 *   broken clock, and past year 9999 `toISOString` writes no RFC 3339 any more.
 *
 * Each refusal names the rule it breaks (e.g. `has day 30, and 2026-02 has 28 days (RFC
 * 3339 §5.7)`). Encodes with `toISOString`: UTC, `Z`, milliseconds, so what the kit
 * writes it reads back unchanged.
 */
export const Rfc3339Instant = Schema.transformOrFail(
  Schema.String,
  Schema.ValidDateFromSelf.pipe(Schema.betweenDate(EarliestInstant, LatestInstant)),
  {
    strict: true,
    decode: (text, _, ast) => {
      const parsed = parseInstant(text)
      return "ms" in parsed
        ? ParseResult.succeed(new Date(parsed.ms))
        : ParseResult.fail(new ParseResult.Type(ast, text, parsed.refusal))
    },
    encode: (date) => ParseResult.succeed(date.toISOString())
  }
).annotations({ identifier: "Rfc3339Instant" })
