import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { HttpServer } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Context, Deferred, Duration, Effect, Fiber, Layer, Option, Redacted } from "effect"
import { execFileSync } from "node:child_process"
import { randomBytes, randomUUID } from "node:crypto"
import { ManagementApi } from "../../src/adapters/amqp/ManagementApi.js"
import { RedeliveryAmqp } from "../../src/adapters/amqp/RedeliveryAmqp.js"
import { namesOf } from "../../src/adapters/amqp/Topology.js"
import { catalogHandler } from "../../src/app/handlers.js"
import { findGaps, redeliverGaps } from "../../src/app/reconcile.js"
import { type StatusReport, StatusView } from "../../src/app/status.js"
import { TracingEnabled } from "../../src/app/tracing.js"
import type { HandlerName } from "../../src/domain/HandlerName.js"
import { Outbox } from "../../src/ports/Outbox.js"
import { Redelivery } from "../../src/ports/Redelivery.js"
import { ApiRole, statusViewOver } from "../../src/roles/api.js"
import { ApiReader, CatalogStores, HandlerInboxesSqlite } from "../../src/roles/databases.js"
import { healthServer } from "../../src/roles/health.js"
import { AuditRole, CatalogRole, receiverRole } from "../../src/roles/receivers.js"
import { RelayRole } from "../../src/roles/relay.js"
import {
  amqpUrl,
  cleanupTopology,
  closeConnectionsNamed,
  eventually,
  publishRaw,
  tempDataDir,
  testConnection,
  testVhost,
  uniquePrefix
} from "../support/broker.js"
import { dostavka } from "../support/cli.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { scrape } from "../support/prometheus.js"
import { baseUrl, type CapturedLog, countRows, get, post, query, startRoles, testSettings } from "../support/roles.js"

/** The status view of `settings`' data dir and broker, as `npm run main -- status` builds it. */
const statusOf = (settings: ReturnType<typeof testSettings>) =>
  Effect.flatMap(Effect.flatMap(StatusView, (view) => view.report), (report) => Effect.succeed(report)).pipe(
    Effect.provide(statusViewOver(ApiReader).pipe(Layer.provide(settings)))
  )

const handlerOf = (report: StatusReport, handler: HandlerName) => report.handlers.find((h) => h.handler === handler)!

/** Posts `n` revisions of fresh materials; returns their event ids in order. */
const postMany = (base: string, n: number, label: string) =>
  Effect.forEach(
    Array.from({ length: n }, (_, i) => i),
    (i) =>
      Effect.map(
        post(
          base,
          `${label}-${i}-${randomUUID()}`,
          MaterialMother.wire(MaterialMother.command({ materialId: `${label}/m${i}` }))
        ),
        (r) => {
          expect(r.status).toBe(202)
          return r.body.event_id as string
        }
      )
  )

const applied = (dir: string, handler: HandlerName) => () =>
  Effect.sync(() =>
    query<{ n: number }>(
      dir,
      handler,
      "SELECT COUNT(*) AS n FROM inbox WHERE handler = ? AND outcome = 'applied'",
      handler
    )[0]!.n
  )

/** Outbox rows not yet marked published. */
const outboxPending = (dir: string) =>
  Effect.sync(() =>
    query<{ n: number }>(dir, "api", "SELECT COUNT(*) AS n FROM outbox WHERE published_at IS NULL")[0]!.n
  )

interface Readiness {
  readonly status: string
  readonly checks: ReadonlyArray<{ readonly name: string; readonly ok: boolean; readonly detail?: string }>
}

const portOf = (context: Context.Context<never>) => {
  const server = Context.unsafeGet(context, HttpServer.HttpServer)
  return server.address._tag === "TcpAddress" ? server.address.port : 0
}

