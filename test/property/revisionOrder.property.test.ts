import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import fc from "fast-check"
import { auditHandler, catalogHandler } from "../../src/app/handlers.js"
import { receive } from "../../src/app/receive.js"
import { AuditLog } from "../../src/ports/AuditLog.js"
import { CatalogStore } from "../../src/ports/CatalogStore.js"
import { Inbox } from "../../src/ports/Inbox.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { ReceiverMemory } from "../support/memory.js"
import { propertyParameters } from "../support/properties.js"

/**
 * The events of one material's revisions 1..n, delivered in any order, each possibly
 * more than once (a redelivery keeps its message id).
 */
const deliveries = fc.integer({ min: 1, max: 12 }).chain((n) => {
  const events = Array.from({ length: n }, (_, i) => MaterialMother.event({ revision: i + 1 }))
  return fc.tuple(
    fc.constant(events),
    fc.array(fc.integer({ min: 0, max: n - 1 }), { maxLength: 2 * n })
  ).chain(([events, repeats]) =>
    fc.shuffledSubarray([...events, ...repeats.map((i) => events[i]!)], { minLength: events.length + repeats.length })
      .map((order) => ({ events, order }))
  )
})

describe("revision order, whatever the arrival order", () => {
  it("any permutation of a material's revisions, with redeliveries, leaves the catalog at the newest and each event applied once", async () => {
    await fc.assert(
      fc.asyncProperty(deliveries, ({ events, order }) =>
        Effect.gen(function*() {
          for (const event of order) {
            yield* receive(catalogHandler, event, { messageId: event.eventId, correlationId: "req" })
            yield* receive(auditHandler, event, { messageId: event.eventId, correlationId: "req" })
          }
          const entry = yield* Effect.flatMap(CatalogStore, (c) => c.get(MaterialMother.materialId))
          expect(Option.getOrThrow(entry).revision).toBe(events.length)
          const catalog = yield* Effect.flatMap(Inbox, (i) => i.counts("catalog"))
          expect(catalog.applied + catalog.stale).toBe(events.length)
          expect(catalog.duplicates).toBe(order.length - events.length)
          // Applied revisions strictly increase in arrival order; the rest are stale.
          const firstSeen = order.filter((e, i) => order.findIndex((x) => x.eventId === e.eventId) === i)
          const rising = firstSeen.filter((e, i) => firstSeen.slice(0, i).every((x) => x.revision < e.revision))
          expect(catalog.applied).toBe(rising.length)
          expect(yield* Effect.flatMap(AuditLog, (a) => a.count)).toBe(events.length)
        }).pipe(Effect.provide(ReceiverMemory), Effect.runPromise)),
      propertyParameters()
    )
  })
})
