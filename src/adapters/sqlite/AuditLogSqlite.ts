import { SqlSchema } from "@effect/sql"
import { Effect, Layer, Schema } from "effect"
import { AuditLog, AuditRecord } from "../../ports/AuditLog.js"
import { type DatabaseTag } from "./DatabaseTags.js"
import { persistence } from "./SqliteFailures.js"
import { CountRow, tableRow } from "./TableRow.js"

const RecordRow = tableRow(AuditRecord, {
  eventId: "event_id",
  materialId: "material_id",
  publishedAtMs: "published_at",
  correlationId: "correlation_id",
  receivedAtMs: "received_at"
})

/**
 * The `AuditLog` port over a connection to the audit receiver's database (`AuditDb`,
 * `AuditDbReader`; table `audit_records`). A record that does not encode into a row is a
 * defect (see `rowDefect`).
 */
export const AuditLogSqlite = <Self>(database: DatabaseTag<Self, "audit">) =>
  Layer.effect(
    AuditLog,
    Effect.gen(function*() {
      const { sql } = yield* database
      const append = SqlSchema.void({
        Request: RecordRow,
        execute: (row) => sql`INSERT INTO audit_records ${sql.insert(row)}`
      })
      const count = SqlSchema.single({
        Request: Schema.Void,
        Result: CountRow,
        execute: () => sql`SELECT COUNT(*) AS n FROM audit_records`
      })
      return {
        append: (record) => append(record).pipe(persistence("audit.append")),
        count: count(undefined).pipe(Effect.map((row) => row.n), persistence("audit.count"))
      }
    })
  )
