import { SqlClient } from "@effect/sql"
import { Effect, Layer, Option } from "effect"
import { MaterialStore } from "../../ports/MaterialStore.js"
import { persistence } from "./Database.js"

interface MaterialRow {
  readonly material_id: string
  readonly revision: number
  readonly title: string
  readonly summary: string
  readonly body: string
  readonly event_id: string
  readonly published_at: number
}

/** The `MaterialStore` port over the API owner's SQLite database (table `materials`). */
export const MaterialStoreSqlite = Layer.effect(
  MaterialStore,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return {
      latest: (materialId) =>
        sql<MaterialRow>`SELECT * FROM materials WHERE material_id = ${materialId} ORDER BY revision DESC LIMIT 1`.pipe(
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
