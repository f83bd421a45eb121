import { Context, type Effect } from "effect"
import type { PersistenceError } from "../domain/errors.js"

/** One audit record: a fact the audit receiver saw, with where it came from. */
export interface AuditRecord {
  readonly eventId: string
  readonly materialId: string
  readonly revision: number
  readonly title: string
  readonly publishedAtMs: number
  /** The API request that caused the event. */
  readonly correlationId: string
  readonly receivedAtMs: number
}

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
