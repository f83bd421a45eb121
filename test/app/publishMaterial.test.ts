import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { memoryUuid } from "../../src/adapters/memory/IdsMemory.js"
import { publishMaterial } from "../../src/app/publishMaterial.js"
import { PersistenceError } from "../../src/domain/errors.js"
import { MaterialStore } from "../../src/ports/MaterialStore.js"
import { Outbox } from "../../src/ports/Outbox.js"
import { PublicationRequests } from "../../src/ports/PublicationRequests.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { ApiMemory } from "../support/memory.js"

const outboxStats = Effect.flatMap(Outbox, (o) => o.stats(0))

describe("publishMaterial (in memory)", () => {
  it.effect("writes the material revision, the request and the outbox row together", () =>
    Effect.gen(function*() {
      const accepted = yield* publishMaterial(MaterialMother.key("a"), MaterialMother.command({ revision: 1 }))
      expect(accepted).toMatchObject({ status: "pending", replayed: false, revision: 1 })
      const latest = yield* Effect.flatMap(MaterialStore, (m) => m.latest(MaterialMother.materialId))
      expect(Option.getOrThrow(latest)).toMatchObject({ revision: 1, eventId: accepted.eventId })
      const [row] = yield* Effect.flatMap(Outbox, (o) => o.pending(10, 0))
      expect(row?.envelope).toMatchObject({
        messageId: accepted.eventId,
        correlationId: accepted.requestId,
        type: "material.published.v1"
      })
      expect(JSON.parse(row!.envelope.body)).not.toHaveProperty("body")
    }).pipe(Effect.provide(ApiMemory)))

  it.effect("takes the request's and the event's ids from Ids, in that order, and a replay asks for none", () =>
    Effect.gen(function*() {
      const first = yield* publishMaterial(MaterialMother.key("a"), MaterialMother.command({ revision: 1 }))
      expect(first).toMatchObject({ requestId: memoryUuid(1), eventId: memoryUuid(2) })
      yield* publishMaterial(MaterialMother.key("a"), MaterialMother.command({ revision: 1 }))
      const second = yield* publishMaterial(MaterialMother.key("b"), MaterialMother.command({ revision: 2 }))
      expect(second).toMatchObject({ requestId: memoryUuid(3), eventId: memoryUuid(4) })
      const [row] = yield* Effect.flatMap(Outbox, (o) => o.pending(10, 0))
      expect(row?.envelope).toMatchObject({ messageId: memoryUuid(2), correlationId: memoryUuid(1) })
    }).pipe(Effect.provide(ApiMemory)))

  it.effect("the same key with the same command returns the same ids and adds nothing", () =>
    Effect.gen(function*() {
      const first = yield* publishMaterial(MaterialMother.key("a"), MaterialMother.command())
      const again = yield* publishMaterial(MaterialMother.key("a"), MaterialMother.command())
      expect(again).toEqual({ ...first, replayed: true })
      expect((yield* outboxStats).pending).toBe(1)
    }).pipe(Effect.provide(ApiMemory)))

  it.effect("the same key with another command is IdempotencyKeyReused, nothing written", () =>
    Effect.gen(function*() {
      yield* publishMaterial(MaterialMother.key("a"), MaterialMother.command({ revision: 1 }))
      const error = yield* Effect.flip(
        publishMaterial(MaterialMother.key("a"), MaterialMother.command({ revision: 2 }))
      )
      expect(error._tag).toBe("IdempotencyKeyReused")
      expect((yield* outboxStats).pending).toBe(1)
    }).pipe(Effect.provide(ApiMemory)))

  it.effect("revision 2 after revision 3 is StaleRevision naming the current one, nothing written", () =>
    Effect.gen(function*() {
      yield* publishMaterial(MaterialMother.key("r3"), MaterialMother.command({ revision: 3 }))
      const error = yield* Effect.flip(
        publishMaterial(MaterialMother.key("r2"), MaterialMother.command({ revision: 2 }))
      )
      expect(error).toMatchObject({ _tag: "StaleRevision", revision: 2, currentRevision: 3 })
      const same = yield* Effect.flip(
        publishMaterial(MaterialMother.key("r3b"), MaterialMother.command({ revision: 3 }))
      )
      expect(same._tag).toBe("StaleRevision")
      expect((yield* outboxStats).pending).toBe(1)
      expect(Option.isNone(yield* Effect.flatMap(PublicationRequests, (r) => r.byKey("key-r2")))).toBe(true)
    }).pipe(Effect.provide(ApiMemory)))

  it.effect("a revision may skip numbers: 1 then 4 is accepted", () =>
    Effect.gen(function*() {
      yield* publishMaterial(MaterialMother.key("1"), MaterialMother.command({ revision: 1 }))
      const four = yield* publishMaterial(MaterialMother.key("4"), MaterialMother.command({ revision: 4 }))
      expect(four.revision).toBe(4)
    }).pipe(Effect.provide(ApiMemory)))

  it.effect("a failing outbox write rolls back the material and the request", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(publishMaterial(MaterialMother.key("a"), MaterialMother.command()))
      expect(error._tag).toBe("PersistenceError")
      expect(Option.isNone(yield* Effect.flatMap(MaterialStore, (m) => m.latest(MaterialMother.materialId)))).toBe(true)
      expect(Option.isNone(yield* Effect.flatMap(PublicationRequests, (r) => r.byKey("key-a")))).toBe(true)
    }).pipe(
      Effect.provide(Layer.effect(
        Outbox,
        Effect.map(Outbox, (outbox) => ({
          ...outbox,
          enqueue: () =>
            Effect.fail(new PersistenceError({ operation: "outbox.enqueue", kind: "unavailable", cause: "disk full" }))
        }))
      )),
      Effect.provide(ApiMemory)
    ))
})
