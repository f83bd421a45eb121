import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { execFileSync, spawnSync } from "node:child_process"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { namesOf } from "../../src/adapters/amqp/Topology.js"
import { CatalogRole } from "../../src/roles/receivers.js"
import { Roles } from "../../src/roles/Roles.js"
import {
  amqpUrl,
  cleanupTopology,
  depthOf,
  eventually,
  publishRaw,
  tempDataDir,
  uniquePrefix
} from "../support/broker.js"
import { projectRoot } from "../support/cli.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { scrape } from "../support/prometheus.js"
import { baseUrl, post, startRoles, testSettings } from "../support/roles.js"

/** Why promtool cannot run here, or undefined when it can (Debian's `prometheus` package has it; `.ci/run` installs it). */
const promtoolMissing = spawnSync("promtool", ["--version"]).error === undefined
  ? undefined
  : "promtool is not on PATH (apt-get install prometheus)"
if (promtoolMissing !== undefined) console.log(`promtool checks skipped: ${promtoolMissing}`)

const promtool = (args: ReadonlyArray<string>, input?: string) =>
  execFileSync("promtool", args, { encoding: "utf8", input, cwd: join(projectRoot, "ops", "prometheus") })

describe("gauges to alert on", () => {
  it.scopedLive(
    "a stopped receiver, a dead letter: /metrics has them as gauges, with the page rules that hold, every series named by its role, and no Effect runtime series",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("gauges")
        yield* cleanupTopology(prefix)
        const names = namesOf(prefix)
        const settings = testSettings(prefix, dir)
        // The catalog declares its queues and stops; the API and audit run, with their gauges.
        const catalog = yield* startRoles(CatalogRole, settings)
        yield* catalog.stop
        const api = yield* startRoles(Layer.merge(Roles.api, Roles.audit), settings)
        const base = baseUrl(api.context)
        yield* startRoles(Roles.relay, settings)
        for (const i of [0, 1, 2]) {
          const posted = yield* post(
            base,
            `gauges-${i}`,
            MaterialMother.wire(MaterialMother.command({ materialId: `gauges/m${i}` }))
          )
          expect(posted.status).toBe(202)
        }
        yield* publishRaw(amqpUrl, [{
          exchange: names.exchange,
          routingKey: "material.published.v1",
          content: Buffer.from("{"),
          options: { messageId: "gauges-poison", contentType: "application/json", persistent: true }
        }])
        yield* eventually(depthOf(amqpUrl, names.deadQueue("audit")), (n) => n === 1)

        // The gauges are set every 5 s, one after the other, from figures the management API samples
        // every 5 s, queue by queue, and from the outbox the relay marks after its confirms: wait until
        // every gauge asserted below that moves has moved.
        const metrics = yield* eventually(
          scrape(base),
          (m) =>
            m.value("dostavka_queue_ready", { handler: "catalog" }) === 4 &&
            m.value("dostavka_dead", { handler: "audit" }) === 1 &&
            m.value("dostavka_queue_consumers", { handler: "audit" }) === 1 &&
            m.value("dostavka_attention", { rule: "no-consumer" }) === 1 &&
            m.value("dostavka_attention", { rule: "dead" }) === 1 &&
            m.value("dostavka_outbox_pending") === 0 &&
            m.value("process_resident_memory_bytes") > 0,
          30_000
        )
        expect(metrics.value("dostavka_queue_consumers", { handler: "catalog" })).toBe(0)
        expect(metrics.value("dostavka_queue_consumers", { handler: "audit" })).toBe(1)
        expect(metrics.value("dostavka_attention", { rule: "no-consumer" })).toBe(1)
        expect(metrics.value("dostavka_attention", { rule: "dead" })).toBe(1)
        expect(metrics.value("dostavka_attention", { rule: "parked" })).toBe(0)
        expect(metrics.value("dostavka_outbox_pending")).toBe(0)
        expect(metrics.value("dostavka_build_info", { version: "0.1.0", node: process.versions.node })).toBe(1)
        expect(metrics.value("process_resident_memory_bytes")).toBeGreaterThan(10_000_000)
        // At 0 from the start, so that rate() and absence alerts work before the first event.
        expect(metrics.families.find((f) => f.name === "dostavka_reconnects_total")?.metrics).toContainEqual(
          expect.objectContaining({ labels: expect.objectContaining({ role: "audit" }), value: "0" })
        )
        for (const family of metrics.families) {
          expect(family.name).not.toMatch(/^effect_/)
        }
        const series = metrics.text.split("\n").filter((line) => line !== "" && !line.startsWith("#"))
        // The test process names itself dostavka; a role process dostavka-<role> (main.ts).
        expect(series.filter((line) => !line.includes("service_name=\"dostavka\""))).toEqual([])
        expect(metrics.text).not.toContain("otel_scope_name")
        expect(metrics.text).not.toMatch(/^# UNIT /m)
        if (promtoolMissing === undefined) expect(promtool(["check", "metrics"], metrics.text)).toBe("")
      }),
    90_000
  )

  it.skipIf(promtoolMissing !== undefined)(
    "the alerts mirror the page rules: promtool accepts ops/prometheus/alerts.yml, and its tests fire each alert on its condition only",
    () => {
      expect(existsSync(join(projectRoot, "ops", "grafana", "dostavka.json"))).toBe(true)
      expect(promtool(["check", "rules", "alerts.yml"])).toContain("SUCCESS: 8 rules found")
      expect(promtool(["test", "rules", "alerts.test.yml"])).toContain("SUCCESS")
    }
  )
})
