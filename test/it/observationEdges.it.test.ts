import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option, Redacted } from "effect"
import { createServer, type Server } from "node:http"
import { QuorumDeadNotRead } from "../../src/adapters/amqp/BrokerStatsAmqp.js"
import { namesOf } from "../../src/adapters/amqp/Topology.js"
import { type StatusReport, StatusView } from "../../src/app/status.js"
import type { HandlerName } from "../../src/domain/HandlerName.js"
import { ApiRole, statusViewOver } from "../../src/roles/api.js"
import { ApiReader } from "../../src/roles/databases.js"
import { CatalogRole } from "../../src/roles/receivers.js"
import {
  cleanupTopology,
  depthOf,
  eventually,
  publishRaw,
  setPolicy,
  tempDataDir,
  testVhost,
  uniquePrefix
} from "../support/broker.js"
import { dostavka } from "../support/cli.js"
import { startRoles, testSettings } from "../support/roles.js"

/** The status view of `settings`' data dir and broker, as `npm run main -- status` builds it. */
const statusOf = (settings: ReturnType<typeof testSettings>) =>
  Effect.flatMap(StatusView, (view) => view.report).pipe(
    Effect.provide(statusViewOver(ApiReader).pipe(Layer.provide(settings)))
  )

const handlerOf = (report: StatusReport, handler: HandlerName) => report.handlers.find((h) => h.handler === handler)!

/** An HTTP server on 127.0.0.1 that is not RabbitMQ's management API: it answers 404 to every request. */
const notManagementApi = Effect.acquireRelease(
  Effect.async<Server>((resume) => {
    const server = createServer((_, response) => {
      response.writeHead(404, { "content-type": "text/html" })
      response.end("<html><body>Not Found</body></html>")
    })
    server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
  }),
  (server) => Effect.sync(() => server.close())
)

describe("a broker password with a literal %", () => {
  // amqplib accepts a password with a literal `%` (it unescapes leniently), so such a URL is a
  // working one for the broker; the kit must either use it or refuse it as a setting.
  it.scopedLive(
    "status with a literal % in the broker password: a status view (or exit 2 naming DOSTAVKA_AMQP_URL), never 'URI malformed'",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("edge-pct-status")
        const api = yield* startRoles(ApiRole, testSettings(prefix, dir))
        yield* api.stop
        const run = yield* dostavka(["status", "--json"], {
          DOSTAVKA_AMQP_URL: "amqp://guest:50%off@127.0.0.1:5672",
          DOSTAVKA_PREFIX: prefix,
          DOSTAVKA_DATA_DIR: dir
        })
        expect(run.stderr).not.toContain("URI malformed")
        expect(run.stdout + run.stderr).not.toContain("50%off")
        if (run.code === 2) {
          expect(run.stderr.trim()).toMatch(/^dostavka: configuration: DOSTAVKA_AMQP_URL/)
        } else {
          expect(run, run.stderr).toMatchObject({ code: 0 })
          expect(JSON.parse(run.stdout).outbox).toMatchObject({ pending: 0 })
        }
      }),
    60_000
  )

  it.scopedLive(
    "a relay whose password (with a literal %) the broker refuses stops with the one 'broker refused' line, not 'URI malformed'",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const run = yield* dostavka(["--role", "relay"], {
          DOSTAVKA_AMQP_URL: "amqp://guest:50%off@127.0.0.1:5672",
          DOSTAVKA_PREFIX: uniquePrefix("edge-pct-relay"),
          DOSTAVKA_DATA_DIR: dir
        })
        expect(run.stderr).not.toContain("URI malformed")
        expect(run.stderr).not.toContain("50%off")
        const last = run.stderr.trim().split("\n").at(-1)
        if (run.code === 2) {
          expect(last).toMatch(/^dostavka: configuration: DOSTAVKA_AMQP_URL/)
        } else {
          expect(run.code).toBe(1)
          expect(last).toMatch(/^dostavka: stopped: broker refused the connection \(authentication\)/)
        }
      }),
    60_000
  )
})

