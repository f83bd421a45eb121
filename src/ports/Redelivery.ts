import { Context, type Effect } from "effect"
import type { Envelope } from "../domain/Envelope.js"
import type { HandlerName } from "../domain/HandlerName.js"
import type { PublishOutcome } from "./EventBus.js"

/**
 * Sends events again to one handler only, after reconciliation found that it never
 * applied them. Contract: `send(handler, envelopes)` publishes each, with publisher
 * confirms, to that handler's queue and no other (the other handlers see nothing), and
 * answers one outcome per envelope, in order; it never fails.
 */
export interface RedeliveryShape {
  readonly send: (
    handler: HandlerName,
    envelopes: ReadonlyArray<Envelope>
  ) => Effect.Effect<ReadonlyArray<PublishOutcome>>
}

export class Redelivery extends Context.Tag("dostavka/Redelivery")<Redelivery, RedeliveryShape>() {}
