/**
 * Group commit: many items' writes in one transaction, so that a batch costs one commit
 * (one fsync) instead of one per item, without letting one failing item take its
 * neighbours down with it.
 */
import { Cause, Effect, Exit } from "effect"
import type { PersistenceError } from "../domain/errors.js"
import type { TransactionShape } from "../ports/Transaction.js"

/** The work of one transaction over a batch, made afresh for each attempt by `GroupCommit.begin`. */
export interface BatchWork<I, A, E, B, F, R> {
  /** One item's writes. */
  readonly step: (item: I, index: number) => Effect.Effect<A, E, R>
  /**
   * The batch's last writes, in the same transaction, given each item's exit in order (a
   * savepoint's own failure is a `PersistenceError`); its value is the result.
   */
  readonly finish: (exits: ReadonlyArray<Exit.Exit<A, E | PersistenceError>>) => Effect.Effect<B, F, R>
}

/** The step of the `index`-th item failed on the fast path. */
interface ItemFailed<E> {
  readonly _tag: "ItemFailed"
  readonly index: number
  readonly cause: Cause.Cause<E>
}

/**
 * Runs `items` through the work `begin` makes, in ONE transaction of `transaction`:
 * - fast path: `begin`, every `step` in order, `finish`; no savepoints;
 * - if a step fails, that transaction rolls back and a second one runs `begin` again and
 *   each step in a savepoint of its own (a nested `run`, see `TransactionShape`), so that a
 *   failing item undoes only its own writes; the item that failed on the fast path keeps
 *   that failure and its step is not run a second time; `finish` sees every exit.
 * `begin` runs inside each transaction, so what it reads is read again after a rollback.
 * An interruption, of a step or from outside, rolls back and interrupts. Fails with what
 * `begin` or `finish` fail with, or with the `PersistenceError` of a transaction that
 * could not begin or commit (then nothing was kept).
 */
export const groupCommit = <I, A, E, B, F, R>(
  transaction: TransactionShape,
  items: ReadonlyArray<I>,
  begin: Effect.Effect<BatchWork<I, A, E, B, F, R>, F, R>
): Effect.Effect<B, F | PersistenceError, R> => {
  const fast = Effect.gen(function*() {
    const work = yield* begin
    const exits: Array<Exit.Exit<A, E>> = []
    for (const [index, item] of items.entries()) {
      const value = yield* work.step(item, index).pipe(
        Effect.catchAllCause((cause) =>
          Cause.isInterruptedOnly(cause)
            ? Effect.interrupt
            : Effect.fail<ItemFailed<E>>({ _tag: "ItemFailed", index, cause })
        )
      )
      exits.push(Exit.succeed(value))
    }
    return yield* work.finish(exits)
  })
  const isolated = (first: ItemFailed<E>) =>
    Effect.gen(function*() {
      const work = yield* begin
      const exits: Array<Exit.Exit<A, E | PersistenceError>> = []
      for (const [index, item] of items.entries()) {
        const exit = index === first.index
          ? Exit.failCause(first.cause)
          : yield* Effect.exit(transaction.run(work.step(item, index)))
        if (Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause)) return yield* Effect.interrupt
        exits.push(exit)
      }
      return yield* work.finish(exits)
    })
  return transaction.run(fast).pipe(
    Effect.catchIf(
      (error): error is ItemFailed<E> => (error as { _tag?: unknown })._tag === "ItemFailed",
      (first) => transaction.run(isolated(first))
    )
  )
}
