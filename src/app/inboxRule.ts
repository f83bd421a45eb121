/**
 * The inbox rule, written once: a handler processes each message once. A delivery whose
 * message has a receipt, or was received earlier in the same batch, is a duplicate: its
 * handler's effect does not run again and the duplicate is counted on the receipt.
 * Receipts are written together at the end of the batch's transaction, so the receipt
 * exists iff the effect committed (the consumer acks only after that commit; RabbitMQ
 * "Consumer Acknowledgements": a lost ack means a redelivery, which finds the receipt).
 */
import { Clock, Effect } from "effect"
import type { KnownEvent } from "../domain/Envelope.js"
import type { PersistenceError } from "../domain/errors.js"
import type { HandlerName } from "../domain/HandlerName.js"
import { Inbox, type Receipt, type ReceiptOutcome } from "../ports/Inbox.js"
import type { Admitted, ReceivedMessage } from "./admission.js"
import { withRemoteParent } from "./tracing.js"
import type { Disposition } from "./verdict.js"

/**
 * A handler: one receiver's effect for an event. `apply` runs inside the receiver's
 * transaction and says whether it applied the event or skipped it as stale.
 */
export interface Handler<R> {
  /** The handler's name, also the inbox key and the suffix of its queue names. */
  readonly name: HandlerName
  readonly apply: (event: KnownEvent, message: ReceivedMessage) => Effect.Effect<ReceiptOutcome, PersistenceError, R>
}

/** The inbox rule: a message is a duplicate when it has a receipt (`receipts`) or was received earlier in the batch (`earlier`). */
export const isDuplicate = (messageId: string, receipts: ReadonlySet<string>, earlier: ReadonlySet<string>): boolean =>
  receipts.has(messageId) || earlier.has(messageId)

/** One delivery's result in the batch: its disposition, and the receipt or duplicate it leaves to write. */
export interface Reception {
  readonly disposition: Disposition
  readonly receipt?: Receipt
  /** The message whose receipt counts this delivery as a duplicate. */
  readonly duplicateOf?: string
}

/** What every log line written while a delivery is handled carries: the handler and the event's ids. */
const deliveryAnnotations = (handler: HandlerName, item: Admitted) => ({
  handler,
  messageId: item.message.messageId,
  correlationId: item.message.correlationId,
  materialId: item.event.materialId,
  revision: item.event.revision
})

/** The span of one handler's effect, child of the publisher's (see `withRemoteParent`). */
const applySpan = (handler: HandlerName, item: Admitted) =>
  withRemoteParent(`Receiver.apply ${handler}`, item.traceparent, {
    "messaging.system": "rabbitmq",
    "messaging.message.id": item.message.messageId,
    "dostavka.handler": handler
  })

/**
 * Reception of a batch of `items` by `handler`, inside the caller's transaction: ONE
 * inbox lookup (`Inbox.received`) for the whole batch, then `receiveOne` per item (the inbox
 * rule, then the handler's effect for a fresh one), then `settle` with the receptions that
 * committed: ONE insert of their receipts (`Inbox.recordAll`), then the duplicates counted.
 * An item whose `receiveOne` failed (in a savepoint the caller rolled back) is not counted as
 * received, so a later delivery of the same message is fresh. Fails with the inbox's
 * `PersistenceError`; `receiveOne` fails with the handler's.
 */
export const reception = <R>(handler: Handler<R>, items: ReadonlyArray<Admitted>) =>
  Effect.gen(function*() {
    const inbox = yield* Inbox
    const receipts = yield* inbox.received(handler.name, items.map((item) => item.message.messageId))
    const earlier = new Set<string>()
    const receivedAtMs = yield* Clock.currentTimeMillis
    const receiveOne = (item: Admitted): Effect.Effect<Reception, PersistenceError, R> => {
      const messageId = item.message.messageId
      if (isDuplicate(messageId, receipts, earlier)) {
        return Effect.succeed({ disposition: "duplicate", duplicateOf: messageId })
      }
      return handler.apply(item.event, item.message).pipe(
        applySpan(handler.name, item),
        Effect.annotateLogs(deliveryAnnotations(handler.name, item)),
        Effect.map((outcome): Reception => {
          earlier.add(messageId)
          return { disposition: outcome, receipt: { handler: handler.name, messageId, outcome, receivedAtMs } }
        })
      )
    }
    const settle = (receptions: ReadonlyArray<Reception>) =>
      Effect.gen(function*() {
        yield* inbox.recordAll(receptions.flatMap((r) => (r.receipt === undefined ? [] : [r.receipt])))
        for (const r of receptions) {
          if (r.duplicateOf !== undefined) yield* inbox.noteDuplicate(handler.name, r.duplicateOf)
        }
      })
    return { receiveOne, settle }
  })
