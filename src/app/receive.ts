import { Cause, Clock, Data, type Duration, Effect, Either, Exit, Metric, Option } from "effect"
import { decodeEvent, isKeepableCorrelationId, type KnownEvent } from "../domain/Envelope.js"
import { describeCause, type PersistenceError } from "../domain/errors.js"
import type { HandlerName } from "../domain/HandlerName.js"
import { type DeliveryFailure, Inbox, type Receipt, type ReceiptOutcome } from "../ports/Inbox.js"
import { Transaction } from "../ports/Transaction.js"
import {
  classifyDefect,
  classifyPersistence,
  type HandlerFailure,
  IncompatibleMessage,
  type RetryPolicy,
  routeFailure
} from "./failures.js"
import { Metrics } from "./Metrics.js"
import { withRemoteParent } from "./tracing.js"

/** What a received message carries besides its event. */
export interface ReceivedMessage {
  readonly messageId: string
  readonly correlationId: string
}

/**
 * A handler: one receiver's effect for an event. `apply` runs inside the receiver's
 * transaction and says whether it applied the event or skipped it as stale.
 */
export interface Handler<R> {
  /** The handler's name, also the inbox key and the suffix of its queue names. */
  readonly name: HandlerName
  readonly apply: (event: KnownEvent, message: ReceivedMessage) => Effect.Effect<ReceiptOutcome, PersistenceError, R>
}

/** What became of a delivery: the effect applied, skipped as stale, or suppressed as a duplicate. */
export type Disposition = ReceiptOutcome | "duplicate"

/** What every log line written while a delivery is handled carries: the handler and the event's ids. */
const deliveryAnnotations = (handler: HandlerName, event: KnownEvent, message: ReceivedMessage) => ({
  handler,
  messageId: message.messageId,
  correlationId: message.correlationId,
  materialId: event.materialId,
  revision: event.revision
})

/**
 * One delivery for `handler`, exactly once per `(handler, messageId)`: looks up the inbox
 * receipt; if there is one, counts the duplicate and returns `duplicate` without running
 * the effect; otherwise runs the handler's effect and records the receipt with its
 * outcome. Runs inside the caller's transaction (or savepoint).
 */
const receiveOne = <R>(handler: Handler<R>, event: KnownEvent, message: ReceivedMessage) =>
  Effect.gen(function*() {
    const inbox = yield* Inbox
    if (Option.isSome(yield* inbox.find(handler.name, message.messageId))) {
      yield* inbox.noteDuplicate(handler.name, message.messageId)
      return "duplicate" as Disposition
    }
    const outcome = yield* handler.apply(event, message)
    const receivedAtMs = yield* Clock.currentTimeMillis
    yield* inbox.record({ handler: handler.name, messageId: message.messageId, outcome, receivedAtMs })
    return outcome as Disposition
  }).pipe(Effect.annotateLogs(deliveryAnnotations(handler.name, event, message)))

/** A decoded delivery ready for its handler, with the `traceparent` it came with. */
interface Receivable {
  readonly event: KnownEvent
  readonly message: ReceivedMessage
  readonly traceparent: unknown
}

/** The span of one handler's effect, child of the publisher's (see `withRemoteParent`). */
const applySpan = (handler: HandlerName, item: Receivable) =>
  withRemoteParent(`Receiver.apply ${handler}`, item.traceparent, {
    "messaging.system": "rabbitmq",
    "messaging.message.id": item.message.messageId,
    "dostavka.handler": handler
  })

/** The handler's effect failed for the `index`-th message of a batch on the fast path, with `cause`. */
class HandlerFailedInBatch extends Data.TaggedError("HandlerFailedInBatch")<{
  readonly index: number
  readonly cause: Cause.Cause<PersistenceError>
}> {}

/**
 * The fast path of group commit, for a batch in which nothing fails: inside the caller's
 * transaction, ONE inbox lookup for the whole batch, each handler's effect in turn (no
 * savepoints), and ONE statement for all the receipts. A message seen already (a receipt,
 * or an earlier delivery of the same batch) counts as a duplicate, as in `receiveOne`.
 * The first failure of a handler's effect fails the whole with `HandlerFailedInBatch`
 * (which message, and why), so that the caller rolls back and takes the savepoint path
 * for the others, without running the failed one's handler a second time; a failure of
 * the inbox is the `PersistenceError` itself.
 */
