import { Data } from "effect"

/** One field of a refused command and why, e.g. `{ field: "revision", message: "must be at least 1" }`. */
export interface FieldIssue {
  readonly field: string
  readonly message: string
}

/** The command does not satisfy its schema; each issue names a field in its wire spelling. HTTP 400. */
export class InvalidCommand extends Data.TaggedError("InvalidCommand")<{
  readonly issues: ReadonlyArray<FieldIssue>
}> {}

/** The revision is not greater than the material's current one. HTTP 409. */
export class StaleRevision extends Data.TaggedError("StaleRevision")<{
  readonly materialId: string
  readonly revision: number
  readonly currentRevision: number
}> {}

/** The idempotency key was already used for a different request. HTTP 422 (IETF draft "The Idempotency-Key HTTP Header Field", §2.7). */
export class IdempotencyKeyReused extends Data.TaggedError("IdempotencyKeyReused")<{
  readonly idempotencyKey: string
}> {}

/** A received message that cannot become a known event; it goes to the dead-letter queue with this reason. */
export class UndecodableMessage extends Data.TaggedError("UndecodableMessage")<{
  readonly reason:
    | "no-message-id"
    | "id-mismatch"
    | "unknown-type"
    | "unknown-version"
    | "bad-content-type"
    | "bad-body"
    | "bad-correlation-id"
  readonly detail: string
}> {}

/**
 * A store could not be read or written. `kind` says what may help:
 * - `unavailable`: busy or locked past the busy timeout, disk full, an I/O error: trying
 *   again later may pass (HTTP 503, a delayed retry of a message);
 * - `constraint`: the write breaks a constraint (a unique key): the same write will fail
 *   again until the data or the code changes;
 * - `lost`: the database file this process opened was removed or replaced under it;
 *   nothing written now would be seen by the next process, so the role must stop.
 */
export class PersistenceError extends Data.TaggedError("PersistenceError")<{
  readonly operation: string
  readonly kind: "unavailable" | "constraint" | "lost"
  readonly cause: unknown
}> {}

/**
 * One line for an error and the errors it wraps, outermost first, without stack traces:
 * e.g. `SqlError` → `SqliteError` gives "Failed to execute statement: database is locked",
 * and a `ServeError` gives "An error has occurred: listen EADDRINUSE …". Follows `cause`
 * at most five levels deep; empty messages are left out.
 */
export const describeCause = (cause: unknown): string => {
  const messages: Array<string> = []
  let current: unknown = cause
  for (let depth = 0; depth < 5 && current !== undefined; depth++) {
    const message = current instanceof Error ? current.message : String(current)
    if (message !== "") messages.push(message)
    current = current instanceof Error ? current.cause : undefined
  }
  return messages.join(": ")
}
