import { describe, expect, it } from "@effect/vitest"
import { Either, ParseResult, Schema } from "effect"
import { Rfc3339Instant } from "../../src/domain/Rfc3339Instant.js"

const decode = Schema.decodeUnknownEither(Rfc3339Instant)
/** The instant `text` names, as `toISOString` writes it, or the refusal's message. */
const read = (text: unknown): string =>
  Either.match(decode(text), {
    onLeft: (error) => ParseResult.ArrayFormatter.formatErrorSync(error)[0]!.message,
    onRight: (date) => date.toISOString()
  })

describe("published_at: an RFC 3339 §5.6 date-time", () => {
  // Each rule from both sides: the form it accepts (and the instant it names), and its nearest refused neighbour.
  it.each([
    [
      "an offset",
      "2026-11-29T14:30:00+02:30",
      "2026-11-29T12:00:00.000Z",
      "2026-11-29T14:30:00",
      "must be an RFC 3339"
    ],
    [
      "UTC written -00:00 (§4.3)",
      "2026-11-29T12:00:00-00:00",
      "2026-11-29T12:00:00.000Z",
      "2026-11-29T12:00:00+0000",
      "must be an RFC 3339"
    ],
    [
      "lower-case t and z",
      "2026-11-29t12:00:00z",
      "2026-11-29T12:00:00.000Z",
      "2026-11-29 12:00:00z",
      "must be an RFC 3339"
    ],
    [
      "a fraction of any length",
      "2026-11-29T12:00:00.123456789Z",
      "2026-11-29T12:00:00.123Z",
      "2026-11-29T12:00:00.Z",
      "must be an RFC 3339"
    ],
    [
      "a leap day",
      "2024-02-29T00:00:00Z",
      "2024-02-29T00:00:00.000Z",
      "2026-02-29T00:00:00Z",
      "has day 29, and 2026-02 has 28 days (RFC 3339 §5.7)"
    ],
    [
      "a leap century",
      "2000-02-29T00:00:00Z",
      "2000-02-29T00:00:00.000Z",
      "1900-02-29T00:00:00Z",
      "has day 29, and 1900-02 has 28 days (RFC 3339 §5.7)"
    ],
    [
      "the last hour",
      "2026-11-29T23:59:59Z",
      "2026-11-29T23:59:59.000Z",
      "2026-11-29T24:00:00Z",
      "has hour 24; an hour is 00–23 (RFC 3339 §5.6)"
    ],
    [
      "the widest offset",
      "2026-11-29T00:00:00-23:59",
      "2026-11-29T23:59:00.000Z",
      "2026-11-29T00:00:00+24:00",
      "has offset +24:00; an offset is at most ±23:59 (RFC 3339 §5.6)"
    ],
    [
      "the epoch",
      "1970-01-01T00:00:00Z",
      "1970-01-01T00:00:00.000Z",
      "1969-12-31T23:59:59.999Z",
      "is before 1970-01-01T00:00:00Z, the earliest instant accepted"
    ],
    [
      "an offset across the epoch",
      "1969-12-31T23:30:00-01:00",
      "1970-01-01T00:30:00.000Z",
      "1970-01-01T00:30:00+01:00",
      "is before 1970-01-01T00:00:00Z, the earliest instant accepted"
    ],
    [
      "the latest instant",
      "9999-12-31T23:59:59.999Z",
      "9999-12-31T23:59:59.999Z",
      "9999-12-31T23:59:59-00:01",
      "is after 9999-12-31T23:59:59.999Z, the latest instant accepted"
    ]
  ])("%s: accepts %s as %s, refuses %s", (_, accepted, instant, refused, message) => {
    expect(read(accepted)).toBe(instant)
    expect(read(refused)).toContain(message)
  })

  const syntax = "must be an RFC 3339 date-time such as 2026-11-29T12:00:00Z: YYYY-MM-DD, T, hh:mm:ss, " +
    "an optional fraction, then Z or ±hh:mm (RFC 3339 §5.6)"
  it.each([
    ["1", syntax],
    ["March 7", syntax],
    ["2026-03-07", syntax],
    ["2026-11-29 12:00:00Z", syntax],
    ["2026-11-29T12:00:00", syntax],
    ["2026-11-29T12:00Z", syntax],
    ["2026-11-29T12:00:00+0200", syntax],
    ["2026-11-29T12:00:00 Z", syntax],
    [" 2026-11-29T12:00:00Z", syntax],
    ["+002026-11-29T12:00:00Z", syntax],
    ["2026-W48-7T12:00:00Z", syntax],
    ["２０２６-11-29T12:00:00Z", syntax],
    ["Sun, 29 Nov 2026 12:00:00 GMT", syntax],
    ["2026-02-30T00:00:00Z", "has day 30, and 2026-02 has 28 days (RFC 3339 §5.7)"],
    ["2026-04-31T00:00:00Z", "has day 31, and 2026-04 has 30 days (RFC 3339 §5.7)"],
    ["2026-01-00T00:00:00Z", "has day 00, and 2026-01 has 31 days (RFC 3339 §5.7)"],
    ["2026-13-01T00:00:00Z", "has month 13; a month is 01–12 (RFC 3339 §5.6)"],
    ["2026-00-01T00:00:00Z", "has month 00; a month is 01–12 (RFC 3339 §5.6)"],
    ["2026-11-29T12:60:00Z", "has minute 60; a minute is 00–59 (RFC 3339 §5.6)"],
    ["2026-11-29T12:00:61Z", "has second 61; a second is 00–59 (RFC 3339 §5.6)"],
    [
      "2016-12-31T23:59:60Z",
      "has second 60, a leap second, which is not accepted: an instant is held in ms since the epoch, " +
      "which counts no leap seconds (RFC 3339 §5.7)"
    ],
    ["2026-11-29T12:00:00-05:60", "has offset -05:60; an offset is at most ±23:59 (RFC 3339 §5.6)"],
    ["0050-01-01T00:00:00Z", "is before 1970-01-01T00:00:00Z, the earliest instant accepted"]
  ])("refuses %s: %s", (text, message) => {
    expect(read(text)).toBe(message)
  })

  it("encodes with toISOString (UTC, milliseconds, Z), and refuses to encode an instant it would not read back", () => {
    expect(Schema.encodeSync(Rfc3339Instant)(new Date(Date.UTC(2026, 10, 29, 14, 30, 0, 7)))).toBe(
      "2026-11-29T14:30:00.007Z"
    )
    // toISOString would write +010000-01-01T00:00:00.000Z, which is no RFC 3339.
    expect(Either.isLeft(Schema.encodeEither(Rfc3339Instant)(new Date(Date.UTC(10000, 0, 1))))).toBe(true)
  })
})
