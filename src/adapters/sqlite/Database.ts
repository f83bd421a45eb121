import * as Migrator from "@effect/sql/Migrator"
import { SqlClient } from "@effect/sql"
import { SqlError } from "@effect/sql/SqlError"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Effect, Layer } from "effect"
import { mkdirSync } from "node:fs"
import { dirname, join } from "node:path"
import { PersistenceError } from "../../domain/errors.js"
import { Transaction } from "../../ports/Transaction.js"

/** The three service databases: one SQLite file each, never shared between services. */
export type ServiceDatabase = "api" | "catalog" | "audit"

/** Maps any failure of a store operation to the port's `PersistenceError`, naming the operation. */
export const persistence = (operation: string) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.mapError(effect, (cause) => new PersistenceError({ operation, cause }))

const inboxTable = Effect.flatMap(SqlClient.SqlClient, (sql) => sql`
  CREATE TABLE inbox (
    handler     TEXT    NOT NULL,
    message_id  TEXT    NOT NULL,
    outcome     TEXT    NOT NULL CHECK (outcome IN ('applied', 'stale')),
    received_at INTEGER NOT NULL,
    duplicates  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (handler, message_id)
  )`)

// Every database has this one-row-less table: see `TransactionSqlite` for why.
const writeLockTable = Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE TABLE write_lock (n INTEGER)`)

const migrations: Record<ServiceDatabase, Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>>> = {
  api: {
    "1_init": Effect.flatMap(SqlClient.SqlClient, (sql) =>
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
      ], { discard: true })
    )
  },
  catalog: {
    "1_init": Effect.flatMap(SqlClient.SqlClient, (sql) =>
      Effect.all([
        sql`CREATE TABLE catalog_entries (
          material_id  TEXT    PRIMARY KEY,
          revision     INTEGER NOT NULL,
          title        TEXT    NOT NULL,
          summary      TEXT    NOT NULL,
          published_at INTEGER NOT NULL,
          event_id     TEXT    NOT NULL
        )`,
        inboxTable,
        writeLockTable
      ], { discard: true })
    )
  },
  audit: {
    "1_init": Effect.flatMap(SqlClient.SqlClient, (sql) =>
      Effect.all([
        sql`CREATE TABLE audit_records (
          event_id       TEXT    NOT NULL UNIQUE,
          material_id    TEXT    NOT NULL,
          revision       INTEGER NOT NULL,
          title          TEXT    NOT NULL,
          published_at   INTEGER NOT NULL,
          correlation_id TEXT    NOT NULL,
          received_at    INTEGER NOT NULL
        )`,
        inboxTable,
        writeLockTable
      ], { discard: true })
    )
  }
}

const runMigrations = Migrator.make({})

/** The file of a service's database under `dataDir`, e.g. `./var/catalog.db`. */
export const databaseFile = (dataDir: string, service: ServiceDatabase): string => join(dataDir, `${service}.db`)

/**
 * Opens (creating it if needed) the SQLite file of one service in WAL mode and brings
 * its schema up to date with `@effect/sql`'s Migrator (table `effect_sql_migrations`).
 * Provides `SqlClient` and `SqliteClient`; fails with `SqlError` or `MigrationError`.
 */
export const databaseLayer = (filename: string, service: ServiceDatabase) => {
  const client = Layer.unwrapEffect(Effect.sync(() => {
    mkdirSync(dirname(filename), { recursive: true })
    return SqliteClient.layer({ filename })
  }))
  const migrate = Layer.effectDiscard(runMigrations({ loader: Migrator.fromRecord(migrations[service]) }))
  return Layer.provideMerge(migrate, client)
}

/**
 * A read-only connection to a service's database, for observers (the main job's report,
 * an operator view): it never takes the write lock, so in the process that also runs the
 * service it cannot make the service's writer wait, and it runs no migrations. The file
 * must exist. Provides `SqlClient`; a write through it fails with `SqlError`.
 */
export const readerLayer = (filename: string) => SqliteClient.layer({ filename, readonly: true, disableWAL: true })

/**
 * The `Transaction` port over one SQLite database (`sql.withTransaction`).
 *
 * SQLite's deferred `BEGIN` takes a read snapshot first; if another process (a relay
 * beside the API) commits before our first write, that write fails at once with
 * SQLITE_BUSY_SNAPSHOT and no busy timeout applies. So every transaction starts with a
 * write that changes nothing, which takes the write lock up front and makes a concurrent
 * writer wait (better-sqlite3's 5 s busy timeout) instead.
 */
export const TransactionSqlite = Layer.effect(
  Transaction,
  Effect.map(SqlClient.SqlClient, (sql) => ({
    run: (effect) =>
      sql.withTransaction(Effect.zipRight(sql`UPDATE write_lock SET n = n WHERE 0`, effect)).pipe(
        Effect.catchIf(
          (error): error is SqlError => error instanceof SqlError,
          (cause) => Effect.fail(new PersistenceError({ operation: "transaction", cause }))
        )
      )
  }))
)
