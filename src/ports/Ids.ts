import { Context, type Effect } from "effect"

/**
 * Where new identifiers come from: a request's and an event's id, an HTTP request's
 * `X-Request-Id`.
 *
 * Contract: every `uuid` is a new string of UUID shape (8-4-4-4-12 lowercase hex digits),
 * never given out before by this service; it cannot fail. The live service gives random
 * (version 4) UUIDs, so ids are unique across processes too; a deterministic twin lets a
 * test know which id comes next.
 */
export interface IdsShape {
  readonly uuid: Effect.Effect<string>
}

export class Ids extends Context.Tag("dostavka/Ids")<Ids, IdsShape>() {}
