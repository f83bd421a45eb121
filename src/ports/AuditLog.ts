import { Context, type Effect, Schema } from "effect"
import type { PersistenceError } from "../domain/errors.js"
import { MaterialId, Revision } from "../domain/Material.js"
import { EventId } from "../domain/MaterialPublished.js"

/** One audit record: a fact the audit receiver saw, with where it came from. */
export const AuditRecord = Schema.Struct({
  eventId: EventId,
  materialId: MaterialId,
  revision: Revision,
  title: Schema.String,
  /** ms since the epoch, as the event says. */
  publishedAtMs: Schema.Number,
  /** The API request that caused the event. */
  correlationId: Schema.String,
  /** When the audit receiver recorded it, ms since the epoch. */
  receivedAtMs: Schema.Number
})
export interface AuditRecord extends Schema.Schema.Type<typeof AuditRecord> {}

/**
 * The audit log: one record per event, append-only. Contract: `append` of an `eventId`
 * already present fails with `PersistenceError` (unique key); the inbox keeps that from
 * happening on redelivery. Fails with `PersistenceError` only.
 */
export interface AuditLogShape {
  readonly append: (record: AuditRecord) => Effect.Effect<void, PersistenceError>
  readonly count: Effect.Effect<number, PersistenceError>
}

export class AuditLog extends Context.Tag("dostavka/AuditLog")<AuditLog, AuditLogShape>() {}
