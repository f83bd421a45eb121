import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { decodeEvent, MaxDetailLength } from "../../src/domain/Envelope.js"
import { MaterialMother } from "../support/MaterialMother.js"

const event = MaterialMother.event({ revision: 3 })
const envelope = MaterialMother.envelope(event, "req-1")
const incoming = {
  type: envelope.type,
  schemaVersion: 1,
  contentType: envelope.contentType,
  body: Buffer.from(envelope.body)
}

describe("the material.published.v1 envelope", () => {
  it("carries the fact without the body, under the event id, correlated to the request", () => {
    expect(envelope).toMatchObject({
      messageId: event.eventId,
      correlationId: "req-1",
      type: "material.published.v1",
      schemaVersion: 1,
      contentType: "application/json",
      timestampMs: Date.parse("2026-11-29T12:00:00.000Z")
    })
    expect(JSON.parse(envelope.body)).toEqual({
      event_id: event.eventId,
      material_id: "guides/quorum-queues",
      revision: 3,
      title: "Quorum queues, revision 3",
      summary: "Why replicated queues replace mirrored ones.",
      published_at: "2026-11-29T12:00:00.000Z"
    })
  })

  it("decodes back to the same event, also under a content type with parameters", () => {
    expect(Either.getOrThrow(decodeEvent(incoming))).toEqual(event)
    expect(Either.getOrThrow(decodeEvent({ ...incoming, contentType: "Application/JSON; charset=utf-8" }))).toEqual(
      event
    )
  })

  it.each([
    ["unknown-type", { ...incoming, type: "material.deleted.v1" }],
    ["unknown-version", { ...incoming, schemaVersion: 2 }],
    ["unknown-version", { ...incoming, schemaVersion: true }],
    ["unknown-version", { ...incoming, schemaVersion: undefined }],
    ["bad-content-type", { ...incoming, contentType: "text/plain" }],
    ["bad-body", { ...incoming, body: Buffer.from("{not json") }],
    ["bad-body", { ...incoming, body: Buffer.from(JSON.stringify({ ...JSON.parse(envelope.body), revision: 0 })) }]
  ])("refuses %s", (reason, message) => {
    const decoded = decodeEvent(message)
    expect(Either.isLeft(decoded) && decoded.left.reason).toBe(reason)
  })

  it("a body nested 10,000 levels deep is refused as bad-body, never thrown, with a short detail", () => {
    const body = JSON.stringify({ ...JSON.parse(envelope.body), title: "PLACEHOLDER" })
      .replace("\"PLACEHOLDER\"", "[".repeat(10_000) + "]".repeat(10_000))
    const decoded = decodeEvent({ ...incoming, body: Buffer.from(body) })
    expect(Either.isLeft(decoded) && decoded.left).toMatchObject({
      reason: "bad-body",
      detail: expect.stringContaining("deeper than")
    })
  })

  it("a body of raw Latin-1 bytes is refused as bad-body, not read with replacement characters", () => {
    const body = Buffer.concat([Buffer.from(envelope.body.slice(0, -2)), Buffer.from([0xe9, 0xff]), Buffer.from("\"}")])
    const decoded = decodeEvent({ ...incoming, body })
    expect(Either.isLeft(decoded) && decoded.left).toMatchObject({
      reason: "bad-body",
      detail: "the body is not valid UTF-8"
    })
  })

  it("a schema-version header holding a deep table is an unknown version, described in a few words", () => {
    let deep: unknown = 1
    for (let i = 0; i < 10_000; i++) deep = { n: deep }
    const decoded = decodeEvent({ ...incoming, schemaVersion: deep })
    expect(Either.isLeft(decoded) && decoded.left).toMatchObject({ reason: "unknown-version" })
    expect(Either.isLeft(decoded) && decoded.left.detail.length).toBeLessThan(100)
  })

  it("a long wrong type is cut to at most MaxDetailLength characters", () => {
    const decoded = decodeEvent({ ...incoming, type: "x".repeat(50_000) })
    expect(Either.isLeft(decoded) && decoded.left.detail.length).toBeLessThanOrEqual(MaxDetailLength)
  })

  /** The valid body as JSON text with the member `name` written as `text`. */
  const bodyWith = (name: string, text: string) =>
    Buffer.from(
      JSON.stringify({ ...JSON.parse(envelope.body), [name]: "PLACEHOLDER" }).replace("\"PLACEHOLDER\"", text)
    )
  const detailOf = (body: Buffer) => {
    const decoded = decodeEvent({ ...incoming, body })
    return Either.isLeft(decoded) ? `${decoded.left.reason}: ${decoded.left.detail}` : "accepted"
  }

  it("an event_id in upper case is the same event, held in lower case (RFC 9562 §4)", () => {
    const decoded = decodeEvent({
      ...incoming,
      body: bodyWith("event_id", JSON.stringify(event.eventId.toUpperCase()))
    })
    expect(Either.map(decoded, (e) => e.eventId)).toEqual(Either.right(event.eventId))
  })

  it.each([
    ["a revision given twice", "\"revision\":3", "\"revision\":3,\"revision\":9", "\"revision\""],
    ["a duplicate nested in an unknown field", "\"revision\":3", "\"revision\":3,\"x\":[{\"y\":1,\"y\":2}]", "\"y\""],
    ["an escaped second event_id", "\"revision\":3", "\"revision\":3,\"ev\\u0065nt_id\":\"x\"", "\"event_id\""]
  ])("%s is refused as bad-body, never the last member taken", (_, member, replacement, name) => {
    const body = Buffer.from(envelope.body.replace(member, replacement))
    expect(detailOf(body)).toBe(
      `bad-body: the body has the member name ${name} twice in one object (I-JSON, RFC 7493 §2.3)`
    )
  })

  it.each(["0.1e1", "1.0000000000000001", "3.0", "3e0", "-0"])(
    "a revision written %s is refused as bad-body",
    (lexeme) => {
      expect(detailOf(bodyWith("revision", lexeme))).toBe(
        `bad-body: ["revision"] must be written as an integer, without a fraction, an exponent or a minus zero (it is written ${lexeme})`
      )
    }
  )

  it("a revision over 2^53−1 is refused as at most 9007199254740991, not as 'not an integer'", () => {
    expect(detailOf(bodyWith("revision", "142305660233966512"))).toContain("must be at most 9007199254740991")
  })

  it.each([
    ["1", "must be an RFC 3339 date-time"],
    ["March 7", "must be an RFC 3339 date-time"],
    ["2026-11-29 12:00:00Z", "must be an RFC 3339 date-time"],
    ["2026-11-29T12:00:00", "must be an RFC 3339 date-time"],
    ["2026-02-30T00:00:00Z", "has day 30, and 2026-02 has 28 days (RFC 3339 §5.7)"],
    ["2016-12-31T23:59:60Z", "has second 60, a leap second"],
    ["1969-12-31T23:59:59Z", "is before 1970-01-01T00:00:00Z"]
  ])("a published_at of %s is refused as bad-body, naming the rule", (text, rule) => {
    const detail = detailOf(bodyWith("published_at", JSON.stringify(text)))
    expect(detail).toMatch(/^bad-body: /)
    expect(detail).toContain("[\"published_at\"]")
    expect(detail).toContain(rule)
  })

  it("a published_at with an offset and a fraction is the instant it names; one Date.parse would guess at is not", () => {
    const decoded = decodeEvent({ ...incoming, body: bodyWith("published_at", "\"2026-11-29t14:30:00.1234+02:30\"") })
    expect(Either.map(decoded, (e) => e.publishedAt.toISOString())).toEqual(Either.right("2026-11-29T12:00:00.123Z"))
    expect(detailOf(bodyWith("published_at", "\"2026-11-29T14:30:00.1234\""))).toMatch(/^bad-body: /)
  })
})
