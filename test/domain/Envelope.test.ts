import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { decodeEvent } from "../../src/domain/Envelope.js"
import { MaterialMother } from "../support/MaterialMother.js"

const event = MaterialMother.event({ revision: 3 })
const envelope = MaterialMother.envelope(event, "req-1")
const incoming = { type: envelope.type, schemaVersion: 1, contentType: envelope.contentType, body: envelope.body }

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
    expect(Either.getOrThrow(decodeEvent({ ...incoming, contentType: "Application/JSON; charset=utf-8" }))).toEqual(event)
  })

  it.each([
    ["unknown-type", { ...incoming, type: "material.deleted.v1" }],
    ["unknown-version", { ...incoming, schemaVersion: 2 }],
    ["unknown-version", { ...incoming, schemaVersion: true }],
    ["unknown-version", { ...incoming, schemaVersion: undefined }],
    ["bad-content-type", { ...incoming, contentType: "text/plain" }],
    ["bad-body", { ...incoming, body: "{not json" }],
    ["bad-body", { ...incoming, body: JSON.stringify({ ...JSON.parse(envelope.body), revision: 0 }) }]
  ])("refuses %s", (reason, message) => {
    const decoded = decodeEvent(message)
    expect(Either.isLeft(decoded) && decoded.left.reason).toBe(reason)
  })
})
