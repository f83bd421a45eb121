import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { AmqpClient } from "../../src/adapters/amqp/AmqpClient.js"
import { openConnection } from "../../src/adapters/amqp/AmqpConnection.js"
import { makeAmqpPublisher } from "../../src/adapters/amqp/AmqpPublisher.js"
import { declareTopology, namesOf, topologyOf, topologyPlanOf } from "../../src/adapters/amqp/Topology.js"
import { IdsRandom } from "../../src/adapters/ids/IdsRandom.js"
import { publishMaterial } from "../../src/app/publishMaterial.js"
import { OutboxSignal } from "../../src/ports/OutboxSignal.js"
import { ApiStores } from "../../src/roles/databases.js"
import { RelayRole } from "../../src/roles/relay.js"
import {
  cleanupTopology,
  eventually,
  tempDataDir,
  testAccess,
  testConnection,
  testRetryByHandler,
  uniquePrefix
} from "../support/broker.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { query, startRoles, testSettings } from "../support/roles.js"

describe("relay and topology on the real broker", () => {
  it.scopedLive("the relay publishes a persistent message carrying every envelope property", () =>
    Effect.gen(function*() {
      const dir = yield* tempDataDir
      const prefix = uniquePrefix("relay")
      yield* cleanupTopology(prefix)
      const settings = testSettings(prefix, dir)
      const accepted = yield* publishMaterial(
        MaterialMother.key(),
        MaterialMother.command({ materialId: "guides/confirms", revision: 4 })
      ).pipe(
        Effect.provide(Layer.mergeAll(ApiStores, OutboxSignal.layer, IdsRandom)),
        Effect.provide(settings)
      )
      yield* startRoles(RelayRole, settings)
      yield* eventually(
        Effect.sync(() => query(dir, "api", "SELECT published_at FROM outbox")[0]),
        (row) => row?.published_at != null
      )

      const connection = yield* testConnection
      const channel = yield* Effect.promise(() => connection.createChannel())
      const message = yield* eventually(
        Effect.promise(() => channel.get(namesOf(prefix).queue("audit"), { noAck: true })),
        (m) => m !== false
      )
      if (message === false) return
      const [row] = query<{ timestamp_ms: number }>(dir, "api", "SELECT timestamp_ms FROM outbox")
      expect(message.fields).toMatchObject({ exchange: `${prefix}.events`, routingKey: "material.published.v1" })
      expect(message.properties).toMatchObject({
        deliveryMode: 2,
        messageId: accepted.eventId,
        correlationId: accepted.requestId,
        type: "material.published.v1",
        contentType: "application/json",
        appId: "dostavka-api",
        timestamp: Math.floor(row!.timestamp_ms / 1000),
        headers: { "x-schema-version": 1 }
      })
      expect(JSON.parse(message.content.toString("utf8"))).toEqual({
        event_id: accepted.eventId,
        material_id: "guides/confirms",
        revision: 4,
        title: "Quorum queues, revision 4",
        summary: "Why replicated queues replace mirrored ones.",
        published_at: new Date(row!.timestamp_ms).toISOString()
      })
    }))

  it.scopedLive("a publish that no queue is bound for is Rejected(returned), one that is bound is Confirmed", () =>
    Effect.gen(function*() {
      const prefix = uniquePrefix("returns")
      yield* cleanupTopology(prefix)
      const publisher = yield* makeAmqpPublisher({
        access: testAccess,
        connectionName: "dostavka-test-publisher",
        role: "relay",
        topology: topologyPlanOf({ prefix, queueType: "classic", retry: testRetryByHandler }, "all"),
        confirmTimeout: "5 seconds"
      })
      const message = (routingKey: string, id: string) => ({
        exchange: `${prefix}.events`,
        routingKey,
        content: Buffer.from("{}"),
        options: { messageId: id, persistent: true }
      })
      const outcomes = yield* publisher.publish([
        message("material.published.v1", "a"),
        message("material.deleted.v1", "b"),
        message("material.published.v1", "c")
      ])
      expect(outcomes.map((o) => o._tag === "Rejected" ? `Rejected(${o.reason})` : o._tag)).toEqual([
        "Confirmed",
        "Rejected(returned)",
        "Confirmed"
      ])
    }).pipe(Effect.provide(AmqpClient.live)))

  it.scopedLive("a queue the broker already has with other arguments fails with TopologyMismatch naming it", () =>
    Effect.gen(function*() {
      const prefix = uniquePrefix("mismatch")
      yield* cleanupTopology(prefix)
      const connection = yield* testConnection
      const channel = yield* Effect.promise(() => connection.createChannel())
      yield* Effect.promise(() =>
        channel.assertQueue(`${prefix}.catalog`, { durable: true, arguments: { "x-max-length": 10 } })
      )
      const error = yield* Effect.flip(
        Effect.scoped(
          Effect.flatMap(
            openConnection(testAccess, "dostavka-test"),
            (c) => declareTopology(c, topologyOf({ prefix, queueType: "classic", retry: testRetryByHandler }))
          )
        )
      )
      expect(error._tag).toBe("TopologyMismatch")
      expect(error).toMatchObject({ object: `queue '${prefix}.catalog'` })
      expect(error.message).toContain("PRECONDITION_FAILED")
      // Declaring again the same way is idempotent for the objects that agree.
      yield* Effect.scoped(
        Effect.flatMap(openConnection(testAccess, "dostavka-test"), (c) =>
          declareTopology(c, {
            ...topologyOf({ prefix, queueType: "classic", retry: testRetryByHandler }),
            queues: [],
            bindings: []
          }))
      )
    }).pipe(Effect.provide(AmqpClient.live)))
})
