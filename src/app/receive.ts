import { Clock, Effect, Either, Option } from "effect"
import { decodeEvent, type KnownEvent } from "../domain/Envelope.js"
import { describeCause, type PersistenceError } from "../domain/errors.js"
import { Inbox, type ReceiptOutcome } from "../ports/Inbox.js"
import { Transaction } from "../ports/Transaction.js"

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
  /** The handler's name, also the inbox key and the suffix of its queue name. */
  readonly name: string
  readonly apply: (event: KnownEvent, message: ReceivedMessage) => Effect.Effect<ReceiptOutcome, PersistenceError, R>
}

/** What became of a delivery: the effect applied, skipped as stale, or suppressed as a duplicate. */
export type Disposition = ReceiptOutcome | "duplicate"

/**
 * Processes one delivery for `handler` exactly once per `(handler, messageId)`.
 *
 * In ONE transaction: looks up the inbox receipt; if there is one, counts the duplicate
 * and returns `duplicate` without running the effect; otherwise runs the handler's effect
 * and records the receipt with its outcome. The caller acks only after this succeeds, so
 * a crash between commit and ack leads to a redelivery that finds the receipt
 * (RabbitMQ "Consumer Acknowledgements": redelivery after a lost ack). Fails with
 * `PersistenceError`, in which case nothing was committed.
 */
export const receive = <R>(handler: Handler<R>, event: KnownEvent, message: ReceivedMessage) =>
  Effect.gen(function*() {
    const transaction = yield* Transaction
    const inbox = yield* Inbox
    return yield* transaction.run(Effect.gen(function*() {
      if (Option.isSome(yield* inbox.find(handler.name, message.messageId))) {
        yield* inbox.noteDuplicate(handler.name, message.messageId)
        return "duplicate" as Disposition
      }
      const outcome = yield* handler.apply(event, message)
      const receivedAtMs = yield* Clock.currentTimeMillis
      yield* inbox.record({ handler: handler.name, messageId: message.messageId, outcome, receivedAtMs })
      return outcome as Disposition
    }))
  }).pipe(
    Effect.withSpan("Receiver.receive"),
    Effect.annotateLogs({ handler: handler.name, messageId: message.messageId })
  )

/** A message as the consumer hands it over: AMQP properties that matter, and the body's bytes as received. */
export interface IncomingMessage {
  readonly messageId: string | undefined
  readonly correlationId: string | undefined
  readonly type: string | undefined
  readonly schemaVersion: unknown
  readonly contentType: string | undefined
  readonly body: Uint8Array
}

/** The consumer's instruction for one delivery. */
export type Verdict =
  /** Processed (applied, stale or duplicate): ack it. */
  | { readonly _tag: "Ack"; readonly disposition: Disposition }
  /** Can never be processed: put a copy on the handler's dead-letter queue, then ack. */
  | { readonly _tag: "DeadLetter"; readonly reason: string; readonly detail: string }
  /** Failed for a reason that may pass (a locked or full disk): hand it back to the queue. */
  | { readonly _tag: "Requeue"; readonly detail: string }
  /**
   * The receiver must stop: its database file is gone, so nothing it commits would be
   * kept. Neither ack nor hand back; the message returns to the queue when the channel
   * closes, for the next process to apply.
   */
  | { readonly _tag: "Halt"; readonly detail: string }

/**
 * Decides what becomes of one delivery for `handler`: decodes it (an unknown type or
 * version, a non-JSON content type, a body that fails the schema, a missing
 * `message_id`, or one that is not the event's `event_id` → `DeadLetter` with the
 * reason), then runs `receive`. Never fails: a `PersistenceError` becomes `Requeue`, or
 * `Halt` when the database file was lost.
 */
export const judge = <R>(handler: Handler<R>) => (incoming: IncomingMessage) =>
  Effect.gen(function*() {
    if (incoming.messageId === undefined || incoming.messageId === "") {
      return { _tag: "DeadLetter", reason: "no-message-id", detail: "the message has no message_id property" } as Verdict
    }
    const decoded = decodeEvent(incoming)
    if (Either.isLeft(decoded)) {
      return { _tag: "DeadLetter", reason: decoded.left.reason, detail: decoded.left.detail } as Verdict
    }
    if (decoded.right.eventId !== incoming.messageId) {
      return {
        _tag: "DeadLetter",
        reason: "id-mismatch",
        detail: `message_id ${incoming.messageId} is not the event's event_id ${decoded.right.eventId}`
      } as Verdict
    }
    const message = { messageId: incoming.messageId, correlationId: incoming.correlationId ?? "" }
    return yield* receive(handler, decoded.right, message).pipe(
      Effect.map((disposition): Verdict => ({ _tag: "Ack", disposition })),
      Effect.catchTag("PersistenceError", (error) =>
        Effect.succeed<Verdict>({
          _tag: error.kind === "lost" ? "Halt" : "Requeue",
          detail: `${error.operation}: ${describeCause(error.cause)}`
        }))
    )
  })
