import { Context, type Effect, type Option, Schema } from "effect"
import type { PersistenceError } from "../domain/errors.js"

/** What a handler did with a message: applied its effect, or skipped it as an older revision. */
export const ReceiptOutcome = Schema.Literal("applied", "stale")
export type ReceiptOutcome = typeof ReceiptOutcome.Type

/** The proof that `handler` processed `messageId`. */
export const Receipt = Schema.Struct({
  handler: Schema.String,
  messageId: Schema.String,
  outcome: ReceiptOutcome,
  /** ms since the epoch. */
  receivedAtMs: Schema.Number
})
export interface Receipt extends Schema.Schema.Type<typeof Receipt> {}

export const InboxCounts = Schema.Struct({
  applied: Schema.Number,
  stale: Schema.Number,
  /** Deliveries suppressed because a receipt already existed. */
  duplicates: Schema.Number,
  /** When the last receipt with outcome `applied` was written (ms since the epoch), `null` if none. */
  lastAppliedAtMs: Schema.NullOr(Schema.Number),
  /** Messages whose last failure sent them to a retry tier, with no receipt since. */
  retrying: Schema.Number,
  /** Messages the receiver dead-lettered, with no receipt since (a replay that applied clears it). */
  dead: Schema.Number
})
export interface InboxCounts extends Schema.Schema.Type<typeof InboxCounts> {}

/** A delivery the receiver routed to a retry tier (`retrying`) or to its dead-letter queue (`dead`). */
export const DeliveryFailure = Schema.Struct({
  handler: Schema.String,
  messageId: Schema.String,
  state: Schema.Literal("retrying", "dead"),
  /** Failed attempts so far. */
  attempts: Schema.Number,
  /** When it was routed, ms since the epoch. */
  atMs: Schema.Number
})
export interface DeliveryFailure extends Schema.Schema.Type<typeof DeliveryFailure> {}

/** A message with no receipt, and the last failure the receiver routed for it, if any. */
export interface Unreceived {
  readonly messageId: string
  readonly failure: DeliveryFailure | null
}

/**
 * The inbox of one receiver's database: at most one receipt per `(handler, messageId)`.
 *
 * Contract: `record` is written inside the same `Transaction` as the handler's effect, so
 * the receipt exists iff the effect committed; a second `record` of the same pair fails
 * with `PersistenceError` (the unique key), which rolls that transaction back.
 * `noteDuplicate` counts a suppressed redelivery on the existing receipt.
 *
 * `noteFailures` remembers, per `(handler, messageId)`, the last failure the receiver
 * routed (the latest replaces the earlier), so that reconciliation can tell a message
 * the handler never saw from one it is retrying or dead-lettered. `missing(handler, ids,
 * retryingSinceMs)` returns those of `ids` (in their order) with no receipt, not
 * dead-lettered, and not sent to a retry tier at or after `retryingSinceMs`.
 */
export interface InboxShape {
  readonly find: (handler: string, messageId: string) => Effect.Effect<Option.Option<Receipt>, PersistenceError>
  readonly record: (receipt: Receipt) => Effect.Effect<void, PersistenceError>
  /** Those of `messageIds` that `handler` has a receipt for: one lookup for a batch of deliveries. */
  readonly received: (
    handler: string,
    messageIds: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlySet<string>, PersistenceError>
  /** `record` for several receipts in one statement; fails as a whole (nothing kept) if one pair has a receipt already. */
  readonly recordAll: (receipts: ReadonlyArray<Receipt>) => Effect.Effect<void, PersistenceError>
  readonly noteDuplicate: (handler: string, messageId: string) => Effect.Effect<void, PersistenceError>
  readonly counts: (handler: string) => Effect.Effect<InboxCounts, PersistenceError>
  readonly noteFailures: (failures: ReadonlyArray<DeliveryFailure>) => Effect.Effect<void, PersistenceError>
  readonly unreceived: (
    handler: string,
    messageIds: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<Unreceived>, PersistenceError>
}

export class Inbox extends Context.Tag("dostavka/Inbox")<Inbox, InboxShape>() {}
