import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Ref } from "effect"
import { MemoryDatabase } from "../../src/adapters/memory/MemoryDatabase.js"
import { groupCommit } from "../../src/app/groupCommit.js"
import type { TransactionShape } from "../../src/ports/Transaction.js"

/** A memory database whose transaction counts its outermost runs and its savepoints. */
const counted = Effect.gen(function*() {
  const db = yield* MemoryDatabase
  const rows = yield* db.table<ReadonlyArray<string>>("rows", [])
  const counts = { transactions: 0, savepoints: 0 }
  let depth = 0
  const transaction: TransactionShape = {
    run: (effect) =>
      Effect.suspend(() => {
        if (depth === 0) counts.transactions++
        else counts.savepoints++
        depth++
        return Effect.ensuring(db.run(effect), Effect.sync(() => depth--))
      })
  }
  const write = (row: string) => Ref.update(rows, (all) => [...all, row])
  return { transaction, rows, counts, write }
})

describe("groupCommit", () => {
  it.effect("a clean batch is one transaction, no savepoints, finish sees every success in order", () =>
    Effect.gen(function*() {
      const { counts, rows, transaction, write } = yield* counted
      let begins = 0
      const result = yield* groupCommit(
        transaction,
        ["a", "b", "c"],
        Effect.sync(() => {
          begins++
          return {
            step: (item: string, index: number) => Effect.as(write(item), `${item}${index}`),
            finish: (exits) => Effect.as(write("end"), exits.map((e) => Exit.isSuccess(e) ? e.value : "failed"))
          }
        })
      )
      expect(result).toEqual(["a0", "b1", "c2"])
      expect(yield* Ref.get(rows)).toEqual(["a", "b", "c", "end"])
      expect(counts).toEqual({ transactions: 1, savepoints: 0 })
      expect(begins).toBe(1)
    }).pipe(Effect.provide(MemoryDatabase.layer)))

  it.effect("a failing item rolls back alone: its neighbours commit, its step runs once, begin runs again", () =>
    Effect.gen(function*() {
      const { counts, rows, transaction, write } = yield* counted
      const calls = new Map<string, number>()
      let begins = 0
      const result = yield* groupCommit(
        transaction,
        ["a", "poison", "c"],
        Effect.sync(() => {
          begins++
          return {
            step: (item: string) =>
              Effect.zipRight(
                Effect.zipRight(Effect.sync(() => calls.set(item, (calls.get(item) ?? 0) + 1)), write(item)),
                item === "poison" ? Effect.fail("poisoned" as const) : Effect.succeed(item)
              ),
            finish: (exits) => Effect.as(write("end"), exits.map((e) => Exit.isSuccess(e) ? e.value : "failed"))
          }
        })
      )
      expect(result).toEqual(["a", "failed", "c"])
      // The poison's write was taken back; the second pass ran the others in savepoints.
      expect(yield* Ref.get(rows)).toEqual(["a", "c", "end"])
      // The fast path stopped at the poison; c ran only in its savepoint.
      expect(Object.fromEntries(calls)).toEqual({ a: 2, poison: 1, c: 1 })
      expect(begins).toBe(2)
      expect(counts).toEqual({ transactions: 2, savepoints: 2 })
    }).pipe(Effect.provide(MemoryDatabase.layer)))

  it.effect("a failing finish keeps nothing and fails with its error", () =>
    Effect.gen(function*() {
      const { rows, transaction, write } = yield* counted
      const exit = yield* Effect.exit(groupCommit(
        transaction,
        ["a"],
        Effect.succeed({ step: (item: string) => write(item), finish: () => Effect.fail("disk full" as const) })
      ))
      expect(exit).toStrictEqual(Exit.fail("disk full"))
      expect(yield* Ref.get(rows)).toEqual([])
    }).pipe(Effect.provide(MemoryDatabase.layer)))

  it.effect("an interrupted step rolls the batch back and interrupts, on either path", () =>
    Effect.gen(function*() {
      const { rows, transaction, write } = yield* counted
      for (const items of [["a", "stop"], ["poison", "a", "stop"]]) {
        const fiber = yield* Effect.fork(groupCommit(
          transaction,
          items,
          Effect.succeed({
            step: (item: string) =>
              Effect.zipRight(
                write(item),
                item === "stop" ? Effect.interrupt : item === "poison" ? Effect.fail("poisoned") : Effect.void
              ),
            finish: () => Effect.void
          })
        ))
        const exit = yield* Fiber.await(fiber)
        expect(Exit.isInterrupted(exit)).toBe(true)
        expect(yield* Ref.get(rows)).toEqual([])
      }
    }).pipe(Effect.provide(MemoryDatabase.layer)))
})