describe("the status view observes without changing or misreading", () => {
  it.scopedLive(
    "DOSTAVKA_MANAGEMENT_URL pointing at a server that is not the management API (404 to everything): queues that exist are not reported missing",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("edge-wrong-mgmt")
        yield* cleanupTopology(prefix)
        yield* startRoles(Layer.merge(ApiRole, CatalogRole), testSettings(prefix, dir))
        const server = yield* notManagementApi
        const address = server.address()
        const port = typeof address === "object" && address !== null ? address.port : 0
        const report = yield* statusOf(
          testSettings(prefix, dir, { managementUrl: Option.some(Redacted.make(`http://127.0.0.1:${port}`)) })
        )
        const catalog = handlerOf(report, "catalog")
        // The queue exists (the catalog role declared it and consumes it): "does not exist" would be a wrong figure.
        expect(catalog.queue.exists).not.toBe(false)
        expect(catalog.dead.figures.exists).not.toBe(false)
        expect(catalog.retry.map((r) => r.figures.exists)).not.toContain(false)
        expect(catalog.queue.source).not.toBe("management")
      }),
    60_000
  )

  it.scopedLive(
    "the status view leaves dead letters where they are: reading the oldest dead letter's age does not spend a quorum dead queue's delivery limit",
    () =>
      Effect.gen(function*() {
        // RabbitMQ 4 gives every quorum queue a delivery limit of 20 by default, past which a
        // message with no dead-letter exchange is dropped; a policy of 3 stands for it here.
        const { url, vhost } = yield* testVhost("edge-quorum-dead")
        yield* setPolicy(vhost, "dead-delivery-limit", "\\.dead$", { "delivery-limit": 3 })
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("edge-quorum-dead")
        const settings = testSettings(prefix, dir, { amqpUrl: Redacted.make(url), queueType: "quorum" })
        yield* startRoles(Layer.merge(ApiRole, CatalogRole), settings)
        const names = namesOf(prefix)
        yield* publishRaw(url, [{
          exchange: names.exchange,
          routingKey: "material.published.v1",
          content: Buffer.from("{"),
          options: {
            messageId: "edge-poison",
            type: "material.published.v1",
            contentType: "application/json",
            persistent: true,
            headers: { "x-schema-version": 1 }
          }
        }])
        yield* eventually(depthOf(url, names.deadQueue("catalog")), (n) => n === 1)
        // The management API samples every 5 s: wait until the view sees the dead letter.
        const seen = yield* eventually(statusOf(settings), (r) =>
          handlerOf(r, "catalog").dead.figures.ready === 1, 20_000)
        // Its age is not read on a quorum queue, and the view says why.
        expect(handlerOf(seen, "catalog").dead).toMatchObject({ oldestAgeMs: null, detail: QuorumDeadNotRead })
        // An operator watching `status --watch` for a few more seconds.
        for (let i = 0; i < 6; i++) {
          yield* statusOf(settings)
        }
        expect(yield* depthOf(url, names.deadQueue("catalog"))).toBe(1)
      }),
    60_000
  )
})

describe("the operator commands on a partial machine", () => {
  it.scopedLive(
    "reconcile --older-than garbage is refused as a bad argument (exit 2, one line naming --older-than) even where no database is",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const run = yield* dostavka(["reconcile", "--older-than", "garbage"], {
          DOSTAVKA_DATA_DIR: dir,
          DOSTAVKA_PREFIX: uniquePrefix("edge-reconcile")
        })
        expect(run.code).toBe(2)
        expect(run.stderr.trim().split("\n")).toHaveLength(1)
        expect(run.stderr).toContain("--older-than")
      }),
    60_000
  )

  it.scopedLive(
    "status where api.db is not (a receiver's machine): the view with the outbox unknown, naming api.db, rather than a failure",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("edge-no-api-db")
        yield* cleanupTopology(prefix)
        const catalog = yield* startRoles(CatalogRole, testSettings(prefix, dir))
        yield* catalog.stop
        const run = yield* dostavka(["status", "--json"], { DOSTAVKA_DATA_DIR: dir, DOSTAVKA_PREFIX: prefix })
        expect(run, run.stderr).toMatchObject({ code: 0 })
        const wire = JSON.parse(run.stdout)
        expect(wire.outbox).toBeNull()
        expect(wire.outbox_detail).toContain("api.db")
        expect(wire.handlers[0].inbox).toMatchObject({ applied: 0 })
      }),
    60_000
  )
})
