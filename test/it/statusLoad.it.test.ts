import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option, Redacted } from "effect"
import { createServer, type Server } from "node:http"
import { namesOf } from "../../src/adapters/amqp/Topology.js"
import { type StatusReport, StatusView } from "../../src/app/status.js"
import { ApiRole, statusViewOver } from "../../src/roles/api.js"
import { ApiReader } from "../../src/roles/databases.js"
import { CatalogRole } from "../../src/roles/receivers.js"
import { depthOf, eventually, publishRaw, tempDataDir, uniquePrefix } from "../support/broker.js"
import {
  freePort,
  hasPrivateBrokerSupport,
  privateBroker,
  privateBrokerUnsupportedReason
} from "../support/privateBroker.js"
import { baseUrl, startRoles, testSettings } from "../support/roles.js"

/** Connections the node has accepted since it started, from its management API (sampled every 500 ms here). */
const connectionsCreated = (mgmtPort: number) =>
  Effect.promise(async () => {
    const response = await fetch(`http://127.0.0.1:${mgmtPort}/api/overview`, {
      headers: { authorization: `Basic ${Buffer.from("guest:guest").toString("base64")}` }
    })
    const overview = await response.json() as { churn_rates?: { connection_created?: number } }
    return overview.churn_rates?.connection_created ?? -1
  })

/** `n` GET /v1/status, `concurrency` at a time; the statuses they answered with. */
const statusCalls = (base: string, n: number, concurrency: number) =>
  Effect.forEach(
    Array.from({ length: n }),
    () =>
      Effect.promise(async () => {
        const response = await fetch(`${base}/v1/status`)
        await response.arrayBuffer()
        return response.status
      }),
    { concurrency }
  )

/** An HTTP server on 127.0.0.1 that answers every request with `body` as JSON, 200. */
const answering = (body: string) =>
  Effect.acquireRelease(
    Effect.async<Server>((resume) => {
      const server = createServer((_, response) => {
        response.writeHead(200, { "content-type": "application/json" })
        response.end(body)
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) => Effect.sync(() => server.close())
  )

if (!hasPrivateBrokerSupport) console.log(`status load test skipped: ${privateBrokerUnsupportedReason}`)

describe.skipIf(!hasPrivateBrokerSupport)("the status view under a flood of requests", () => {
  it.scopedLive(
    "1,000 GET /v1/status, 100 at a time, on a broker limited to 256 files: all answered, and at most one connection opened for them, with or without the management API",
    () =>
      Effect.gen(function*() {
        const mgmtPort = yield* freePort
        const broker = yield* privateBroker({
          mgmtPort,
          maxFds: 256,
          conf: ["collect_statistics_interval = 500"]
        })
        const prefix = uniquePrefix("status-load")
        const names = namesOf(prefix)
        const dir = yield* tempDataDir
        const settingsWith = (managementUrl: string) =>
          testSettings(prefix, dir, {
            amqpUrl: Redacted.make(broker.url),
            managementUrl: Option.some(Redacted.make(managementUrl))
          })
        const viaManagement = settingsWith(`http://127.0.0.1:${mgmtPort}`)
        // A receiver declares the topology; a poison message gives its dead queue a head to report.
        yield* startRoles(CatalogRole, viaManagement)
        yield* publishRaw(broker.url, [{
          exchange: names.exchange,
          routingKey: "material.published.v1",
          content: Buffer.from("{"),
          options: { messageId: "poison", contentType: "application/json", persistent: true }
        }])
        yield* eventually(depthOf(broker.url, names.deadQueue("catalog")), (n) => n === 1)

        for (const management of [`http://127.0.0.1:${mgmtPort}`, "http://127.0.0.1:1"]) {
          const api = yield* startRoles(ApiRole, settingsWith(management))
          const before = yield* eventually(connectionsCreated(mgmtPort), (n) => n >= 0)
          const answers = yield* statusCalls(baseUrl(api.context), 1_000, 100)
          expect(answers.filter((status) => status === 200)).toHaveLength(1_000)
          // The counter is sampled: wait for the calls' connections to show, then a sample more.
          yield* Effect.sleep("1200 millis")
          const after = yield* connectionsCreated(mgmtPort)
          expect(after - before, `opened with DOSTAVKA_MANAGEMENT_URL=${management}`).toBeLessThanOrEqual(1)
          const report = yield* Effect.flatMap(StatusView, (view) => view.report).pipe(
            Effect.provide(statusViewOver(ApiReader).pipe(Layer.provide(settingsWith(management))))
          ) as Effect.Effect<StatusReport>
          const catalog = report.handlers.find((h) => h.handler === "catalog")!
          expect(catalog.dead.figures.ready).toBe(1)
          expect(catalog.dead.oldestAgeMs).not.toBeNull()
          yield* api.stop
        }
      }),
    180_000
  )

  it.scopedLive(
    "a management API answering JSON nested 200,000 deep: the view falls back to passive declares, /v1/status answers 200",
    () =>
      Effect.gen(function*() {
        const broker = yield* privateBroker()
        const deep = yield* answering("[".repeat(200_000) + "]".repeat(200_000))
        const port = (deep.address() as { port: number }).port
        const dir = yield* tempDataDir
        const settings = testSettings(uniquePrefix("status-deep"), dir, {
          amqpUrl: Redacted.make(broker.url),
          managementUrl: Option.some(Redacted.make(`http://127.0.0.1:${port}`))
        })
        yield* startRoles(CatalogRole, settings)
        const api = yield* startRoles(ApiRole, settings)
        const response = yield* Effect.promise(() => fetch(`${baseUrl(api.context)}/v1/status`))
        expect(response.status).toBe(200)
        const body = yield* Effect.promise(() => response.json()) as Effect.Effect<{
          handlers: ReadonlyArray<{ queue: { source: string; detail?: string; consumers: number | null } }>
        }>
        expect(body.handlers[0]!.queue).toMatchObject({
          source: "queue.declare",
          consumers: 1,
          detail: expect.stringContaining("nests arrays or objects deeper than 32 levels")
        })
      }),
    120_000
  )
})
