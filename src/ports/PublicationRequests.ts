import { Context, type Effect, type Option, Schema } from "effect"
import type { PersistenceError } from "../domain/errors.js"
import { MaterialId, Revision } from "../domain/Material.js"
import { EventId } from "../domain/MaterialPublished.js"

/** An accepted publication request, keyed by its idempotency key. */
export const PublicationRequest = Schema.Struct({
  idempotencyKey: Schema.String,
  /** SHA-256 of the canonical command; tells "same request again" from "key reused". */
  requestHash: Schema.String,
  requestId: Schema.String,
  eventId: EventId,
  materialId: MaterialId,
  revision: Revision,
  /** ms since the epoch. */
  acceptedAtMs: Schema.Number
})
export interface PublicationRequest extends Schema.Schema.Type<typeof PublicationRequest> {}

/**
 * The API owner's record of accepted requests, which makes `POST /v1/publications`
 * idempotent. Contract: at most one request per idempotency key (`insert` of a known key
 * fails with `PersistenceError`); `insert` runs in the same `Transaction` as the material
 * and the outbox row.
 */
export interface PublicationRequestsShape {
  readonly byKey: (idempotencyKey: string) => Effect.Effect<Option.Option<PublicationRequest>, PersistenceError>
  readonly byId: (requestId: string) => Effect.Effect<Option.Option<PublicationRequest>, PersistenceError>
  readonly insert: (request: PublicationRequest) => Effect.Effect<void, PersistenceError>
}

export class PublicationRequests extends Context.Tag("dostavka/PublicationRequests")<
  PublicationRequests,
  PublicationRequestsShape
>() {}