describe("the status view", () => {
  it.scopedLive(
    "shows what was arranged: pending with the relay stopped, ready with a receiver stopped, unacked while held, dead after poison; unacked null without the management API",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("status")
        yield* cleanupTopology(prefix)
        const settings = testSettings(prefix, dir)
        const names = namesOf(prefix)

        // The API alone: three events wait in the outbox.
        const api = yield* startRoles(ApiRole, settings)
        yield* postMany(baseUrl(api.context), 3, "status")
        expect((yield* statusOf(settings)).outbox).toMatchObject({ pending: 3, published: 0 })

        // The relay and audit, not the catalog: the three wait in the catalog's queue.
        yield* startRoles(Layer.merge(RelayRole, AuditRole), settings)
        yield* eventually(applied(dir, "audit")(), (n) => n === 3)
        // Two poison messages: dead at once for audit, waiting in the catalog's queue.
        yield* publishRaw(
          amqpUrl,
          [1, 2].map((i) => ({
            exchange: names.exchange,
            routingKey: "material.published.v1",
            content: Buffer.from("{"),
            options: { messageId: `poison-${i}`, contentType: "application/json", persistent: true }
          }))
        )
        // The management API samples every 5 s: wait until every figure asserted below is fresh. The
        // relay marks its rows published after their confirms, so audit may have applied them first.
        const before = yield* eventually(statusOf(settings), (r) =>
          handlerOf(r, "catalog").queue.ready === 5 && handlerOf(r, "audit").dead.figures.ready === 2 &&
          handlerOf(r, "audit").queue.consumers === 1 && handlerOf(r, "catalog").queue.unacked === 0 &&
          r.outbox?.pending === 0 && r.outbox?.published === 3, 20_000)
        expect(before.outbox).toMatchObject({ pending: 0, published: 3 })
        expect(handlerOf(before, "catalog")).toMatchObject({
          queue: { source: "management", ready: 5, unacked: 0, consumers: 0 },
          inbox: null
        })
        expect(handlerOf(before, "audit")).toMatchObject({ queue: { consumers: 1 }, inbox: { applied: 3, dead: 2 } })
        expect(handlerOf(before, "audit").dead.oldestAgeMs).toBeGreaterThanOrEqual(0)

        // A catalog whose handler holds its transaction open: all five are delivered, none acked.
        const release = yield* Deferred.make<void>()
        // Let go before the roles stop, should an assertion below fail.
        yield* Effect.addFinalizer(() =>
          Deferred.succeed(release, undefined)
        )
        const held = {
          ...catalogHandler,
          apply: (...args: Parameters<typeof catalogHandler.apply>) =>
            Effect.zipRight(Deferred.await(release), catalogHandler.apply(...args))
        }
        yield* startRoles(receiverRole(held).pipe(Layer.provide(CatalogStores)), settings)
        const holding = yield* eventually(statusOf(settings), (r) =>
          handlerOf(r, "catalog").queue.unacked === 5 && handlerOf(r, "catalog").queue.ready === 0 &&
          handlerOf(r, "catalog").queue.consumers === 1, 20_000)
        expect(handlerOf(holding, "catalog").queue).toMatchObject({ ready: 0, unacked: 5, consumers: 1 })

        // Without the management API: ready and consumers from a passive declare, unacked unknown.
        const blind = yield* statusOf(
          testSettings(prefix, dir, { managementUrl: Option.some(Redacted.make("http://127.0.0.1:1")) })
        )
        expect(handlerOf(blind, "catalog").queue).toMatchObject({
          source: "queue.declare",
          ready: 0,
          unacked: null,
          consumers: 1
        })
        expect(handlerOf(blind, "catalog").queue.detail).toContain("unacked is not known")

        yield* Deferred.succeed(release, undefined)
        yield* eventually(applied(dir, "catalog")(), (n) =>
          n === 3)
        const after = yield* eventually(statusOf(settings), (r) =>
          handlerOf(r, "catalog").dead.figures.ready === 2, 20_000)
        expect(handlerOf(after, "catalog")).toMatchObject({ inbox: { applied: 3, dead: 2, retrying: 0 }, gaps: 0 })
      }),
    120_000
  )
})

