import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Fiber, HashMap, Layer, Logger, Ref, TestClock } from "effect"
import { EventBusMemory, EventBusMemoryLog } from "../../src/adapters/memory/EventBusMemory.js"
import { drainOnce, runRelay } from "../../src/app/relay.js"
import { Settings } from "../../src/config.js"
import { PersistenceError } from "../../src/domain/errors.js"
import { Confirmed, EventBus, Rejected, Unknown } from "../../src/ports/EventBus.js"
import { Outbox } from "../../src/ports/Outbox.js"
import { OutboxSignal } from "../../src/ports/OutboxSignal.js"
import { Transaction } from "../../src/ports/Transaction.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { ApiMemory } from "../support/memory.js"

const enqueue = (n: number) =>
  Effect.flatMap(
    Outbox,
    (outbox) =>
      Effect.forEach(
        Array.from({ length: n }, (_, i) => MaterialMother.envelope(MaterialMother.event({ revision: i + 1 }))),
        (e) => outbox.enqueue(e, 0)
      )
  )
/** Every row not yet published nor parked, due or not. */
const pendingIds = Effect.flatMap(Outbox, (o) => o.pending(100, Number.MAX_SAFE_INTEGER)).pipe(
  Effect.map((rows) => rows.map((r) => r.envelope.messageId))
)
const parkedIds = Effect.flatMap(Outbox, (o) => o.parked(100)).pipe(
  Effect.map((rows) => rows.map((r) => r.envelope.messageId))
)
const drain = (window: number, parkAfter = 10) => drainOnce({ window, parkAfter })
const published = Effect.flatMap(EventBusMemoryLog, (log) => Ref.get(log.published))
const attempts = Effect.flatMap(EventBusMemoryLog, (log) => Ref.get(log.attempts))

const settings = Settings.with({ relayWindow: 10 })

describe("drainOnce", () => {
  it.effect("marks published only what the broker confirmed; the unknown row is re-sent with the same message_id, the rejected one after its own delay", () =>
    Effect.gen(function*() {
      yield* enqueue(3)
      const [first, second, third] = yield* pendingIds
      const error = yield* Effect.flip(drain(10))
      expect(error).toMatchObject({ _tag: "RelayBatchIncomplete", attempted: 3, confirmed: 1, rejected: 1, unknown: 1 })
      expect(yield* pendingIds).toEqual([second, third])
      // The rejected row waits 1 s; the unknown one goes again at once.
      expect((yield* drain(10)).confirmed).toBe(1)
      yield* TestClock.adjust("1 second")
      expect((yield* drain(10)).confirmed).toBe(1)
      expect((yield* published).map((e) => e.messageId)).toEqual([first, second, third])
    }).pipe(
      Effect.provide(EventBusMemory((_, attempt) =>
        attempt === 2 ?
          new Unknown({ reason: "confirm-timeout", detail: "" })
          : attempt === 3 ?
          new Rejected({ reason: "returned", detail: "" })
          : new Confirmed()
      )),
      Effect.provide(ApiMemory)
    ))

  it.effect("publishes in commit order, at most one window at a time", () =>
    Effect.gen(function*() {
      yield* enqueue(25)
      const order = yield* pendingIds
      expect((yield* drain(10)).attempted).toBe(10)
      expect((yield* drain(10)).attempted).toBe(10)
      expect((yield* drain(10)).attempted).toBe(5)
      expect((yield* published).map((e) => e.messageId)).toEqual(order)
    }).pipe(Effect.provide(EventBusMemory()), Effect.provide(ApiMemory)))

  it.effect("a row the broker keeps rejecting is deferred 1 s, 2 s, 4 s, then parked after parkAfter rejections, and the rows behind it flow", () =>
    Effect.gen(function*() {
      const unroutable = MaterialMother.envelope(MaterialMother.event({ materialId: "unroutable/x" }))
      yield* Effect.flatMap(Outbox, (o) => o.enqueue(unroutable, 0))
      yield* enqueue(2)
      for (let i = 0; i < 4; i++) {
        const result = yield* drain(10, 4)
        expect(result).toMatchObject({ rejected: 1, parked: i === 3 ? 1 : 0 })
        yield* TestClock.adjust("10 seconds")
      }
      expect(yield* parkedIds).toEqual([unroutable.messageId])
      expect(yield* pendingIds).toEqual([])
      expect(yield* published).toHaveLength(2)
      const [row] = yield* Effect.flatMap(Outbox, (o) => o.parked(1))
      expect(row).toMatchObject({ rejections: 4, lastError: "returned: no queue is bound" })
      expect(yield* Effect.flatMap(Outbox, (o) => o.release("all"))).toBe(1)
      expect(yield* pendingIds).toEqual([unroutable.messageId])
    }).pipe(
      Effect.provide(
        EventBusMemory((envelope) =>
          envelope.body.includes("unroutable/x")
            ? new Rejected({ reason: "returned", detail: "no queue is bound" })
            : new Confirmed()
        )
      ),
      Effect.provide(ApiMemory)
    ))

  it.effect("the deferral doubles from 1 s per rejection: the row is not due before its time", () =>
    Effect.gen(function*() {
      yield* enqueue(1)
      for (const wait of [1_000, 2_000, 4_000]) {
        expect((yield* drain(10)).rejected).toBe(1)
        yield* TestClock.adjust(wait - 1)
        expect((yield* drain(10)).attempted).toBe(0)
        yield* TestClock.adjust(1)
      }
      expect((yield* drain(10)).rejected).toBe(1)
    }).pipe(
      Effect.provide(EventBusMemory(() => new Rejected({ reason: "nacked", detail: "queue full" }))),
      Effect.provide(ApiMemory)
    ))
})

