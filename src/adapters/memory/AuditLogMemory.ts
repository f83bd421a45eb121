import { Effect, Layer, Ref } from "effect"
import { AuditLog, type AuditRecord } from "../../ports/AuditLog.js"
import { MemoryDatabase, uniqueViolation } from "./MemoryDatabase.js"

/** The in-memory twin of `AuditLogSqlite`. */
export const AuditLogMemory = Layer.effect(
  AuditLog,
  Effect.gen(function*() {
    const db = yield* MemoryDatabase
    const table = yield* db.table<ReadonlyArray<AuditRecord>>("audit_records", [])
    return {
      append: (record) =>
        Effect.flatMap(Ref.get(table), (rows) =>
          rows.some((r) => r.eventId === record.eventId)
            ? Effect.fail(uniqueViolation("audit.append", "audit_records.event_id"))
            : Ref.set(table, [...rows, record])),
      count: Effect.map(Ref.get(table), (rows) => rows.length)
    }
  })
)
