import { Effect, Layer, Ref } from "effect"
import { Ids } from "../../ports/Ids.js"

/** The UUID-shaped id an `IdsMemory` gives the `n`th time it is asked (from 1). */
export const memoryUuid = (n: number) => `00000000-0000-4000-8000-${n.toString(16).padStart(12, "0")}`

/** The deterministic twin of `IdsRandom`: `memoryUuid(1)`, `memoryUuid(2)`, … per layer built. */
export const IdsMemory = Layer.effect(
  Ids,
  Effect.map(Ref.make(0), (counter) => ({ uuid: Effect.map(Ref.updateAndGet(counter, (n) => n + 1), memoryUuid) }))
)
