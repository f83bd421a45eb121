import { Schema } from "effect"
import { CanonicalUuid } from "./CanonicalUuid.js"
import { AddressableMaterialId, Revision, Summary, Title } from "./Material.js"
import { Rfc3339Instant } from "./Rfc3339Instant.js"

/**
 * An event's id: a UUID, given by the API owner when it accepts a request; the message id
 * of the event on the bus and the key of every inbox. Read in any letter case and held in
 * lower case (`CanonicalUuid`, RFC 9562 §4), so one event is one inbox key however a
 * producer spelled it.
 */
export const EventId = CanonicalUuid.pipe(Schema.brand("EventId", { identifier: "EventId" }))
export type EventId = typeof EventId.Type

/**
 * The fact: "material M was published at revision N". Immutable, past tense, versioned.
 * It carries no body: receivers that need it ask the API owner. On the wire it is the
 * JSON message body, snake_case keys, `published_at` an RFC 3339 date-time
 * (`Rfc3339Instant`: read with any offset, written in UTC with milliseconds).
 */
export class MaterialPublishedV1 extends Schema.Class<MaterialPublishedV1>("MaterialPublishedV1")({
  eventId: Schema.propertySignature(EventId).pipe(Schema.fromKey("event_id")),
  materialId: Schema.propertySignature(AddressableMaterialId).pipe(Schema.fromKey("material_id")),
  revision: Revision,
  title: Title,
  summary: Summary,
  publishedAt: Schema.propertySignature(Rfc3339Instant).pipe(Schema.fromKey("published_at"))
}) {
  /** The message type, also the routing key. */
  static readonly type = "material.published.v1"
  /** The schema version carried in the `x-schema-version` header. */
  static readonly schemaVersion = 1
}

/** The JSON text of an event, as the outbox stores it and the relay sends it. */
export const encodeMaterialPublishedV1 = Schema.encodeSync(Schema.parseJson(MaterialPublishedV1))

/**
 * An already parsed JSON value to an event. Fields it does not know are ignored, so a
 * producer may add one without breaking this receiver (a tolerant reader); a missing or
 * ill-typed known field fails with a `ParseError` naming it.
 */
export const decodeMaterialPublishedV1 = Schema.decodeUnknownEither(MaterialPublishedV1)
