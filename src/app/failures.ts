import { Cause, Data, type Duration } from "effect"
import type { UndecodableMessage } from "../domain/errors.js"
import { describeCause, type PersistenceError } from "../domain/errors.js"
import { truncate } from "../domain/JsonInput.js"

/**
 * A handler's delayed retry: after its n-th failed attempt a message waits `delays[n-1]`
 * (the last delay once past the list) in that tier's retry queue, then comes back to the
 * handler's queue; the `maxAttempts`-th failure dead-letters it as `exhausted`.
 */
export interface RetryPolicy {
  /** One retry queue per delay, ascending. */
  readonly delays: ReadonlyArray<Duration.Duration>
  /** Deliveries to the handler before the message is dead-lettered; 1 means no retry. */
  readonly maxAttempts: number
}

/** The longest error message a failure carries (it travels in a message header). */
export const MaxFailureMessageLength = 1000

/**
 * A delivery that can never be processed, however often it is tried: undecodable, an
 * unknown type or version, not JSON, no or a mismatched `message_id`. Dead-lettered at once.
 */
export class IncompatibleMessage extends Data.TaggedError("IncompatibleMessage")<{
  readonly errorTag: string
  readonly detail: string
}> {
  static readonly of = (error: UndecodableMessage) =>
    new IncompatibleMessage({ errorTag: `UndecodableMessage.${error.reason}`, detail: error.detail })
}

/** The handler failed for a reason that may pass: its store busy, locked or full, a dependency timed out. Retried later. */
export class TransientFailure extends Data.TaggedError("TransientFailure")<{
  readonly errorTag: string
  readonly detail: string
}> {}

/**
 * The handler failed for a reason that will not pass by itself: a constraint violation, or
 * a defect (a thrown exception, a bug). Retried too, so that once the bug is fixed nothing
 * is lost; after the attempts, dead-lettered for a deliberate replay. Never taken for a
 * broker outage: the consumer goes on with the next messages.
 */
export class PermanentFailure extends Data.TaggedError("PermanentFailure")<{
  readonly errorTag: string
  readonly detail: string
}> {}

/** Why a handler's attempt failed, in the class that decides what comes next. */
export type HandlerFailure = TransientFailure | PermanentFailure

/** The class of a store failure: `constraint` will not pass by itself, anything else may. */
export const classifyPersistence = (error: PersistenceError): HandlerFailure => {
  const fields = {
    errorTag: `PersistenceError.${error.kind}`,
    detail: truncate(`${error.operation}: ${describeCause(error.cause)}`, MaxFailureMessageLength)
  }
  return error.kind === "constraint" ? new PermanentFailure(fields) : new TransientFailure(fields)
}

/** A defect of a handler (a thrown exception, a bug) as the permanent failure of that one message. */
export const classifyDefect = (cause: Cause.Cause<unknown>): PermanentFailure => {
  const defect = Cause.squash(cause)
  return new PermanentFailure({
    errorTag: defect instanceof Error ? `Defect.${defect.name}` : "Defect",
    detail: truncate(describeCause(defect), MaxFailureMessageLength)
  })
}

/** What becomes of a failed attempt: another one after a delay, or the dead-letter queue. */
export type FailureRoute = Data.TaggedEnum<{
  /** Wait `delay` in the retry queue of tier `tier` (an index into `RetryPolicy.delays`), then try again. */
  RetryLater: { readonly tier: number; readonly delay: Duration.Duration; readonly attempts: number }
  /** No attempt left: dead-letter it as exhausted. */
  GiveUp: { readonly attempts: number }
}>
export const FailureRoute = Data.taggedEnum<FailureRoute>()

/**
 * Routes a failure: `attemptsBefore` failed attempts came before this one (the kit's own
 * attempts header; RabbitMQ 4 ignores a client's `x-death` and its counts changed between
 * versions, so the kit never reads them). The attempt that just failed is number
 * `attemptsBefore + 1`; when that reaches `maxAttempts` it gives up, else it retries in
 * the tier of that number (the last tier once past the list).
 */
export const routeFailure = (policy: RetryPolicy, attemptsBefore: number): FailureRoute => {
  const attempts = attemptsBefore + 1
  if (attempts >= policy.maxAttempts || policy.delays.length === 0) return FailureRoute.GiveUp({ attempts })
  const tier = Math.min(attempts, policy.delays.length) - 1
  return FailureRoute.RetryLater({ tier, delay: policy.delays[tier]!, attempts })
}
