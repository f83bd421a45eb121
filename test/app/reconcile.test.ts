import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Ref } from "effect"
import fc from "fast-check"
import { HandlerInboxesMemory } from "../../src/adapters/memory/HandlerInboxesMemory.js"
import { findGaps, makeGapCounter, redeliverGaps } from "../../src/app/reconcile.js"
import type { Envelope } from "../../src/domain/Envelope.js"
import type { HandlerName } from "../../src/domain/HandlerName.js"
import { Confirmed, Unknown } from "../../src/ports/EventBus.js"
import { Inbox } from "../../src/ports/Inbox.js"
import { Outbox } from "../../src/ports/Outbox.js"
import { Redelivery } from "../../src/ports/Redelivery.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { ApiMemory, ReceiverMemory } from "../support/memory.js"

const PublishedAt = 10_000
const Now = 1_000_000
const search = { nowMs: Now, olderThanMs: 60_000, retryGraceMs: 60_000 }

/** `n` events in the outbox, all published at `PublishedAt`; their ids in commit order. */
const published = (n: number) =>
  Effect.gen(function*() {
    const outbox = yield* Outbox
    const envelopes = Array.from({ length: n }, (_, i) =>
      MaterialMother.envelope(MaterialMother.event({ materialId: `r/m${i}`, revision: 1 })))
    for (const e of envelopes) {
      yield* outbox.enqueue(e, 0)
    }
    yield* outbox.markPublished(
      envelopes.map((e) =>
        e.messageId
      ),
      PublishedAt
    )
    return envelopes.map((e) => e.messageId)
  })

const applied = (handler: HandlerName, ids: ReadonlyArray<string>) =>
  Effect.flatMap(
    Inbox,
    (inbox) =>
      Effect.forEach(ids, (messageId) =>
        inbox.record({ handler, messageId, outcome: "applied", receivedAtMs: PublishedAt }))
  )

const failed = (handler: HandlerName, messageId: string, state: "retrying" | "dead", atMs: number) =>
  Effect.flatMap(Inbox, (inbox) => inbox.noteFailures([{ handler, messageId, state, attempts: 1, atMs }]))

const Stores = Layer.mergeAll(ApiMemory, HandlerInboxesMemory.pipe(Layer.provideMerge(ReceiverMemory)))

const ids = (gaps: ReadonlyArray<{ readonly messageId: string }>) => gaps.map((g) => g.messageId)

describe("findGaps", () => {
  it.effect("a gap is published, old enough, and neither applied, dead-lettered, nor retried within the grace", () =>
    Effect.gen(function*() {
      const [a, b, c, d, e, f] = yield* published(6)
      yield* applied("catalog", [a!, b!])
      yield* failed("catalog", c!, "dead", 20_000)
      yield* failed("catalog", d!, "retrying", 900_000) // after Now - 60 s - 60 s: still on its way
      yield* failed("catalog", f!, "retrying", 800_000) // its retry copy never came back
      yield* applied("audit", [a!, b!, c!, d!, e!, f!])
      const catalog = yield* findGaps("catalog", search)
      expect(ids(catalog.gaps)).toEqual([e, f])
      expect(catalog).toMatchObject({ checked: 6, checkedThrough: 6 })
      expect((yield* findGaps("audit", search)).gaps).toEqual([])
    }).pipe(Effect.provide(Stores)))

  it.effect("events published less than olderThanMs ago are not compared yet", () =>
    Effect.gen(function*() {
      yield* published(3)
      const early = yield* findGaps("catalog", { ...search, nowMs: PublishedAt + 59_999 })
      expect(early).toMatchObject({ gaps: [], checked: 0 })
      expect((yield* findGaps("catalog", { ...search, nowMs: PublishedAt + 60_001 })).gaps).toHaveLength(3)
    }).pipe(Effect.provide(Stores)))

  it.effect("pages through more rows than one page holds, in commit order", () =>
    Effect.gen(function*() {
      const all = yield* published(2_503)
      yield* applied("catalog", all.filter((_, i) => i % 1000 !== 7))
      const found = yield* findGaps("catalog", search)
      expect(ids(found.gaps)).toEqual([all[7], all[1007], all[2007]])
      expect(found.checked).toBe(2_503)
    }).pipe(Effect.provide(Stores)))
})

