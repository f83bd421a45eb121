/**
 * BenchMessages: messages shaped like the kit's own. Each is a `material.published.v1`
 * event of a material of its own (so the catalog applies every one), encoded by the kit
 * (`envelopeOf`) to a JSON body of about 1 KiB, and sent with the kit's AMQP properties
 * (`toPublish`: persistent, message_id, correlation_id, type, timestamp, app_id, schema
 * version header). Publication requests carry the same title and summary and a 1 KiB body.
 */
import { Schema } from "effect"
import { randomUUID } from "node:crypto"
import { type RawPublish } from "../../src/adapters/amqp/AmqpPublisher.js"
import { toPublish } from "../../src/adapters/amqp/EventBusAmqp.js"
import { ApiAppId } from "../../src/app/publishMaterial.js"
import { type Envelope, envelopeOf } from "../../src/domain/Envelope.js"
import { MaterialPublishedV1 } from "../../src/domain/MaterialPublished.js"

/** The size the bodies aim at, in bytes of JSON. */
export const TargetBodyBytes = 1024

const decodeEvent = Schema.decodeUnknownSync(MaterialPublishedV1)

const title = "Quorum queues in practice: replication, delivery limits and what they cost"
const filler = "Replicated, durable queues with at-least-once dead-lettering; a delivery limit ends poison messages. "

/** The summary length that brings an event of `materialId` to `TargetBodyBytes`. */
const summaryFor = (materialId: string): string => {
  const probe = envelopeOf(eventOf(materialId, ""), randomUUID(), ApiAppId).body
  const room = Math.max(0, TargetBodyBytes - Buffer.byteLength(probe))
  return filler.repeat(Math.ceil(room / filler.length) + 1).slice(0, room)
}

const eventOf = (materialId: string, summary: string) =>
  decodeEvent({
    event_id: randomUUID(),
    material_id: materialId,
    revision: 1,
    title,
    summary,
    published_at: new Date().toISOString()
  })

/** `count` envelopes of distinct materials `bench/<tag>/<i>`, as the API would put them in the outbox. */
export const envelopes = (tag: string, count: number): ReadonlyArray<Envelope> => {
  const summary = summaryFor(`bench/${tag}/${count}`)
  return Array.from(
    { length: count },
    (_, i) => envelopeOf(eventOf(`bench/${tag}/${i}`, summary), randomUUID(), ApiAppId)
  )
}

/** The AMQP publishes of `envelopes` to `exchange` (routing key: the type), or to a queue through the default exchange. */
export const publishesOf = (
  envelopes: ReadonlyArray<Envelope>,
  target: { readonly exchange: string } | { readonly queue: string }
): ReadonlyArray<RawPublish> =>
  envelopes.map((envelope) => {
    const publish = toPublish("exchange" in target ? target.exchange : "", envelope)
    return "queue" in target ? { ...publish, routingKey: target.queue } : publish
  })

const requestSummary = summaryFor("bench/request/000000")
const requestBody = "Body text that stays with the API owner. ".repeat(25).slice(0, 1000)

/** The JSON of a `POST /v1/publications` for a new material `bench/<tag>/<i>` at revision 1. */
export const publicationRequest = (tag: string, i: number): string =>
  JSON.stringify({ material_id: `bench/${tag}/${i}`, revision: 1, title, summary: requestSummary, body: requestBody })
