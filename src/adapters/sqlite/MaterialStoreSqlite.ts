import { SqlSchema } from "@effect/sql"
import { Effect, Layer, Schema } from "effect"
import { MaterialRevision, MaterialStore } from "../../ports/MaterialStore.js"
import { type DatabaseTag } from "./DatabaseTags.js"
import { persistence } from "./SqliteFailures.js"
import { tableRow } from "./TableRow.js"

const MaterialRow = tableRow(MaterialRevision, {
  materialId: "material_id",
  eventId: "event_id",
  publishedAtMs: "published_at"
})

/**
 * The `MaterialStore` port over a connection to the API owner's database (`ApiDb`,
 * `ApiDbReader`; table `materials`). Rows are decoded with the port's `MaterialRevision`;
 * one that does not decode is a defect (see `rowDefect`).
 */
export const MaterialStoreSqlite = <Self>(database: DatabaseTag<Self, "api">) =>
  Layer.effect(
    MaterialStore,
    Effect.gen(function*() {
      const { sql } = yield* database
      const latest = SqlSchema.findOne({
        // The port's type guarantees a MaterialId already: the key is not checked again per lookup.
        Request: Schema.String,
        Result: MaterialRow,
        execute: (materialId) =>
          sql`SELECT * FROM materials WHERE material_id = ${materialId} ORDER BY revision DESC LIMIT 1`
      })
      const insert = SqlSchema.void({
        Request: MaterialRow,
        execute: (row) => sql`INSERT INTO materials ${sql.insert(row)}`
      })
      return {
        latest: (materialId) => latest(materialId).pipe(persistence("materials.latest")),
        insert: (material) => insert(material).pipe(persistence("materials.insert"))
      }
    })
  )
