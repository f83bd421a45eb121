import { SqlSchema } from "@effect/sql"
import { Effect, Layer, Option, Schema } from "effect"
import { Envelope } from "../../domain/Envelope.js"
import { LeaseHolder, Outbox, type OutboxMessage, OutboxState, PublishedRef } from "../../ports/Outbox.js"
import { type DatabaseTag } from "./DatabaseTags.js"
import { persistence } from "./SqliteFailures.js"
import { tableRow } from "./TableRow.js"

const envelopeColumns = {
  messageId: "message_id",
  correlationId: "correlation_id",
  schemaVersion: "schema_version",
  contentType: "content_type",
  timestampMs: "timestamp_ms",
  appId: "app_id"
} as const
const EnvelopeRow = tableRow(Envelope, envelopeColumns)

/** A whole `outbox` row: the port's `OutboxState` and the domain's `Envelope`, side by side in one row. */
const MessageRow = tableRow(Schema.Struct({ ...OutboxState.fields, ...Envelope.fields }), {
  ...envelopeColumns,
  createdAtMs: "created_at",
  publishedAtMs: "published_at",
  lastError: "last_error",
  parkedAtMs: "parked_at"
})

const toMessage = (
  { createdAtMs, lastError, parkedAtMs, publishedAtMs, rejections, sequence, ...envelope }: typeof MessageRow.Type
): OutboxMessage => ({ sequence, createdAtMs, publishedAtMs, rejections, lastError, parkedAtMs, envelope })

const PublishedRefRow = tableRow(PublishedRef, { messageId: "message_id", publishedAtMs: "published_at" })
const LeaseRow = tableRow(LeaseHolder, { expiresAtMs: "expires_at" })
const Stats = Schema.Struct({
  pending: Schema.Number,
  published: Schema.Number,
  parked: Schema.Number,
  oldest: Schema.NullOr(Schema.Number),
  last_minute: Schema.Number
})
// Message ids travel as one JSON array (json_each), so any number of them is one statement.
const MessageIds = Schema.parseJson(Schema.Array(Schema.String))

/** The relay lease is one row of `relay_lease`, named after the outbox it guards. */
const LeaseName = "outbox"

/**
 * The `Outbox` port over a connection to the API owner's database (`ApiDb`, `ApiDbReader`;
 * tables `outbox`, `relay_lease`). Rows are decoded with the port's `OutboxState` and the
 * domain's `Envelope`; one that does not decode is a defect (see `rowDefect`).
 */
