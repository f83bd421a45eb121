import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Option, Redacted } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import { createServer, type Server } from "node:http"
import { join } from "node:path"
import { namesOf } from "../../src/adapters/amqp/Topology.js"
import { ApiRole } from "../../src/roles/api.js"
import { CatalogRole } from "../../src/roles/receivers.js"
import { depthOf, eventually, publishRaw, tempDataDir, uniquePrefix } from "../support/broker.js"
import {
  freePort,
  hasPrivateBrokerSupport,
  privateBroker,
  privateBrokerUnsupportedReason
} from "../support/privateBroker.js"
import { baseUrl, startRoles, testSettings } from "../support/roles.js"

/**
 * How many connections named `name` the private node `node` has accepted so far, from its
 * log ("connection <…> (… - NAME): user … authenticated"): exact, unlike the management
 * API's sampled churn counters.
 */
const connectionsNamed = (node: string, name: string) =>
  Effect.sync(() => {
    const dir = join("/tmp/dostavka-rabbit", node, "log")
    return readdirSync(dir)
      .filter((file) => file.endsWith(".log"))
      .map((file) => readFileSync(join(dir, file), "utf8").split(` - ${name}): user `).length - 1)
      .reduce((a, b) => a + b, 0)
  })

/** `count` once it reads the same twice 500 ms apart: the node writes its log a moment after the fact. */
const settled = (count: Effect.Effect<number>) =>
  Effect.gen(function*() {
    let last = yield* count
    for (;;) {
      yield* Effect.sleep("500 millis")
      const now = yield* count
      if (now === last) return now
      last = now
    }
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
          maxFds: 256
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
          const before = yield* settled(connectionsNamed(broker.name, `${prefix}-status`))
          const answers = yield* statusCalls(baseUrl(api.context), 1_000, 100)
          expect(answers.filter((status) => status === 200)).toHaveLength(1_000)
          const after = yield* settled(connectionsNamed(broker.name, `${prefix}-status`))
          expect(after - before, `opened with DOSTAVKA_MANAGEMENT_URL=${management}`).toBeLessThanOrEqual(1)
          const status = Effect.promise(async () =>
            (await fetch(`${baseUrl(api.context)}/v1/status`)).json()
          ) as Effect.Effect<
            {
              handlers: ReadonlyArray<
                { handler: string; dead: { figures: { ready: number }; oldest_age_ms: number | null; detail?: string } }
              >
            }
          >
          const catalogOf = (report: Effect.Effect.Success<typeof status>) =>
            report.handlers.find((h) => h.handler === "catalog")!
          // The management API samples each queue every 5 s, so the dead letter may not be in its
          // figures yet (nor in the view's cache of the last second): wait until the view shows it.
          const catalog = catalogOf(yield* eventually(status, (r) => catalogOf(r).dead.figures.ready === 1))
          expect(catalog.dead.figures.ready).toBe(1)
          expect(catalog.dead.oldest_age_ms, `${management}: ${catalog.dead.detail}`).not.toBeNull()
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
        const status = Effect.promise(async () => {
          const response = await fetch(`${baseUrl(api.context)}/v1/status`)
          const text = await response.text()
          return {
            status: response.status,
            body: response.status === 200
              ? JSON.parse(text) as {
                handlers: ReadonlyArray<{ queue: { source: string; detail?: string; consumers: number | null } }>
              }
              : undefined
          }
        })
        // The catalog starts consuming in a fiber of its own, after its role has started: wait
        // until the passive declare counts its consumer (the view serves a report for a second).
        const { body, status: code } = yield* eventually(
          status,
          (r) => r.status !== 200 || r.body?.handlers[0]?.queue.consumers === 1
        )
        expect(code).toBe(200)
        expect(body!.handlers[0]!.queue).toMatchObject({
          source: "queue.declare",
          consumers: 1,
          detail: expect.stringContaining("nests arrays or objects deeper than 32 levels")
        })
      }),
    120_000
  )

  it.scopedLive(
    "GET /v1/status while the broker's VM is paused (SIGSTOP), the management API unreachable: answered within the view's own bounds, not after the heartbeat gives the connection up",
    () =>
      Effect.gen(function*() {
        const broker = yield* privateBroker()
        const dir = yield* tempDataDir
        const settings = testSettings(uniquePrefix("status-frozen"), dir, {
          amqpUrl: Redacted.make(broker.url),
          managementUrl: Option.some(Redacted.make("http://127.0.0.1:1")),
          connectTimeout: Duration.seconds(1)
        })
        yield* startRoles(CatalogRole, settings)
        const api = yield* startRoles(ApiRole, settings)
        const base = baseUrl(api.context)
        const timed = Effect.promise(async () => {
          const started = Date.now()
          const response = await fetch(`${base}/v1/status`, { signal: AbortSignal.timeout(60_000) })
          await response.arrayBuffer()
          return { status: response.status, ms: Date.now() - started }
        })
        // A first view opens the shared status connection.
        expect((yield* timed).status).toBe(200)
        const pid = yield* broker.pid
        yield* Effect.acquireRelease(
          Effect.sync(() => process.kill(pid, "SIGSTOP")),
          () => Effect.sync(() => process.kill(pid, "SIGCONT"))
        )
        // Past the second a view is served for, so that this one reads the silent broker.
        yield* Effect.sleep("1100 millis")
        const frozen = yield* timed
        expect(frozen.status).toBe(200)
        expect(frozen.ms, "ms for one GET /v1/status with the broker paused").toBeLessThan(8_000)
      }),
    120_000
  )
})
