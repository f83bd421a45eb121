import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Ref, TestClock } from "effect"
import { drainOnce, runRelay } from "../../src/app/relay.js"
import { EventBusMemory, EventBusMemoryLog } from "../../src/adapters/memory/EventBusMemory.js"
import { Settings } from "../../src/config.js"
import { Confirmed, Rejected, Unknown } from "../../src/ports/EventBus.js"
import { Outbox } from "../../src/ports/Outbox.js"
import { OutboxSignal } from "../../src/ports/OutboxSignal.js"
import { ApiMemory } from "../support/memory.js"
import { MaterialMother } from "../support/MaterialMother.js"

const enqueue = (n: number) =>
  Effect.flatMap(Outbox, (outbox) =>
    Effect.forEach(Array.from({ length: n }, (_, i) => MaterialMother.envelope(MaterialMother.event({ revision: i + 1 }))), (e) =>
      outbox.enqueue(e, 0)))
/** Every row not yet published nor parked, due or not. */
const pendingIds = Effect.flatMap(Outbox, (o) => o.pending(100, Number.MAX_SAFE_INTEGER)).pipe(Effect.map((rows) => rows.map((r) => r.envelope.messageId)))
const parkedIds = Effect.flatMap(Outbox, (o) => o.parked(100)).pipe(Effect.map((rows) => rows.map((r) => r.envelope.messageId)))
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
        attempt === 2 ? new Unknown({ reason: "confirm-timeout", detail: "" })
        : attempt === 3 ? new Rejected({ reason: "returned", detail: "" })
        : new Confirmed())),
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
      expect((yield* published)).toHaveLength(2)
      const [row] = yield* Effect.flatMap(Outbox, (o) => o.parked(1))
      expect(row).toMatchObject({ rejections: 4, lastError: "returned: no queue is bound" })
      expect(yield* Effect.flatMap(Outbox, (o) => o.release("all"))).toBe(1)
      expect(yield* pendingIds).toEqual([unroutable.messageId])
    }).pipe(
      Effect.provide(EventBusMemory((envelope) =>
        envelope.body.includes("unroutable/x") ? new Rejected({ reason: "returned", detail: "no queue is bound" }) : new Confirmed())),
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
      Effect.provide(EventBusMemory((_, attempt) => attempt <= 3 ? new Unknown({ reason: "broker-unavailable", detail: "" }) : new Confirmed())),
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

  it.effect("a second relay publishes nothing while the first holds the lease, and takes over when it expires", () =>
    Effect.gen(function*() {
      const outbox = yield* Outbox
      expect(yield* outbox.acquireLease("relay-a", 15_000, 0)).toBe(true)
      yield* enqueue(2)
      const b = yield* Effect.fork(runRelay("relay-b"))
      yield* TestClock.adjust("14 seconds")
      expect(yield* attempts).toBe(0)
      yield* TestClock.adjust("1100 millis")
      expect((yield* published).length).toBe(2)
      expect(yield* outbox.acquireLease("relay-a", 15_000, 15_100)).toBe(false)
      yield* Fiber.interrupt(b)
      expect(yield* outbox.acquireLease("relay-a", 15_000, 15_100)).toBe(true)
    }).pipe(Effect.provide(EventBusMemory()), Effect.provide(Layer.merge(ApiMemory, settings))))
})
