import { describe, expect, it } from "@effect/vitest"
import { Either, ParseResult, Schema } from "effect"
import fc from "fast-check"
import { decodeEvent, MaxDetailLength } from "../../src/domain/Envelope.js"
import { MaxIssueLength, MaxListedIssues, parseJsonBytes } from "../../src/domain/JsonInput.js"
import { decodePublishMaterial } from "../../src/domain/PublishMaterial.js"
import { Rfc3339Instant } from "../../src/domain/Rfc3339Instant.js"
import { MaterialMother } from "../support/MaterialMother.js"
import {
  deepJson,
  duplicatedName,
  manyUnknownKeys,
  nonIntegerLiteral,
  propertyParameters,
  rfc3339Text
} from "../support/properties.js"

const validBody = MaterialMother.envelope(MaterialMother.event()).body

/** Bodies of every kind: random bytes, any JSON, deep nesting, the valid event with a field replaced by anything. */
const bodies = fc.oneof(
  fc.uint8Array({ maxLength: 512 }),
  fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v))),
  deepJson.map((text) => Buffer.from(text)),
  manyUnknownKeys(5_000).map((text) => Buffer.from(text)),
  fc.tuple(
    fc.constantFrom("event_id", "material_id", "revision", "title", "summary", "published_at", "extra"),
    fc.jsonValue()
  )
    .map(([field, value]) => Buffer.from(JSON.stringify({ ...JSON.parse(validBody), [field]: value }))),
  fc.constant(Buffer.from(validBody))
)

/** Header values as amqplib may hand them over: any JSON-like value, tables and lists included, or nothing. */
const anyHeader = fc.oneof(fc.constant(1), fc.constant(undefined), fc.anything({ maxDepth: 6 }))

describe("the bus decoder, given anything", () => {
  it("returns a known event or a typed refusal with a bounded detail, and never throws", () => {
    fc.assert(
      fc.property(
        bodies,
        fc.oneof(fc.constant("material.published.v1"), fc.constant(undefined), fc.string()),
        anyHeader,
        fc.oneof(fc.constant("application/json"), fc.constant(undefined), fc.string()),
        (body, type, schemaVersion, contentType) => {
          const decoded = decodeEvent({ type, schemaVersion, contentType, body })
          if (Either.isLeft(decoded)) {
            expect(decoded.left._tag).toBe("UndecodableMessage")
            expect(decoded.left.detail.length).toBeLessThanOrEqual(MaxDetailLength)
          } else {
            expect(decoded.right.eventId).toMatch(/^[0-9a-f-]{36}$/)
          }
        }
      ),
      propertyParameters()
    )
  })
})

describe("the command decoder, given any JSON", () => {
  it("returns a command or at most MaxListedIssues + 1 issues of bounded length, and never throws", () => {
    fc.assert(
      fc.property(fc.oneof(bodies, manyUnknownKeys(20_000).map((t) => Buffer.from(t))), (bytes) => {
        const json = parseJsonBytes(bytes)
        if (Either.isLeft(json)) return
        const decoded = decodePublishMaterial(json.right)
        if (Either.isLeft(decoded)) {
          expect(decoded.left.issues.length).toBeGreaterThan(0)
          expect(decoded.left.issues.length).toBeLessThanOrEqual(MaxListedIssues + 1)
          for (const issue of decoded.left.issues) expect(issue.message.length).toBeLessThanOrEqual(MaxIssueLength)
        }
      }),
      propertyParameters()
    )
  })
})

const validCommand = JSON.stringify(MaterialMother.wire(MaterialMother.command()))
const refusalOf = (result: Either.Either<unknown, string>) => Either.isLeft(result) ? result.left : "accepted"
/** Both doors on one body: the command as the API reads it, and the event as a receiver does; a refusal as text. */
const bothDoors = (body: Buffer) => ({
  command: refusalOf(Either.flatMap(
    Either.mapLeft(parseJsonBytes(body), (refusal) => `(body) ${refusal.message}`),
    (document) =>
      Either.mapLeft(decodePublishMaterial(document), (e) => e.issues.map((i) => `${i.field} ${i.message}`).join("; "))
  )),
  event: refusalOf(Either.mapLeft(
    decodeEvent({ type: "material.published.v1", schemaVersion: 1, contentType: "application/json", body }),
    (e) => `${e.reason}: ${e.detail}`
  ))
})

