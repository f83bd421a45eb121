import { describe, expect, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, Fiber, FiberRef, Layer, Ref } from "effect"
import { MemoryDatabase } from "../../src/adapters/memory/MemoryDatabase.js"
import { CoalescingTransaction } from "../../src/adapters/sqlite/CoalescingTransaction.js"
import { PersistenceError } from "../../src/domain/errors.js"
import { Transaction } from "../../src/ports/Transaction.js"

/**
 * The underlying transaction counts its commits (outermost runs) and, while `gate` is
 * closed, holds the first one open, as a commit waiting for its fsync would; `failCommit`
 * makes the commit of that number (0 the first) fail after its effect, as a failed COMMIT would.
 */
const harness = Effect.gen(function*() {
  const db = yield* MemoryDatabase
  const rows = yield* db.table<ReadonlyArray<string>>("rows", [])
  const commits = yield* Ref.make(0)
  const failCommit = yield* Ref.make<number | undefined>(undefined)
  const gate = yield* Deferred.make<void>()
  const inside = FiberRef.unsafeMake(false)
  const counting = Layer.succeed(Transaction, {
    run: (effect) =>
      Effect.flatMap(FiberRef.get(inside), (nested) =>
        nested
          ? db.run(effect)
          : db.run(Effect.gen(function*() {
            const a = yield* Effect.locally(effect, inside, true)
            const n = yield* Ref.getAndUpdate(commits, (c) => c + 1)
            if (n === 0) yield* Deferred.await(gate)
            if ((yield* Ref.get(failCommit)) === n) {
              return yield* new PersistenceError({ operation: "commit", kind: "unavailable", cause: "disk I/O error" })
            }
            return a
          })))
  })
  const transaction = yield* Layer.build(CoalescingTransaction.pipe(Layer.provide(counting)))
  const write = (row: string, fail = false) =>
    Effect.flatMap(Transaction, (t) =>
      t.run(Effect.zipRight(
        Ref.update(rows, (r) => [...r, row]),
        fail ? Effect.fail(`refused ${row}` as const) : Effect.succeed(row)
      ))).pipe(Effect.provide(transaction))
  return { rows, commits, failCommit, gate, write, transaction }
}).pipe(Effect.provide(MemoryDatabase.layer))

describe("CoalescingTransaction (group commit)", () => {
  it.scoped("units handed in while a commit is in progress share the next commit; a failing one rolls back alone", () =>
    Effect.gen(function*() {
      const h = yield* harness
      const first = yield* Effect.fork(h.write("a"))
      // The first commit is held open: these nine queue up behind it.
      yield* Effect.yieldNow()
      const rest = yield* Effect.forEach(
        ["b", "c", "d", "e", "f", "g", "h", "i", "j"],
        (row) => Effect.fork(Effect.exit(h.write(row, row === "e"))),
        { concurrency: "unbounded" }
      )
      yield* Effect.yieldNow()
      yield* Deferred.succeed(h.gate, undefined)
      expect(yield* Fiber.join(first)).toBe("a")
      const exits = yield* Effect.forEach(rest, Fiber.join)
      expect(exits.map((e) => Exit.isSuccess(e) ? e.value : "failed")).toEqual([
        "b",
        "c",
        "d",
        "failed",
        "f",
        "g",
        "h",
        "i",
        "j"
      ])
      expect(yield* Ref.get(h.rows)).toEqual(["a", "b", "c", "d", "f", "g", "h", "i", "j"])
      expect(yield* Ref.get(h.commits)).toBe(2)
    }))

  it.scoped("a commit that fails fails every unit of its batch, and keeps none of their writes", () =>
    Effect.gen(function*() {
      const h = yield* harness
      yield* Ref.set(h.failCommit, 1)
      const first = yield* Effect.fork(h.write("x"))
      yield* Effect.yieldNow()
      const batch = yield* Effect.forEach(["y", "z"], (row) => Effect.fork(Effect.exit(h.write(row))), {
        concurrency: "unbounded"
      })
      yield* Effect.yieldNow()
      yield* Deferred.succeed(h.gate, undefined)
      expect(yield* Fiber.join(first)).toBe("x")
      for (const exit of yield* Effect.forEach(batch, Fiber.join)) {
        expect(Exit.isFailure(exit) && Cause.failureOption(exit.cause)).toMatchObject({
          _tag: "Some",
          value: { operation: "commit", kind: "unavailable" }
        })
      }
      expect(yield* Ref.get(h.rows)).toEqual(["x"])
      expect(yield* Ref.get(h.commits)).toBe(2)
      expect(yield* h.write("after")).toBe("after")
      expect(yield* Ref.get(h.rows)).toEqual(["x", "after"])
    }))

  it.scoped("a run inside a unit is a savepoint of the batch's transaction, not another unit", () =>
    Effect.gen(function*() {
      const h = yield* harness
      yield* Deferred.succeed(h.gate, undefined)
      const innerFailed = yield* Effect.flatMap(Transaction, (t) =>
        t.run(Effect.gen(function*() {
          yield* Ref.update(h.rows, (r) => [...r, "outer"])
          const inner = yield* Effect.exit(
            t.run(Effect.zipRight(Ref.update(h.rows, (r) => [...r, "inner"]), Effect.fail("no")))
          )
          return Exit.isFailure(inner)
        }))).pipe(Effect.provide(h.transaction))
      expect(innerFailed).toBe(true)
      expect(yield* Ref.get(h.rows)).toEqual(["outer"])
      expect(yield* Ref.get(h.commits)).toBe(1)
    }))
})
