import { Effect, Layer, Option, Ref } from "effect"
import { Outbox, type OutboxMessage } from "../../ports/Outbox.js"
import { MemoryDatabase, uniqueViolation } from "./MemoryDatabase.js"

type Row = OutboxMessage & { readonly nextAttemptAtMs: number }

interface OutboxTable {
  readonly rows: ReadonlyArray<Row>
  readonly lease: { readonly owner: string; readonly expiresAtMs: number } | undefined
}

const withoutSchedule = ({ nextAttemptAtMs: _, ...row }: Row): OutboxMessage => row

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
              rows: [...t.rows, {
                sequence: t.rows.length + 1,
                envelope,
                createdAtMs,
                publishedAtMs: null,
                rejections: 0,
                lastError: null,
                parkedAtMs: null,
                nextAttemptAtMs: 0
              }]
            })),
      pending: (limit, nowMs) =>
        Effect.map(Ref.get(table), (t) =>
          t.rows
            .filter((row) => row.publishedAtMs === null && row.parkedAtMs === null && row.nextAttemptAtMs <= nowMs)
            .slice(0, limit)
            .map(withoutSchedule)),
      reject: (rejections, atMs) =>
        Ref.update(table, (t) => ({
          ...t,
          rows: t.rows.map((row) => {
            const r = rejections.find((x) => x.messageId === row.envelope.messageId)
            return r === undefined || row.publishedAtMs !== null ? row : {
              ...row,
              rejections: row.rejections + 1,
              lastError: r.error,
              nextAttemptAtMs: r.retryAtMs ?? 0,
              parkedAtMs: r.retryAtMs === null ? atMs : null
            }
          })
        })),
      parked: (limit) =>
        Effect.map(
          Ref.get(table),
          (t) =>
            t.rows.filter((row) => row.parkedAtMs !== null && row.publishedAtMs === null).slice(0, limit).map(
              withoutSchedule
            )
        ),
      release: (messageIds) =>
        Ref.modify(table, (t) => {
          let released = 0
          const rows = t.rows.map((row) => {
            const chosen = messageIds === "all" || messageIds.includes(row.envelope.messageId)
            if (!chosen || row.parkedAtMs === null || row.publishedAtMs !== null) return row
            released++
            return { ...row, parkedAtMs: null, rejections: 0, nextAttemptAtMs: 0 }
          })
          return [released, { ...t, rows }]
        }),
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
          const pending = t.rows.filter((row) => row.publishedAtMs === null && row.parkedAtMs === null)
          const oldest = pending[0]?.createdAtMs
          return {
            pending: pending.length,
            published: t.rows.filter((row) => row.publishedAtMs !== null).length,
            parked: t.rows.filter((row) => row.publishedAtMs === null && row.parkedAtMs !== null).length,
            oldestPendingAgeMs: oldest === undefined ? null : Math.max(0, nowMs - oldest),
            publishedLastMinute: t.rows.filter((row) =>
              row.publishedAtMs !== null && row.publishedAtMs >= nowMs - 60_000
            ).length
          }
        }),
      publishedPage: (afterSequence, publishedBeforeMs, limit) =>
        Effect.map(Ref.get(table), (t) =>
          t.rows
            .filter((row) =>
              row.sequence > afterSequence && row.publishedAtMs !== null && row.publishedAtMs < publishedBeforeMs
            )
            .slice(0, limit)
            .map((row) => ({
              sequence: row.sequence,
              messageId: row.envelope.messageId,
              publishedAtMs: row.publishedAtMs!
            }))),
      find: (messageIds) =>
        Effect.map(
          Ref.get(table),
          (t) => t.rows.filter((row) => messageIds.includes(row.envelope.messageId)).map(withoutSchedule)
        ),
      acquireLease: (owner, ttlMs, nowMs) =>
        Ref.modify(table, (t) => {
          const lease = t.lease === undefined || t.lease.owner === owner || t.lease.expiresAtMs <= nowMs
            ? { owner, expiresAtMs: nowMs + ttlMs }
            : t.lease
          return [lease, { ...t, lease }]
        }),
      releaseLease: (owner) => Ref.update(table, (t) => (t.lease?.owner === owner ? { ...t, lease: undefined } : t))
    }
  })
)
