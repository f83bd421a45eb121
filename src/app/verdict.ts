/**
 * Verdicts: the consumer's instruction for each delivery, decided purely from what
 * happened to it (refused at admission, or the exit of its handler's attempt) and the
 * handler's retry policy.
 */
import { Cause, Data, type Duration, type Exit, Option } from "effect"
import { describeCause, type PersistenceError } from "../domain/errors.js"
import type { HandlerName } from "../domain/HandlerName.js"
import type { DeliveryFailure, ReceiptOutcome } from "../ports/Inbox.js"
import {
  classifyDefect,
  classifyPersistence,
  type HandlerFailure,
  type IncompatibleMessage,
  type RetryPolicy,
  routeFailure
} from "./failures.js"

/** What became of a delivery: the effect applied, skipped as stale, or suppressed as a duplicate. */
export type Disposition = ReceiptOutcome | "duplicate"

/** The consumer's instruction for one delivery. */
export type Verdict = Data.TaggedEnum<{
  /** Processed (applied, stale or duplicate): ack it. */
  Ack: { readonly disposition: Disposition }
  /** Failed, with attempts left: a copy to the retry queue of `tier`, confirmed, then ack. */
  Retry: {
    readonly failure: HandlerFailure
    readonly tier: number
    readonly delay: Duration.Duration
    readonly attempts: number
  }
  /** Can never be processed, or out of attempts: a copy to the handler's dead queue, confirmed, then ack. */
  DeadLetter: {
    readonly reason: "incompatible" | "exhausted" | "untrusted-publisher"
    readonly failure: IncompatibleMessage | HandlerFailure
    readonly attempts: number
  }
  /**
   * The receiver must stop: its database file is gone, so nothing it commits would be
   * kept. Neither ack nor hand back; the message returns to the queue when the channel
   * closes, for the next process to apply.
   */
  Halt: { readonly detail: string }
}>
export const Verdict = Data.taggedEnum<Verdict>()

/** A refusal at admission: dead-lettered at once, as `untrusted-publisher` or `incompatible`. */
export const refused = (refusal: IncompatibleMessage, attempts: number): Verdict =>
  Verdict.DeadLetter({
    reason: refusal.errorTag === "UntrustedPublisher" ? "untrusted-publisher" : "incompatible",
    failure: refusal,
    attempts
  })

/** A failed attempt, routed by `policy` (`routeFailure`) to a retry tier or, out of attempts, to the dead-letter queue. */
const failed = (policy: RetryPolicy, attemptsBefore: number, failure: HandlerFailure): Verdict => {
  const route = routeFailure(policy, attemptsBefore)
  return route._tag === "RetryLater"
    ? Verdict.Retry({ failure, tier: route.tier, delay: route.delay, attempts: route.attempts })
    : Verdict.DeadLetter({ reason: "exhausted", failure, attempts: route.attempts })
}

/**
 * The verdict on an attempt that ended with `exit`, after `attemptsBefore` failed ones:
 * success acks with its disposition; a store failure halts the receiver when the database
 * was `lost` and is otherwise a failed attempt (`classifyPersistence`); a defect (a thrown
 * exception) is the permanent failure of that message (`classifyDefect`). An interruption
 * is not an outcome: callers stop before they ask.
 */
export const verdictOf = (
  policy: RetryPolicy,
  attemptsBefore: number,
  exit: Exit.Exit<Disposition, PersistenceError>
): Verdict => {
  if (exit._tag === "Success") return Verdict.Ack({ disposition: exit.value })
  const error = Cause.failureOption(exit.cause)
  if (Option.isNone(error)) return failed(policy, attemptsBefore, classifyDefect(exit.cause))
  return error.value.kind === "lost"
    ? Verdict.Halt({ detail: `${error.value.operation}: ${describeCause(error.value.cause)}` })
    : failed(policy, attemptsBefore, classifyPersistence(error.value))
}

/**
 * What the inbox remembers of a verdict (`Inbox.noteFailures`), so that reconciliation
 * does not count a message being retried or dead-lettered as lost: a `Retry` is
 * `retrying`, a `DeadLetter` is `dead`, anything else nothing. Without a `messageId` there
 * is nothing to key it on.
 */
export const failureNote = (
  handler: HandlerName,
  messageId: string | undefined,
  verdict: Verdict,
  atMs: number
): ReadonlyArray<DeliveryFailure> => {
  if (messageId === undefined || messageId === "") return []
  if (verdict._tag === "Retry") return [{ handler, messageId, state: "retrying", attempts: verdict.attempts, atMs }]
  if (verdict._tag === "DeadLetter") return [{ handler, messageId, state: "dead", attempts: verdict.attempts, atMs }]
  return []
}
