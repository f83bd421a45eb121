import { SqlSchema } from "@effect/sql"
import { Effect, Layer, Schema } from "effect"
import { PublicationRequest, PublicationRequests } from "../../ports/PublicationRequests.js"
import { type DatabaseTag } from "./DatabaseTags.js"
import { persistence } from "./SqliteFailures.js"
import { tableRow } from "./TableRow.js"

const RequestRow = tableRow(PublicationRequest, {
  idempotencyKey: "idempotency_key",
  requestHash: "request_hash",
  requestId: "request_id",
  eventId: "event_id",
  materialId: "material_id",
  acceptedAtMs: "accepted_at"
})

/**
 * The `PublicationRequests` port over a connection to the API owner's database (`ApiDb`,
 * `ApiDbReader`; table `publication_requests`). Rows are decoded with the port's
 * `PublicationRequest`; one that does not decode is a defect (see `rowDefect`).
 */
export const PublicationRequestsSqlite = <Self>(database: DatabaseTag<Self, "api">) =>
  Layer.effect(
    PublicationRequests,
    Effect.gen(function*() {
      const { sql } = yield* database
      const byKey = SqlSchema.findOne({
        Request: Schema.String,
        Result: RequestRow,
        execute: (key) => sql`SELECT * FROM publication_requests WHERE idempotency_key = ${key}`
      })
      const byId = SqlSchema.findOne({
        Request: Schema.String,
        Result: RequestRow,
        execute: (requestId) => sql`SELECT * FROM publication_requests WHERE request_id = ${requestId}`
      })
      const insert = SqlSchema.void({
        Request: RequestRow,
        execute: (row) => sql`INSERT INTO publication_requests ${sql.insert(row)}`
      })
      return {
        byKey: (key) => byKey(key).pipe(persistence("requests.byKey")),
        byId: (requestId) => byId(requestId).pipe(persistence("requests.byId")),
        insert: (request) => insert(request).pipe(persistence("requests.insert"))
      }
    })
  )
