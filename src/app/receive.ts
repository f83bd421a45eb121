/**
 * Receiving, as one rule: admit each delivery (pure), receive the admitted ones by the
 * inbox rule in one group commit, and turn what happened into verdicts (pure). The
 * consumer settles each delivery by its verdict only after this commit.
 */
import { Cause, Clock, Effect, Either, Exit, Metric } from "effect"
import type { KnownEvent } from "../domain/Envelope.js"
import type { PersistenceError } from "../domain/errors.js"
import { Inbox } from "../ports/Inbox.js"
import { Transaction } from "../ports/Transaction.js"
import { admit, type Admitted, DefaultReceiveLimits, type IncomingMessage, type ReceiveLimits } from "./admission.js"
import type { RetryPolicy } from "./failures.js"
import { groupCommit } from "./groupCommit.js"
import { type Handler, type Reception, reception } from "./inboxRule.js"
import { Metrics } from "./Metrics.js"
import { failureNote, refused, type Verdict, verdictOf } from "./verdict.js"

/**
 * Processes one delivery for `handler` in ONE transaction: the inbox rule, the handler's
 * effect and its receipt commit together (see `reception`). Fails with `PersistenceError`,
 * in which case nothing was committed.
 */
export const receive = <R>(handler: Handler<R>, event: KnownEvent, message: Admitted["message"]) =>
  Effect.flatMap(Transaction, (transaction) =>
    transaction.run(Effect.gen(function*() {
      const item: Admitted = { event, message, traceparent: undefined }
      const batch = yield* reception(handler, [item])
      const received = yield* batch.receiveOne(item)
      yield* batch.settle([received])
      return received.disposition
    }))).pipe(Effect.withSpan("Receiver.receive"))

/**
 * Decides what becomes of a batch of deliveries for `handler`, one verdict per delivery
 * in their order:
 * - one that `admit` refuses (an untrusted publisher, undecodable headers, too large, an
 *   unknown type or version, a body that fails the schema, a missing or mismatched
 *   `message_id`) is dead-lettered at once;
 * - the others are received by the inbox rule (`reception`) in ONE group commit
 *   (`groupCommit`: one transaction; if a handler fails, again with a savepoint per
 *   message, so that the failing one rolls back alone while its neighbours commit); a
 *   failed one is routed by `policy` to a retry tier or, out of attempts, to the
 *   dead-letter queue (`verdictOf`);
 * - if the transaction cannot commit, every one of them failed transiently (or, when the
 *   database file was lost, the receiver halts);
 * - each one routed to a retry tier or the dead-letter queue, refused ones included, is
 *   remembered in the inbox (`Inbox.noteFailures`) in the same transaction, for
 *   reconciliation (in a transaction of its own when nothing was admitted, and then a
 *   failure to write it is ignored: the verdicts stand).
 * Never fails; an interruption interrupts.
 */
export const judgeAll =
  <R>(handler: Handler<R>, policy: RetryPolicy, limits: ReceiveLimits = DefaultReceiveLimits) =>
  (batch: ReadonlyArray<IncomingMessage>): Effect.Effect<ReadonlyArray<Verdict>, never, R | Transaction | Inbox> =>
    Effect.gen(function*() {
      const transaction = yield* Transaction
      const inbox = yield* Inbox
      const startedAt = yield* Clock.currentTimeMillis
      const admissions = batch.map((incoming) => admit(incoming, limits))
      const admitted = admissions.flatMap((a, i) => (Either.isRight(a) ? [{ item: a.right, incoming: batch[i]! }] : []))
      const refusals = admissions.map((a, i) => Either.isLeft(a) ? refused(a.left, batch[i]!.attempts) : undefined)
      const refusedNotes = refusals.flatMap((verdict, i) =>
        verdict === undefined ? [] : failureNote(handler.name, batch[i]!.messageId, verdict, startedAt)
      )
      const items = admitted.map(({ item }) => item)
      const received = admitted.length === 0
        ? yield* Effect.as(
          refusedNotes.length === 0 ? Effect.void : Effect.ignore(transaction.run(inbox.noteFailures(refusedNotes))),
          Exit.succeed([])
        )
        : yield* Effect.exit(
          groupCommit<Admitted, Reception, PersistenceError, ReadonlyArray<Verdict>, PersistenceError, R | Inbox>(
            transaction,
            items,
            Effect.map(reception(handler, items), (work) => ({
              step: work.receiveOne,
              finish: (exits) =>
                Effect.gen(function*() {
                  yield* work.settle(exits.flatMap((exit) => (Exit.isSuccess(exit) ? [exit.value] : [])))
                  const verdicts = exits.map((exit, k) =>
                    verdictOf(policy, admitted[k]!.incoming.attempts, Exit.map(exit, (r) => r.disposition))
                  )
                  const notes = verdicts.flatMap((v, k) =>
                    failureNote(handler.name, items[k]!.message.messageId, v, startedAt)
                  )
                  if (refusedNotes.length + notes.length > 0) yield* inbox.noteFailures([...refusedNotes, ...notes])
                  return verdicts
                })
            }))
          )
        )
      if (Exit.isFailure(received) && Cause.isInterruptedOnly(received.cause)) return yield* Effect.interrupt
      const verdicts = Exit.isSuccess(received)
        ? received.value
        : admitted.map(({ incoming }) => verdictOf(policy, incoming.attempts, Exit.failCause(received.cause)))
      if (admitted.length > 0) yield* measure(handler.name, startedAt, items, verdicts)
      let next = 0
      return refusals.map((refusal) => refusal ?? verdicts[next++]!)
    }).pipe(Effect.withSpan("Receiver.judgeAll", { attributes: { handler: handler.name, batch: batch.length } }))

/** The batch's handler time, and for each applied event the time from its publication to now. */
const measure = (
  handler: string,
  startedAt: number,
  items: ReadonlyArray<Admitted>,
  verdicts: ReadonlyArray<Verdict>
) =>
  Effect.gen(function*() {
    const committedAt = yield* Clock.currentTimeMillis
    yield* Metric.update(Metric.tagged(Metrics.handlerSeconds, "handler", handler), (committedAt - startedAt) / 1000)
    const appliedLatency = Metric.tagged(Metrics.commitToAppliedSeconds, "handler", handler)
    for (const [k, { event }] of items.entries()) {
      const verdict = verdicts[k]!
      if (verdict._tag === "Ack" && verdict.disposition === "applied") {
        yield* Metric.update(appliedLatency, Math.max(0, committedAt - event.publishedAt.getTime()) / 1000)
      }
    }
  })

/** `judgeAll` for one delivery. */
export const judge =
  <R>(handler: Handler<R>, policy: RetryPolicy, limits: ReceiveLimits = DefaultReceiveLimits) =>
  (incoming: IncomingMessage) => Effect.map(judgeAll(handler, policy, limits)([incoming]), (verdicts) => verdicts[0]!)
