/** The audit receiver's own table: one record per event, whatever its revision. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { Migration } from "../Migration.js"

const migration: Migration = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql`CREATE TABLE audit_records (
    event_id       TEXT    NOT NULL UNIQUE,
    material_id    TEXT    NOT NULL,
    revision       INTEGER NOT NULL,
    title          TEXT    NOT NULL,
    published_at   INTEGER NOT NULL,
    correlation_id TEXT    NOT NULL,
    received_at    INTEGER NOT NULL
  )`)

export default migration
