/** The API's first schema: materials, publication requests, the outbox and the relay's lease. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { writeLockTable } from "../kitTables.js"
import type { Migration } from "../Migration.js"

const migration: Migration = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.all([
    sql`CREATE TABLE materials (
      material_id  TEXT    NOT NULL,
      revision     INTEGER NOT NULL,
      title        TEXT    NOT NULL,
      summary      TEXT    NOT NULL,
      body         TEXT    NOT NULL,
      event_id     TEXT    NOT NULL UNIQUE,
      published_at INTEGER NOT NULL,
      PRIMARY KEY (material_id, revision)
    )`,
    sql`CREATE TABLE publication_requests (
      idempotency_key TEXT    PRIMARY KEY,
      request_hash    TEXT    NOT NULL,
      request_id      TEXT    NOT NULL UNIQUE,
      event_id        TEXT    NOT NULL UNIQUE,
      material_id     TEXT    NOT NULL,
      revision        INTEGER NOT NULL,
      accepted_at     INTEGER NOT NULL
    )`,
    sql`CREATE TABLE outbox (
      sequence       INTEGER PRIMARY KEY AUTOINCREMENT,
      message_id     TEXT    NOT NULL UNIQUE,
      correlation_id TEXT    NOT NULL,
      type           TEXT    NOT NULL,
      schema_version INTEGER NOT NULL,
      content_type   TEXT    NOT NULL,
      timestamp_ms   INTEGER NOT NULL,
      app_id         TEXT    NOT NULL,
      body           TEXT    NOT NULL,
      created_at     INTEGER NOT NULL,
      published_at   INTEGER
    )`,
    sql`CREATE INDEX outbox_pending ON outbox (sequence) WHERE published_at IS NULL`,
    sql`CREATE TABLE relay_lease (
      name       TEXT    PRIMARY KEY,
      owner      TEXT    NOT NULL,
      expires_at INTEGER NOT NULL
    )`,
    writeLockTable
  ], { discard: true }))

export default migration