describe("metrics and health", () => {
  it.scopedLive(
    "/metrics parses as Prometheus text; its counters move by what the test sent, duplicates included",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("metrics")
        yield* cleanupTopology(prefix)
        const settings = testSettings(prefix, dir)
        const roles = yield* startRoles(Layer.mergeAll(ApiRole, RelayRole, CatalogRole, AuditRole), settings)
        const base = baseUrl(roles.context)
        const start = yield* scrape(base)
        const ids = yield* postMany(base, 5, "metrics")
        yield* eventually(
          Effect.all([applied(dir, "catalog")(), applied(dir, "audit")()]),
          ([c, a]) => c === 5 && a === 5
        )
        // The same five again to the catalog only: its inbox absorbs them.
        const rows = yield* Effect.flatMap(Outbox, (o) => o.find(ids)).pipe(
          Effect.provide(ApiReader.pipe(Layer.provide(settings)))
        )
        const sent = yield* Effect.flatMap(Redelivery, (r) => r.send("catalog", rows.map((row) => row.envelope))).pipe(
          Effect.provide(RedeliveryAmqp.pipe(Layer.provide(settings)))
        )
        expect(sent.map((o) => o._tag)).toEqual(Array(5).fill("Confirmed"))
        const delta = (now: typeof start, name: string, labels: Record<string, string>) =>
          now.value(name, labels) - start.value(name, labels)
        // Histograms are checked in the text: this parser folds OpenTelemetry's histogram series together.
        const histogramCount = (text: string) =>
          Number(/^dostavka_commit_to_applied_seconds_count\{handler="catalog"[^}]*\} (\d+)$/m.exec(text)?.[1] ?? 0)
        // Each counter moves after the fact it counts (a delivery's after its ack, a publish's after its
        // confirm), each in its own fiber: wait until every one asserted below has moved.
        const end = yield* eventually(
          scrape(base),
          (s) =>
            delta(s, "dostavka_deliveries_total", { handler: "catalog", disposition: "duplicate" }) === 5 &&
            delta(s, "dostavka_deliveries_total", { handler: "catalog", disposition: "applied" }) === 5 &&
            delta(s, "dostavka_deliveries_total", { handler: "audit", disposition: "applied" }) === 5 &&
            delta(s, "dostavka_publishes_total", { outcome: "confirmed", role: "relay" }) === 5 &&
            delta(s, "dostavka_http_requests_total", { status: "202", route: "/v1/publications" }) === 5 &&
            histogramCount(s.text) - histogramCount(start.text) === 5
        )
        expect(end.families.map((f) => f.name)).toEqual(expect.arrayContaining([
          "dostavka_http_requests_total",
          "dostavka_publishes_total",
          "dostavka_deliveries_total",
          "dostavka_publish_confirm_seconds",
          "dostavka_commit_to_applied_seconds",
          "dostavka_handler_seconds"
        ]))
        expect(delta(end, "dostavka_http_requests_total", { status: "202", route: "/v1/publications" })).toBe(5)
        expect(delta(end, "dostavka_publishes_total", { outcome: "confirmed", role: "relay" })).toBe(5)
        expect(delta(end, "dostavka_deliveries_total", { handler: "catalog", disposition: "applied" })).toBe(5)
        expect(delta(end, "dostavka_deliveries_total", { handler: "audit", disposition: "applied" })).toBe(5)
        expect(delta(end, "dostavka_deliveries_total", { handler: "audit", disposition: "duplicate" })).toBe(0)
        expect(histogramCount(end.text) - histogramCount(start.text)).toBe(5)
        expect(end.text).not.toMatch(/event_id|message_id|guest/)
      }),
    60_000
  )

  it.scopedLive(
    "/readyz: 200 when up, 503 naming the broker connection after rabbitmqctl close_connection, 200 again after recovery",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("readyz")
        yield* cleanupTopology(prefix)
        const settings = testSettings(prefix, dir)
        const catalog = yield* startRoles(Layer.merge(CatalogRole, healthServer(0)), settings)
        const base = `http://127.0.0.1:${portOf(catalog.context as Context.Context<never>)}`
        expect((yield* get(base, "/healthz")).body).toEqual({ status: "ok" })
        const ready = yield* eventually(get(base, "/readyz"), (r) => r.status === 200)
        expect((ready.body as Readiness).checks.map((c) => c.name).sort()).toEqual(
          [`broker:${prefix}-catalog-consumer`, "database:catalog", "topology:catalog"]
        )
        // Poll every 20 ms across the close: the consumer's first reconnect waits 200–300 ms.
        const seen: Array<{ status: number; body: Readiness }> = []
        const watching = yield* Effect.fork(Effect.forever(Effect.zipRight(
          Effect.flatMap(get(base, "/readyz"), (r) =>
            Effect.sync(() => seen.push({ status: r.status, body: r.body as Readiness }))),
          Effect.sleep("20 millis")
        )))
        expect(yield* closeConnectionsNamed(`${prefix}-catalog-consumer`)).toBe(1)
        yield* eventually(
          Effect.sync(() =>
            seen
          ),
          (all) => all.some((r) => r.status === 503) && all.at(-1)?.status === 200,
          15_000
        )
        yield* Fiber.interrupt(watching)
        const down = seen.find((r) => r.status === 503)!
        expect(down.body.checks.find((c) => !c.ok)).toMatchObject({
          name: `broker:${prefix}-catalog-consumer`,
          detail: expect.stringContaining("reconnecting")
        })
      }),
    60_000
  )
})

