import { Context, type Duration, Effect, Layer, Queue } from "effect"

/**
 * An in-process doorbell from the API to the relay: after a commit that added outbox
 * rows the API rings it, and a relay in the same process wakes at once instead of at its
 * next poll. Losing a ring is harmless (the relay polls anyway), so it holds at most one.
 */
export interface OutboxSignalShape {
  readonly notify: Effect.Effect<void>
  /** Waits for a ring, or for `timeout`, whichever comes first. */
  readonly wait: (timeout: Duration.DurationInput) => Effect.Effect<void>
}

export class OutboxSignal extends Context.Tag("dostavka/OutboxSignal")<OutboxSignal, OutboxSignalShape>() {
  static readonly layer = Layer.effect(
    OutboxSignal,
    Effect.map(Queue.sliding<void>(1), (bell) => ({
      notify: Effect.asVoid(Queue.offer(bell, undefined)),
      wait: (timeout) => Effect.asVoid(Effect.timeoutOption(Queue.take(bell), timeout))
    }))
  )
}
