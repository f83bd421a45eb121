import { Context, type Effect, type Option, Schema } from "effect"
import type { PersistenceError } from "../domain/errors.js"
import { MaterialId, Revision } from "../domain/Material.js"
import { EventId } from "../domain/MaterialPublished.js"

/** What the catalog shows for a material: its newest known revision. */
export const CatalogEntry = Schema.Struct({
  materialId: MaterialId,
  revision: Revision,
  title: Schema.String,
  summary: Schema.String,
  /** ms since the epoch, as the event says. */
  publishedAtMs: Schema.Number,
  eventId: EventId
})
export interface CatalogEntry extends Schema.Schema.Type<typeof CatalogEntry> {}

/**
 * The catalog's entries, one per material. Contract: `put` replaces the entry of its
 * material unconditionally; the revision rule is the caller's, checked with `get` inside
 * the same `Transaction`. Fails with `PersistenceError` only.
 */
export interface CatalogStoreShape {
  readonly get: (materialId: MaterialId) => Effect.Effect<Option.Option<CatalogEntry>, PersistenceError>
  readonly put: (entry: CatalogEntry) => Effect.Effect<void, PersistenceError>
  readonly count: Effect.Effect<number, PersistenceError>
}

export class CatalogStore extends Context.Tag("dostavka/CatalogStore")<CatalogStore, CatalogStoreShape>() {}
