import { Context, type Effect, type Option, Schema } from "effect"
import type { PersistenceError } from "../domain/errors.js"
import { MaterialId, Revision } from "../domain/Material.js"
import { EventId } from "../domain/MaterialPublished.js"

/** One stored revision of a material, as the API owner keeps it (with its body). */
export const MaterialRevision = Schema.Struct({
  materialId: MaterialId,
  revision: Revision,
  title: Schema.String,
  summary: Schema.String,
  body: Schema.String,
  /** The id of the `material.published.v1` event this revision caused. */
  eventId: EventId,
  /** When the API owner accepted it, ms since the epoch. */
  publishedAtMs: Schema.Number
})
export interface MaterialRevision extends Schema.Schema.Type<typeof MaterialRevision> {}

/**
 * The API owner's materials: every accepted revision, body included.
 *
 * Contract: `latest` returns the highest stored revision; `insert` adds a revision and
 * fails with `PersistenceError` if that `(materialId, revision)` exists. Callers check
 * the revision rule inside the same `Transaction` as the insert.
 */
export interface MaterialStoreShape {
  readonly latest: (materialId: MaterialId) => Effect.Effect<Option.Option<MaterialRevision>, PersistenceError>
  readonly insert: (revision: MaterialRevision) => Effect.Effect<void, PersistenceError>
}

export class MaterialStore extends Context.Tag("dostavka/MaterialStore")<MaterialStore, MaterialStoreShape>() {}
