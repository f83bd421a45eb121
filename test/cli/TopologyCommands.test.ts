import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { EventEmitter } from "node:events"
import { AmqpClient, type AmqpConnection } from "../../src/adapters/amqp/AmqpClient.js"
import { topologyOf } from "../../src/adapters/amqp/Topology.js"
import { deleteTopology } from "../../src/cli/TopologyCommands.js"
import { Settings } from "../../src/config.js"
import { testRetryByHandler } from "../support/broker.js"
import { FakeChannel } from "../support/FakeAmqp.js"

/** A queue on the scripted broker: what a passive declare says, and whether a consumer comes before the delete. */
interface ScriptedQueue {
  readonly messages: number
  readonly consumers: number
  readonly consumerArrives?: boolean
}

/** amqplib's error for a channel the broker closed with `code`. */
const closedBy = (code: number, text: string) =>
  Object.assign(new Error(`Channel closed by server: ${code} (${text})`), { code })

/**
 * A broker holding `queues` and every exchange, which records each delete with its
 * options. A queue whose consumer arrives after the check answers an `if-unused` delete
 * with 406, as RabbitMQ does.
 */
const scriptedBroker = (queues: Record<string, ScriptedQueue>) => {
  const deletes: Array<{ readonly name: string; readonly ifUnused: boolean | undefined }> = []
  const channel = () =>
    Object.assign(new FakeChannel(), {
      checkQueue: async (name: string) => {
        const queue = queues[name]
        if (queue === undefined) throw closedBy(404, "NOT_FOUND")
        return { queue: name, messageCount: queue.messages, consumerCount: queue.consumers }
      },
      deleteQueue: async (name: string, options?: { ifUnused?: boolean }) => {
        if (options?.ifUnused === true && queues[name]?.consumerArrives === true) {
          throw closedBy(406, `PRECONDITION_FAILED - queue '${name}' in vhost '/' in use`)
        }
        deletes.push({ name, ifUnused: options?.ifUnused })
        return { messageCount: queues[name]?.messages ?? 0 }
      },
      deleteExchange: async (name: string) => {
        deletes.push({ name, ifUnused: undefined })
        return {}
      }
    })
  const connection = Object.assign(new EventEmitter(), {
    createChannel: async () => channel(),
    createConfirmChannel: async () => channel(),
    close: async () => {}
  })
  const layer = Layer.succeed(AmqpClient, { connect: async () => connection as unknown as AmqpConnection })
  return { deletes, layer }
}

const topology = (queueType: "classic" | "quorum") =>
  topologyOf({ prefix: "unit", queueType, retry: testRetryByHandler })
const allQueues = (queueType: "classic" | "quorum", queue: ScriptedQueue = { messages: 0, consumers: 0 }) =>
  Object.fromEntries(topology(queueType).queues.map((q) => [q.name, queue]))

describe("topology --delete", () => {
  it.effect("a consumer arrives between the check and the delete: the broker's 406 to if-unused is TopologyInUse, naming the queue and the queues deleted before it, and nothing after it is touched", () =>
    Effect.gen(function*() {
      const queues = { ...allQueues("classic"), "unit.audit": { messages: 3, consumers: 0, consumerArrives: true } }
      const broker = scriptedBroker(queues)
      const error = yield* deleteTopology(topology("classic"), { force: false }).pipe(
        Effect.provide(Layer.merge(broker.layer, Settings.with({ prefix: "unit" }))),
        Effect.flip
      )
      const names = topology("classic").queues.map((q) => q.name)
      const before = names.slice(0, names.indexOf("unit.audit"))
      expect(error).toMatchObject({
        _tag: "TopologyInUse",
        queues: [{ name: "unit.audit", consumers: null }],
        deleted: before
      })
      expect(error.message).toBe(
        "topology --delete refused: unit.audit (a consumer came) still consumed; stop the roles and any other " +
          `consumer, or add --force; ${before.length} queues were deleted before it (run again once it is unused)`
      )
      expect(broker.deletes.map((d) => d.name)).toEqual(before)
      expect(broker.deletes.every((d) => d.ifUnused === true)).toBe(true)
    }))

  it.effect("quorum queues are deleted without if-unused, which RabbitMQ refuses for them (540 NOT_IMPLEMENTED): the check before is their guard", () =>
    Effect.gen(function*() {
      const broker = scriptedBroker(allQueues("quorum", { messages: 1, consumers: 0 }))
      const deletion = yield* deleteTopology(topology("quorum"), { force: false }).pipe(
        Effect.provide(Layer.merge(broker.layer, Settings.with({ prefix: "unit", queueType: "quorum" })))
      )
      expect(deletion.queues.every((q) => q.existed && q.messages === 1)).toBe(true)
      const queueDeletes = broker.deletes.slice(0, topology("quorum").queues.length)
      expect(queueDeletes.map((d) => d.name)).toEqual(topology("quorum").queues.map((q) => q.name))
      expect(queueDeletes.every((d) => d.ifUnused === false)).toBe(true)
      // Exchanges after the queues.
      expect(broker.deletes.slice(queueDeletes.length).map((d) => d.name)).toEqual(
        topology("quorum").exchanges.map((e) => e.name)
      )
    }))

  it.effect("--force deletes queues in use without if-unused: the broker cancels their consumers", () =>
    Effect.gen(function*() {
      const broker = scriptedBroker(allQueues("classic", { messages: 0, consumers: 2 }))
      const deletion = yield* deleteTopology(topology("classic"), { force: true }).pipe(
        Effect.provide(Layer.merge(broker.layer, Settings.with({ prefix: "unit" })))
      )
      expect(deletion.queues.every((q) => q.existed)).toBe(true)
      expect(broker.deletes.slice(0, deletion.queues.length).every((d) => d.ifUnused === false)).toBe(true)
    }))
})