const receiveAll = <R>(handler: Handler<R>, items: ReadonlyArray<Receivable>) =>
  Effect.gen(function*() {
    const inbox = yield* Inbox
    const received = yield* inbox.received(handler.name, items.map((item) => item.message.messageId))
    const seen = new Set(received)
    // A repeat of a message first received in this batch: counted once its receipt is written.
    const repeats: Array<string> = []
    const receivedAtMs = yield* Clock.currentTimeMillis
    const receipts: Array<Receipt> = []
    const dispositions: Array<Disposition> = []
    for (const [index, item] of items.entries()) {
      const messageId = item.message.messageId
      if (seen.has(messageId)) {
        if (received.has(messageId)) yield* inbox.noteDuplicate(handler.name, messageId)
        else repeats.push(messageId)
        dispositions.push("duplicate")
        continue
      }
      seen.add(messageId)
      const outcome = yield* handler.apply(item.event, item.message).pipe(
        Effect.catchAllCause((cause): Effect.Effect<never, HandlerFailedInBatch> =>
          Cause.isInterruptedOnly(cause) ? Effect.interrupt : Effect.fail(new HandlerFailedInBatch({ index, cause }))
        ),
        applySpan(handler.name, item),
        Effect.annotateLogs(deliveryAnnotations(handler.name, item.event, item.message))
      )
      receipts.push({ handler: handler.name, messageId, outcome, receivedAtMs })
      dispositions.push(outcome)
    }
    yield* inbox.recordAll(receipts)
    for (const messageId of repeats) yield* inbox.noteDuplicate(handler.name, messageId)
    return dispositions
  })

/**
 * Processes one delivery for `handler` in ONE transaction: the inbox receipt and the
 * handler's effect commit together (see `receiveOne`). The caller acks only after this
 * succeeds, so a crash between commit and ack leads to a redelivery that finds the
 * receipt (RabbitMQ "Consumer Acknowledgements": redelivery after a lost ack). Fails with
 * `PersistenceError`, in which case nothing was committed.
 */
export const receive = <R>(handler: Handler<R>, event: KnownEvent, message: ReceivedMessage) =>
  Effect.flatMap(Transaction, (transaction) => transaction.run(receiveOne(handler, event, message))).pipe(
    Effect.withSpan("Receiver.receive")
  )

/** A message as the consumer hands it over: AMQP properties that matter, the body's bytes as received, and its failed attempts. */
export interface IncomingMessage {
  readonly messageId: string | undefined
  readonly correlationId: string | undefined
  readonly type: string | undefined
  readonly schemaVersion: unknown
  readonly contentType: string | undefined
  readonly body: Uint8Array
  /** Failed attempts before this delivery, from the kit's own header (0 for a first delivery or a replay). */
  readonly attempts: number
  /** The publisher's `user_id`, which the broker validated against its connection's user. */
  readonly userId: string | undefined
  /** True when it came straight from the events exchange, false for a retry, a replay, or a message moved by an operator. */
  readonly fromEventsExchange: boolean
  /** The `traceparent` header as received (W3C Trace Context), if any: the parent of the receiver's span. */
  readonly traceparent?: unknown
  /** Why its header table could not be decoded (an unknown type, nested too deep, a name given twice), when it could not. */
  readonly headersRefused?: string
}

/** What a receiver accepts before it decodes a delivery. */
export interface ReceiveLimits {
  /** With a value, an event that came straight from the events exchange must carry this broker user as its `user_id` (see `untrusted`). */
  readonly trustedPublisher: Option.Option<string>
  /** The largest body it decodes, in bytes; a larger one is incompatible before it is read as text. */
  readonly maxEventBytes: number
}

/** No publisher check, and events up to 64 KiB: the defaults of `DOSTAVKA_TRUSTED_PUBLISHER` and `DOSTAVKA_MAX_EVENT_BYTES`. */
export const DefaultReceiveLimits: ReceiveLimits = { trustedPublisher: Option.none(), maxEventBytes: 64 * 1024 }

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

