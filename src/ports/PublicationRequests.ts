import { Context, type Effect, type Option } from "effect"
import type { PersistenceError } from "../domain/errors.js"

/** An accepted publication request, keyed by its idempotency key. */
export interface PublicationRequest {
  readonly idempotencyKey: string
  /** SHA-256 of the canonical command; tells "same request again" from "key reused". */
  readonly requestHash: string
  readonly requestId: string
  readonly eventId: string
  readonly materialId: string
  readonly revision: number
  readonly acceptedAtMs: number
}

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
