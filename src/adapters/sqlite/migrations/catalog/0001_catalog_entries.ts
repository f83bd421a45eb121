/** The catalog's own table: the newest revision of each material. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { Migration } from "../Migration.js"

const migration: Migration = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql`CREATE TABLE catalog_entries (
    material_id  TEXT    PRIMARY KEY,
    revision     INTEGER NOT NULL,
    title        TEXT    NOT NULL,
    summary      TEXT    NOT NULL,
    published_at INTEGER NOT NULL,
    event_id     TEXT    NOT NULL
  )`)

export default migration