const failed = (policy: RetryPolicy, attemptsBefore: number, failure: HandlerFailure): Verdict => {
  const route = routeFailure(policy, attemptsBefore)
  return route._tag === "RetryLater"
    ? Verdict.Retry({ failure, tier: route.tier, delay: route.delay, attempts: route.attempts })
    : Verdict.DeadLetter({ reason: "exhausted", failure, attempts: route.attempts })
}

/** A store failure as a verdict: `lost` halts the receiver, anything else is a failed attempt. */
const onStoreFailure = (policy: RetryPolicy, attemptsBefore: number, error: PersistenceError): Verdict =>
  error.kind === "lost"
    ? Verdict.Halt({ detail: `${error.operation}: ${describeCause(error.cause)}` })
    : failed(policy, attemptsBefore, classifyPersistence(error))

/**
 * Trust in a delivery's publisher: with `trustedPublisher` set, an event that came straight
 * from the events exchange must carry that broker user as its `user_id` (RabbitMQ checks
 * `user_id` against the publishing connection's user, "Validated User-ID"). Retries and
 * replays come through the handler's own exchange, which only the kit's users may write
 * to (see `scripts/broker-users.sh`), so they are not checked again.
 */
const untrusted = (
  incoming: IncomingMessage,
  trustedPublisher: Option.Option<string>
): IncompatibleMessage | undefined =>
  Option.isSome(trustedPublisher) && incoming.fromEventsExchange && incoming.userId !== trustedPublisher.value
    ? new IncompatibleMessage({
      errorTag: "UntrustedPublisher",
      detail: `published by ${
        incoming.userId === undefined ? "a user who did not set user_id" : `'${incoming.userId.slice(0, 100)}'`
      }, not by the trusted publisher '${trustedPublisher.value}'`
    })
    : undefined

/**
 * What makes a delivery incompatible before its body is looked at: a header table that
 * could not be decoded, or a body over `maxEventBytes` (an event carries no material body,
 * so a large one is not an event; refusing it by its length never reads it into a string).
 */
const unreadable = (incoming: IncomingMessage, maxEventBytes: number): IncompatibleMessage | undefined =>
  incoming.headersRefused !== undefined
    ? new IncompatibleMessage({
      errorTag: "UndecodableMessage.bad-headers",
      detail: `its header table cannot be decoded: ${incoming.headersRefused}`
    })
    : incoming.body.byteLength > maxEventBytes
    ? new IncompatibleMessage({
      errorTag: "UndecodableMessage.too-large",
      detail: `its body is ${incoming.body.byteLength} bytes; an event is at most ${maxEventBytes}`
    })
    : undefined

/** Decodes a delivery into the event it carries, or says why it is incompatible. */
const decode = (
  incoming: IncomingMessage
): Either.Either<{ event: KnownEvent; message: ReceivedMessage }, IncompatibleMessage> => {
  if (incoming.messageId === undefined || incoming.messageId === "") {
    return Either.left(
      new IncompatibleMessage({
        errorTag: "UndecodableMessage.no-message-id",
        detail: "the message has no message_id property"
      })
    )
  }
  const decoded = decodeEvent(incoming)
  if (Either.isLeft(decoded)) return Either.left(IncompatibleMessage.of(decoded.left))
  if (incoming.correlationId !== undefined && !isKeepableCorrelationId(incoming.correlationId)) {
    return Either.left(
      new IncompatibleMessage({
        errorTag: "UndecodableMessage.bad-correlation-id",
        detail: "correlation_id is over 255 characters or was not valid UTF-8"
      })
    )
  }
  // The event's id is a canonical UUID (lower-case ASCII hex, RFC 9562 §4); a message_id
  // is the same UUID exactly when its lower-case form equals it (no character outside
  // ASCII lower-cases to a hex digit), and the inbox keys on that one form.
  if (decoded.right.eventId !== incoming.messageId.toLowerCase()) {
    return Either.left(
      new IncompatibleMessage({
        errorTag: "UndecodableMessage.id-mismatch",
        detail: `message_id ${incoming.messageId.slice(0, 100)} is not the event's event_id ${decoded.right.eventId}`
      })
    )
  }
  return Either.right({
    event: decoded.right,
    message: { messageId: decoded.right.eventId, correlationId: incoming.correlationId ?? "" }
  })
}

