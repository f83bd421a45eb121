import { SqlClient, SqlSchema } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import * as Migrator from "@effect/sql/Migrator"
import { SqlError } from "@effect/sql/SqlError"
import Sqlite from "better-sqlite3"
import { Cause, Context, Data, type Duration, Effect, Layer, Option, ParseResult, Schedule, Schema } from "effect"
import { mkdirSync, statSync } from "node:fs"
import { dirname, join } from "node:path"
import { describeCause, PersistenceError } from "../../domain/errors.js"
import { registerCheck } from "../../ports/Readiness.js"
import { Supervisor } from "../../ports/Supervisor.js"
import { Transaction } from "../../ports/Transaction.js"
import { CountRow } from "./TableRow.js"

/** The three service databases: one SQLite file each, never shared between services. */
export type ServiceDatabase = "api" | "catalog" | "audit"

/**
 * One connection to one service's database, as the adapters over it see it: the SQL
 * client, and the file it opened (a read-only connection's `file.verify` always succeeds,
 * as it commits nothing). `service` names the database in the type, so that an
 * adapter that needs the API owner's tables (`OutboxSqlite`) cannot be built over a
 * receiver's database: that mistake does not compile.
 */
export interface DatabaseConnection<S extends ServiceDatabase> {
  readonly service: S
  readonly sql: SqlClient.SqlClient
  readonly file: SqliteFile
}

/**
 * Every connection a process may open has a tag of its own: the writing connection of
 * each service database (`ApiDb`, `CatalogDb`, `AuditDb`) and the read-only one beside
 * it (`ApiDbReader`, ...). An adapter is built over a tag (`InboxSqlite(CatalogDb)`), so
 * two adapters over two databases are two Layers with two requirements: Layer memoisation
 * can never hand one database's adapter to a user of another.
 */
export class ApiDb extends Context.Tag("dostavka/ApiDb")<ApiDb, DatabaseConnection<"api">>() {}
/** The read-only connection to `api.db` (see `ApiDb`). */
export class ApiDbReader extends Context.Tag("dostavka/ApiDbReader")<ApiDbReader, DatabaseConnection<"api">>() {}
/** The writing connection to `catalog.db` (see `ApiDb`). */
export class CatalogDb extends Context.Tag("dostavka/CatalogDb")<CatalogDb, DatabaseConnection<"catalog">>() {}
/** The read-only connection to `catalog.db` (see `ApiDb`). */
export class CatalogDbReader
  extends Context.Tag("dostavka/CatalogDbReader")<CatalogDbReader, DatabaseConnection<"catalog">>()
{}
/** The writing connection to `audit.db` (see `ApiDb`). */
export class AuditDb extends Context.Tag("dostavka/AuditDb")<AuditDb, DatabaseConnection<"audit">>() {}
/** The read-only connection to `audit.db` (see `ApiDb`). */
export class AuditDbReader
  extends Context.Tag("dostavka/AuditDbReader")<AuditDbReader, DatabaseConnection<"audit">>()
{}

/** A tag of a connection to the database of `S`, e.g. `DatabaseTag<Self, "catalog" | "audit">` for an inbox. */
export type DatabaseTag<Self, S extends ServiceDatabase> = Context.Tag<Self, DatabaseConnection<S>>

/** The SQLite result code of `cause` or of an error it wraps, e.g. `SQLITE_BUSY`; `undefined` if none. */
export const sqliteCode = (cause: unknown): string | undefined => {
  let current: unknown = cause
  for (let depth = 0; depth < 5 && typeof current === "object" && current !== null; depth++) {
    const code = (current as { code?: unknown }).code
    if (typeof code === "string" && code.startsWith("SQLITE_")) return code
    current = (current as { cause?: unknown }).cause
  }
  return undefined
}

/**
 * True when another connection holds a lock SQLite needed (SQLITE_BUSY and its extended
 * codes, SQLITE_LOCKED): trying again after that connection commits can pass.
 */
