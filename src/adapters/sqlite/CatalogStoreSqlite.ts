import { Effect, Layer, Option } from "effect"
import { CatalogStore } from "../../ports/CatalogStore.js"
import { type DatabaseTag, persistence } from "./Database.js"

interface EntryRow {
  readonly material_id: string
  readonly revision: number
  readonly title: string
  readonly summary: string
  readonly published_at: number
  readonly event_id: string
}

/** The `CatalogStore` port over a connection to the catalog's database (`CatalogDb`, `CatalogDbReader`; table `catalog_entries`). */
export const CatalogStoreSqlite = <Self>(database: DatabaseTag<Self, "catalog">) =>
  Layer.effect(
    CatalogStore,
    Effect.gen(function*() {
      const { sql } = yield* database
      return {
        get: (materialId) =>
          sql<EntryRow>`SELECT * FROM catalog_entries WHERE material_id = ${materialId}`.pipe(
            Effect.map((rows) =>
              Option.map(Option.fromNullable(rows[0]), (row) => ({
                materialId: row.material_id,
                revision: row.revision,
                title: row.title,
                summary: row.summary,
                publishedAtMs: row.published_at,
                eventId: row.event_id
              }))
            ),
            persistence("catalog.get")
          ),
        put: (e) =>
          sql`INSERT INTO catalog_entries ${
            sql.insert({
              material_id: e.materialId,
              revision: e.revision,
              title: e.title,
              summary: e.summary,
              published_at: e.publishedAtMs,
              event_id: e.eventId
            })
          } ON CONFLICT (material_id) DO UPDATE SET
            revision = excluded.revision, title = excluded.title, summary = excluded.summary,
            published_at = excluded.published_at, event_id = excluded.event_id`.pipe(
            Effect.asVoid,
            persistence("catalog.put")
          ),
        count: sql<{ n: number }>`SELECT COUNT(*) AS n FROM catalog_entries`.pipe(
          Effect.map(([row]) => row?.n ?? 0),
          persistence("catalog.count")
        )
      }
    })
  )
