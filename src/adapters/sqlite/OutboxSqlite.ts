import { Effect, Layer, Option } from "effect"
import { Outbox, type OutboxMessage } from "../../ports/Outbox.js"
import { type DatabaseTag, persistence } from "./Database.js"

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
  readonly rejections: number
  readonly last_error: string | null
  readonly parked_at: number | null
  readonly traceparent: string | null
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
    body: row.body,
    ...(row.traceparent === null ? {} : { traceparent: row.traceparent })
  },
  createdAtMs: row.created_at,
  publishedAtMs: row.published_at,
  rejections: row.rejections,
  lastError: row.last_error,
  parkedAtMs: row.parked_at
})

/** The relay lease is one row of `relay_lease`, named after the outbox it guards. */
const LeaseName = "outbox"

/** The `Outbox` port over a connection to the API owner's database (`ApiDb`, `ApiDbReader`; tables `outbox`, `relay_lease`). */
export const OutboxSqlite = <Self>(database: DatabaseTag<Self, "api">) =>
  Layer.effect(
    Outbox,
    Effect.gen(function*() {
      const { sql } = yield* database
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
              created_at: createdAtMs,
              traceparent: envelope.traceparent ?? null
            })
          }`.pipe(Effect.asVoid, persistence("outbox.enqueue")),
        pending: (limit, nowMs) =>
          sql<OutboxRow>`SELECT * FROM outbox
          WHERE published_at IS NULL AND parked_at IS NULL AND next_attempt_at <= ${nowMs}
          ORDER BY sequence LIMIT ${limit}`.pipe(
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
        parked: (limit) =>
          sql<
            OutboxRow
          >`SELECT * FROM outbox WHERE parked_at IS NOT NULL AND published_at IS NULL ORDER BY sequence LIMIT ${limit}`
            .pipe(
              Effect.map((rows) => rows.map(toMessage)),
              persistence("outbox.parked")
            ),
        release: (messageIds) =>
          (messageIds === "all"
            ? sql<{ n: number }>`UPDATE outbox SET parked_at = NULL, rejections = 0, next_attempt_at = 0
              WHERE parked_at IS NOT NULL AND published_at IS NULL RETURNING 1 AS n`
            : messageIds.length === 0
            ? Effect.succeed<ReadonlyArray<{ n: number }>>([])
            : sql<{ n: number }>`UPDATE outbox SET parked_at = NULL, rejections = 0, next_attempt_at = 0
              WHERE parked_at IS NOT NULL AND published_at IS NULL AND ${
              sql.in("message_id", messageIds)
            } RETURNING 1 AS n`).pipe(
              Effect.map((rows) => rows.length),
              persistence("outbox.release")
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
          sql<{ pending: number; published: number; parked: number; oldest: number | null; last_minute: number }>`
          SELECT
            COUNT(*) FILTER (WHERE published_at IS NULL AND parked_at IS NULL)     AS pending,
            COUNT(*) FILTER (WHERE published_at IS NOT NULL)                       AS published,
            COUNT(*) FILTER (WHERE published_at >= ${nowMs - 60_000})              AS last_minute,
            COUNT(*) FILTER (WHERE published_at IS NULL AND parked_at IS NOT NULL) AS parked,
            MIN(created_at) FILTER (WHERE published_at IS NULL AND parked_at IS NULL) AS oldest
          FROM outbox`.pipe(
            Effect.map(([row]) => ({
              pending: row?.pending ?? 0,
              published: row?.published ?? 0,
              parked: row?.parked ?? 0,
              oldestPendingAgeMs: row?.oldest == null ? null : Math.max(0, nowMs - row.oldest),
              publishedLastMinute: row?.last_minute ?? 0
            })),
            persistence("outbox.stats")
          ),
        publishedPage: (afterSequence, publishedBeforeMs, limit) =>
          sql<{ sequence: number; message_id: string; published_at: number }>`
          SELECT sequence, message_id, published_at FROM outbox
          WHERE sequence > ${afterSequence} AND published_at IS NOT NULL AND published_at < ${publishedBeforeMs}
          ORDER BY sequence LIMIT ${limit}`.pipe(
            Effect.map((rows) =>
              rows.map((r) => ({ sequence: r.sequence, messageId: r.message_id, publishedAtMs: r.published_at }))
            ),
            persistence("outbox.publishedPage")
          ),
        find: (messageIds) =>
          messageIds.length === 0 ? Effect.succeed([]) : sql<OutboxRow>`
          SELECT * FROM outbox WHERE message_id IN (SELECT value FROM json_each(${JSON.stringify(messageIds)}))
          ORDER BY sequence`.pipe(
            Effect.map((rows) => rows.map(toMessage)),
            persistence("outbox.find")
          ),
        acquireLease: (owner, ttlMs, nowMs) =>
          Effect.zipRight(
            sql`
            INSERT INTO relay_lease (name, owner, expires_at) VALUES (${LeaseName}, ${owner}, ${nowMs + ttlMs})
            ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
            WHERE relay_lease.owner = excluded.owner OR relay_lease.expires_at <= ${nowMs}`,
            sql<
              { owner: string; expires_at: number }
            >`SELECT owner, expires_at FROM relay_lease WHERE name = ${LeaseName}`
          ).pipe(
            Effect.map(([row]) => ({ owner: row!.owner, expiresAtMs: row!.expires_at })),
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
