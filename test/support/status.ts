import { Duration, Effect, Layer } from "effect"
import { DeadLettersMemory } from "../../src/adapters/memory/DeadLettersMemory.js"
import { HandlerInboxesMemory } from "../../src/adapters/memory/HandlerInboxesMemory.js"
import { InboxMemory } from "../../src/adapters/memory/InboxMemory.js"
import { MemoryDatabase } from "../../src/adapters/memory/MemoryDatabase.js"
import { StatusView } from "../../src/app/status.js"
import { Settings } from "../../src/config.js"
import type { HandlerName } from "../../src/domain/HandlerName.js"
import { BrokerStats, type QueueFigures } from "../../src/ports/BrokerStats.js"
import type { Outbox } from "../../src/ports/Outbox.js"

/** Figures as the management API would give them: `ready` and `unacked` of one queue. */
export const managementFigures = (queue: string, ready: number, unacked = 0, consumers = 1): QueueFigures => ({
  queue,
  exists: true,
  ready,
  unacked,
  consumers,
  source: "management",
  asOfMs: 0,
  staleUpToMs: 5_000
})

/**
 * A `BrokerStats` that answers the same figures for every queue of every handler, named
 * after it; `dead` gives the dead queue's depth, `deadPublishedAt` when its head was
 * published (ms).
 */
export const brokerStatsStub = (
  dead: Partial<Record<HandlerName, number>> = {},
  deadPublishedAt: Partial<Record<HandlerName, number>> = {}
) =>
  Layer.effect(
    BrokerStats,
    Effect.map(Settings, (settings) => ({
      target: { broker: "127.0.0.1:5672", vhost: "/" },
      handlerQueues: (handler: HandlerName) =>
        Effect.succeed({
          queue: managementFigures(`t.${handler}`, 0),
          retry: settings.retry[handler].delays.map((d, i) => ({
            delayMs: Duration.toMillis(d),
            figures: managementFigures(`t.${handler}.retry.${i}`, 0)
          })),
          dead: managementFigures(`t.${handler}.dead`, dead[handler] ?? 0, 0, 0),
          deadHead: { publishedAtMs: deadPublishedAt[handler] ?? null }
        })
    }))
  )

/**
 * The status view over `outbox` and the in-memory receivers (both handlers' inboxes in
 * one memory database, also exposed as `Inbox`), a broker stub whose dead queues hold
 * `dead` with heads published at `deadPublishedAt`, and the in-memory dead-letter queues
 * (exposed with their state). Needs `Settings`.
 */
export const memoryStatusView = <E, R>(
  outbox: Layer.Layer<Outbox, E, R>,
  dead: Partial<Record<HandlerName, number>> = {},
  deadPublishedAt: Partial<Record<HandlerName, number>> = {}
) =>
  StatusView.layer.pipe(
    Layer.provide([outbox, brokerStatsStub(dead, deadPublishedAt)]),
    Layer.provideMerge(Layer.mergeAll(HandlerInboxesMemory, DeadLettersMemory)),
    Layer.provideMerge(InboxMemory.pipe(Layer.provide(MemoryDatabase.layer)))
  )
