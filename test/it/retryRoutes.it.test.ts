import { describe, expect, it } from "@effect/vitest"
import * as amqp from "amqplib"
import { Duration, Effect, Layer } from "effect"
import { DeadLettersAmqp } from "../../src/adapters/amqp/DeadLettersAmqp.js"
import { toPublish } from "../../src/adapters/amqp/EventBusAmqp.js"
import { HandlerRoutes, namesOf } from "../../src/adapters/amqp/Topology.js"
import { catalogHandler } from "../../src/app/handlers.js"
import type { Handler } from "../../src/app/inboxRule.js"
import { PersistenceError } from "../../src/domain/errors.js"
import type { CatalogStore } from "../../src/ports/CatalogStore.js"
import { DeadLetters, DeadLetterSelection } from "../../src/ports/DeadLetters.js"
import { CatalogStores } from "../../src/roles/databases.js"
import { receiverRole } from "../../src/roles/receivers.js"
import {
  amqpUrl,
  cleanupTopology,
  depthOf,
  eventually,
  publishRaw,
  tempDataDir,
  uniquePrefix
} from "../support/broker.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { countRows, startRoles, testSettings } from "../support/roles.js"

/** The catalog's real handler, failing transiently the first `failures` times it sees each message. */
const catalogFailingFirst = (failures: number) => {
  const seen = new Map<string, number>()
  const handler: Handler<CatalogStore> = {
    ...catalogHandler,
    apply: (event, message) =>
      Effect.suspend(() => {
        const n = (seen.get(message.messageId) ?? 0) + 1
        seen.set(message.messageId, n)
        return n <= failures
          ? Effect.fail(new PersistenceError({ operation: "catalog.put", kind: "unavailable", cause: "locked (test)" }))
          : catalogHandler.apply(event, message)
      })
  }
  return { role: receiverRole(handler).pipe(Layer.provide(CatalogStores)), seen }
}

/** Runs `use` on a channel of the machine's broker, closed afterwards. */
const onChannel = (use: (channel: amqp.Channel) => Promise<unknown>) =>
  Effect.promise(async () => {
    const connection = await amqp.connect(amqpUrl)
    try {
      await use(await connection.createChannel())
    } finally {
      await connection.close().catch(() => undefined)
    }
  })

describe.each(["classic", "quorum"] as const)("the way back from a retry queue, on %s queues", (queueType) => {
  it.scopedLive(
    "a retry expires while the handler's redeliver binding is gone: it still comes back and is applied; with every way back gone it lands on the dead queue, and a replay applies it",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix(`route-${queueType}`)
        yield* cleanupTopology(prefix)
        const names = namesOf(prefix)
        // No topology check during the test: it would put the bindings back.
        const settings = testSettings(prefix, dir, { queueType, topologyCheck: Duration.hours(1) })
        const failing = catalogFailingFirst(1)
        yield* startRoles(failing.role, settings)
        const [warmUp, first, second] = [0, 1, 2].map((i) =>
          MaterialMother.envelope(MaterialMother.event({ materialId: `route/m${i}`, revision: 1 }))
        )
        // A first retry, so that the receiver's copy publisher has connected (and declared the
        // topology, as each new session of it does) before the bindings are taken away.
        yield* publishRaw(amqpUrl, [toPublish(names.exchange, warmUp!)])
        yield* eventually(Effect.sync(() => countRows(dir, "catalog", "inbox")), (n) => n === 1)

        yield* onChannel((ch) => ch.unbindQueue(names.queue("catalog"), names.handlerExchange("catalog"), "redeliver"))
        yield* publishRaw(amqpUrl, [toPublish(names.exchange, first!)])
        yield* eventually(Effect.sync(() => countRows(dir, "catalog", "inbox")), (n) => n === 2)
        expect(failing.seen.get(first!.messageId)).toBe(2)

        yield* onChannel((ch) =>
          ch.unbindQueue(names.queue("catalog"), names.redeliveryExchange("catalog"), HandlerRoutes.redeliver)
        )
        yield* publishRaw(amqpUrl, [toPublish(names.exchange, second!)])
        yield* eventually(depthOf(amqpUrl, names.deadQueue("catalog")), (n) => n === 1)
        expect(countRows(dir, "catalog", "inbox")).toBe(2)
        const dead = yield* Effect.provide(DeadLetters, DeadLettersAmqp.pipe(Layer.provide(settings)))
        const [letter] = yield* dead.list("catalog", 10)
        expect(letter).toMatchObject({
          messageId: second!.messageId,
          reason: "rejected-by-broker",
          errorTag: "x-death/expired",
          error: expect.stringContaining(names.retryQueue("catalog", Duration.millis(300)))
        })
        // The operator puts a way back and replays it (the replay goes through the handler's exchange).
        yield* onChannel((ch) => ch.bindQueue(names.queue("catalog"), names.handlerExchange("catalog"), "redeliver"))
        const replayed = yield* dead.replay("catalog", DeadLetterSelection.All(), { dryRun: false })
        expect(replayed.moved).toEqual([second!.messageId])
        yield* eventually(Effect.sync(() => countRows(dir, "catalog", "inbox")), (n) => n === 3)
      }),
    60_000
  )

  it.scopedLive.each(["maxlen", "expired"] as const)(
    "a message the broker once dead-lettered (%s), moved back by hand, fails once: its retry comes back and is applied, not dropped as a dead-letter cycle",
    (reason) =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix(`cycle-${queueType}`)
        yield* cleanupTopology(prefix)
        const names = namesOf(prefix)
        const failing = catalogFailingFirst(1)
        yield* startRoles(failing.role, testSettings(prefix, dir, { queueType }))
        const event = MaterialMother.envelope(MaterialMother.event({ materialId: `cycle/${reason}`, revision: 1 }))
        const published = toPublish(names.exchange, event)
        // As a shovel (the management UI's "move messages") hands it back: the dead letter whole,
        // the broker's death history of the handler's own queue included, onto the handler's queue.
        const death = {
          count: 1,
          reason,
          queue: names.queue("catalog"),
          time: { "!": "timestamp", value: Math.floor(Date.now() / 1000) },
          exchange: names.exchange,
          "routing-keys": ["material.published.v1"]
        }
        yield* publishRaw(amqpUrl, [{
          exchange: "",
          routingKey: names.queue("catalog"),
          content: published.content,
          options: {
            ...published.options,
            headers: {
              ...published.options.headers,
              "x-death": [death],
              "x-first-death-exchange": names.exchange,
              "x-first-death-queue": names.queue("catalog"),
              "x-first-death-reason": reason,
              "x-last-death-exchange": names.exchange,
              "x-last-death-queue": names.queue("catalog"),
              "x-last-death-reason": reason
            }
          }
        }])
        yield* eventually(Effect.sync(() => countRows(dir, "catalog", "inbox")), (n) => n === 1, 15_000)
        expect(failing.seen.get(event.messageId)).toBe(2)
      }),
    60_000
  )
})
