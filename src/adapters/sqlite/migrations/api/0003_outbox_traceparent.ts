/** The W3C trace context of the request that wrote an outbox row, when the API traces. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { Migration } from "../Migration.js"

const migration: Migration = Effect.flatMap(
  SqlClient.SqlClient,
  (sql) => sql`ALTER TABLE outbox ADD COLUMN traceparent TEXT`
)

export default migration
