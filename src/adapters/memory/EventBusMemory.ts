import { Context, Effect, Layer, Ref } from "effect"
import type { Envelope } from "../../domain/Envelope.js"
import { Confirmed, EventBus, type PublishOutcome } from "../../ports/EventBus.js"

/**
 * The in-memory twin of the amqplib `EventBus`: records every publish, and answers with
 * the outcome `script` gives (default: every publish `Confirmed`). `published` holds the
 * messages the "broker" confirmed, in publish order.
 */
export class EventBusMemoryLog extends Context.Tag("dostavka/EventBusMemoryLog")<EventBusMemoryLog, {
  readonly published: Ref.Ref<ReadonlyArray<Envelope>>
  readonly attempts: Ref.Ref<number>
}>() {}

export const EventBusMemory = (
  script: (envelope: Envelope, attempt: number) => PublishOutcome = () => new Confirmed()
) =>
  Layer.effectContext(Effect.gen(function*() {
    const published = yield* Ref.make<ReadonlyArray<Envelope>>([])
    const attempts = yield* Ref.make(0)
    const bus = EventBus.of({
      publish: (messages) =>
        Effect.forEach(messages, (envelope) =>
          Effect.gen(function*() {
            const attempt = yield* Ref.updateAndGet(attempts, (n) => n + 1)
            const outcome = script(envelope, attempt)
            if (outcome._tag === "Confirmed") yield* Ref.update(published, (all) => [...all, envelope])
            return outcome
          }))
    })
    return Context.make(EventBus, bus).pipe(Context.add(EventBusMemoryLog, { published, attempts }))
  }))