describe("redeliverGaps", () => {
  it.effect("sends each gap's envelope as it is in the outbox, to that handler, and reports what was not confirmed", () =>
    Effect.gen(function*() {
      const [a, b] = yield* published(2)
      const sent = yield* Ref.make<ReadonlyArray<readonly [HandlerName, Envelope]>>([])
      const redelivery = Layer.succeed(Redelivery, {
        send: (handler, envelopes) =>
          Effect.as(
            Ref.update(sent, (s) => [...s, ...envelopes.map((e) => [handler, e] as const)]),
            envelopes.map((e) => (e.messageId === a
              ? new Confirmed()
              : new Unknown({ reason: "confirm-timeout", detail: "no confirm within 5s" }))
            )
          )
      })
      const gaps = (yield* findGaps("audit", search)).gaps
      const result = yield* redeliverGaps("audit", gaps).pipe(Effect.provide(redelivery))
      expect(result).toEqual({
        redelivered: [a],
        failed: [{ messageId: b, detail: "unknown (confirm-timeout): no confirm within 5s" }]
      })
      const outbox = yield* Effect.flatMap(Outbox, (o) => o.find([a!, b!]))
      expect(yield* Ref.get(sent)).toEqual(outbox.map((row) => ["audit", row.envelope]))
    }).pipe(Effect.provide(Stores)))
})

describe("makeGapCounter", () => {
  it.effect("counts again after a repair, and a retry that outlives its grace becomes a gap later", () =>
    Effect.gen(function*() {
      const [a, b, c] = yield* published(3)
      yield* applied("catalog", [a!])
      yield* failed("catalog", b!, "retrying", 900_000)
      const counter = yield* makeGapCounter
      expect(yield* counter.count("catalog", search)).toBe(1) // c
      yield* applied("catalog", [c!])
      expect(yield* counter.count("catalog", search)).toBe(0)
      // 100 s later b's retry is past its grace and never came back.
      expect(yield* counter.count("catalog", { ...search, nowMs: Now + 100_000 })).toBe(1)
    }).pipe(Effect.provide(Stores)))

  it.effect("always agrees with a full comparison from the start, whatever happens between counts (property)", () =>
    Effect.promise(() =>
      fc.assert(
        fc.asyncProperty(
          // Each step: a message, what happens to it (a failure `ago` ms before now), then time moves on.
          fc.array(
            fc.record({
              index: fc.nat(11),
              state: fc.constantFrom("applied" as const, "dead" as const, "retrying" as const, "none" as const),
              ago: fc.nat(150_000),
              advance: fc.nat(80_000)
            }),
            { minLength: 1, maxLength: 60 }
          ),
          async (steps) => {
            await Effect.runPromise(
              Effect.gen(function*() {
                const all = yield* published(12)
                const counter = yield* makeGapCounter
                let nowMs = Now
                for (const step of steps) {
                  const id = all[step.index]!
                  if (step.state === "applied") yield* Effect.ignore(applied("catalog", [id]))
                  else if (step.state !== "none") yield* failed("catalog", id, step.state, nowMs - step.ago)
                  const at = { ...search, nowMs }
                  const counted = yield* counter.count("catalog", at)
                  const full = yield* findGaps("catalog", at)
                  if (counted !== full.gaps.length) {
                    throw new Error(`counted ${counted}, a full comparison found ${full.gaps.length}`)
                  }
                  nowMs += step.advance
                }
              }).pipe(Effect.provide(Stores))
            )
          }
        ),
        { numRuns: 300 }
      )
    ))
})
