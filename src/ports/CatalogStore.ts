import { Context, type Effect, type Option } from "effect"
import type { PersistenceError } from "../domain/errors.js"

/** What the catalog shows for a material: its newest known revision. */
export interface CatalogEntry {
  readonly materialId: string
  readonly revision: number
  readonly title: string
  readonly summary: string
  readonly publishedAtMs: number
  readonly eventId: string
}

/**
 * The catalog's entries, one per material. Contract: `put` replaces the entry of its
 * material unconditionally; the revision rule is the caller's, checked with `get` inside
 * the same `Transaction`. Fails with `PersistenceError` only.
 */
export interface CatalogStoreShape {
  readonly get: (materialId: string) => Effect.Effect<Option.Option<CatalogEntry>, PersistenceError>
  readonly put: (entry: CatalogEntry) => Effect.Effect<void, PersistenceError>
  readonly count: Effect.Effect<number, PersistenceError>
}

export class CatalogStore extends Context.Tag("dostavka/CatalogStore")<CatalogStore, CatalogStoreShape>() {}