describe("traces across the broker", () => {
  it.scopedLive(
    "one POST yields spans for the API, the relay's publish and both receivers, all in one trace",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("trace")
        yield* cleanupTopology(prefix)
        const exporter = new InMemorySpanExporter()
        const tracing = Layer.merge(
          NodeSdk.layer(() => ({
            resource: { serviceName: "dostavka-test" },
            spanProcessor: new SimpleSpanProcessor(exporter)
          })),
          Layer.succeed(TracingEnabled, true)
        )
        const roles = yield* startRoles(
          Layer.mergeAll(ApiRole, RelayRole, CatalogRole, AuditRole).pipe(Layer.provide(tracing)),
          testSettings(prefix, dir)
        )
        const [eventId] = yield* postMany(baseUrl(roles.context), 1, "trace")
        yield* eventually(
          Effect.all([applied(dir, "catalog")(), applied(dir, "audit")()]),
          ([c, a]) => c === 1 && a === 1
        )
        // A span is exported when it ends: the relay's publish span ends after its confirm, and the
        // API's once the answer is written, either of which may come after the receivers applied.
        const spans = yield* eventually(Effect.sync(() => exporter.getFinishedSpans()), (all) =>
          all.some((s) =>
            s.name === "Receiver.apply audit"
          ) && all.some((s) => s.name === "Receiver.apply catalog") &&
          all.some((s) => s.name === "http.server POST") &&
          all.some((s) => s.name === "Relay.publish" && s.attributes["messaging.message.id"] === eventId))
        const named = (name: string) => spans.filter((s) => s.name === name)
        const http = named("http.server POST")[0]!
        const publish = named("Relay.publish").find((s) => s.attributes["messaging.message.id"] === eventId)!
        const receivers = [...named("Receiver.apply catalog"), ...named("Receiver.apply audit")]
        expect(receivers).toHaveLength(2)
        const traceId = http.spanContext().traceId
        expect([publish, ...receivers].map((s) => s.spanContext().traceId)).toEqual([traceId, traceId, traceId])
        // The receivers are children of the relay's publish span, carried in the traceparent header.
        expect(receivers.map((s) => s.parentSpanContext?.spanId)).toEqual([
          publish.spanContext().spanId,
          publish.spanContext().spanId
        ])
      }),
    60_000
  )
})

