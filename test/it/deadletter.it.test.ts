import { describe, expect, it } from "@effect/vitest"
import * as amqp from "amqplib"
import type { GetMessage } from "amqplib"
import { Duration, Effect, Layer, Redacted } from "effect"
import { AmqpClient } from "../../src/adapters/amqp/AmqpClient.js"
import { openConnection } from "../../src/adapters/amqp/AmqpConnection.js"
import { DeadLettersAmqp } from "../../src/adapters/amqp/DeadLettersAmqp.js"
import { toPublish } from "../../src/adapters/amqp/EventBusAmqp.js"
import { KitHeaders } from "../../src/adapters/amqp/FailureHeaders.js"
import { declareTopology, namesOf, topologyOf } from "../../src/adapters/amqp/Topology.js"
import { DeadLetters } from "../../src/ports/DeadLetters.js"
import { AuditRole, CatalogRole } from "../../src/roles/receivers.js"
import {
  amqpUrl,
  cleanupTopology,
  depthOf,
  eventually,
  peekQueue,
  publishRaw,
  tempDataDir,
  testAccess,
  testConnection,
  testRetryByHandler,
  uniquePrefix
} from "../support/broker.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { hasPrivateBrokerSupport, privateBroker, privateBrokerUnsupportedReason } from "../support/privateBroker.js"
import { type CapturedLog, countRows, startRoles, testSettings } from "../support/roles.js"

const declare = (prefix: string, queueType: "classic" | "quorum") =>
  Effect.scoped(
    Effect.flatMap(openConnection(testAccess, "dostavka-test"), (c) =>
      declareTopology(c, topologyOf({ prefix, queueType, retry: testRetryByHandler })))
  )

