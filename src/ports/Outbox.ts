import { Context, type Effect, type Option, Schema } from "effect"
import { Envelope } from "../domain/Envelope.js"
import type { PersistenceError } from "../domain/errors.js"

/** Where an outbox row stands, besides the message it holds (times in ms since the epoch). */
export const OutboxState = Schema.Struct({
  /** Commit order; the relay publishes in this order. */
  sequence: Schema.Number,
  createdAtMs: Schema.Number,
  /** `null` while pending. */
  publishedAtMs: Schema.NullOr(Schema.Number),
  /** How many times the broker rejected it (returned as unroutable, or nacked). */
  rejections: Schema.Number,
  /** The last rejection's reason, `null` if none. */
  lastError: Schema.NullOr(Schema.String),
  /** When the relay parked it after too many rejections; `null` if it is not parked. */
  parkedAtMs: Schema.NullOr(Schema.Number)
})

/** One outbox row: a message the API committed and the relay must publish. */
export const OutboxMessage = Schema.Struct({ ...OutboxState.fields, envelope: Envelope })
export interface OutboxMessage extends Schema.Schema.Type<typeof OutboxMessage> {}

/** What becomes of a row the broker rejected: publish it again at `retryAtMs`, or park it. */
export interface Rejection {
  readonly messageId: string
  readonly error: string
  /** `null` parks the row: the relay leaves it until an operator releases it. */
  readonly retryAtMs: number | null
}

/** What the outbox holds, for the report and the operator view. */
export interface OutboxStats {
  /** Rows to publish, parked ones not included. */
  readonly pending: number
  readonly published: number
  readonly parked: number
  /** Age in ms of the oldest pending row at `nowMs`, `null` when nothing is pending. */
  readonly oldestPendingAgeMs: number | null
  /** Rows published in the minute before `nowMs`. */
  readonly publishedLastMinute: number
}

/** Who holds the relay lease, and until when (ms since the epoch). */
export const LeaseHolder = Schema.Struct({ owner: Schema.String, expiresAtMs: Schema.Number })
export interface LeaseHolder extends Schema.Schema.Type<typeof LeaseHolder> {}

/** A published row's place in commit order, for reconciliation (`publishedAtMs`: ms since the epoch). */
export const PublishedRef = Schema.Struct({
  sequence: Schema.Number,
  messageId: Schema.String,
  publishedAtMs: Schema.Number
})
export interface PublishedRef extends Schema.Schema.Type<typeof PublishedRef> {}

/**
 * The transactional outbox of the API owner's database.
 *
 * Contract: `enqueue` writes inside the caller's `Transaction`, so a message exists iff
 * the business write that caused it committed. `pending(limit, nowMs)` returns rows that
 * are neither published nor parked and are due (`nowMs` is at or past their next
 * attempt), oldest first (by `sequence`). A row becomes published only through
 * `markPublished`, which the relay calls after the broker confirmed it; a row whose
 * publish outcome is unknown stays pending and is published again with the same
 * `messageId`. `reject` counts a rejection and either defers the row to a later attempt
 * or parks it; `parked` lists parked rows oldest first, and `release` makes them pending
 * and due again with no rejections counted (by id, or all when `messageIds` is "all"),
 * returning how many it released.
 *
 * The relay lease makes one relay the publisher at a time: `acquireLease(owner, ttlMs,
 * nowMs)` takes the lease for `owner` until `nowMs + ttlMs` when nobody else holds an
 * unexpired one, and extends its own; it answers who holds the lease afterwards, and
 * until when (the caller holds it when `holder.owner` is `owner`). All operations fail with `PersistenceError` only.
 */
export interface OutboxShape {
  readonly enqueue: (envelope: Envelope, createdAtMs: number) => Effect.Effect<void, PersistenceError>
  readonly pending: (limit: number, nowMs: number) => Effect.Effect<ReadonlyArray<OutboxMessage>, PersistenceError>
  readonly markPublished: (messageIds: ReadonlyArray<string>, atMs: number) => Effect.Effect<void, PersistenceError>
  readonly reject: (rejections: ReadonlyArray<Rejection>, atMs: number) => Effect.Effect<void, PersistenceError>
  readonly parked: (limit: number) => Effect.Effect<ReadonlyArray<OutboxMessage>, PersistenceError>
  readonly release: (messageIds: ReadonlyArray<string> | "all") => Effect.Effect<number, PersistenceError>
  /** `None` when no row has that id; `Some(null)` while pending; `Some(ms)` once published. */
  readonly publishedAt: (messageId: string) => Effect.Effect<Option.Option<number | null>, PersistenceError>
  readonly stats: (nowMs: number) => Effect.Effect<OutboxStats, PersistenceError>
  /**
   * Up to `limit` published rows with `sequence` above `afterSequence` that were published
   * before `publishedBeforeMs`, in sequence order: reconciliation's pages.
   */
  readonly publishedPage: (
    afterSequence: number,
    publishedBeforeMs: number,
    limit: number
  ) => Effect.Effect<ReadonlyArray<PublishedRef>, PersistenceError>
  /** The rows with these message ids, in sequence order; ids with no row are left out. */
  readonly find: (messageIds: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<OutboxMessage>, PersistenceError>
  readonly acquireLease: (owner: string, ttlMs: number, nowMs: number) => Effect.Effect<LeaseHolder, PersistenceError>
  readonly releaseLease: (owner: string) => Effect.Effect<void, PersistenceError>
}

export class Outbox extends Context.Tag("dostavka/Outbox")<Outbox, OutboxShape>() {}
