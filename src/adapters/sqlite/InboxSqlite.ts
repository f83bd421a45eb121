import { SqlSchema } from "@effect/sql"
import { Effect, Layer, Schema } from "effect"
import { DeliveryFailure, Inbox, InboxCounts, Receipt } from "../../ports/Inbox.js"
import { type DatabaseTag } from "./DatabaseTags.js"
import { persistence } from "./SqliteFailures.js"
import { tableRow } from "./TableRow.js"

const ReceiptRow = tableRow(Receipt, { messageId: "message_id", receivedAtMs: "received_at" })
const FailureRow = tableRow(DeliveryFailure, { messageId: "message_id", atMs: "last_failure_at" })

const Key = Schema.Struct({ handler: Schema.String, messageId: Schema.String })
// A list of message ids travels as one JSON array (json_each), so any number is one statement.
const Keys = Schema.Struct({ handler: Schema.String, messageIds: Schema.parseJson(Schema.Array(Schema.String)) })

const CountsRow = tableRow(InboxCounts, { lastAppliedAtMs: "last_applied" })
const UnreceivedRow = Schema.Struct({
  id: Schema.String,
  state: Schema.NullOr(DeliveryFailure.fields.state),
  attempts: Schema.NullOr(Schema.Number),
  at: Schema.NullOr(Schema.Number)
})

/**
 * The `Inbox` port over a connection to a receiver's database (`CatalogDb`, `AuditDb`, or
 * their readers): receipts in table `inbox`, the last routed failure of each message in
 * `delivery_failures`, both keyed `(handler, message_id)`. Rows are decoded with the
 * port's `Receipt` and `DeliveryFailure`; one that does not decode is a defect (see
 * `rowDefect`).
 */
export const InboxSqlite = <Self, S extends "catalog" | "audit">(database: DatabaseTag<Self, S>) =>
  Layer.effect(
    Inbox,
    Effect.gen(function*() {
      const { sql } = yield* database
      const find = SqlSchema.findOne({
        Request: Key,
        Result: ReceiptRow,
        execute: ({ handler, messageId }) =>
          sql`SELECT * FROM inbox WHERE handler = ${handler} AND message_id = ${messageId}`
      })
      // Never called with no rows: `INSERT INTO inbox` needs at least one.
      const insert = SqlSchema.void({
        Request: Schema.Array(ReceiptRow),
        execute: (rows) => sql`INSERT INTO inbox ${sql.insert(rows)}`
      })
      const received = SqlSchema.findAll({
        Request: Keys,
        Result: Schema.Struct({ id: Schema.String }),
        execute: ({ handler, messageIds }) =>
          sql`SELECT message_id AS id FROM inbox
              WHERE handler = ${handler} AND message_id IN (SELECT value FROM json_each(${messageIds}))`
      })
      // Both aggregates answer one row each, so their cross join is the one row of counts.
      const counts = SqlSchema.single({
        Request: Schema.String,
        Result: CountsRow,
        execute: (handler) =>
          sql`SELECT * FROM
              (SELECT
                 COUNT(*) FILTER (WHERE outcome = 'applied')         AS applied,
                 COUNT(*) FILTER (WHERE outcome = 'stale')           AS stale,
                 COALESCE(SUM(duplicates), 0)                        AS duplicates,
                 MAX(received_at) FILTER (WHERE outcome = 'applied') AS last_applied
               FROM inbox WHERE handler = ${handler}),
              (SELECT
                 COUNT(*) FILTER (WHERE state = 'retrying') AS retrying,
                 COUNT(*) FILTER (WHERE state = 'dead')     AS dead
               FROM delivery_failures f
               WHERE f.handler = ${handler}
                 AND NOT EXISTS (SELECT 1 FROM inbox i WHERE i.handler = f.handler AND i.message_id = f.message_id))`
      })
      const noteFailures = SqlSchema.void({
        Request: Schema.Array(FailureRow),
        execute: (rows) =>
          sql`INSERT INTO delivery_failures ${sql.insert(rows)}
              ON CONFLICT (handler, message_id) DO UPDATE SET
                state = excluded.state, attempts = excluded.attempts, last_failure_at = excluded.last_failure_at`
      })
      const unreceived = SqlSchema.findAll({
        Request: Keys,
        Result: UnreceivedRow,
        execute: ({ handler, messageIds }) =>
          sql`SELECT j.value AS id, f.state AS state, f.attempts AS attempts, f.last_failure_at AS at
              FROM json_each(${messageIds}) j
              LEFT JOIN delivery_failures f ON f.handler = ${handler} AND f.message_id = j.value
              WHERE NOT EXISTS (SELECT 1 FROM inbox i WHERE i.handler = ${handler} AND i.message_id = j.value)
              ORDER BY j.key`
      })
      return {
        find: (handler, messageId) => find({ handler, messageId }).pipe(persistence("inbox.find")),
        record: (receipt) => insert([receipt]).pipe(persistence("inbox.record")),
        received: (handler, messageIds) =>
          messageIds.length === 0 ?
            Effect.succeed(new Set<string>()) :
            received({ handler, messageIds }).pipe(
              Effect.map((rows): ReadonlySet<string> => new Set(rows.map((r) => r.id))),
              persistence("inbox.received")
            ),
        recordAll: (receipts) =>
          receipts.length === 0
            ? Effect.void
            : insert(receipts).pipe(persistence("inbox.recordAll")),
        noteDuplicate: (handler, messageId) =>
          sql`UPDATE inbox SET duplicates = duplicates + 1 WHERE handler = ${handler} AND message_id = ${messageId}`
            .pipe(Effect.asVoid, persistence("inbox.noteDuplicate")),
        counts: (handler) => counts(handler).pipe(persistence("inbox.counts")),
        noteFailures: (failures) =>
          failures.length === 0
            ? Effect.void
            : noteFailures(failures).pipe(persistence("inbox.noteFailures")),
        unreceived: (handler, messageIds) =>
          messageIds.length === 0 ?
            Effect.succeed([]) :
            unreceived({ handler, messageIds }).pipe(
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
