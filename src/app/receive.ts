import { Clock, Effect, Option } from "effect"
import type { KnownEvent } from "../domain/Envelope.js"
import type { PersistenceError } from "../domain/errors.js"
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
