import { Effect, Layer, Option, Ref } from "effect"
import { type CatalogEntry, CatalogStore } from "../../ports/CatalogStore.js"
import { MemoryDatabase } from "./MemoryDatabase.js"

/** The in-memory twin of `CatalogStoreSqlite`. */
export const CatalogStoreMemory = Layer.effect(
  CatalogStore,
  Effect.gen(function*() {
    const db = yield* MemoryDatabase
    const table = yield* db.table<ReadonlyMap<string, CatalogEntry>>("catalog_entries", new Map())
    return {
      get: (materialId) => Effect.map(Ref.get(table), (t) => Option.fromNullable(t.get(materialId))),
      put: (entry) => Ref.update(table, (t) => new Map(t).set(entry.materialId, entry)),
      count: Effect.map(Ref.get(table), (t) => t.size)
    }
  })
)
