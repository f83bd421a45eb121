/**
 * How a failed SQLite operation reaches the ports: as a `PersistenceError` of the kind
 * that decides what comes next (`lost`, `constraint`, `unavailable`), or as a defect when
 * a stored row does not match its record.
 */
import { Cause, Effect, ParseResult } from "effect"
import { describeCause, PersistenceError } from "../../domain/errors.js"
import { DatabaseFileLost } from "./SqliteFile.js"

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
