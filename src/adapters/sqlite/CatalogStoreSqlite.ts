import { SqlSchema } from "@effect/sql"
import { Effect, Layer, Schema } from "effect"
import { CatalogEntry, CatalogStore } from "../../ports/CatalogStore.js"
import { type DatabaseTag } from "./DatabaseTags.js"
import { persistence } from "./SqliteFailures.js"
import { CountRow, tableRow } from "./TableRow.js"

const EntryRow = tableRow(CatalogEntry, {
  materialId: "material_id",
  publishedAtMs: "published_at",
  eventId: "event_id"
})

/**
 * The `CatalogStore` port over a connection to the catalog's database (`CatalogDb`,
 * `CatalogDbReader`; table `catalog_entries`). Rows are decoded with the port's
 * `CatalogEntry`; one that does not decode is a defect (see `rowDefect`).
 */
export const CatalogStoreSqlite = <Self>(database: DatabaseTag<Self, "catalog">) =>
  Layer.effect(
    CatalogStore,
    Effect.gen(function*() {
      const { sql } = yield* database
      const get = SqlSchema.findOne({
        // The port's type guarantees a MaterialId already: the key is not checked again per lookup.
        Request: Schema.String,
        Result: EntryRow,
        execute: (materialId) => sql`SELECT * FROM catalog_entries WHERE material_id = ${materialId}`
      })
      const put = SqlSchema.void({
        Request: EntryRow,
        execute: (row) =>
          sql`INSERT INTO catalog_entries ${sql.insert(row)} ON CONFLICT (material_id) DO UPDATE SET
            revision = excluded.revision, title = excluded.title, summary = excluded.summary,
            published_at = excluded.published_at, event_id = excluded.event_id`
      })
      const count = SqlSchema.single({
        Request: Schema.Void,
        Result: CountRow,
        execute: () => sql`SELECT COUNT(*) AS n FROM catalog_entries`
      })
      return {
        get: (materialId) => get(materialId).pipe(persistence("catalog.get")),
        put: (entry) => put(entry).pipe(persistence("catalog.put")),
        count: count(undefined).pipe(Effect.map((row) => row.n), persistence("catalog.count"))
      }
    })
  )
