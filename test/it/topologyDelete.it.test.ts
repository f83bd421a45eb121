import { describe, expect, it } from "@effect/vitest"
import * as amqp from "amqplib"
import { Effect } from "effect"
import { AmqpClient } from "../../src/adapters/amqp/AmqpClient.js"
import { openConnection } from "../../src/adapters/amqp/AmqpConnection.js"
import { declareTopology, namesOf, type Topology, topologyOf } from "../../src/adapters/amqp/Topology.js"
import { MaterialPublishedV1 } from "../../src/domain/MaterialPublished.js"
import {
  amqpUrl,
  cleanupTopology,
  publishRaw,
  testAccess,
  testConnection,
  testRetryByHandler,
  uniquePrefix
} from "../support/broker.js"
import { dostavka } from "../support/cli.js"

/** The settings the CLI needs to name the same topology as `topologyOf(prefix, queueType, testRetry)`. */
const envOf = (prefix: string, queueType: "classic" | "quorum" = "classic") => ({
  DOSTAVKA_PREFIX: prefix,
  DOSTAVKA_AMQP_URL: amqpUrl,
  DOSTAVKA_QUEUE_TYPE: queueType,
  DOSTAVKA_RETRY_DELAYS_MS: "300,600",
  DOSTAVKA_MAX_ATTEMPTS: "3"
})

const declared = (prefix: string, queueType: "classic" | "quorum") =>
  Effect.gen(function*() {
    const topology = topologyOf({ prefix, queueType, retry: testRetryByHandler })
    yield* Effect.scoped(
      Effect.flatMap(openConnection(testAccess, "dostavka-test"), (c) => declareTopology(c, topology))
    ).pipe(Effect.provide(AmqpClient.live), Effect.orDie)
    return topology
  })

/** Which of `topology`'s queues and exchanges the broker has now: one passive declare each, on a channel of its own (a 404 closes it). */
const present = (topology: Topology) =>
  Effect.promise(async () => {
    const connection = await amqp.connect(amqpUrl)
    try {
      const exists = async (check: (channel: amqp.Channel) => Promise<unknown>) => {
        const channel = await connection.createChannel()
        channel.on("error", () => {})
        try {
          await check(channel)
          await channel.close()
          return true
        } catch (error) {
          if ((error as { code?: number }).code === 404) return false
          throw error
        }
      }
      const names: Array<string> = []
      for (const q of topology.queues) if (await exists((c) => c.checkQueue(q.name))) names.push(q.name)
      for (const e of topology.exchanges) if (await exists((c) => c.checkExchange(e.name))) names.push(e.name)
      return names
    } finally {
      await connection.close().catch(() => undefined)
    }
  })

const everyName = (topology: Topology) => [...topology.queues, ...topology.exchanges].map((o) => o.name)

