import { Context, Data, type Effect } from "effect"
import type { Envelope } from "../domain/Envelope.js"

/** The broker acknowledged the message (basic.ack on a confirm channel): it is the broker's now. */
export class Confirmed extends Data.TaggedClass("Confirmed")<{}> {}

/**
 * The message was refused: `nacked` (basic.nack), `returned` (basic.return of a
 * `mandatory` publish that matched no queue; the return arrives before the ack and is
 * tied to its publish by `message_id`), or `refused` by the client library before it
 * was sent (e.g. a headers table over 64 KiB). Publishing it again unchanged will not
 * help unless the topology is repaired.
 */
export class Rejected extends Data.TaggedClass("Rejected")<{
  readonly reason: "nacked" | "returned" | "refused"
  readonly detail: string
}> {}

/**
 * Nobody knows whether the broker has the message: no confirm before `confirmTimeout`,
 * or the channel closed first. The outbox row stays pending and is published again with
 * the same `message_id`; receivers' inboxes absorb the possible duplicate.
 */
export class Unknown extends Data.TaggedClass("Unknown")<{
  readonly reason: "confirm-timeout" | "channel-closed" | "broker-unavailable"
  readonly detail: string
}> {}

export type PublishOutcome = Confirmed | Rejected | Unknown

/**
 * The outbound side of the broker, as the relay sees it.
 *
 * Contract: `publish` sends the messages in the given order, persistent and `mandatory`,
 * routed by their `type`, all of them in flight at once (pipelined publisher confirms,
 * RabbitMQ "Consumer Acknowledgements and Publisher Confirms"), and returns exactly one
 * outcome per message, in the same order. It never fails: a broker that cannot be reached
 * makes every outcome `Unknown`.
 */
export interface EventBusShape {
  readonly publish: (messages: ReadonlyArray<Envelope>) => Effect.Effect<ReadonlyArray<PublishOutcome>>
}

export class EventBus extends Context.Tag("dostavka/EventBus")<EventBus, EventBusShape>() {}
