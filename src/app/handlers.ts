import { Clock, Effect, Option } from "effect"
import { isNewer } from "../domain/Material.js"
import { AuditLog } from "../ports/AuditLog.js"
import { CatalogStore } from "../ports/CatalogStore.js"
import type { Handler } from "./inboxRule.js"

/**
 * The catalog handler: keeps the newest revision of each material. An event whose
 * revision is not newer than the held one changes nothing and is recorded `stale`, so a
 * late or redelivered old revision never overwrites a newer one.
 */
export const catalogHandler: Handler<CatalogStore> = {
  name: "catalog",
  apply: (event) =>
    Effect.gen(function*() {
      const catalog = yield* CatalogStore
      const held = Option.getOrUndefined(yield* catalog.get(event.materialId))
      if (!isNewer(event.revision, held?.revision)) return "stale" as const
      yield* catalog.put({
        materialId: event.materialId,
        revision: event.revision,
        title: event.title,
        summary: event.summary,
        publishedAtMs: event.publishedAt.getTime(),
        eventId: event.eventId
      })
      return "applied" as const
    })
}

/** The audit handler: one record per event, whatever its revision. */
export const auditHandler: Handler<AuditLog> = {
  name: "audit",
  apply: (event, message) =>
    Effect.gen(function*() {
      const audit = yield* AuditLog
      yield* audit.append({
        eventId: event.eventId,
        materialId: event.materialId,
        revision: event.revision,
        title: event.title,
        publishedAtMs: event.publishedAt.getTime(),
        correlationId: message.correlationId,
        receivedAtMs: yield* Clock.currentTimeMillis
      })
      return "applied" as const
    })
}
