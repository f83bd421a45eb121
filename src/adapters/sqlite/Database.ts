/**
 * Opening a service database: the file in WAL mode with `synchronous = FULL`, its schema
 * migrated, its readiness check registered; and the read-only connection beside it.
 */
import { SqlClient, SqlSchema } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import * as Migrator from "@effect/sql/Migrator"
import { SqlError } from "@effect/sql/SqlError"
import Sqlite from "better-sqlite3"
import { Data, type Duration, Effect, Layer, Schedule, Schema } from "effect"
import { mkdirSync } from "node:fs"
import { dirname, join } from "node:path"
import { describeCause } from "../../domain/errors.js"
import { registerCheck } from "../../ports/Readiness.js"
import type { DatabaseTag, ServiceDatabase } from "./DatabaseTags.js"
import { migrations, migrationsOf } from "./migrations/Migrations.js"
import { isBusy, rowDefect } from "./SqliteFailures.js"
import { openedFile } from "./SqliteFile.js"
import { CountRow } from "./TableRow.js"

const runMigrations = Migrator.make({})

/** The file of a service's database under `dataDir`, e.g. `./var/catalog.db`. */
export const databaseFile = (dataDir: string, service: ServiceDatabase): string => join(dataDir, `${service}.db`)

/**
 * How long better-sqlite3 itself waits for a lock, in ms: not at all. Its wait is
 * synchronous and holds the event loop (with many requests waiting, for good), so every
 * wait is `busyRetry`'s instead, between attempts, with the event loop free.
 */
export const NativeBusyTimeoutMs = 0

/**
 * Retries an operation that found the database locked by another connection: from 5 ms,
 * doubling, jittered, at most 100 ms apart, for `budget` in all. Used by transactions
 * and by opening and migrating a database; past the budget the caller sees the failure
 * (the API answers 503).
 */
export const busyRetry = (budget: Duration.DurationInput) =>
  Schedule.exponential("5 millis", 2).pipe(
    Schedule.union(Schedule.spaced("100 millis")),
    Schedule.jittered,
    Schedule.upTo(budget)
  )

/** The schema is behind: another process is migrating it right now (Migrator gives way instead of waiting). */
class MigrationsPending extends Data.TaggedError("MigrationsPending")<{ readonly code: "SQLITE_BUSY" }> {}

/**
 * Creates the file if needed and puts it in WAL mode with a connection that never waits
 * for a lock itself, so that a lock held by another process (a second role starting on
 * the same new data dir) is waited out by `busyRetry`, interruptibly, instead of by
 * SQLite's synchronous wait inside the client's own first statement.
 */
const prepareFile = (filename: string, busyBudget: Duration.DurationInput) =>
  Effect.try({
    try: () => {
      mkdirSync(dirname(filename), { recursive: true })
      const db = new Sqlite(filename, { timeout: NativeBusyTimeoutMs })
      try {
        db.pragma("journal_mode = WAL")
      } finally {
        db.close()
      }
    },
    catch: (cause) => new SqlError({ cause, message: `opening ${filename}` })
  }).pipe(Effect.retry({ schedule: busyRetry(busyBudget), while: isBusy }))

/**
 * Opens (creating it if needed) the SQLite file of one service in WAL mode with
 * `synchronous = FULL`, and brings its schema up to date with `@effect/sql`'s Migrator
 * (table `effect_sql_migrations`).
 *
 * `synchronous = FULL` makes every commit fsync the WAL before it returns, so a commit
 * that an ack or a 202 follows survives a power loss or an OS crash, not only a crash of
 * the process (SQLite, "PRAGMA synchronous": in WAL mode NORMAL may roll back the last
 * transactions after a power loss). SQLite's own busy timeout is `NativeBusyTimeoutMs`
 * (0): a lock held by another process opening or migrating the same file at the same
 * time is waited out by `busyRetry(busyBudget)`. Provides the connection as `database`
 * (a writer's tag: `ApiDb`, `CatalogDb` or `AuditDb`), and registers the readiness check
 * `database:<service>` (the file is still the one opened, and answers `SELECT 1`); fails
 * with `SqlError` or `MigrationError` when the file cannot be opened or migrated for
 * another reason, or the lock outlasts the budget.
 */
export const databaseLayer = <Self, S extends ServiceDatabase>(
  database: DatabaseTag<Self, S>,
  service: NoInfer<S>,
  filename: string,
  busyBudget: Duration.DurationInput = "5 seconds"
) => {
  const client = Layer.unwrapEffect(Effect.as(prepareFile(filename, busyBudget), SqliteClient.layer({ filename })))
  const expected = migrationsOf(service).length
  const migrate = Layer.effectDiscard(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`PRAGMA busy_timeout = ${sql.literal(String(NativeBusyTimeoutMs))}`
      yield* sql`PRAGMA synchronous = FULL`
      yield* runMigrations({ loader: Migrator.fromRecord(migrations[service]) })
      const applied = yield* SqlSchema.single({
        Request: Schema.Void,
        Result: CountRow,
        execute: () => sql`SELECT COUNT(*) AS n FROM effect_sql_migrations`
      })(undefined).pipe(Effect.map((row) => row.n), rowDefect)
      if (applied < expected) return yield* new MigrationsPending({ code: "SQLITE_BUSY" })
    }).pipe(
      Effect.tapError((error) =>
        isBusy(error) ? Effect.logDebug(`${service}.db is locked by another process; waiting`) : Effect.void
      ),
      Effect.retry({ schedule: busyRetry(busyBudget), while: isBusy })
    )
  )
  const opened = Layer.retry(client, busyRetry(busyBudget).pipe(Schedule.whileInput(isBusy)))
  // The file's identity is taken once it is open and migrated, so its -wal and -shm exist.
  const connection = Layer.effect(
    database,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const file = yield* openedFile(filename)
      yield* registerCheck(
        `database:${service}`,
        Effect.zipRight(file.verify, sql`SELECT 1`).pipe(
          Effect.mapError((error) => `${filename}: ${describeCause(error)}`)
        )
      )
      return { service, sql, file }
    })
  )
  return Layer.provide(connection, Layer.provideMerge(migrate, opened))
}

/**
 * A read-only connection to a service's database, for observers (the API's GETs, the
 * main job's report, an operator view): it never takes the write lock, so a writer that
 * holds it, in this process or another, never holds up a read. It runs no migrations;
 * the file must exist. Provides the connection as `database` (a reader's tag: `ApiDbReader`,
 * `CatalogDbReader` or `AuditDbReader`); a write through it fails with `SqlError`.
 */
export const readerLayer = <Self, S extends ServiceDatabase>(
  database: DatabaseTag<Self, S>,
  service: NoInfer<S>,
  filename: string
) =>
  Layer.effect(
    database,
    Effect.map(SqlClient.SqlClient, (sql) => ({ service, sql, file: { filename, verify: Effect.void } }))
  ).pipe(Layer.provide(SqliteClient.layer({ filename, readonly: true, disableWAL: true })))
