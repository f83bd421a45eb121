import { Context, type Effect, type Option } from "effect"
import type { Envelope } from "../domain/Envelope.js"
import type { PersistenceError } from "../domain/errors.js"

/** One outbox row: a message the API committed and the relay must publish. */
export interface OutboxMessage {
  /** Commit order; the relay publishes in this order. */
  readonly sequence: number
  readonly envelope: Envelope
  readonly createdAtMs: number
  /** `null` while pending. */
  readonly publishedAtMs: number | null
}

/** What the outbox holds, for the report and the operator view. */
export interface OutboxStats {
  readonly pending: number
  readonly published: number
  /** Age in ms of the oldest pending row at `nowMs`, `null` when nothing is pending. */
  readonly oldestPendingAgeMs: number | null
}

/**
 * The transactional outbox of the API owner's database.
 *
 * Contract: `enqueue` writes inside the caller's `Transaction`, so a message exists iff
 * the business write that caused it committed. `pending` returns unpublished rows oldest
 * first (by `sequence`). A row becomes published only through `markPublished`, which the
 * relay calls after the broker confirmed it; a row whose publish outcome is unknown stays
 * pending and is published again with the same `messageId`.
 *
 * The relay lease makes one relay the publisher at a time: `acquireLease(owner, ttlMs,
 * nowMs)` succeeds for `owner` when nobody else holds an unexpired lease, and extends
 * its own. All operations fail with `PersistenceError` only.
 */
export interface OutboxShape {
  readonly enqueue: (envelope: Envelope, createdAtMs: number) => Effect.Effect<void, PersistenceError>
  readonly pending: (limit: number) => Effect.Effect<ReadonlyArray<OutboxMessage>, PersistenceError>
  readonly markPublished: (messageIds: ReadonlyArray<string>, atMs: number) => Effect.Effect<void, PersistenceError>
  /** `None` when no row has that id; `Some(null)` while pending; `Some(ms)` once published. */
  readonly publishedAt: (messageId: string) => Effect.Effect<Option.Option<number | null>, PersistenceError>
  readonly stats: (nowMs: number) => Effect.Effect<OutboxStats, PersistenceError>
  readonly acquireLease: (owner: string, ttlMs: number, nowMs: number) => Effect.Effect<boolean, PersistenceError>
  readonly releaseLease: (owner: string) => Effect.Effect<void, PersistenceError>
}

export class Outbox extends Context.Tag("dostavka/Outbox")<Outbox, OutboxShape>() {}