describe("credentials", () => {
  it.scopedLive(
    "a password in DOSTAVKA_AMQP_URL appears in no log line, status output or metric",
    () =>
      Effect.gen(function*() {
        const { url: vhostUrl, vhost } = yield* testVhost("secret")
        const user = `dostavka-test-${randomUUID().slice(0, 8)}`
        const password = randomBytes(12).toString("hex")
        yield* Effect.acquireRelease(
          Effect.sync(() => {
            execFileSync("rabbitmqctl", ["-q", "add_user", user, password])
            execFileSync("rabbitmqctl", ["-q", "set_permissions", "-p", vhost, user, ".*", ".*", ".*"])
          }),
          () => Effect.sync(() => execFileSync("rabbitmqctl", ["-q", "delete_user", user], { stdio: "ignore" }))
        )
        const url = vhostUrl.replace("guest:guest@", `${user}:${password}@`)
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("secret")
        const settings = testSettings(prefix, dir, { amqpUrl: Redacted.make(url) })
        const logs: Array<CapturedLog> = []
        const roles = yield* startRoles(Layer.mergeAll(ApiRole, RelayRole, CatalogRole, AuditRole), settings, {
          logs,
          allLevels: true
        })
        const base = baseUrl(roles.context)
        yield* postMany(base, 2, "secret")
        // Both receivers: the status command's first handler, asserted below, is the catalog.
        yield* eventually(Effect.all([applied(dir, "catalog")(), applied(dir, "audit")()]), ([c, a]) =>
          c === 2 && a === 2)
        // This user has no management tag: the status view falls back to queue.declare, and says why.
        const status = yield* get(base, "/v1/status")
        expect((status.body as { handlers: Array<{ queue: { source: string } }> }).handlers[0]!.queue.source).toBe(
          "queue.declare"
        )
        const metrics = yield* scrape(base)
        const cli = yield* dostavka(["status", "--json"], {
          DOSTAVKA_AMQP_URL: url,
          DOSTAVKA_PREFIX: prefix,
          DOSTAVKA_DATA_DIR: dir,
          DOSTAVKA_LOG_LEVEL: "debug"
        })
        const table = yield* dostavka(["status"], {
          DOSTAVKA_AMQP_URL: url,
          DOSTAVKA_PREFIX: prefix,
          DOSTAVKA_DATA_DIR: dir,
          DOSTAVKA_MANAGEMENT_URL: `http://${user}:${password}@127.0.0.1:15672`
        })
        expect(cli.code).toBe(0)
        expect(JSON.parse(cli.stdout).handlers[0].inbox.applied).toBe(2)
        expect(table.stdout).toContain("HANDLER")
        const everything = [
          ...logs.map((l) =>
            `${l.message} ${JSON.stringify(l.annotations)}`
          ),
          JSON.stringify(status.body),
          metrics.text,
          cli.stdout,
          cli.stderr,
          table.stdout,
          table.stderr
        ].join("\n")
        expect(logs.length).toBeGreaterThan(10)
        expect(everything).not.toContain(password)
      }),
    90_000
  )
})