describe("both decoders, given a document with a member name twice", () => {
  it("refuse it, wherever the duplicate is and however the second name is escaped", () => {
    fc.assert(
      fc.property(duplicatedName, fc.boolean(), (duplicate, inEvent) => {
        // The members go beside the document's own, or into a field of their own.
        const body = Buffer.from(
          // A function, so that a `$` in a generated name is not read as a replacement pattern.
          (inEvent ? validBody : validCommand).replace(
            /^\{/,
            () => duplicate.topLevel ? `{${duplicate.members},` : `{"extra":${duplicate.text},`
          )
        )
        const { command, event } = bothDoors(body)
        expect(command).toMatch(/^\(body\) has the member name .* twice in one object \(I-JSON, RFC 7493 §2\.3\)$/s)
        expect(event).toMatch(/^bad-body: the body has the member name .* twice in one object/s)
      }),
      propertyParameters()
    )
  })
})

describe("both decoders, given a revision that is not written as an integer literal", () => {
  it("refuse it, naming revision, whatever number it parses to", () => {
    fc.assert(
      fc.property(nonIntegerLiteral, (lexeme) => {
        const written = `must be written as an integer, without a fraction, an exponent or a minus zero (it is written`
        const { command } = bothDoors(Buffer.from(validCommand.replace(/"revision":\d+/, `"revision":${lexeme}`)))
        const { event } = bothDoors(Buffer.from(validBody.replace(/"revision":\d+/, `"revision":${lexeme}`)))
        expect(command).toContain(`revision ${written}`)
        expect(event).toContain(`bad-body: ["revision"] ${written}`)
      }),
      propertyParameters()
    )
  })
})

describe("published_at (RFC 3339 §5.6)", () => {
  const decode = Schema.decodeUnknownEither(Rfc3339Instant)
  const messageOf = (text: string) =>
    Either.match(decode(text), {
      onLeft: (error) => ParseResult.ArrayFormatter.formatErrorSync(error)[0]!.message,
      onRight: () => "accepted"
    })

  it("every instant in range, written with any offset, fraction and letter case, reads back as itself", () => {
    fc.assert(
      fc.property(rfc3339Text, ({ ms, text }) => {
        const decoded = decode(text)
        expect(Either.map(decoded, (d) => d.getTime())).toEqual(Either.right(ms))
        expect(Either.map(decoded, Schema.encodeSync(Rfc3339Instant))).toEqual(Either.right(new Date(ms).toISOString()))
      }),
      propertyParameters()
    )
  })

  it("a valid instant mangled into a form Date.parse still reads is refused", () => {
    const mangle = fc.constantFrom<(s: string) => string>(
      (s) => s.replace(/(?:[Zz]|[+-]\d\d:\d\d)$/, ""), // no offset: local time
      (s) => s.replace(/[Tt]/, " "), // a space for T
      (s) => s.slice(0, 10), // a date alone
      (s) => s.replace(/(\d\d:\d\d):\d\d/, "$1"), // no seconds
      (s) => new Date(Date.parse(s)).toUTCString(), // RFC 9110's IMF-fixdate
      (s) => new Date(Date.parse(s)).toString(), // local time with a zone name
      (s) => String(new Date(Date.parse(s)).getUTCFullYear()) // a year alone
    )
    fc.assert(
      fc.property(rfc3339Text, mangle, ({ text }, mangled) => {
        expect(messageOf(mangled(text))).toMatch(/^must be an RFC 3339 date-time/)
      }),
      propertyParameters()
    )
  })

  it("a string is read only if it has the date-time form, and nothing throws", () => {
    const dateTimeForm = /^\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)$/
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string({ unit: fc.constantFrom(..."0123456789-:TtZz.+ ") })), (text) => {
        if (messageOf(text) === "accepted") expect(text).toMatch(dateTimeForm)
      }),
      propertyParameters()
    )
  })

  it("a day past its month's end, or day 00, is refused and named, leap years included", () => {
    const impossibleDay = fc.integer({ min: 1970, max: 9999 }).chain((year) =>
      fc.integer({ min: 1, max: 12 }).chain((month) => {
        const days = new Date(Date.UTC(year, month, 0)).getUTCDate()
        return fc.constantFrom(0, ...Array.from({ length: 31 - days }, (_, k) => days + 1 + k)).map((day) => ({
          text: `${year}-${String(month).padStart(2, "0")}-${String(day).padStart(2, "0")}T12:00:00Z`,
          month: `${year}-${String(month).padStart(2, "0")}`,
          days
        }))
      })
    )
    fc.assert(
      fc.property(impossibleDay, ({ days, month, text }) => {
        expect(messageOf(text)).toMatch(
          new RegExp(`^has day \\d\\d, and ${month} has ${days} days \\(RFC 3339 §5\\.7\\)$`)
        )
      }),
      propertyParameters()
    )
  })
})
