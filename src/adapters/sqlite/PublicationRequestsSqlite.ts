import { Effect, Layer, Option } from "effect"
import { type PublicationRequest, PublicationRequests } from "../../ports/PublicationRequests.js"
import { type DatabaseTag, persistence } from "./Database.js"

interface RequestRow {
  readonly idempotency_key: string
  readonly request_hash: string
  readonly request_id: string
  readonly event_id: string
  readonly material_id: string
  readonly revision: number
  readonly accepted_at: number
}

const toRequest = (row: RequestRow): PublicationRequest => ({
  idempotencyKey: row.idempotency_key,
  requestHash: row.request_hash,
  requestId: row.request_id,
  eventId: row.event_id,
  materialId: row.material_id,
  revision: row.revision,
  acceptedAtMs: row.accepted_at
})

/** The `PublicationRequests` port over a connection to the API owner's database (`ApiDb`, `ApiDbReader`; table
 * `publication_requests`). */
export const PublicationRequestsSqlite = <Self>(database: DatabaseTag<Self, "api">) =>
  Layer.effect(
    PublicationRequests,
    Effect.gen(function*() {
      const { sql } = yield* database
      return {
        byKey: (key) =>
          sql<RequestRow>`SELECT * FROM publication_requests WHERE idempotency_key = ${key}`.pipe(
            Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toRequest)),
            persistence("requests.byKey")
          ),
        byId: (requestId) =>
          sql<RequestRow>`SELECT * FROM publication_requests WHERE request_id = ${requestId}`.pipe(
            Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toRequest)),
            persistence("requests.byId")
          ),
        insert: (r) =>
          sql`INSERT INTO publication_requests ${
            sql.insert({
              idempotency_key: r.idempotencyKey,
              request_hash: r.requestHash,
              request_id: r.requestId,
              event_id: r.eventId,
              material_id: r.materialId,
              revision: r.revision,
              accepted_at: r.acceptedAtMs
            })
          }`.pipe(Effect.asVoid, persistence("requests.insert"))
      }
    })
  )
