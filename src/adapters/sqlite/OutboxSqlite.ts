import { SqlClient } from "@effect/sql"
import { Effect, Layer, Option } from "effect"
import { Outbox, type OutboxMessage } from "../../ports/Outbox.js"
import { persistence } from "./Database.js"

interface OutboxRow {
  readonly sequence: number
  readonly message_id: string
  readonly correlation_id: string
  readonly type: string
  readonly schema_version: number
  readonly content_type: string
  readonly timestamp_ms: number
  readonly app_id: string
  readonly body: string
  readonly created_at: number
  readonly published_at: number | null
}

const toMessage = (row: OutboxRow): OutboxMessage => ({
  sequence: row.sequence,
  envelope: {
    messageId: row.message_id,
    correlationId: row.correlation_id,
    type: row.type,
    schemaVersion: row.schema_version,
    contentType: row.content_type,
    timestampMs: row.timestamp_ms,
    appId: row.app_id,
    body: row.body
  },
  createdAtMs: row.created_at,
  publishedAtMs: row.published_at
})

/** The relay lease is one row of `relay_lease`, named after the outbox it guards. */
const LeaseName = "outbox"

/** The `Outbox` port over the API owner's SQLite database (tables `outbox`, `relay_lease`). */
export const OutboxSqlite = Layer.effect(
  Outbox,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return {
      enqueue: (envelope, createdAtMs) =>
        sql`INSERT INTO outbox ${
          sql.insert({
            message_id: envelope.messageId,
            correlation_id: envelope.correlationId,
            type: envelope.type,
            schema_version: envelope.schemaVersion,
            content_type: envelope.contentType,
            timestamp_ms: envelope.timestampMs,
            app_id: envelope.appId,
            body: envelope.body,
            created_at: createdAtMs
          })
        }`.pipe(Effect.asVoid, persistence("outbox.enqueue")),
      pending: (limit) =>
        sql<OutboxRow>`SELECT * FROM outbox WHERE published_at IS NULL ORDER BY sequence LIMIT ${limit}`.pipe(
          Effect.map((rows) => rows.map(toMessage)),
          persistence("outbox.pending")
        ),
      markPublished: (messageIds, atMs) =>
        messageIds.length === 0
          ? Effect.void
          : sql`UPDATE outbox SET published_at = ${atMs}
                WHERE published_at IS NULL AND ${sql.in("message_id", messageIds)}`.pipe(
            Effect.asVoid,
            persistence("outbox.markPublished")
          ),
      publishedAt: (messageId) =>
        sql<{ published_at: number | null }>`SELECT published_at FROM outbox WHERE message_id = ${messageId}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row) => row.published_at)),
          persistence("outbox.publishedAt")
        ),
      stats: (nowMs) =>
        sql<{ pending: number; published: number; oldest: number | null }>`
          SELECT
            COUNT(*) FILTER (WHERE published_at IS NULL)     AS pending,
            COUNT(*) FILTER (WHERE published_at IS NOT NULL) AS published,
            MIN(created_at) FILTER (WHERE published_at IS NULL) AS oldest
          FROM outbox`.pipe(
          Effect.map(([row]) => ({
            pending: row?.pending ?? 0,
            published: row?.published ?? 0,
            oldestPendingAgeMs: row?.oldest == null ? null : Math.max(0, nowMs - row.oldest)
          })),
          persistence("outbox.stats")
        ),
      acquireLease: (owner, ttlMs, nowMs) =>
        sql<{ owner: string }>`
          INSERT INTO relay_lease (name, owner, expires_at) VALUES (${LeaseName}, ${owner}, ${nowMs + ttlMs})
          ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
          WHERE relay_lease.owner = excluded.owner OR relay_lease.expires_at <= ${nowMs}
          RETURNING owner`.pipe(
          Effect.map((rows) => rows.length === 1),
          persistence("outbox.acquireLease")
        ),
      releaseLease: (owner) =>
        sql`DELETE FROM relay_lease WHERE name = ${LeaseName} AND owner = ${owner}`.pipe(
          Effect.asVoid,
          persistence("outbox.releaseLease")
        )
    }
  })
)
