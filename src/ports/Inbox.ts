import { Context, type Effect, type Option } from "effect"
import type { PersistenceError } from "../domain/errors.js"

/** What a handler did with a message: applied its effect, or skipped it as an older revision. */
export type ReceiptOutcome = "applied" | "stale"

/** The proof that `handler` processed `messageId`. */
export interface Receipt {
  readonly handler: string
  readonly messageId: string
  readonly outcome: ReceiptOutcome
  readonly receivedAtMs: number
}

export interface InboxCounts {
  readonly applied: number
  readonly stale: number
  /** Deliveries suppressed because a receipt already existed. */
  readonly duplicates: number
}

/**
 * The inbox of one receiver's database: at most one receipt per `(handler, messageId)`.
 *
 * Contract: `record` is written inside the same `Transaction` as the handler's effect, so
 * the receipt exists iff the effect committed; a second `record` of the same pair fails
 * with `PersistenceError` (the unique key), which rolls that transaction back.
 * `noteDuplicate` counts a suppressed redelivery on the existing receipt.
 */
export interface InboxShape {
  readonly find: (handler: string, messageId: string) => Effect.Effect<Option.Option<Receipt>, PersistenceError>
  readonly record: (receipt: Receipt) => Effect.Effect<void, PersistenceError>
  readonly noteDuplicate: (handler: string, messageId: string) => Effect.Effect<void, PersistenceError>
  readonly counts: (handler: string) => Effect.Effect<InboxCounts, PersistenceError>
}

export class Inbox extends Context.Tag("dostavka/Inbox")<Inbox, InboxShape>() {}
