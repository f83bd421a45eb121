/** The tables the kit keeps in every database (`write_lock`) and in every receiver's (the inbox and its failures). */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { Migration } from "./Migration.js"

/** At most one receipt per `(handler, message_id)`: see `Inbox`. */
export const inboxTable: Migration = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql`
  CREATE TABLE inbox (
    handler     TEXT    NOT NULL,
    message_id  TEXT    NOT NULL,
    outcome     TEXT    NOT NULL CHECK (outcome IN ('applied', 'stale')),
    received_at INTEGER NOT NULL,
    duplicates  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (handler, message_id)
  )`)

/** The last failure the receiver routed for a message: see `Inbox.noteFailures`. */
export const deliveryFailuresTable: Migration = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql`
  CREATE TABLE delivery_failures (
    handler         TEXT    NOT NULL,
    message_id      TEXT    NOT NULL,
    state           TEXT    NOT NULL CHECK (state IN ('retrying', 'dead')),
    attempts        INTEGER NOT NULL,
    last_failure_at INTEGER NOT NULL,
    PRIMARY KEY (handler, message_id)
  )`)

/** A table with no rows whose no-op update takes the write lock first: see `TransactionSqlite` for why. */
export const writeLockTable: Migration = Effect.flatMap(
  SqlClient.SqlClient,
  (sql) => sql`CREATE TABLE write_lock (n INTEGER)`
)
