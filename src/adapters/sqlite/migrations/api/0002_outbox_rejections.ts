/**
 * A rejected outbox row waits for its own next attempt, so it never holds back the rows
 * behind it, and is parked after too many rejections.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { Migration } from "../Migration.js"

const migration: Migration = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.all([
    sql`ALTER TABLE outbox ADD COLUMN rejections INTEGER NOT NULL DEFAULT 0`,
    sql`ALTER TABLE outbox ADD COLUMN next_attempt_at INTEGER NOT NULL DEFAULT 0`,
    sql`ALTER TABLE outbox ADD COLUMN last_error TEXT`,
    sql`ALTER TABLE outbox ADD COLUMN parked_at INTEGER`,
    sql`DROP INDEX outbox_pending`,
    sql`CREATE INDEX outbox_pending ON outbox (sequence) WHERE published_at IS NULL AND parked_at IS NULL`,
    sql`CREATE INDEX outbox_parked ON outbox (sequence) WHERE parked_at IS NOT NULL`
  ], { discard: true }))

export default migration
