import { Effect, Layer } from "effect"
import { AuditLog } from "../../ports/AuditLog.js"
import { type DatabaseTag, persistence } from "./Database.js"

/** The `AuditLog` port over a connection to the audit receiver's database (`AuditDb`, `AuditDbReader`; table `audit_records`). */
export const AuditLogSqlite = <Self>(database: DatabaseTag<Self, "audit">) =>
  Layer.effect(
    AuditLog,
    Effect.gen(function*() {
      const { sql } = yield* database
      return {
        append: (r) =>
          sql`INSERT INTO audit_records ${
            sql.insert({
              event_id: r.eventId,
              material_id: r.materialId,
              revision: r.revision,
              title: r.title,
              published_at: r.publishedAtMs,
              correlation_id: r.correlationId,
              received_at: r.receivedAtMs
            })
          }`.pipe(Effect.asVoid, persistence("audit.append")),
        count: sql<{ n: number }>`SELECT COUNT(*) AS n FROM audit_records`.pipe(
          Effect.map(([row]) => row?.n ?? 0),
          persistence("audit.count")
        )
      }
    })
  )