describe("dead letters on the real broker", () => {
  it.scopedLive("undecodable and unknown-version messages land on the handler's dead queue, whole and with the reason; the consumer carries on", () =>
    Effect.gen(function*() {
      const dir = yield* tempDataDir
      const prefix = uniquePrefix("dead")
      yield* cleanupTopology(prefix)
      const names = namesOf(prefix)
      yield* startRoles(CatalogRole, testSettings(prefix, dir))
      const connection = yield* testConnection
      const channel = yield* Effect.promise(() => connection.createConfirmChannel())
      const valid = MaterialMother.envelope(MaterialMother.event())
      const publish = (body: string, options: Record<string, unknown>) =>
        Effect.promise(() => {
          channel.publish(names.exchange, "material.published.v1", Buffer.from(body), {
            type: "material.published.v1",
            contentType: "application/json",
            headers: { "x-schema-version": 1 },
            ...options
          })
          return channel.waitForConfirms()
        })
      yield* publish("{not json", { messageId: "poison-1", expiration: "60000", correlationId: "c-1" })
      yield* publish(valid.body, { messageId: valid.messageId, headers: { "x-schema-version": 2 } })
      yield* publish(valid.body, { messageId: valid.messageId, contentType: "application/json; charset=utf-8" })

      yield* eventually(Effect.sync(() => countRows(dir, "catalog", "inbox")), (n) => n === 1)
      const all: Array<GetMessage> = []
      yield* eventually(
        Effect.promise(async () => {
          const message = await channel.get(names.deadQueue("catalog"), { noAck: true })
          if (message !== false) all.push(message)
          return all.length
        }),
        (n) => n === 2
      )
      expect(all.map((m) => m.properties.headers?.[KitHeaders.reason])).toEqual(["incompatible", "incompatible"])
      expect(all.map((m) => m.properties.headers?.[KitHeaders.errorTag]).sort()).toEqual([
        "IncompatibleMessage/UndecodableMessage.bad-body",
        "IncompatibleMessage/UndecodableMessage.unknown-version"
      ])
      const poison = all.find((m) => m.properties.messageId === "poison-1")!
      expect(poison.content.toString()).toBe("{not json")
      expect(poison.properties).toMatchObject({ correlationId: "c-1", deliveryMode: 2, expiration: undefined })
      expect(poison.properties.headers).toMatchObject({
        [KitHeaders.handler]: "catalog",
        [KitHeaders.originalExchange]: names.exchange,
        [KitHeaders.originalRoutingKey]: "material.published.v1",
        [KitHeaders.originalExpiration]: "60000",
        [KitHeaders.error]: expect.stringContaining("JSON")
      })
    }))

  it.scopedLive(
    "an event the broker dead-lettered by itself from the handler's queue (it expired there) is listed from its x-death, not from the kit headers its publisher forged",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("forged-dead")
        yield* cleanupTopology(prefix)
        const names = namesOf(prefix)
        const settings = testSettings(prefix, dir)
        // The catalog declares the topology and stops: nothing consumes its queue.
        const { stop } = yield* startRoles(CatalogRole, settings)
        yield* stop
        const envelope = MaterialMother.envelope(MaterialMother.event({ materialId: "forged/expired", revision: 1 }))
        const publish = toPublish(names.exchange, envelope)
        yield* publishRaw(amqpUrl, [{
          ...publish,
          options: {
            ...publish.options,
            expiration: "0",
            headers: {
              ...publish.options.headers,
              [KitHeaders.reason]: "exhausted",
              [KitHeaders.attempts]: 1_000_000,
              [KitHeaders.errorTag]: "PermanentFailure/forged",
              [KitHeaders.firstFailureAt]: "2001-01-01T00:00:00.000Z"
            }
          }
        }])
        yield* eventually(depthOf(amqpUrl, names.deadQueue("catalog")), (n) => n === 1)
        const [letter] = yield* Effect.flatMap(
          Effect.provide(DeadLetters, DeadLettersAmqp.pipe(Layer.provide(settings))),
          (d) => d.list("catalog", 10)
        )
        expect(letter).toMatchObject({ reason: "rejected-by-broker", errorTag: "x-death/expired", attempts: 0 })
        expect(letter!.firstFailureAtMs).not.toBe(Date.parse("2001-01-01T00:00:00.000Z"))
      }),
    60_000
  )

  it.each(["classic", "quorum"] as const)(
    "a %s handler queue dead-letters what its consumer rejects onto the handler's dead queue",
    (queueType) =>
      Effect.gen(function*() {
        const prefix = uniquePrefix(`dlx-${queueType}`)
        yield* cleanupTopology(prefix)
        yield* declare(prefix, queueType)
        const names = namesOf(prefix)
        const connection = yield* testConnection
        const channel = yield* Effect.promise(() => connection.createConfirmChannel())
        yield* Effect.promise(() => {
          channel.publish(names.exchange, "material.published.v1", Buffer.from("payload"), {
            messageId: "m-1",
            persistent: true
          })
          return channel.waitForConfirms()
        })
        const delivery = yield* eventually(
          Effect.promise(() => channel.get(names.queue("audit"), { noAck: false })),
          (m) => m !== false
        )
        if (delivery === false) return
        channel.nack(delivery, false, false)
        const dead = yield* eventually(
          Effect.promise(() => channel.get(names.deadQueue("audit"), { noAck: true })),
          (m) => m !== false
        )
        if (dead === false) return
        expect(dead.content.toString()).toBe("payload")
        expect(dead.properties.messageId).toBe("m-1")
        expect(dead.properties.headers?.["x-death"]?.[0]).toMatchObject({
          queue: names.queue("audit"),
          reason: "rejected"
        })
      }).pipe(Effect.scoped, Effect.provide(AmqpClient.live), Effect.runPromise)
  )

  it.scopedLive("an event body nested 10,000 levels deep is dead-lettered as bad-body; both receivers go on with what follows", () =>
    Effect.gen(function*() {
      const dir = yield* tempDataDir
      const prefix = uniquePrefix("deep")
      yield* cleanupTopology(prefix)
      const names = namesOf(prefix)
      yield* startRoles(Layer.merge(CatalogRole, AuditRole), testSettings(prefix, dir))
      const connection = yield* testConnection
      const channel = yield* Effect.promise(() => connection.createConfirmChannel())
      const poison = MaterialMother.envelope(MaterialMother.event({ revision: 1 }))
      const deepBody = JSON.stringify({ ...JSON.parse(poison.body), title: "PLACEHOLDER" })
        .replace("\"PLACEHOLDER\"", "[".repeat(10_000) + "]".repeat(10_000))
      const next = MaterialMother.envelope(MaterialMother.event({ revision: 2 }))
      for (const [envelope, body] of [[poison, deepBody], [next, next.body]] as const) {
        const message = toPublish(names.exchange, envelope)
        yield* Effect.promise(() => {
          channel.publish(message.exchange, message.routingKey, Buffer.from(body), message.options)
          return channel.waitForConfirms()
        })
      }
      yield* eventually(
        Effect.sync(() => [countRows(dir, "catalog", "inbox"), countRows(dir, "audit", "inbox")]),
        ([c, a]) => c === 1 && a === 1
      )
      for (const handler of ["catalog", "audit"] as const) {
        const dead = yield* eventually(
          Effect.promise(() => channel.get(names.deadQueue(handler), { noAck: true })),
          (m) => m !== false
        )
        if (dead === false) return
        expect(dead.properties.messageId).toBe(poison.messageId)
        expect(dead.properties.headers?.[KitHeaders.reason]).toBe("incompatible")
        expect(dead.properties.headers?.[KitHeaders.errorTag]).toBe("IncompatibleMessage/UndecodableMessage.bad-body")
        expect(dead.properties.headers?.[KitHeaders.error]).toContain("deeper than 32 levels")
        expect(dead.content.toString()).toBe(deepBody)
      }
    }))
})

if (!hasPrivateBrokerSupport) console.log(`frame_max test skipped: ${privateBrokerUnsupportedReason}`)

