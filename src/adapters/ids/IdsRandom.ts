import { Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import { Ids } from "../../ports/Ids.js"

/** `Ids` from node:crypto's `randomUUID`: random version 4 UUIDs. */
export const IdsRandom = Layer.succeed(Ids, { uuid: Effect.sync(() => randomUUID()) })
