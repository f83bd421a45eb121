import { Effect, Layer, Option, Ref } from "effect"
import { Outbox, type OutboxMessage } from "../../ports/Outbox.js"
import { MemoryDatabase, uniqueViolation } from "./MemoryDatabase.js"

interface OutboxTable {
  readonly rows: ReadonlyArray<OutboxMessage>
  readonly lease: { readonly owner: string; readonly expiresAtMs: number } | undefined
}

/** The in-memory twin of `OutboxSqlite`. */
export const OutboxMemory = Layer.effect(
  Outbox,
  Effect.gen(function*() {
    const db = yield* MemoryDatabase
    const table = yield* db.table<OutboxTable>("outbox", { rows: [], lease: undefined })
    return {
      enqueue: (envelope, createdAtMs) =>
        Effect.flatMap(Ref.get(table), (t) =>
          t.rows.some((row) => row.envelope.messageId === envelope.messageId)
            ? Effect.fail(uniqueViolation("outbox.enqueue", "outbox.message_id"))
            : Ref.set(table, {
              ...t,
              rows: [...t.rows, { sequence: t.rows.length + 1, envelope, createdAtMs, publishedAtMs: null }]
            })),
      pending: (limit) =>
        Effect.map(Ref.get(table), (t) => t.rows.filter((row) => row.publishedAtMs === null).slice(0, limit)),
      markPublished: (messageIds, atMs) =>
        Ref.update(table, (t) => ({
          ...t,
          rows: t.rows.map((row) =>
            row.publishedAtMs === null && messageIds.includes(row.envelope.messageId)
              ? { ...row, publishedAtMs: atMs }
              : row
          )
        })),
      publishedAt: (messageId) =>
        Effect.map(Ref.get(table), (t) =>
          Option.map(
            Option.fromNullable(t.rows.find((row) => row.envelope.messageId === messageId)),
            (row) => row.publishedAtMs
          )),
      stats: (nowMs) =>
        Effect.map(Ref.get(table), (t) => {
          const pending = t.rows.filter((row) => row.publishedAtMs === null)
          const oldest = pending[0]?.createdAtMs
          return {
            pending: pending.length,
            published: t.rows.length - pending.length,
            oldestPendingAgeMs: oldest === undefined ? null : Math.max(0, nowMs - oldest)
          }
        }),
      acquireLease: (owner, ttlMs, nowMs) =>
        Ref.modify(table, (t) =>
          t.lease === undefined || t.lease.owner === owner || t.lease.expiresAtMs <= nowMs
            ? [true, { ...t, lease: { owner, expiresAtMs: nowMs + ttlMs } }]
            : [false, t]),
      releaseLease: (owner) =>
        Ref.update(table, (t) => (t.lease?.owner === owner ? { ...t, lease: undefined } : t))
    }
  })
)
