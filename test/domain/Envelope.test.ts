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
})