describe("reconciliation", () => {
  const cliEnv = (prefix: string, dir: string) => ({
    DOSTAVKA_PREFIX: prefix,
    DOSTAVKA_DATA_DIR: dir,
    DOSTAVKA_RETRY_DELAYS_MS: "300,600",
    DOSTAVKA_MAX_ATTEMPTS: "3"
  })

  it.scopedLive(
    "a queue deleted for a moment: reconcile finds exactly the events the catalog missed, --redeliver sends them to it alone, no effect twice",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("deleted-queue")
        yield* cleanupTopology(prefix)
        const settings = testSettings(prefix, dir)
        const core = yield* startRoles(Layer.mergeAll(ApiRole, RelayRole, AuditRole), settings)
        const base = baseUrl(core.context)
        const first = yield* startRoles(CatalogRole, settings)
        yield* postMany(base, 3, "before")
        yield* eventually(Effect.all([applied(dir, "catalog")(), applied(dir, "audit")()]), ([c, a]) =>
          c === 3 && a === 3)
        // The catalog's queue deleted by hand: confirmed events reach audit's queue only.
        yield* first.stop
        const connection = yield* testConnection
        const channel = yield* Effect.promise(() =>
          connection.createChannel()
        )
        yield* Effect.promise(() => channel.deleteQueue(namesOf(prefix).queue("catalog")))
        const missed = yield* postMany(base, 4, "missed")
        yield* eventually(applied(dir, "audit")(), (n) => n === 7)
        yield* startRoles(CatalogRole, settings)
        yield* postMany(base, 2, "after")
        yield* eventually(Effect.all([applied(dir, "catalog")(), applied(dir, "audit")()]), ([c, a]) =>
          c === 5 && a === 9)
        // Reconcile compares the rows marked published, which the relay marks after their confirms.
        yield* eventually(outboxPending(dir), (n) =>
          n === 0)

        const found = yield* dostavka(["reconcile", "--older-than", "0s", "--json"], cliEnv(prefix, dir))
        expect(found, found.stdout + found.stderr).toMatchObject({ code: 1 })
        const [catalog, audit] = JSON.parse(found.stdout) as Array<
          { handler: string; checked: number; gaps: Array<{ event_id: string }> }
        >
        expect(catalog).toMatchObject({ handler: "catalog", checked: 9 })
        expect(catalog!.gaps.map((g) => g.event_id)).toEqual(missed)
        expect(audit).toMatchObject({ handler: "audit", checked: 9, gaps: [] })
        expect(found.stderr).toContain("some published events never reached a handler")
        const status = yield* statusOf(settings)
        expect(handlerOf(status, "catalog").gaps).toBe(0) // younger than 60 s: not yet counted as gaps

        const repaired = yield* dostavka(["reconcile", "--older-than", "0s", "--redeliver"], cliEnv(prefix, dir))
        expect(repaired.code).toBe(0)
        expect(repaired.stdout).toContain("catalog: redelivered 4, failed 0")
        yield* eventually(applied(dir, "catalog")(), (n) => n === 9)
        const again = yield* dostavka(["reconcile", "--older-than", "0s", "--json"], cliEnv(prefix, dir))
        expect(again.code).toBe(0)
        expect((JSON.parse(again.stdout) as Array<{ gaps: Array<unknown> }>).map((h) => h.gaps)).toEqual([[], []])
        expect(countRows(dir, "audit", "audit_records")).toBe(9)
        expect(countRows(dir, "catalog", "catalog_entries")).toBe(9)
        expect(query(dir, "catalog", "SELECT SUM(duplicates) AS d FROM inbox")).toEqual([{ d: 0 }])
        expect(query(dir, "audit", "SELECT SUM(duplicates) AS d FROM inbox")).toEqual([{ d: 0 }])
      }),
    120_000
  )

  it.scopedLive(
    "a binding removed by hand: the missed events are found and redelivered; with a short check period the binding is back within one period",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("removed-binding")
        yield* cleanupTopology(prefix)
        const names = namesOf(prefix)
        const settings = testSettings(prefix, dir)
        const roles = yield* startRoles(Layer.mergeAll(ApiRole, RelayRole, CatalogRole, AuditRole), settings)
        const base = baseUrl(roles.context)
        yield* postMany(base, 2, "bound")
        yield* eventually(Effect.all([applied(dir, "catalog")(), applied(dir, "audit")()]), ([c, a]) =>
          c === 2 && a === 2)
        const connection = yield* testConnection
        const channel = yield* Effect.promise(() =>
          connection.createChannel()
        )
        yield* Effect.promise(() =>
          channel.unbindQueue(names.queue("catalog"), names.exchange, "material.published.v1")
        )
        const missed = yield* postMany(base, 5, "unbound")
        yield* eventually(applied(dir, "audit")(), (n) => n === 7)
        // findGaps compares the rows marked published, which the relay marks after their confirms.
        yield* eventually(outboxPending(dir), (n) => n === 0)

        const reconcile = Effect.provide(
          Layer.mergeAll(ApiReader, HandlerInboxesSqlite, RedeliveryAmqp).pipe(Layer.provide(settings))
        )
        const search = { nowMs: Date.now() + 1, olderThanMs: 0, retryGraceMs: 600 }
        const found = yield* reconcile(findGaps("catalog", search))
        expect(found.gaps.map((g) => g.messageId)).toEqual(missed)
        expect((yield* reconcile(findGaps("audit", search))).gaps).toEqual([])
        yield* Effect.promise(() => channel.bindQueue(names.queue("catalog"), names.exchange, "material.published.v1"))
        expect(yield* reconcile(redeliverGaps("catalog", found.gaps))).toEqual({ redelivered: missed, failed: [] })
        yield* eventually(applied(dir, "catalog")(), (n) => n === 7)
        expect((yield* reconcile(findGaps("catalog", { ...search, nowMs: Date.now() + 1 }))).gaps).toEqual([])
        expect(query(dir, "catalog", "SELECT SUM(duplicates) AS d FROM inbox")).toEqual([{ d: 0 }])
        expect(countRows(dir, "audit", "audit_records")).toBe(7)
      }),
    90_000
  )

  it.scopedLive(
    "topology drift: a removed binding and a deleted dead-letter queue are declared again within one check period, and logged",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("drift")
        yield* cleanupTopology(prefix)
        const names = namesOf(prefix)
        const periodMs = 1_500
        const settings = testSettings(prefix, dir, { topologyCheck: Duration.millis(periodMs) })
        const logs: Array<CapturedLog> = []
        yield* startRoles(CatalogRole, settings, { logs, allLevels: true })
        const management = yield* Effect.provide(ManagementApi, ManagementApi.live.pipe(Layer.provide(settings)))
        const bound = management.bindingKeys(names.exchange, names.queue("catalog"))
        // The consumer declares the topology again when it connects: remove things after that.
        yield* eventually(Effect.sync(() => logs.some((l) => l.message === "consuming")), (up) => up)
        expect(yield* bound).toContain("material.published.v1")
        const connection = yield* testConnection
        const channel = yield* Effect.promise(() => connection.createChannel())
        yield* Effect.promise(() =>
          channel.unbindQueue(names.queue("catalog"), names.exchange, "material.published.v1")
        )
        yield* Effect.promise(() => channel.deleteQueue(names.deadQueue("catalog")))
        const removedAt = Date.now()
        // The repair is declared, then logged: wait for the log line, then look at the broker.
        // (The two removals may fall on either side of a check: then two lines name them.)
        const missing = (all: ReadonlyArray<CapturedLog>) =>
          all.filter((l) => l.message.startsWith("topology drift")).map((l) =>
            `${l.level} ${String(l.annotations.missing)}`
          ).join("; ")
        const drift = yield* eventually(
          Effect.sync(() => missing(logs)),
          (m) => m.includes("queue") && m.includes("binding"),
          periodMs + 3_000
        )
        expect(Date.now() - removedAt).toBeLessThan(periodMs + 3_000)
        expect(yield* bound).toContain("material.published.v1")
        expect(Option.isSome(yield* management.queue(names.deadQueue("catalog")))).toBe(true)
        expect(drift).toMatch(/^WARN /)
        expect(drift).toContain(`queue '${names.deadQueue("catalog")}'`)
        expect(drift).toContain(`binding '${names.exchange}' -> '${names.queue("catalog")}' (material.published.v1)`)
      }),
    60_000
  )
})
