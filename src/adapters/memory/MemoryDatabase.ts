import { Context, Effect, Exit, FiberRef, Layer, Ref } from "effect"
import { PersistenceError } from "../../domain/errors.js"
import { Transaction, type TransactionShape } from "../../ports/Transaction.js"

/**
 * The in-memory twin of one service database: named tables, each a `Ref` of an immutable
 * value, and a transaction that snapshots every table and puts the snapshots back when
 * its effect fails or is interrupted; a nested one is a savepoint. Transactions are
 * serialized, as SQLite's are.
 */
export interface MemoryDatabaseShape {
  /** The table called `name`; created holding `initial` on first use. */
  readonly table: <T>(name: string, initial: T) => Effect.Effect<Ref.Ref<T>>
  readonly run: TransactionShape["run"]
}

export class MemoryDatabase extends Context.Tag("dostavka/MemoryDatabase")<MemoryDatabase, MemoryDatabaseShape>() {
  static readonly layer = Layer.effect(
    MemoryDatabase,
    Effect.gen(function*() {
      const tables = new Map<string, Ref.Ref<unknown>>()
      const lock = yield* Effect.makeSemaphore(1)
      const inTransaction = FiberRef.unsafeMake(false)
      const table = <T>(name: string, initial: T) =>
        Effect.sync(() => {
          let ref = tables.get(name)
          if (ref === undefined) {
            ref = Ref.unsafeMake<unknown>(initial)
            tables.set(name, ref)
          }
          return ref as Ref.Ref<T>
        })
      // Both a transaction and a savepoint (a nested `run`) keep a snapshot of every
      // table and put it back when their effect fails; only the outermost takes the lock.
      const undoOnFailure: TransactionShape["run"] = (effect) =>
        Effect.gen(function*() {
          const refs = [...tables.values()]
          const snapshot = yield* Effect.forEach(refs, Ref.get)
          const exit = yield* Effect.exit(Effect.locally(effect, inTransaction, true))
          if (Exit.isFailure(exit)) yield* Effect.forEach(refs, (ref, i) => Ref.set(ref, snapshot[i]))
          return yield* exit
        })
      const run: TransactionShape["run"] = (effect) =>
        Effect.flatMap(
          FiberRef.get(inTransaction),
          (nested) => nested ? undoOnFailure(effect) : lock.withPermits(1)(undoOnFailure(effect))
        )
      return { table, run }
    })
  )
}

/** The `Transaction` port over a `MemoryDatabase`. */
export const TransactionMemory = Layer.effect(Transaction, Effect.map(MemoryDatabase, (db) => ({ run: db.run })))

/** The failure a memory table gives where SQLite would report a unique-key violation. */
export const uniqueViolation = (operation: string, key: string) =>
  new PersistenceError({ operation, kind: "constraint", cause: new Error(`UNIQUE constraint failed: ${key}`) })