export const isBusy = (cause: unknown): boolean => {
  const code = sqliteCode(cause)
  return code !== undefined && (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED"))
}

/** The port's classification of a failed store operation (see `PersistenceError`). */
export const persistenceKind = (cause: unknown): PersistenceError["kind"] =>
  cause instanceof DatabaseFileLost
    ? "lost"
    : sqliteCode(cause)?.startsWith("SQLITE_CONSTRAINT")
    ? "constraint"
    : "unavailable"

/**
 * A stored row that does not decode into its port's record (or a record that does not
 * encode into a row), or a query that always answers one row answering none, is a defect
 * (`Effect.die`), not a `PersistenceError`: the database holds what this code never
 * writes, and trying again cannot help. It is logged at error level with the parse error,
 * which names the column; callers see a defect of the operation (the receiver, of that
 * message's handling; the API, a 500). The records' rules are those of every version that
 * wrote them (see `MaterialId` against `AddressableMaterialId`), so old rows still read.
 */
export const rowDefect = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.catchIf(
    effect,
    (error): error is Extract<E, ParseResult.ParseError | Cause.NoSuchElementException> =>
      ParseResult.isParseError(error) || Cause.isNoSuchElementException(error),
    (error) =>
      Effect.zipRight(
        Effect.logError(`a stored row does not match its record: ${describeCause(error).slice(0, 1000)}`),
        Effect.die(error)
      )
  )

/**
 * Maps any failure of a store operation to the port's `PersistenceError`, naming the
 * operation; a row that does not decode is a defect instead (`rowDefect`).
 */
export const persistence = (operation: string) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.mapError(
    rowDefect(effect),
    (cause) =>
      cause instanceof PersistenceError
        ? cause
        : new PersistenceError({ operation, kind: persistenceKind(cause), cause })
  )

const inboxTable = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql`
  CREATE TABLE inbox (
    handler     TEXT    NOT NULL,
    message_id  TEXT    NOT NULL,
    outcome     TEXT    NOT NULL CHECK (outcome IN ('applied', 'stale')),
    received_at INTEGER NOT NULL,
    duplicates  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (handler, message_id)
  )`)