/**
 * Decides what becomes of a batch of deliveries for `handler` (group commit), in their
 * order:
 * - one from a publisher that is not `limits.trustedPublisher` (when set, see
 *   `untrusted`) is dead-lettered at once as `untrusted-publisher`;
 * - one whose header table could not be decoded, or whose body is over
 *   `limits.maxEventBytes`, is dead-lettered at once as `incompatible`;
 * - an incompatible one (an unknown type or version, a non-JSON content type, a body that
 *   fails the schema, a missing `message_id`, or one that is not the event's `event_id`)
 *   is dead-lettered at once;
 * - the others are received in ONE transaction, first on the fast path (`receiveAll`:
 *   one inbox lookup, the effects, one insert of the receipts, no savepoints). If a
 *   handler fails there, that transaction rolls back and the batch is received again,
 *   each message in a savepoint of its own: a message whose handler fails (a store
 *   error, or a defect: a thrown exception) rolls back only its own writes and takes
 *   the failure path alone, while its neighbours commit; its failure is routed by
 *   `policy` (`routeFailure`) to a retry tier or, out of attempts, to the dead-letter
 *   queue;
 * - if the transaction cannot commit, every one of them failed transiently (or, when the
 *   database file was lost, the receiver halts);
 * - each failure routed to a retry tier or the dead-letter queue is remembered in the
 *   inbox (`Inbox.noteFailures`) in the same transaction, for reconciliation.
 * Never fails; an interruption interrupts.
 */
