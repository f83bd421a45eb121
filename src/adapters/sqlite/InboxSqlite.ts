import { Effect, Layer, Option } from "effect"
import { Inbox, type ReceiptOutcome } from "../../ports/Inbox.js"
import { type DatabaseTag, persistence } from "./Database.js"

/**
 * The `Inbox` port over a connection to a receiver's database (`CatalogDb`, `AuditDb`, or their readers): receipts in table `inbox`, the last
 * routed failure of each message in `delivery_failures`, both keyed `(handler, message_id)`.
 */
export const InboxSqlite = <Self, S extends "catalog" | "audit">(database: DatabaseTag<Self, S>) =>
  Layer.effect(
    Inbox,
    Effect.gen(function*() {
      const { sql } = yield* database
      return {
        find: (handler, messageId) =>
          sql<{ outcome: ReceiptOutcome; received_at: number }>`
          SELECT outcome, received_at FROM inbox WHERE handler = ${handler} AND message_id = ${messageId}`.pipe(
            Effect.map((rows) =>
              Option.map(Option.fromNullable(rows[0]), (row) => ({
                handler,
                messageId,
                outcome: row.outcome,
                receivedAtMs: row.received_at
              }))
            ),
            persistence("inbox.find")
          ),
        record: (receipt) =>
          sql`INSERT INTO inbox ${
            sql.insert({
              handler: receipt.handler,
              message_id: receipt.messageId,
              outcome: receipt.outcome,
              received_at: receipt.receivedAtMs
            })
          }`.pipe(Effect.asVoid, persistence("inbox.record")),
        received: (handler, messageIds) =>
          messageIds.length === 0 ?
            Effect.succeed(new Set<string>()) :
            sql<{ id: string }>`
            SELECT message_id AS id FROM inbox
            WHERE handler = ${handler} AND message_id IN (SELECT value FROM json_each(${JSON.stringify(messageIds)}))`
              .pipe(
                Effect.map((rows): ReadonlySet<string> => new Set(rows.map((r) => r.id))),
                persistence("inbox.received")
              ),
        recordAll: (receipts) =>
          receipts.length === 0 ? Effect.void : sql`INSERT INTO inbox ${
            sql.insert(receipts.map((r) => ({
              handler: r.handler,
              message_id: r.messageId,
              outcome: r.outcome,
              received_at: r.receivedAtMs
            })))
          }`.pipe(Effect.asVoid, persistence("inbox.recordAll")),
        noteDuplicate: (handler, messageId) =>
          sql`UPDATE inbox SET duplicates = duplicates + 1 WHERE handler = ${handler} AND message_id = ${messageId}`
            .pipe(
              Effect.asVoid,
              persistence("inbox.noteDuplicate")
            ),
        counts: (handler) =>
          Effect.zipWith(
            sql<{ applied: number; stale: number; duplicates: number; last_applied: number | null }>`
            SELECT
              COUNT(*) FILTER (WHERE outcome = 'applied')            AS applied,
              COUNT(*) FILTER (WHERE outcome = 'stale')              AS stale,
              COALESCE(SUM(duplicates), 0)                           AS duplicates,
              MAX(received_at) FILTER (WHERE outcome = 'applied')    AS last_applied
            FROM inbox WHERE handler = ${handler}`,
            sql<{ retrying: number; dead: number }>`
            SELECT
              COUNT(*) FILTER (WHERE state = 'retrying') AS retrying,
              COUNT(*) FILTER (WHERE state = 'dead')     AS dead
            FROM delivery_failures f
            WHERE f.handler = ${handler}
              AND NOT EXISTS (SELECT 1 FROM inbox i WHERE i.handler = f.handler AND i.message_id = f.message_id)`,
            ([row], [failures]) => ({
              applied: row?.applied ?? 0,
              stale: row?.stale ?? 0,
              duplicates: row?.duplicates ?? 0,
              lastAppliedAtMs: row?.last_applied ?? null,
              retrying: failures?.retrying ?? 0,
              dead: failures?.dead ?? 0
            })
          ).pipe(persistence("inbox.counts")),
        noteFailures: (failures) =>
          failures.length === 0 ? Effect.void : sql`
          INSERT INTO delivery_failures ${
            sql.insert(failures.map((f) => ({
              handler: f.handler,
              message_id: f.messageId,
              state: f.state,
              attempts: f.attempts,
              last_failure_at: f.atMs
            })))
          }
          ON CONFLICT (handler, message_id) DO UPDATE SET
            state = excluded.state, attempts = excluded.attempts, last_failure_at = excluded.last_failure_at`.pipe(
            Effect.asVoid,
            persistence("inbox.noteFailures")
          ),
        // The ids travel as one JSON array (json_each), so a page of any size is one statement.
        unreceived: (handler, messageIds) =>
          messageIds.length === 0 ?
            Effect.succeed([]) :
            sql<{ id: string; state: "retrying" | "dead" | null; attempts: number | null; at: number | null }>`
          SELECT j.value AS id, f.state AS state, f.attempts AS attempts, f.last_failure_at AS at
          FROM json_each(${JSON.stringify(messageIds)}) j
          LEFT JOIN delivery_failures f ON f.handler = ${handler} AND f.message_id = j.value
          WHERE NOT EXISTS (SELECT 1 FROM inbox i WHERE i.handler = ${handler} AND i.message_id = j.value)
          ORDER BY j.key`.pipe(
              Effect.map((rows) =>
                rows.map((r) => ({
                  messageId: r.id,
                  failure: r.state === null
                    ? null
                    : { handler, messageId: r.id, state: r.state, attempts: r.attempts ?? 0, atMs: r.at ?? 0 }
                }))
              ),
              persistence("inbox.unreceived")
            )
      }
    })
  )