// The last failure the receiver routed for a message: see `Inbox.noteFailures`.
const deliveryFailuresTable = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql`
  CREATE TABLE delivery_failures (
    handler         TEXT    NOT NULL,
    message_id      TEXT    NOT NULL,
    state           TEXT    NOT NULL CHECK (state IN ('retrying', 'dead')),
    attempts        INTEGER NOT NULL,
    last_failure_at INTEGER NOT NULL,
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
      ], { discard: true })),
    // A rejected row waits for its own next attempt, so it never holds back the rows
    // behind it, and is parked after too many rejections.
    "2_outbox_rejections": Effect.flatMap(SqlClient.SqlClient, (sql) =>
      Effect.all([
        sql`ALTER TABLE outbox ADD COLUMN rejections INTEGER NOT NULL DEFAULT 0`,
        sql`ALTER TABLE outbox ADD COLUMN next_attempt_at INTEGER NOT NULL DEFAULT 0`,
        sql`ALTER TABLE outbox ADD COLUMN last_error TEXT`,
        sql`ALTER TABLE outbox ADD COLUMN parked_at INTEGER`,
        sql`DROP INDEX outbox_pending`,
        sql`CREATE INDEX outbox_pending ON outbox (sequence) WHERE published_at IS NULL AND parked_at IS NULL`,
        sql`CREATE INDEX outbox_parked ON outbox (sequence) WHERE parked_at IS NOT NULL`
      ], { discard: true })),
    // The W3C trace context of the request that wrote the row, when the API traces.
    "3_outbox_traceparent": Effect.flatMap(
      SqlClient.SqlClient,
      (sql) => sql`ALTER TABLE outbox ADD COLUMN traceparent TEXT`
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
      ], { discard: true })),
    "2_delivery_failures": deliveryFailuresTable
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
      ], { discard: true })),
    "2_delivery_failures": deliveryFailuresTable
  }
}

const runMigrations = Migrator.make({})

/** The migrations of one service's database, oldest first, as `<id>_<name>` (the Migrator's record keys). */
export const migrationsOf = (service: ServiceDatabase): ReadonlyArray<string> => Object.keys(migrations[service])

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

/** The database file this process opened is gone from its path, or another file took its place. */
export class DatabaseFileLost
  extends Data.TaggedError("DatabaseFileLost")<{ readonly filename: string; readonly detail: string }>
{
  override get message() {
    return `${this.detail}; writes would go to a file nobody will read again`
  }
}

/**
 * The identity (device and inode) of the files a connection opened, and a check that
 * their paths still name them: the database, its write-ahead log (`-wal`) and its
 * shared-memory index (`-shm`), which SQLite keeps while any connection is open. A file
 * removed or replaced under a running process (`rm`, a restore copied over it) keeps
 * receiving that process's writes unseen, and a log removed takes every transaction not
 * yet checkpointed with it at the next start; the check, made before each commit, turns
 * either into `DatabaseFileLost`.
 */
export interface SqliteFile {
  readonly filename: string
  readonly verify: Effect.Effect<void, DatabaseFileLost>
}

const identityOf = (path: string): string | undefined => {
  try {
    const stat = statSync(path)
    return `${stat.dev}:${stat.ino}`
  } catch {
    return undefined
  }
}

const openedFile = (filename: string): Effect.Effect<SqliteFile> =>
  Effect.sync(() => {
    const paths = [filename, `${filename}-wal`, `${filename}-shm`]
    const opened = paths.map(identityOf)
    return {
      filename,
      verify: Effect.suspend(() => {
        for (const [i, path] of paths.entries()) {
          if (opened[i] === undefined) continue
          const now = identityOf(path)
          if (now === undefined) return Effect.fail(new DatabaseFileLost({ filename, detail: `${path} was removed` }))
          if (now !== opened[i]) {
            return Effect.fail(new DatabaseFileLost({ filename, detail: `${path} was replaced by another file` }))
          }
        }
        return Effect.void
      })
    }
  })

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

/**
 * The `Transaction` port over one SQLite database (`sql.withTransaction` on `database`'s
 * connection).
 *
 * SQLite's deferred `BEGIN` takes a read snapshot first; if another process (a relay
 * beside the API) commits before our first write, that write fails at once with
 * SQLITE_BUSY_SNAPSHOT and no busy timeout applies. So every transaction starts with a
 * write that changes nothing, which takes the write lock up front. When another
 * connection holds that lock, the whole transaction is tried again by
 * `busyRetry(settings.storeBusyTimeout)` without blocking the event loop, and fails with
 * `PersistenceError` (`unavailable`) past it, or at once when the process is stopping
 * (`Supervisor.beginStop`). Before committing, it checks that the file
 * is still the one it opened (`DatabaseConnection.file`), else fails with
 * `PersistenceError` (`lost`) and commits nothing. A nested `run` is a savepoint: when it fails, only its own writes
 * are undone.
 */
export const TransactionSqlite = <Self, S extends ServiceDatabase>(
  database: DatabaseTag<Self, S>,
  busyBudget: Duration.DurationInput
) =>
  Layer.effect(
    Transaction,
    Effect.gen(function*() {
      const { file, sql } = yield* database
      const supervisor = yield* Effect.serviceOption(Supervisor)
      // Once the process is stopping, a transaction stops waiting for the lock: its caller answers now.
      const schedule = busyRetry(busyBudget).pipe(
        Schedule.checkEffect(() =>
          Option.match(supervisor, {
            onNone: () => Effect.succeed(true),
            onSome: (s) => Effect.map(s.stopping, (b) => !b)
          })
        )
      )
      const takeWriteLock = sql`UPDATE write_lock SET n = n WHERE 0`
      const asPersistence = (operation: string) => (cause: SqlError | DatabaseFileLost) =>
        Effect.fail(new PersistenceError({ operation, kind: persistenceKind(cause), cause }))
      const isSqlError = (error: unknown): error is SqlError => error instanceof SqlError
      const isStoreFailure = (error: unknown): error is SqlError | DatabaseFileLost =>
        error instanceof SqlError || error instanceof DatabaseFileLost
      const savepoint = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | PersistenceError, R> =>
        sql.withTransaction(effect).pipe(Effect.catchIf(isSqlError, asPersistence("savepoint")))
      const transaction = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | PersistenceError, R> =>
        sql.withTransaction(Effect.zipRight(takeWriteLock, Effect.zipLeft(effect, file.verify))).pipe(
          Effect.retry({ schedule, while: isBusy }),
          Effect.catchIf(isStoreFailure, asPersistence("transaction"))
        )
      const run = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | PersistenceError, R> =>
        Effect.flatMap(
          Effect.serviceOption(SqlClient.TransactionConnection),
          (outer) => (outer._tag === "Some" ? savepoint(effect) : transaction(effect))
        )
      return { run }
    })
  )
