/**
 * AppliedTimes: when each event was applied by both receivers, read from their own
 * databases (read-only). Each receiver stamps its inbox receipt's `received_at`
 * (`Clock`, ms since the epoch, the same clock as this process) inside the transaction
 * that applies the event, just before the batch commits; the event is applied by both
 * at the later of its two receipts. The figure therefore leaves out that batch's commit
 * (one fsync) and the ack that follows it. Polled every 100 ms only to know when all are
 * in; the poll's period does not enter the figures.
 */
import Sqlite from "better-sqlite3"
import { Effect } from "effect"
import { databaseFile } from "../../src/adapters/sqlite/Database.js"
import type { HandlerName } from "../../src/domain/HandlerName.js"
import { BenchFailure } from "./BenchFailure.js"

const Handlers: ReadonlyArray<HandlerName> = ["catalog", "audit"]

/** A read-only connection to each receiver's database. */
const openReaders = (dataDir: string) =>
  Handlers.map((h) => [h, new Sqlite(databaseFile(dataDir, h), { readonly: true })] as const)

const withReaders = <A>(
  dataDir: string,
  use: (dbs: ReadonlyArray<readonly [HandlerName, Sqlite.Database]>) => A
): A => {
  const dbs = openReaders(dataDir)
  try {
    return use(dbs)
  } finally {
    for (const [, db] of dbs) db.close()
  }
}

/** How many receipts each receiver has committed so far. */
export const receiptCounts = (dataDir: string): Record<HandlerName, number> =>
  withReaders(
    dataDir,
    (dbs) =>
      Object.fromEntries(
        dbs.map((
          [h, db]
        ) => [h, db.prepare<[], { n: number | null }>("SELECT MAX(rowid) AS n FROM inbox").get()?.n ?? 0])
      ) as Record<HandlerName, number>
  )

/**
 * Waits until both receivers hold a receipt for every one of `eventIds` (at most
 * `timeoutMs`), then returns when each was applied by both (ms since the epoch). One
 * read-only connection per receiver for the whole wait, one query per receiver and poll.
 */
export const appliedByBoth = (dataDir: string, eventIds: ReadonlyArray<string>, timeoutMs: number) =>
  Effect.acquireUseRelease(
    Effect.sync(() => openReaders(dataDir)),
    (dbs) =>
      Effect.gen(function*() {
        const ids = JSON.stringify(eventIds)
        const receipts = dbs.map(([h, db]) => {
          const query = db.prepare<[string, string], { id: string; at: number }>(
            "SELECT j.value AS id, i.received_at AS at FROM json_each(?) j JOIN inbox i ON i.handler = ? AND i.message_id = j.value"
          )
          return () => query.all(ids, h)
        })
        const deadline = Date.now() + timeoutMs
        for (;;) {
          const found = receipts.map((read) => read())
          if (found.every((rows) => rows.length >= eventIds.length)) {
            const at = new Map<string, number>()
            for (const row of found.flat()) at.set(row.id, Math.max(at.get(row.id) ?? 0, row.at))
            return at
          }
          if (Date.now() > deadline) {
            return yield* new BenchFailure({
              what: "e2e",
              detail: `not every event was applied by both receivers within ${timeoutMs} ms`
            })
          }
          yield* Effect.sleep("100 millis")
        }
      }),
    (dbs) => Effect.sync(() => dbs.forEach(([, db]) => db.close()))
  )