describe("topology --delete on the real broker", () => {
  it.scopedLive(
    "--delete --yes removes every queue and exchange of the prefix, queues first: each queue's message count listed, what did not exist said so, and every passive declare a 404 afterwards",
    () =>
      Effect.gen(function*() {
        const prefix = uniquePrefix("topodel")
        yield* cleanupTopology(prefix)
        const topology = yield* declared(prefix, "classic")
        const names = namesOf(prefix)
        // Two events: each handler queue holds two messages.
        yield* publishRaw(
          amqpUrl,
          [1, 2].map((n) => ({
            exchange: names.exchange,
            routingKey: MaterialPublishedV1.type,
            content: Buffer.from(`{"n":${n}}`),
            options: { persistent: true }
          }))
        )
        // Deleted by hand before: the command says it did not exist.
        const connection = yield* testConnection
        const channel = yield* Effect.promise(() => connection.createChannel())
        yield* Effect.promise(() => channel.deleteQueue(names.deadQueue("audit")))

        const run = yield* dostavka(["topology", "--delete", "--yes"], envOf(prefix))
        expect(run.stderr).toBe("")
        expect(run.code).toBe(0)
        const queues = topology.queues.length
        expect(run.stdout).toMatch(
          new RegExp(
            `^deleted the topology of prefix ${prefix}: ${queues - 1} queues \\(4 messages with them\\) and ` +
              `${topology.exchanges.length} exchanges; 1 did not exist\\n`
          )
        )
        expect(run.stdout).toMatch(new RegExp(`\\n${names.queue("catalog")} +deleted +2\\n`))
        expect(run.stdout).toMatch(new RegExp(`\\n${names.queue("audit")} +deleted +2\\n`))
        expect(run.stdout).toMatch(
          new RegExp(`\\n${names.retryQueue("catalog", testRetryByHandler.catalog.delays[0]!)} +deleted +0\\n`)
        )
        expect(run.stdout).toMatch(new RegExp(`\\n${names.deadQueue("audit")} +did not exist +-\\n`))
        expect(run.stdout).toMatch(new RegExp(`\\n${names.exchange} +deleted\\n`))
        expect(yield* present(topology)).toEqual([])

        // Again: nothing is left, and the JSON says so object by object.
        const again = yield* dostavka(["topology", "--delete", "--yes", "--json"], envOf(prefix))
        expect(again.code).toBe(0)
        const report = JSON.parse(again.stdout) as {
          queues: ReadonlyArray<{ name: string; existed: boolean; messages: number | null }>
          exchanges: ReadonlyArray<{ name: string; existed: boolean }>
        }
        expect([...report.queues, ...report.exchanges].map((o) => o.name)).toEqual(everyName(topology))
        expect(report.queues.every((q) => !q.existed && q.messages === null)).toBe(true)
        expect(report.exchanges.every((e) => !e.existed)).toBe(true)
      }),
    60_000
  )

  for (const queueType of ["classic", "quorum"] as const) {
    it.scopedLive(
      `${queueType} queues: a queue with a consumer is refused (exit 1, one line naming it and its consumers, nothing deleted), and --force deletes it all`,
      () =>
        Effect.gen(function*() {
          const prefix = uniquePrefix(`topouse-${queueType}`)
          yield* cleanupTopology(prefix)
          const topology = yield* declared(prefix, queueType)
          const queue = namesOf(prefix).queue("catalog")
          const connection = yield* testConnection
          const channel = yield* Effect.promise(() => connection.createChannel())
          yield* Effect.promise(() => channel.consume(queue, () => {}, { noAck: false }))

          const refused = yield* dostavka(["topology", "--delete", "--yes"], envOf(prefix, queueType))
          expect(refused.code).toBe(1)
          expect(refused.stdout).toBe("")
          expect(refused.stderr.trimEnd().split("\n")).toEqual([
            `dostavka: topology --delete refused: ${queue} (1 consumer) still consumed; ` +
            "stop the roles and any other consumer, or add --force; nothing was deleted"
          ])
          expect(yield* present(topology)).toEqual(everyName(topology))

          const forced = yield* dostavka(["topology", "--delete", "--yes", "--force"], envOf(prefix, queueType))
          expect(forced.code).toBe(0)
          expect(forced.stdout).toMatch(new RegExp(`\\n${queue} +deleted +0\\n`))
          expect(yield* present(topology)).toEqual([])
        }),
      60_000
    )
  }

  it.live(
    "--delete without --yes is a usage error: exit 2, one line saying it deletes the queues with their messages, and no connection",
    () =>
      Effect.gen(function*() {
        // No broker answers on port 1: the refusal must come before any connect.
        const env = { DOSTAVKA_PREFIX: "plan", DOSTAVKA_AMQP_URL: "amqp://guest:guest@127.0.0.1:1" }
        const [noYes, yesAlone] = yield* Effect.all([
          dostavka(["topology", "--delete"], env),
          dostavka(["topology", "--yes"], env)
        ], { concurrency: 2 })
        expect(noYes.code).toBe(2)
        expect(noYes.stderr.trimEnd()).toBe(
          "dostavka: topology --delete deletes every queue of prefix plan with the messages in it, " +
            "and its exchanges: add --yes to do it"
        )
        expect(yesAlone.code).toBe(2)
        expect(yesAlone.stderr.trimEnd()).toBe("dostavka: --yes and --force go with --delete only")
      }),
    60_000
  )
})