export const OutboxSqlite = <Self>(database: DatabaseTag<Self, "api">) =>
  Layer.effect(
    Outbox,
    Effect.gen(function*() {
      const { sql } = yield* database
      const enqueue = SqlSchema.void({
        Request: Schema.Struct({ envelope: EnvelopeRow, createdAtMs: Schema.Number }),
        execute: ({ createdAtMs, envelope }) =>
          sql`INSERT INTO outbox ${sql.insert({ ...envelope, created_at: createdAtMs })}`
      })
      const pending = SqlSchema.findAll({
        Request: Schema.Struct({ limit: Schema.Number, nowMs: Schema.Number }),
        Result: MessageRow,
        execute: ({ limit, nowMs }) =>
          sql`SELECT * FROM outbox
              WHERE published_at IS NULL AND parked_at IS NULL AND next_attempt_at <= ${nowMs}
              ORDER BY sequence LIMIT ${limit}`
      })
      const parked = SqlSchema.findAll({
        Request: Schema.Number,
        Result: MessageRow,
        execute: (limit) =>
          sql`SELECT * FROM outbox WHERE parked_at IS NOT NULL AND published_at IS NULL ORDER BY sequence LIMIT ${limit}`
      })
      const publishedAt = SqlSchema.findOne({
        Request: Schema.String,
        Result: Schema.Struct({ published_at: Schema.NullOr(Schema.Number) }),
        execute: (messageId) => sql`SELECT published_at FROM outbox WHERE message_id = ${messageId}`
      })
      const stats = SqlSchema.single({
        Request: Schema.Number,
        Result: Stats,
        execute: (nowMs) =>
          sql`SELECT
                COUNT(*) FILTER (WHERE published_at IS NULL AND parked_at IS NULL)        AS pending,
                COUNT(*) FILTER (WHERE published_at IS NOT NULL)                          AS published,
                COUNT(*) FILTER (WHERE published_at >= ${nowMs - 60_000})                 AS last_minute,
                COUNT(*) FILTER (WHERE published_at IS NULL AND parked_at IS NOT NULL)    AS parked,
                MIN(created_at) FILTER (WHERE published_at IS NULL AND parked_at IS NULL) AS oldest
              FROM outbox`
      })
      const publishedPage = SqlSchema.findAll({
        Request: Schema.Struct({ afterSequence: Schema.Number, beforeMs: Schema.Number, limit: Schema.Number }),
        Result: PublishedRefRow,
        execute: ({ afterSequence, beforeMs, limit }) =>
          sql`SELECT sequence, message_id, published_at FROM outbox
              WHERE sequence > ${afterSequence} AND published_at IS NOT NULL AND published_at < ${beforeMs}
              ORDER BY sequence LIMIT ${limit}`
      })
      const find = SqlSchema.findAll({
        Request: MessageIds,
        Result: MessageRow,
        execute: (messageIds) =>
          sql`SELECT * FROM outbox WHERE message_id IN (SELECT value FROM json_each(${messageIds})) ORDER BY sequence`
      })
      const lease = SqlSchema.single({
        Request: Schema.Void,
        Result: LeaseRow,
        execute: () => sql`SELECT owner, expires_at FROM relay_lease WHERE name = ${LeaseName}`
      })
      return {
        enqueue: (envelope, createdAtMs) => enqueue({ envelope, createdAtMs }).pipe(persistence("outbox.enqueue")),
        pending: (limit, nowMs) =>
          pending({ limit, nowMs }).pipe(
            Effect.map((rows) => rows.map(toMessage)),
            persistence("outbox.pending")
          ),
        reject: (rejections, atMs) =>
          Effect.forEach(rejections, (r) =>
            sql`UPDATE outbox SET
                  rejections = rejections + 1,
                  last_error = ${r.error},
                  next_attempt_at = ${r.retryAtMs ?? 0},
                  parked_at = ${r.retryAtMs === null ? atMs : null}
                WHERE message_id = ${r.messageId} AND published_at IS NULL`, { discard: true }).pipe(
              persistence("outbox.reject")
            ),
        parked: (limit) => parked(limit).pipe(Effect.map((rows) => rows.map(toMessage)), persistence("outbox.parked")),
        // Counts the rows it released (RETURNING one row each).
        release: (messageIds) =>
          messageIds !== "all" && messageIds.length === 0 ? Effect.succeed(0) : sql`
            UPDATE outbox SET parked_at = NULL, rejections = 0, next_attempt_at = 0
            WHERE parked_at IS NOT NULL AND published_at IS NULL ${
            messageIds === "all" ? sql.literal("") : sql`AND ${sql.in("message_id", messageIds)}`
          }
            RETURNING 1`.pipe(Effect.map((rows) => rows.length), persistence("outbox.release")),
        markPublished: (messageIds, atMs) =>
          messageIds.length === 0
            ? Effect.void
            : sql`UPDATE outbox SET published_at = ${atMs}
                  WHERE published_at IS NULL AND ${sql.in("message_id", messageIds)}`.pipe(
              Effect.asVoid,
              persistence("outbox.markPublished")
            ),
        publishedAt: (messageId) =>
          publishedAt(messageId).pipe(
            Effect.map(Option.map((row) => row.published_at)),
            persistence("outbox.publishedAt")
          ),
        stats: (nowMs) =>
          stats(nowMs).pipe(
            Effect.map((row) => ({
              pending: row.pending,
              published: row.published,
              parked: row.parked,
              oldestPendingAgeMs: row.oldest === null ? null : Math.max(0, nowMs - row.oldest),
              publishedLastMinute: row.last_minute
            })),
            persistence("outbox.stats")
          ),
        publishedPage: (afterSequence, publishedBeforeMs, limit) =>
          publishedPage({ afterSequence, beforeMs: publishedBeforeMs, limit }).pipe(
            persistence("outbox.publishedPage")
          ),
        find: (messageIds) =>
          messageIds.length === 0
            ? Effect.succeed([])
            : find(messageIds).pipe(Effect.map((rows) => rows.map(toMessage)), persistence("outbox.find")),
        acquireLease: (owner, ttlMs, nowMs) =>
          Effect.zipRight(
            sql`
              INSERT INTO relay_lease (name, owner, expires_at) VALUES (${LeaseName}, ${owner}, ${nowMs + ttlMs})
              ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
              WHERE relay_lease.owner = excluded.owner OR relay_lease.expires_at <= ${nowMs}`,
            lease(undefined)
          ).pipe(persistence("outbox.acquireLease")),
        releaseLease: (owner) =>
          sql`DELETE FROM relay_lease WHERE name = ${LeaseName} AND owner = ${owner}`.pipe(
            Effect.asVoid,
            persistence("outbox.releaseLease")
          )
      }
    })
  )