describe("runRelay", () => {
  it.effect("backs off 200 ms, 400 ms, 800 ms while publishes stay unknown, then drains", () =>
    Effect.gen(function*() {
      yield* enqueue(1)
      const fiber = yield* Effect.fork(runRelay("relay-a"))
      yield* TestClock.adjust("1 millis")
      expect(yield* attempts).toBe(1)
      yield* TestClock.adjust("199 millis")
      expect(yield* attempts).toBe(2)
      yield* TestClock.adjust("399 millis")
      expect(yield* attempts).toBe(2)
      yield* TestClock.adjust("1 millis")
      expect(yield* attempts).toBe(3)
      yield* TestClock.adjust("800 millis")
      expect(yield* attempts).toBe(4)
      expect(yield* pendingIds).toEqual([])
      yield* Fiber.interrupt(fiber)
    }).pipe(
      Effect.provide(EventBusMemory((_, attempt) =>
        attempt <= 3 ? new Unknown({ reason: "broker-unavailable", detail: "" }) : new Confirmed()
      )),
      Effect.provide(Layer.merge(ApiMemory, settings))
    ))

  it.effect("wakes on the API's ring at once, and otherwise polls every 100 ms", () =>
    Effect.gen(function*() {
      const fiber = yield* Effect.fork(runRelay("relay-a"))
      yield* TestClock.adjust("1 millis")
      yield* enqueue(1)
      yield* Effect.flatMap(OutboxSignal, (s) => s.notify)
      // No clock moves: the ring alone must make the relay publish.
      yield* published.pipe(Effect.repeat({ until: (all) => all.length === 1, times: 1_000 }))
      expect((yield* published).length).toBe(1)
      yield* enqueue(1)
      yield* TestClock.adjust("50 millis")
      expect((yield* published).length).toBe(1)
      yield* TestClock.adjust("50 millis")
      expect((yield* published).length).toBe(2)
      yield* Fiber.interrupt(fiber)
    }).pipe(Effect.provide(EventBusMemory()), Effect.provide(Layer.merge(ApiMemory, settings))))

  it.effect("a relay killed with its lease: the next one logs who holds it and until when, once, and publishes within the lease and one poll", () =>
    Effect.gen(function*() {
      const outbox = yield* Outbox
      // relay-a took the lease at 0 for the default 2 s, then died without a word.
      expect(yield* outbox.acquireLease("relay-a", 2_000, 0)).toEqual({ owner: "relay-a", expiresAtMs: 2_000 })
      yield* enqueue(2)
      const logs: Array<string> = []
      const capture = Logger.replace(
        Logger.defaultLogger,
        Logger.make(({ annotations, message }) => {
          const a = Object.fromEntries(HashMap.toEntries(annotations))
          logs.push(`${String(message)} holder=${String(a.holder)} until=${String(a.until)}`)
        })
      )
      const b = yield* Effect.fork(runRelay("relay-b").pipe(Effect.provide(capture)))
      yield* TestClock.adjust("1999 millis")
      expect(yield* attempts).toBe(0)
      yield* TestClock.adjust("251 millis")
      expect((yield* published).length).toBe(2)
      expect(logs.filter((l) => l.startsWith("relay waits for the lease"))).toEqual([
        `relay waits for the lease holder=relay-a until=${new Date(2_000).toISOString()}`
      ])
      expect((yield* outbox.acquireLease("relay-a", 2_000, 2_300)).owner).toBe("relay-b")
      yield* Fiber.interrupt(b)
      expect((yield* outbox.acquireLease("relay-a", 2_000, 2_300)).owner).toBe("relay-a")
    }).pipe(Effect.provide(EventBusMemory()), Effect.provide(Layer.merge(ApiMemory, settings))))

  it.effect("the leader keeps its lease while a batch waits for confirms five times longer than the lease", () =>
    Effect.gen(function*() {
      yield* enqueue(1)
      const slowBus = Layer.succeed(EventBus, {
        publish: (messages) => Effect.as(Effect.sleep("10 seconds"), messages.map(() => new Confirmed()))
      })
      const a = yield* Effect.fork(runRelay("relay-a").pipe(Effect.provide(slowBus)))
      yield* TestClock.adjust("1 millis")
      const b = yield* Effect.fork(runRelay("relay-b"))
      for (let t = 0; t < 20; t++) {
        yield* TestClock.adjust("500 millis")
        expect(yield* attempts).toBe(0)
      }
      expect((yield* Effect.flatMap(Outbox, (o) => o.acquireLease("relay-b", 2_000, 10_001))).owner).toBe("relay-a")
      expect(yield* pendingIds).toEqual([])
      yield* Fiber.interrupt(a)
      yield* Fiber.interrupt(b)
    }).pipe(Effect.provide(EventBusMemory()), Effect.provide(Layer.merge(ApiMemory, settings))))

  it.effect("a leader that cannot renew stops sending before its lease runs out; the next relay sends only after it has", () =>
    Effect.gen(function*() {
      const sends: Array<readonly [string, number]> = []
      const busOf = (name: string) =>
        Layer.succeed(EventBus, {
          publish: (messages) =>
            Effect.map(Clock.currentTimeMillis, (now) => {
              sends.push([name, now])
              return messages.map(() => new Confirmed())
            })
        })
      const locked = yield* Ref.make(false)
      const transaction = yield* Transaction
      // relay-a's database calls fail once `locked` is set, as if another process held the write lock.
      const lockable = Layer.succeed(Transaction, {
        run: (effect) =>
          Effect.flatMap(
            Ref.get(locked),
            (l) =>
              l
                ? Effect.fail(
                  new PersistenceError({ operation: "transaction", kind: "unavailable", cause: "database is locked" })
                )
                : transaction.run(effect)
          )
      })
      const a = yield* Effect.fork(runRelay("relay-a").pipe(Effect.provide(Layer.merge(busOf("a"), lockable))))
      yield* TestClock.adjust("1 millis")
      const b = yield* Effect.fork(runRelay("relay-b").pipe(Effect.provide(busOf("b"))))
      // Rows arrive every 50 ms throughout; relay-a's database locks at 1 s.
      for (let t = 0; t < 120; t++) {
        yield* enqueue(1)
        if (t === 20) yield* Ref.set(locked, true)
        yield* TestClock.adjust("50 millis")
      }
      const lastOfA = Math.max(...sends.filter(([n]) => n === "a").map(([, t]) => t))
      const firstOfB = Math.min(...sends.filter(([n]) => n === "b").map(([, t]) => t))
      // relay-a renewed last at or before 1 s, so its lease ran out by 3 s; it sent only with half of it left.
      expect(lastOfA).toBeLessThanOrEqual(2_000)
      expect(firstOfB).toBeGreaterThanOrEqual(3_000)
      expect(firstOfB).toBeLessThanOrEqual(3_300)
      yield* Fiber.interrupt(a)
      yield* Fiber.interrupt(b)
    }).pipe(Effect.provide(EventBusMemory()), Effect.provide(Layer.merge(ApiMemory, settings))))
})
