import { SqlClient } from "@effect/sql"
import { Effect, Layer, Option } from "effect"
import { Inbox, type ReceiptOutcome } from "../../ports/Inbox.js"
import { persistence } from "./Database.js"

/** The `Inbox` port over a receiver's SQLite database (table `inbox`, key `(handler, message_id)`). */
export const InboxSqlite = Layer.effect(
  Inbox,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
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
      noteDuplicate: (handler, messageId) =>
        sql`UPDATE inbox SET duplicates = duplicates + 1 WHERE handler = ${handler} AND message_id = ${messageId}`.pipe(
          Effect.asVoid,
          persistence("inbox.noteDuplicate")
        ),
      counts: (handler) =>
        sql<{ applied: number; stale: number; duplicates: number }>`
          SELECT
            COUNT(*) FILTER (WHERE outcome = 'applied') AS applied,
            COUNT(*) FILTER (WHERE outcome = 'stale')   AS stale,
            COALESCE(SUM(duplicates), 0)                AS duplicates
          FROM inbox WHERE handler = ${handler}`.pipe(
          Effect.map(([row]) => ({
            applied: row?.applied ?? 0,
            stale: row?.stale ?? 0,
            duplicates: row?.duplicates ?? 0
          })),
          persistence("inbox.counts")
        )
    }
  })
)