describe.skipIf(!hasPrivateBrokerSupport)("dead letters on a broker with a small frame_max", () => {
  it.scopedLive(
    "a dead-letter copy the broker can never take (over frame_max) ends on the dead queue through the queue's own dead-lettering, not in a loop",
    () =>
      Effect.gen(function*() {
        const broker = yield* privateBroker({ conf: ["frame_max = 4096"] })
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("framemax")
        const names = namesOf(prefix)
        const logs: Array<CapturedLog> = []
        yield* startRoles(CatalogRole, testSettings(prefix, dir, { amqpUrl: Redacted.make(broker.url) }), { logs })
        const connection = yield* Effect.acquireRelease(Effect.promise(() => amqp.connect(broker.url)), (c) =>
          Effect.promise(() => c.close().catch(() => undefined)))
        const channel = yield* Effect.promise(() =>
          connection.createConfirmChannel()
        )
        // Undecodable, with a 3,800-byte header: it fits a 4 KiB frame, its dead copy with
        // the kit's headers does not.
        yield* Effect.promise(() => {
          channel.publish(names.exchange, "material.published.v1", Buffer.from("{not json"), {
            messageId: "poison-frame",
            type: "material.published.v1",
            contentType: "application/json",
            headers: { "x-schema-version": 1, "x-padding": "p".repeat(3_800) }
          })
          return channel.waitForConfirms()
        })
        const valid = toPublish(names.exchange, MaterialMother.envelope(MaterialMother.event()))
        yield* Effect.promise(() => {
          channel.publish(valid.exchange, valid.routingKey, valid.content, valid.options)
          return channel.waitForConfirms()
        })
        yield* eventually(Effect.sync(() => countRows(dir, "catalog", "inbox")), (n) => n === 1, 30_000)
        const dead = yield* eventually(
          Effect.promise(() => channel.get(names.deadQueue("catalog"), { noAck: true })),
          (m) => m !== false,
          30_000
        )
        if (dead === false) return
        expect(dead.properties.messageId).toBe("poison-frame")
        expect(dead.content.toString()).toBe("{not json")
        expect(dead.properties.headers?.["x-death"]?.[0]).toMatchObject({
          queue: names.queue("catalog"),
          reason: "rejected",
          count: 1
        })
        expect(yield* Effect.promise(() => channel.checkQueue(names.queue("catalog")))).toMatchObject({
          messageCount: 0
        })
        // The broker closes the publishing connection on the oversized frame, an unknown
        // outcome: handed back at most three times, then rejected; never a loop.
        const rejections = logs.filter((l) => l.message.startsWith("copy not written"))
        expect(rejections).toHaveLength(1)
      }),
    120_000
  )

  it.scopedLive(
    "a dead-letter copy held up by a memory alarm is written once: not rejected to the dead-letter exchange beside it when its confirm is late",
    () =>
      Effect.gen(function*() {
        const broker = yield* privateBroker()
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("alarm")
        const names = namesOf(prefix)
        const settings = testSettings(prefix, dir, {
          amqpUrl: Redacted.make(broker.url),
          confirmTimeout: Duration.seconds(1)
        })
        const first = yield* startRoles(CatalogRole, settings)
        yield* first.stop
        yield* publishRaw(broker.url, [{
          exchange: names.exchange,
          routingKey: "material.published.v1",
          content: Buffer.from("{bad"),
          options: {
            messageId: "alarm-1",
            type: "material.published.v1",
            contentType: "application/json",
            headers: { "x-schema-version": 1 }
          }
        }])
        yield* broker.ctl("set_vm_memory_high_watermark", "absolute", "1")
        yield* startRoles(CatalogRole, settings)
        // The alarm blocks publishers only: the consumer takes the message (none is ready then) and
        // its copy's publish blocks. Waited for, so that the time below runs with the copy held up.
        yield* eventually(depthOf(broker.url, names.queue("catalog")), (n) => n === 0, 30_000)
        // Deliberately a fixed time: several confirm timeouts (1 s) must pass while the copy's publish is blocked.
        yield* Effect.sleep("4 seconds")
        yield* broker.ctl("set_vm_memory_high_watermark", "0.4")
        yield* eventually(depthOf(broker.url, names.deadQueue("catalog")), (n) => n >= 1, 30_000)
        // Deliberately a fixed time: a second copy, were one written, would come in it.
        yield* Effect.sleep("2 seconds")
        const dead = yield* peekQueue(broker.url, names.deadQueue("catalog"))
        expect(
          dead.map((
            m
          ) => [
            m.properties.messageId,
            m.properties.headers?.[KitHeaders.reason],
            m.properties.headers?.["x-death"] === undefined
          ])
        )
          .toEqual([["alarm-1", "incompatible", true]])
        // Acked after its copy's confirm; a delivery handed back meanwhile would be ready for a moment.
        expect(yield* eventually(depthOf(broker.url, names.queue("catalog")), (n) => n === 0)).toBe(0)
      }),
    120_000
  )
})
