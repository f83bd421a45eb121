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
  /** Every AMQP property it carries, headers included (decoded), as received; without headers when `headersRefused`. */
  readonly properties: Readonly<Record<string, unknown>>
  /** Why its header table could not be decoded, when it could not: then its story (reason, attempts, times) is unknown. */
  readonly headersRefused?: string
  /** Its body, byte for byte. */
  readonly body: Uint8Array
}

/** Which dead letters an operation applies to: some by message id, every one on the queue, or the one at its head (whatever it holds). */
export type DeadLetterSelection = Data.TaggedEnum<{
  Ids: { readonly ids: ReadonlyArray<string> }
  All: {}
  Head: {}
}>
export const DeadLetterSelection = Data.taggedEnum<DeadLetterSelection>()

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** Two message ids name the same message: equal, or the same UUID in another case (RFC 9562 §4: case-insensitive on input). */
export const sameMessageId = (a: string, b: string): boolean =>
  a === b || (uuid.test(a) && a.toLowerCase() === b.toLowerCase())

/** True when `selection` takes the letter with `messageId` at `position` (0 at the queue's head). */
export const isSelected = (selection: DeadLetterSelection, messageId: string, position: number): boolean =>
  selection._tag === "All" ||
  (selection._tag === "Head" ? position === 0 : selection.ids.some((id) => sameMessageId(id, messageId)))

/** The ids `selection` asked for that are not among `seen`. */
export const missingIds = (selection: DeadLetterSelection, seen: ReadonlyArray<string>): ReadonlyArray<string> =>
  selection._tag === "Ids" ? selection.ids.filter((id) => !seen.some((s) => sameMessageId(id, s))) : []

/** What a replay or purge did: the message ids it moved or removed (all of them, in queue order), and the requested ids it did not find. */
export interface DeadLetterMove {
  readonly moved: ReadonlyArray<string>
  readonly notFound: ReadonlyArray<string>
  /** Replays the broker did not confirm; those dead letters stay where they were. */
  readonly failed: ReadonlyArray<string>
  /** Selected for a replay, but left where they were: their header table cannot be decoded, so they would only die again. */
  readonly undecodable: ReadonlyArray<string>
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
 * stay in their order; one whose header table cannot be decoded is left in place and
 * reported as `undecodable`. With `dryRun` it moves nothing and reports what it would
 * move. `purge` removes the selected ones for good. Message ids match exactly, or as the
 * same UUID in another case (`sameMessageId`). Every broker operation is bounded in time.
 * All fail with `DeadLettersUnavailable`.
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
