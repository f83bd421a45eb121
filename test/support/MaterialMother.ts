import { Schema } from "effect"
import { createHash, randomUUID } from "node:crypto"
import type { IncomingMessage } from "../../src/app/admission.js"
import { type Envelope, envelopeOf } from "../../src/domain/Envelope.js"
import { MaterialId, Revision } from "../../src/domain/Material.js"
import { EventId, MaterialPublishedV1 } from "../../src/domain/MaterialPublished.js"
import { IdempotencyKey, PublishMaterial } from "../../src/domain/PublishMaterial.js"

/** Valid commands and events, with only what a test cares about stated. */
export const MaterialMother = {
  /** The material the other builders use unless told otherwise. */
  materialId: MaterialId.make("guides/quorum-queues"),
  /** A valid event id, the same for the same `label` (a version 4 UUID made of its SHA-256). */
  eventId: (label: string = randomUUID()): EventId => {
    const h = createHash("sha256").update(label).digest("hex")
    return EventId.make(`${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`)
  },
  command: (
    overrides: Partial<{ materialId: string; revision: number; title: string; summary: string; body: string }> = {}
  ) =>
    PublishMaterial.make({
      materialId: MaterialId.make(overrides.materialId ?? "guides/quorum-queues"),
      revision: Revision.make(overrides.revision ?? 1),
      title: overrides.title ?? `Quorum queues, revision ${overrides.revision ?? 1}`,
      summary: overrides.summary ?? "Why replicated queues replace mirrored ones.",
      body: overrides.body ?? "Quorum queues are replicated with Raft.\n\nThey are durable by design."
    }),
  /** The JSON a client POSTs for `command` (snake_case keys). */
  wire: (command: PublishMaterial) => Schema.encodeSync(PublishMaterial)(command),
  key: (suffix: string = randomUUID()) => IdempotencyKey.make(`key-${suffix}`),
  event: (overrides: Partial<{ eventId: string; materialId: string; revision: number; title: string }> = {}) =>
    MaterialPublishedV1.make({
      eventId: EventId.make(overrides.eventId ?? randomUUID()),
      materialId: MaterialId.make(overrides.materialId ?? "guides/quorum-queues"),
      revision: Revision.make(overrides.revision ?? 1),
      title: overrides.title ?? `Quorum queues, revision ${overrides.revision ?? 1}`,
      summary: "Why replicated queues replace mirrored ones.",
      publishedAt: new Date("2026-11-29T12:00:00.000Z")
    }),
  envelope: (event: MaterialPublishedV1, correlationId: string = randomUUID()): Envelope =>
    envelopeOf(event, correlationId, "dostavka-test"),
  /** `event` as a consumer hands it to `judge`: its envelope's properties and the body's UTF-8 bytes. */
  incoming: (event: MaterialPublishedV1, overrides: Partial<IncomingMessage> = {}): IncomingMessage => {
    const envelope = envelopeOf(event, randomUUID(), "dostavka-test")
    return {
      messageId: envelope.messageId,
      correlationId: envelope.correlationId,
      type: envelope.type,
      schemaVersion: envelope.schemaVersion,
      contentType: envelope.contentType,
      body: Buffer.from(envelope.body, "utf8"),
      attempts: 0,
      userId: undefined,
      fromEventsExchange: true,
      ...overrides
    }
  },
  /**
   * `event` as a producer that writes UUIDs in upper case would send it: its `message_id`
   * and its body's `event_id` in upper case (RFC 9562 §4 makes them the same UUID).
   */
  incomingInUpperCase: (event: MaterialPublishedV1, overrides: Partial<IncomingMessage> = {}): IncomingMessage => {
    const upper = event.eventId.toUpperCase()
    const body = MaterialMother.envelope(event).body.replace(`"event_id":"${event.eventId}"`, `"event_id":"${upper}"`)
    return MaterialMother.incoming(event, { messageId: upper, body: Buffer.from(body, "utf8"), ...overrides })
  }
}
