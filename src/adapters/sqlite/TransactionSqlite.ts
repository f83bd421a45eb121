/** The `Transaction` port over one SQLite database. */
import { SqlClient } from "@effect/sql"
import { SqlError } from "@effect/sql/SqlError"
import { type Duration, Effect, Layer, Option, Schedule } from "effect"
import { PersistenceError } from "../../domain/errors.js"
import { Supervisor } from "../../ports/Supervisor.js"
import { Transaction } from "../../ports/Transaction.js"
import { busyRetry } from "./Database.js"
import type { DatabaseTag, ServiceDatabase } from "./DatabaseTags.js"
import { isBusy, persistenceKind } from "./SqliteFailures.js"
import { DatabaseFileLost } from "./SqliteFile.js"

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
