import { Effect, Layer, Option } from "effect"
import { MaterialStore } from "../../ports/MaterialStore.js"
import { type DatabaseTag, persistence } from "./Database.js"

interface MaterialRow {
  readonly material_id: string
  readonly revision: number
  readonly title: string
  readonly summary: string
  readonly body: string
  readonly event_id: string
  readonly published_at: number
}

/** The `MaterialStore` port over a connection to the API owner's database (`ApiDb`, `ApiDbReader`; table `materials`). */
export const MaterialStoreSqlite = <Self>(database: DatabaseTag<Self, "api">) =>
  Layer.effect(
    MaterialStore,
    Effect.gen(function*() {
      const { sql } = yield* database
      return {
        latest: (materialId) =>
          sql<MaterialRow>`SELECT * FROM materials WHERE material_id = ${materialId} ORDER BY revision DESC LIMIT 1`
            .pipe(
              Effect.map((rows) =>
                Option.map(Option.fromNullable(rows[0]), (row) => ({
                  materialId: row.material_id,
                  revision: row.revision,
                  title: row.title,
                  summary: row.summary,
                  body: row.body,
                  eventId: row.event_id,
                  publishedAtMs: row.published_at
                }))
              ),
              persistence("materials.latest")
            ),
        insert: (m) =>
          sql`INSERT INTO materials ${
            sql.insert({
              material_id: m.materialId,
              revision: m.revision,
              title: m.title,
              summary: m.summary,
              body: m.body,
              event_id: m.eventId,
              published_at: m.publishedAtMs
            })
          }`.pipe(Effect.asVoid, persistence("materials.insert"))
      }
    })
  )
