import fc from "fast-check"
import { EarliestInstant, LatestInstant } from "../../src/domain/Rfc3339Instant.js"

/**
 * Cases per property: 1,000 by default, as CI runs them; `DOSTAVKA_PROPERTY_RUNS` changes
 * it for a longer hunt. fast-check prints the seed and the shrunk counterexample of a
 * failure; `DOSTAVKA_PROPERTY_SEED` replays a seed.
 */
export const propertyParameters = (): fc.Parameters<unknown> => ({
  numRuns: Number(process.env.DOSTAVKA_PROPERTY_RUNS ?? 1000),
  ...(process.env.DOSTAVKA_PROPERTY_SEED === undefined ? {} : { seed: Number(process.env.DOSTAVKA_PROPERTY_SEED) })
})

/** Arrays or objects nested `levels` deep around a leaf, as JSON text, built without recursion. */
export const nestedJson = (levels: number, kind: "array" | "object") =>
  kind === "array" ? "[".repeat(levels) + "0" + "]".repeat(levels) : "{\"n\":".repeat(levels) + "0" + "}".repeat(levels)

/** JSON text nested 1 to 100,000 levels deep. */
export const deepJson = fc.tuple(
  fc.integer({ min: 1, max: 100_000 }),
  fc.constantFrom("array" as const, "object" as const)
)
  .map(([levels, kind]) => nestedJson(levels, kind))

/** A JSON object with up to `max` keys that are no field of anything. */
export const manyUnknownKeys = (max: number) =>
  fc.integer({ min: 0, max }).map((n) => {
    const keys: Array<string> = []
    for (let i = 0; i < n; i++) keys.push(`"unknown_${i}":${i}`)
    return `{${keys.join(",")}}`
  })

/** `name` as the body of a JSON string, each UTF-16 code unit that `escapes` marks written `\uXXXX`. */
const escapedName = (name: string, escapes: ReadonlyArray<boolean>) =>
  Array.from({ length: name.length }, (_, i) =>
    escapes[i] === true
      ? `\\u${name.charCodeAt(i).toString(16).padStart(4, "0")}`
      : JSON.stringify(name[i]).slice(1, -1)).join("")

/**
 * An object's members, as JSON text, with one name twice: once as `JSON.stringify` writes
 * it, once with some of its code units escaped, other members before and between. `text`
 * is that object wrapped in arrays and objects up to five levels; `topLevel` says whether
 * a test should splice `members` into a document's own top-level object instead.
 */
export const duplicatedName = fc.record({
  // Printable ASCII, any code point, any code unit (lone surrogates too), or a field's own name.
  name: fc.oneof(
    fc.string(),
    fc.string({ unit: "binary" }),
    fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)) }),
    fc.constantFrom("revision", "event_id", "title")
  ),
  escapes: fc.array(fc.boolean(), { maxLength: 20 }),
  before: fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }),
  between: fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }),
  first: fc.jsonValue({ maxDepth: 2 }),
  second: fc.jsonValue({ maxDepth: 2 }),
  wrapping: fc.array(fc.oneof(fc.constant(undefined), fc.string({ maxLength: 6 })), { maxLength: 5 }),
  topLevel: fc.boolean()
}).map(({ before, between, escapes, first, name, second, topLevel, wrapping }) => {
  const others = (members: Record<string, unknown>) =>
    Object.entries(members).map(([key, value]) => `${JSON.stringify(key)}:${JSON.stringify(value)},`).join("")
  const members = `${others(before)}${JSON.stringify(name)}:${JSON.stringify(first)},${others(between)}"${
    escapedName(name, escapes)
  }":${JSON.stringify(second)}`
  // undefined wraps in an array, a string in an object under that key.
  const text = wrapping.reduce(
    (inner, key) => key === undefined ? `[${inner}]` : `{${JSON.stringify(key)}:${inner}}`,
    `{${members}}`
  )
  return { members, text, topLevel }
})

/**
 * A JSON number that is no integer literal (RFC 8259 §6): a fraction, an exponent, or
 * both, or minus zero; e.g. `0.1e1`, `1.0000000000000001`, `3E+0`, `-0`.
 */
export const nonIntegerLiteral = fc.oneof(
  fc.tuple(fc.bigInt({ min: -(10n ** 20n), max: 10n ** 20n }), fc.stringMatching(/^[0-9]{1,20}$/))
    .map(([int, fraction]) => `${int}.${fraction}`),
  fc.tuple(
    fc.bigInt({ min: -(10n ** 20n), max: 10n ** 20n }),
    fc.constantFrom("e", "E", "e+", "E-", "e-"),
    fc.integer({ min: 0, max: 400 })
  ).map(([int, e, exponent]) => `${int}${e}${exponent}`),
  fc.tuple(fc.integer({ min: 0, max: 9 }), fc.stringMatching(/^[0-9]{1,5}$/), fc.integer({ min: -5, max: 5 }))
    .map(([int, fraction, exponent]) => `${int}.${fraction}e${exponent}`),
  fc.constantFrom("-0", "-0.0", "-0e0")
)

/**
 * An RFC 3339 §5.6 `date-time` for an instant from 1970 to 9999 (`ms`, ms since the epoch,
 * which `text` names exactly): any offset up to ±23:59 (`Z`, `z`, `+00:00` or `-00:00`
 * for UTC), `T` or `t`, and no fraction or one of 1–12 digits (the ms it keeps are counted
 * in `ms`; digits past the third are noise the reader drops).
 */
export const rfc3339Text = fc.record({
  utc: fc.date({ min: EarliestInstant, max: LatestInstant, noInvalidDate: true }),
  offsetMinutes: fc.oneof(fc.constant(0), fc.integer({ min: -1439, max: 1439 })),
  zulu: fc.constantFrom("Z", "z", "+00:00", "-00:00"),
  separator: fc.constantFrom("T", "t"),
  fractionDigits: fc.integer({ min: 0, max: 12 }),
  noise: fc.stringMatching(/^[0-9]{9}$/)
}).map(({ fractionDigits, noise, offsetMinutes, separator, utc, zulu }) => {
  const local = new Date(utc.getTime() + offsetMinutes * 60_000).toISOString()
  const digits = `${local.slice(20, 23)}${noise}`.slice(0, fractionDigits)
  const kept = Number(digits.padEnd(3, "0").slice(0, 3))
  const offset = offsetMinutes === 0
    ? zulu
    : `${offsetMinutes < 0 ? "-" : "+"}${String(Math.floor(Math.abs(offsetMinutes) / 60)).padStart(2, "0")}:${
      String(Math.abs(offsetMinutes) % 60).padStart(2, "0")
    }`
  return {
    text: `${local.slice(0, 10)}${separator}${local.slice(11, 19)}${digits === "" ? "" : `.${digits}`}${offset}`,
    ms: utc.getTime() - utc.getUTCMilliseconds() + kept
  }
})
  // Past 9999-12-31 local time `toISOString` writes a six-digit year, which no date-time has.
  .filter(({ text }) => /^\d{4}-/.test(text))
