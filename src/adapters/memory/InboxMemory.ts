import { Effect, Layer, Option, Ref } from "effect"
import { type DeliveryFailure, Inbox, type Receipt } from "../../ports/Inbox.js"
import { MemoryDatabase, uniqueViolation } from "./MemoryDatabase.js"

type Entry = Receipt & { readonly duplicates: number }
const keyOf = (handler: string, messageId: string) => `${handler}\u0000${messageId}`

/** The in-memory twin of `InboxSqlite`. */
export const InboxMemory = Layer.effect(
  Inbox,
  Effect.gen(function*() {
    const db = yield* MemoryDatabase
    const table = yield* db.table<ReadonlyMap<string, Entry>>("inbox", new Map())
    const failures = yield* db.table<ReadonlyMap<string, DeliveryFailure>>("delivery_failures", new Map())
    return {
      find: (handler, messageId) =>
        Effect.map(
          Ref.get(table),
          (t) =>
            Option.map(
              Option.fromNullable(t.get(keyOf(handler, messageId))),
              ({ duplicates: _, ...receipt }) => receipt
            )
        ),
      record: (receipt) =>
        Effect.flatMap(Ref.get(table), (t) => {
          const key = keyOf(receipt.handler, receipt.messageId)
          return t.has(key)
            ? Effect.fail(uniqueViolation("inbox.record", "inbox.handler, inbox.message_id"))
            : Ref.set(table, new Map(t).set(key, { ...receipt, duplicates: 0 }))
        }),
      received: (handler, messageIds) =>
        Effect.map(
          Ref.get(table),
          (t): ReadonlySet<string> => new Set(messageIds.filter((id) => t.has(keyOf(handler, id))))
        ),
      recordAll: (receipts) =>
        Effect.flatMap(Ref.get(table), (t) => {
          const next = new Map(t)
          for (const receipt of receipts) {
            const key = keyOf(receipt.handler, receipt.messageId)
            if (next.has(key)) return Effect.fail(uniqueViolation("inbox.recordAll", "inbox.handler, inbox.message_id"))
            next.set(key, { ...receipt, duplicates: 0 })
          }
          return Ref.set(table, next)
        }),
      noteDuplicate: (handler, messageId) =>
        Ref.update(table, (t) => {
          const key = keyOf(handler, messageId)
          const entry = t.get(key)
          return entry === undefined ? t : new Map(t).set(key, { ...entry, duplicates: entry.duplicates + 1 })
        }),
      counts: (handler) =>
        Effect.zipWith(Ref.get(table), Ref.get(failures), (t, f) => {
          const mine = [...t.values()].filter((e) => e.handler === handler)
          const applied = mine.filter((e) => e.outcome === "applied")
          const open = [...f.values()].filter((x) => x.handler === handler && !t.has(keyOf(handler, x.messageId)))
          return {
            applied: applied.length,
            stale: mine.filter((e) => e.outcome === "stale").length,
            duplicates: mine.reduce((n, e) => n + e.duplicates, 0),
            lastAppliedAtMs: applied.length === 0 ? null : Math.max(...applied.map((e) => e.receivedAtMs)),
            retrying: open.filter((x) => x.state === "retrying").length,
            dead: open.filter((x) => x.state === "dead").length
          }
        }),
      noteFailures: (noted) =>
        Ref.update(failures, (f) => {
          const next = new Map(f)
          for (const x of noted) next.set(keyOf(x.handler, x.messageId), x)
          return next
        }),
      unreceived: (handler, messageIds) =>
        Effect.zipWith(Ref.get(table), Ref.get(failures), (t, f) =>
          messageIds
            .filter((id) => !t.has(keyOf(handler, id)))
            .map((id) => ({ messageId: id, failure: f.get(keyOf(handler, id)) ?? null })))
    }
  })
)
