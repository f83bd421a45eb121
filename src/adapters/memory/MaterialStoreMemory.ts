import { Effect, Layer, Option, Ref } from "effect"
import { type MaterialRevision, MaterialStore } from "../../ports/MaterialStore.js"
import { MemoryDatabase, uniqueViolation } from "./MemoryDatabase.js"

/** The in-memory twin of `MaterialStoreSqlite`. */
export const MaterialStoreMemory = Layer.effect(
  MaterialStore,
  Effect.gen(function*() {
    const db = yield* MemoryDatabase
    const table = yield* db.table<ReadonlyArray<MaterialRevision>>("materials", [])
    return {
      latest: (materialId) =>
        Effect.map(Ref.get(table), (rows) =>
          Option.fromNullable(
            rows.filter((r) => r.materialId === materialId).sort((a, b) => b.revision - a.revision)[0]
          )),
      insert: (revision) =>
        Effect.flatMap(
          Ref.get(table),
          (rows) =>
            rows.some((r) =>
                (r.materialId === revision.materialId && r.revision === revision.revision) ||
                r.eventId === revision.eventId
              )
              ? Effect.fail(uniqueViolation("materials.insert", "materials.material_id, materials.revision"))
              : Ref.set(table, [...rows, revision])
        )
    }
  })
)
