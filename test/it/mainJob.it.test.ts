import { FetchHttpClient } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Either, Layer, Logger, LogLevel } from "effect"
import { writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { join } from "node:path"
import { BrokerStatsAmqp } from "../../src/adapters/amqp/BrokerStatsAmqp.js"
import { namesOf } from "../../src/adapters/amqp/Topology.js"
import { runDeliveryJob } from "../../src/jobs/deliveryJob.js"
import { DeliveryJobFailed } from "../../src/jobs/DeliveryReport.js"
import { BrokerStats } from "../../src/ports/BrokerStats.js"
import { ApiRole } from "../../src/roles/api.js"
import { ApiReader, AuditReader, CatalogReader } from "../../src/roles/databases.js"
import { AuditRole, CatalogRole } from "../../src/roles/receivers.js"
import { RelayRole } from "../../src/roles/relay.js"
import {
  amqpUrl,
  cleanupTopology,
  depthOf,
  eventually,
  tempDataDir,
  testConnection,
  uniquePrefix
} from "../support/broker.js"
import { dostavka } from "../support/cli.js"
import { capturedConsole } from "../support/console.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { startRoles, testSettings } from "../support/roles.js"

/** A data set of `n` new materials, each expected to be accepted, written to `dir`; returns its path. */
const writeDataset = (dir: string, n: number, tag: string) => {
  const lines = Array.from({ length: n }, (_, i) =>
    JSON.stringify({
      idempotency_key: `${tag}-${i}`,
      ...MaterialMother.wire(MaterialMother.command({ materialId: `${tag}/material-${i}`, revision: 1 })),
      expect: "accepted"
    }))
  const path = join(dir, "materials.jsonl")
  writeFileSync(path, lines.join("\n") + "\n")
  return path
}

/** A TCP port free on 127.0.0.1 now (the main job's API cannot take port 0 from `DOSTAVKA_HTTP_PORT`). */
const freePort = Effect.async<number>((resume) => {
  const server = createServer()
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(Effect.succeed(port)))
  })
})

describe("the main job on the real broker", () => {
  it.scopedLive(
    "another process consumes the catalog queue and takes half the deliveries: the job stops at its deadline with the partial report, and says the catalog queue has 2 consumers",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("mainjob")
        yield* cleanupTopology(prefix)
        const settings = testSettings(prefix, dir)
        const { context } = yield* startRoles(Layer.mergeAll(ApiRole, RelayRole, CatalogRole, AuditRole), settings)
        const queue = namesOf(prefix).queue("catalog")
        yield* eventually(Effect.either(depthOf(amqpUrl, queue)), Either.isRight)

        // The other process: it consumes the catalog queue and acks nothing.
        const other = yield* testConnection
        const channel = yield* Effect.promise(() => other.createChannel())
        yield* Effect.promise(() => channel.consume(queue, () => {}, { noAck: false }))
        // The job reads the broker's figures at its deadline; the management API samples every 5 s.
        const stats = yield* Layer.build(BrokerStatsAmqp.pipe(Layer.provide(settings)))
        yield* eventually(
          Effect.provide(Effect.flatMap(BrokerStats, (s) => s.handlerQueues("catalog")), stats),
          (figures) => figures.queue.consumers === 2
        )

        const { capture, printed } = yield* capturedConsole
        const failure = yield* runDeliveryJob(
          writeDataset(dir, 20, prefix),
          { api: ApiReader, catalog: CatalogReader, audit: AuditReader, broker: BrokerStatsAmqp },
          Duration.seconds(6)
        ).pipe(
          Effect.provide(Layer.succeedContext(context)),
          Effect.provide(Layer.mergeAll(settings, NodeContext.layer, FetchHttpClient.layer)),
          Logger.withMinimumLogLevel(LogLevel.Warning),
          capture,
          Effect.flip
        )
        if (!(failure instanceof DeliveryJobFailed)) return expect.unreachable(`failed otherwise: ${failure}`)
        expect(failure.report).toMatchObject({ requests: 20, accepted: 20, audit: { applied: 20 } })
        expect(failure.detail).toMatch(
          /^receivers did not apply every event within 6s: \d+ missing at the catalog, 0 at/
        )
        expect(failure.detail).toContain(
          `likely cause: the catalog queue has 2 consumers: another process consumes ${queue} ` +
            "(stop it, or use another DOSTAVKA_PREFIX)"
        )
        expect(failure.report?.catalog.applied).toBeLessThan(20)
        const report = printed.stdout.join("\n")
        expect(report).toContain("Dostavka delivery report (incomplete: the receivers missed the 6s deadline)")
        expect(report).toMatch(/requests sent +20\n/)
        expect(report).toMatch(/audit: applied +20 /)
      }),
    90_000
  )

  it.scopedLive(
    "npm run main on the data set: the report on stdout, progress lines on stderr, and no request log line unless DOSTAVKA_LOG_LEVEL asks",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("mainrun")
        // The main job runs with the default retry tiers.
        yield* cleanupTopology(prefix, {
          catalog: { delays: [Duration.seconds(1), Duration.seconds(10), Duration.seconds(60)], maxAttempts: 5 },
          audit: { delays: [Duration.seconds(1), Duration.seconds(10), Duration.seconds(60)], maxAttempts: 5 }
        })
        const env = {
          DOSTAVKA_PREFIX: prefix,
          DOSTAVKA_DATA_DIR: dir,
          DOSTAVKA_HTTP_PORT: String(yield* freePort),
          DOSTAVKA_AMQP_URL: amqpUrl,
          DOSTAVKA_LOG_FORMAT: "logfmt"
        }
        const run = yield* dostavka([], env)
        expect(run.stderr).not.toMatch(/message=request\b/)
        expect(run.code).toBe(0)
        expect(run.stdout).toMatch(/^Dostavka delivery report\n {2}requests sent +237\n/)
        // Besides a role's rare warning, stderr holds progress lines only, plain ones: it is not a terminal here.
        for (const line of run.stderr.split("\n").filter((l) => l !== "" && !l.startsWith("timestamp="))) {
          expect(line).toMatch(/^(sent \d+\/237|applied catalog \d+\/221, audit \d+\/221)$/)
        }
        expect(run.stderr).not.toContain("\x1b")

        // A second run replays every request; asked for info, the request lines are back.
        const loud = yield* dostavka([], { ...env, DOSTAVKA_LOG_LEVEL: "info" })
        expect(loud.code).toBe(0)
        expect(loud.stderr.match(/message=request\b/g)?.length).toBeGreaterThanOrEqual(237)
      }),
    120_000
  )
})
