import { Context, Data, type Effect } from "effect"
import type { HandlerName } from "../domain/HandlerName.js"

/** Why a message is dead: the kit could never process it, gave up on it, did not trust its publisher, or the broker dead-lettered it. */
export type DeadReason = "incompatible" | "exhausted" | "untrusted-publisher" | "rejected-by-broker"

/** One message on a handler's dead-letter queue, as an operator sees it. */
export interface DeadLetter {
  readonly messageId: string
  readonly handler: HandlerName
  readonly reason: DeadReason
  /** The failure's class and tag, e.g. `PermanentFailure/Defect.TypeError`; for the broker's own, e.g. `x-death/maxlen`. */
  readonly errorTag: string
  readonly error: string
  /** Failed attempts before it was dead-lettered. */
  readonly attempts: number
  /** How many times an operator replayed it before. */
  readonly replays: number
  readonly firstFailureAtMs: number | null
  readonly lastFailureAtMs: number | null
  readonly deadAtMs: number | null
  /** Where it was first published, before any retry. */
  readonly originalExchange: string | null
  readonly originalRoutingKey: string | null
  /** Every AMQP property it carries, headers included, as received. */
  readonly properties: Readonly<Record<string, unknown>>
  /** Its body, byte for byte. */
  readonly body: Uint8Array
}

/** Which dead letters an operation applies to: some by message id, or every one on the queue. */
export type DeadLetterSelection = Data.TaggedEnum<{
  Ids: { readonly ids: ReadonlyArray<string> }
  All: {}
}>
export const DeadLetterSelection = Data.taggedEnum<DeadLetterSelection>()

/** What a replay or purge did: the message ids it moved or removed (all of them, in queue order), and the requested ids it did not find. */
export interface DeadLetterMove {
  readonly moved: ReadonlyArray<string>
  readonly notFound: ReadonlyArray<string>
  /** Replays the broker did not confirm; those dead letters stay where they were. */
  readonly failed: ReadonlyArray<string>
}

/** The dead-letter queue could not be read or written: the broker is unreachable, or refused. */
export class DeadLettersUnavailable extends Data.TaggedError("DeadLettersUnavailable")<{ readonly detail: string }> {
  override get message() {
    return `dead-letter queue unavailable: ${this.detail}`
  }
}

/**
 * The handlers' dead-letter queues, for an operator.
 *
 * Contract: `list` returns up to `limit` dead letters of `handler`, oldest first, and
 * leaves the queue as it was (same messages, same order). `replay` sends the selected
 * ones back to that handler's queue only, never to the other handlers: each copy keeps
 * the body and properties, starts with no attempts and its replay count incremented, and
 * is removed from the dead queue only after the broker confirmed the copy; the others
 * stay in their order. With `dryRun` it moves nothing and reports what it would move.
 * `purge` removes the selected ones for good. All fail with `DeadLettersUnavailable`.
 */
export interface DeadLettersShape {
  readonly list: (
    handler: HandlerName,
    limit: number
  ) => Effect.Effect<ReadonlyArray<DeadLetter>, DeadLettersUnavailable>
  readonly replay: (
    handler: HandlerName,
    selection: DeadLetterSelection,
    options: { readonly dryRun: boolean }
  ) => Effect.Effect<DeadLetterMove, DeadLettersUnavailable>
  readonly purge: (
    handler: HandlerName,
    selection: DeadLetterSelection
  ) => Effect.Effect<DeadLetterMove, DeadLettersUnavailable>
}

export class DeadLetters extends Context.Tag("dostavka/DeadLetters")<DeadLetters, DeadLettersShape>() {}
