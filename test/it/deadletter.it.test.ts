import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type { GetMessage } from "amqplib"
import { openConnection } from "../../src/adapters/amqp/AmqpConnection.js"
import { DeadLetterHeaders } from "../../src/adapters/amqp/AmqpConsumer.js"
import { declareTopology, namesOf, topologyOf } from "../../src/adapters/amqp/Topology.js"
import { CatalogRole } from "../../src/roles/receivers.js"
import { cleanupTopology, eventually, redactedUrl, tempDataDir, testConnection, uniquePrefix } from "../support/broker.js"
import { countRows, startRoles, testSettings } from "../support/roles.js"
import { MaterialMother } from "../support/MaterialMother.js"

const declare = (prefix: string, queueType: "classic" | "quorum") =>
  Effect.scoped(Effect.flatMap(openConnection(redactedUrl, "dostavka-test"), (c) => declareTopology(c, topologyOf(prefix, queueType))))

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
      expect(all.map((m) => m.properties.headers?.[DeadLetterHeaders.reason]).sort()).toEqual(["bad-body", "unknown-version"])
      const poison = all.find((m) => m.properties.messageId === "poison-1")!
      expect(poison.content.toString()).toBe("{not json")
      expect(poison.properties).toMatchObject({ correlationId: "c-1", deliveryMode: 2, expiration: undefined })
      expect(poison.properties.headers).toMatchObject({
        [DeadLetterHeaders.handler]: "catalog",
        [DeadLetterHeaders.originalExchange]: names.exchange,
        [DeadLetterHeaders.originalRoutingKey]: "material.published.v1",
        [DeadLetterHeaders.originalExpiration]: "60000",
        [DeadLetterHeaders.error]: expect.stringContaining("JSON")
      })
    }))

  it.each(["classic", "quorum"] as const)("a %s handler queue dead-letters what its consumer rejects onto the handler's dead queue", (queueType) =>
    Effect.gen(function*() {
      const prefix = uniquePrefix(`dlx-${queueType}`)
      yield* cleanupTopology(prefix)
      yield* declare(prefix, queueType)
      const names = namesOf(prefix)
      const connection = yield* testConnection
      const channel = yield* Effect.promise(() => connection.createConfirmChannel())
      yield* Effect.promise(() => {
        channel.publish(names.exchange, "material.published.v1", Buffer.from("payload"), { messageId: "m-1", persistent: true })
        return channel.waitForConfirms()
      })
      const delivery = yield* eventually(Effect.promise(() => channel.get(names.queue("audit"), { noAck: false })), (m) => m !== false)
      if (delivery === false) return
      channel.nack(delivery, false, false)
      const dead = yield* eventually(Effect.promise(() => channel.get(names.deadQueue("audit"), { noAck: true })), (m) => m !== false)
      if (dead === false) return
      expect(dead.content.toString()).toBe("payload")
      expect(dead.properties.messageId).toBe("m-1")
      expect(dead.properties.headers?.["x-death"]?.[0]).toMatchObject({ queue: names.queue("audit"), reason: "rejected" })
    }).pipe(Effect.scoped, Effect.runPromise))
})
