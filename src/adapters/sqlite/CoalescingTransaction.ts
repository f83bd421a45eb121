import { Cause, Chunk, Context, Deferred, Effect, Exit, FiberId, Layer, Option, Queue } from "effect"
import type { PersistenceError } from "../../domain/errors.js"
import { Transaction, type TransactionShape } from "../../ports/Transaction.js"

/** How many callers' units of work at most share one commit: 64. */
export const CoalesceAtMost = 64

/** Set inside a coalesced batch: a `run` there is a savepoint of the batch's transaction. */
class InCoalescedBatch extends Context.Tag("dostavka/InCoalescedBatch")<InCoalescedBatch, true>() {}

/** One caller's unit of work, as the batch's fiber runs it. */
interface Unit {
  /** Runs the caller's effect in a savepoint; returns how to answer the caller once the batch has committed or failed. */
  readonly attempt: Effect.Effect<(commit: Exit.Exit<void, PersistenceError>) => Effect.Effect<void>>
  /** Answers the caller whose effect never ran (the transaction could not begin, or the process stops). */
  readonly abort: (cause: Cause.Cause<PersistenceError>) => Effect.Effect<void>
}

/**
 * Group commit for a `Transaction` (`underlying`, e.g. `TransactionSqlite`): the units of
 * work that callers hand to `run` while a commit is in progress wait in a queue, and the
 * next transaction takes them all (at most `CoalesceAtMost`), each in a savepoint of its
 * own, and commits them with ONE commit, so one fsync serves many requests. The contract
 * of `Transaction` holds for each caller: its writes are kept iff its effect succeeded
 * and the batch committed, it runs alone (units run one after another), and its answer
 * comes only after the commit. A unit that fails rolls back only its savepoint; a commit
 * that fails (`PersistenceError`) fails every unit of the batch that had succeeded; when
 * it failed because the database stayed locked past the busy time (`unavailable`), the
 * units queued meanwhile fail with it, so that no caller waits longer than the busy time.
 * A `run` inside a unit is a savepoint. When the layer's scope closes, waiting units are
 * interrupted. Needs `Transaction` (the underlying one) and a scope.
 */
export const CoalescingTransaction = Layer.scoped(
  Transaction,
  Effect.gen(function*() {
    const underlying = yield* Transaction
    const queue = yield* Queue.unbounded<Unit>()

    const runBatch = (units: ReadonlyArray<Unit>) =>
      Effect.gen(function*() {
        let settles: Array<(commit: Exit.Exit<void, PersistenceError>) => Effect.Effect<void>> = []
        const commit = yield* Effect.exit(underlying.run(Effect.suspend(() => {
          // The underlying transaction may be tried again (a busy lock): each try starts afresh.
          settles = []
          return Effect.forEach(units, (unit) => Effect.map(unit.attempt, (settle) => void settles.push(settle)), {
            discard: true
          }).pipe(Effect.provideService(InCoalescedBatch, true))
        })))
        yield* Effect.forEach(settles, (settle) => settle(commit), { discard: true })
        if (Exit.isFailure(commit)) {
          yield* Effect.forEach(units.slice(settles.length), (unit) => unit.abort(commit.cause), { discard: true })
          // The database stayed locked for the whole busy time (or the process is stopping): the
          // units that queued meanwhile would wait it out again, past their own busy time. They
          // get the same answer now.
          if (Option.exists(Cause.failureOption(commit.cause), (e) => e.kind === "unavailable")) {
            const queued = Chunk.toReadonlyArray(yield* Queue.takeAll(queue))
            yield* Effect.forEach(queued, (unit) => unit.abort(commit.cause), { discard: true })
          }
        }
      }).pipe(
        Effect.onInterrupt(() =>
          Effect.forEach(units, (unit) => unit.abort(Cause.interrupt(FiberId.none)), { discard: true })
        )
      )

    yield* Effect.forkScoped(
      Effect.forever(
        Effect.flatMap(Queue.takeBetween(queue, 1, CoalesceAtMost), (units) => runBatch(Chunk.toReadonlyArray(units)))
      )
    )
    yield* Effect.addFinalizer(() =>
      Effect.flatMap(Effect.map(Queue.takeAll(queue), Chunk.toReadonlyArray), (units) =>
        Effect.zipRight(
          Effect.forEach(units, (unit) => unit.abort(Cause.interrupt(FiberId.none)), { discard: true }),
          Queue.shutdown(queue)
        ))
    )

    const run: TransactionShape["run"] = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      Effect.flatMap(Effect.serviceOption(InCoalescedBatch), (inBatch) =>
        inBatch._tag === "Some"
          ? underlying.run(effect)
          : Effect.gen(function*() {
            const context = yield* Effect.context<R>()
            const answer = yield* Deferred.make<A, E | PersistenceError>()
            const unit: Unit = {
              attempt: Effect.exit(underlying.run(effect)).pipe(
                // The caller's services, with this batch's transaction in place of the coalescing one.
                Effect.provideService(Transaction, underlying),
                Effect.provide(context),
                Effect.map((exit) => (commit: Exit.Exit<void, PersistenceError>) =>
                  Deferred.done(
                    answer,
                    Exit.isSuccess(exit) && Exit.isFailure(commit) ? Exit.failCause(commit.cause) : exit
                  ).pipe(
                    Effect.asVoid
                  )
                )
              ),
              abort: (cause) => Deferred.failCause(answer, cause).pipe(Effect.asVoid)
            }
            yield* Queue.offer(queue, unit)
            return yield* Deferred.await(answer)
          }))

    return { run }
  })
)