export const judgeAll =
  <R>(handler: Handler<R>, policy: RetryPolicy, limits: ReceiveLimits = DefaultReceiveLimits) =>
  (batch: ReadonlyArray<IncomingMessage>): Effect.Effect<ReadonlyArray<Verdict>, never, R | Transaction | Inbox> =>
    Effect.gen(function*() {
      const transaction = yield* Transaction
      const decoded = batch.map((incoming) => {
        const refusal = untrusted(incoming, limits.trustedPublisher) ?? unreadable(incoming, limits.maxEventBytes)
        return refusal === undefined ? decode(incoming) : Either.left(refusal)
      })
      const receivable = decoded.flatMap((d, i) => (Either.isRight(d) ? [[i, d.right] as const] : []))
      const inbox = yield* Inbox
      const startedAt = yield* Clock.currentTimeMillis
      // Failures are remembered beside the receipts (`Inbox.noteFailures`), so that
      // reconciliation does not count a message being retried or dead-lettered as lost.
      const noteOf = (i: number, verdict: Verdict): Array<DeliveryFailure> => {
        // Under the inbox's key (the canonical event id) when the event was decoded, as it came otherwise.
        const ok = decoded[i]!
        const messageId = Either.isRight(ok) ? ok.right.message.messageId : batch[i]!.messageId
        if (messageId === undefined || messageId === "") return []
        if (verdict._tag === "Retry") {
          return [{ handler: handler.name, messageId, state: "retrying", attempts: verdict.attempts, atMs: startedAt }]
        }
        if (verdict._tag === "DeadLetter") {
          return [{ handler: handler.name, messageId, state: "dead", attempts: verdict.attempts, atMs: startedAt }]
        }
        return []
      }
      const refused = decoded.flatMap((d, i) =>
        Either.isLeft(d)
          ? noteOf(i, Verdict.DeadLetter({ reason: "incompatible", failure: d.left, attempts: batch[i]!.attempts }))
          : []
      )
      const items = receivable.map(([i, { event, message }]): Receivable => ({
        event,
        message,
        traceparent: batch[i]!.traceparent
      }))
      const verdictOf = (i: number, exit: Exit.Exit<Disposition, PersistenceError>): Effect.Effect<Verdict> => {
        if (Exit.isSuccess(exit)) return Effect.succeed(Verdict.Ack({ disposition: exit.value }))
        if (Cause.isInterruptedOnly(exit.cause)) return Effect.interrupt
        const error = Cause.failureOption(exit.cause)
        return Effect.succeed(
          Option.isSome(error)
            ? onStoreFailure(policy, batch[i]!.attempts, error.value)
            : failed(policy, batch[i]!.attempts, classifyDefect(exit.cause))
        )
      }
      // Each message in a savepoint of its own, so that one failing rolls back only its
      // own writes: the path a batch takes when a handler failed in the fast path. The one
      // that failed there keeps that failure; its handler is not run twice for one delivery.
      const isolated = (failedFirst: HandlerFailedInBatch) =>
        Effect.gen(function*() {
          const verdicts = yield* Effect.forEach(
            receivable,
            ([i], k) =>
              k === failedFirst.index
                ? verdictOf(i, Exit.failCause(failedFirst.cause))
                : Effect.exit(
                  transaction.run(receiveOne(handler, items[k]!.event, items[k]!.message)).pipe(
                    applySpan(handler.name, items[k]!)
                  )
                ).pipe(Effect.flatMap((exit) => verdictOf(i, exit)))
          )
          yield* inbox.noteFailures([...refused, ...verdicts.flatMap((v, k) => noteOf(receivable[k]![0], v))])
          return verdicts
        })
      const fast = Effect.gen(function*() {
        const dispositions = yield* receiveAll(handler, items)
        if (refused.length > 0) yield* inbox.noteFailures(refused)
        return dispositions.map((disposition) => Verdict.Ack({ disposition }))
      })
      const received: Exit.Exit<ReadonlyArray<Verdict>, PersistenceError> = receivable.length === 0
        ? yield* Effect.as(
          refused.length === 0 ? Effect.void : Effect.ignore(transaction.run(inbox.noteFailures(refused))),
          Exit.succeed([])
        )
        : yield* Effect.exit(
          transaction.run(fast).pipe(
            Effect.catchTag("HandlerFailedInBatch", (failedFirst) => transaction.run(isolated(failedFirst)))
          )
        )
      if (Exit.isFailure(received) && Cause.isInterruptedOnly(received.cause)) return yield* Effect.interrupt
      const committedAt = yield* Clock.currentTimeMillis
      if (receivable.length > 0) {
        yield* Metric.update(
          Metric.tagged(Metrics.handlerSeconds, "handler", handler.name),
          (committedAt - startedAt) / 1000
        )
      }
      if (Exit.isSuccess(received)) {
        const appliedLatency = Metric.tagged(Metrics.commitToAppliedSeconds, "handler", handler.name)
        for (const [k, [, { event }]] of receivable.entries()) {
          const verdict = received.value[k]
          if (verdict?._tag === "Ack" && verdict.disposition === "applied") {
            yield* Metric.update(appliedLatency, Math.max(0, committedAt - event.publishedAt.getTime()) / 1000)
          }
        }
      }
      const verdicts: Array<Verdict> = []
      let next = 0
      for (const [i, d] of decoded.entries()) {
        if (Either.isLeft(d)) {
          const reason = d.left.errorTag === "UntrustedPublisher" ? "untrusted-publisher" : "incompatible"
          verdicts.push(Verdict.DeadLetter({ reason, failure: d.left, attempts: batch[i]!.attempts }))
        } else if (Exit.isSuccess(received)) {
          verdicts.push(received.value[next++]!)
        } else {
          const error = Cause.failureOption(received.cause)
          verdicts.push(
            Option.isSome(error)
              ? onStoreFailure(policy, batch[i]!.attempts, error.value)
              : failed(policy, batch[i]!.attempts, classifyDefect(received.cause))
          )
        }
      }
      return verdicts
    }).pipe(Effect.withSpan("Receiver.judgeAll", { attributes: { handler: handler.name, batch: batch.length } }))

/** `judgeAll` for one delivery. */
export const judge =
  <R>(handler: Handler<R>, policy: RetryPolicy, limits: ReceiveLimits = DefaultReceiveLimits) =>
  (incoming: IncomingMessage) => Effect.map(judgeAll(handler, policy, limits)([incoming]), (verdicts) => verdicts[0]!)
