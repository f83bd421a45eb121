/**
 * The footprint suite: each role as its own process (`node dist/main.js
 * --role R`), as a deployment runs it.
 * - Start: from spawn to the first 200 from its `/readyz` (the API's port, or
 *   `DOSTAVKA_HEALTH_PORT`), the roles started one after another so that each starts
 *   alone; three rounds, each on a fresh data dir.
 * - Idle memory: resident set size `footprintIdleMs` after the four are ready.
 * - Memory after events, in the last round only (100,000 events take minutes here):
 *   before it starts, the bench writes the events into `api.db`'s outbox through the
 *   kit's `Outbox` and parks them (`Outbox.reject` without a retry time); once idle
 *   memory is read, it releases them all (`Outbox.release("all")`, what
 *   `outbox retry --all` does) and the relay publishes them to both receivers, while
 *   16 clients send `footprintApiRequests` requests to the API. When both receivers
 *   hold every receipt, each role's memory is read three times, a second apart.
 */
import { Effect } from "effect"
import { Outbox } from "../../src/ports/Outbox.js"
import { ApiStores } from "../../src/roles/databases.js"
import { receiptCounts } from "./AppliedTimes.js"
import type { BenchBroker } from "./BenchBroker.js"
import { attempt, BenchFailure } from "./BenchFailure.js"
import { say } from "./BenchLog.js"
import { envelopes } from "./BenchMessages.js"
import type { BenchOptions } from "./BenchOptions.js"
import { type Figure, figure, type SuiteResult } from "./Figures.js"
import { type KitSettings, settingsLayer, writeOutbox } from "./KitInProcess.js"
import { closedLoop } from "./LoadGenerator.js"
import { type RoleName, type RoleProcess, startRoleProcess } from "./RoleProcesses.js"
import { tempDir } from "./TempDir.js"

const Roles: ReadonlyArray<Exclude<RoleName, "all">> = ["api", "relay", "catalog", "audit"]

const releaseOutbox = (s: KitSettings) =>
  Effect.flatMap(Outbox, (outbox) => outbox.release("all")).pipe(
    Effect.provide(ApiStores),
    Effect.provide(settingsLayer(s))
  )

const mb = (kb: number | undefined) => (kb === undefined ? Number.NaN : kb / 1024)

export const footprintSuite = (options: BenchOptions, broker: BenchBroker, projectDir: string) =>
  Effect.gen(function*() {
    const { sizes } = options
    const startMs = new Map<string, Array<number>>(Roles.map((r) => [r, []]))
    const idleMb = new Map<string, Array<number>>(Roles.map((r) => [r, []]))
    const afterMb = new Map<string, Array<number>>(Roles.map((r) => [r, []]))
    const rows = envelopes("footprint", sizes.footprintEvents)
    let carried = 0
    for (let round = 1; round <= sizes.footprintRounds; round++) {
      const last = round === sizes.footprintRounds
      yield* Effect.scoped(Effect.gen(function*() {
        const dataDir = yield* tempDir("footprint")
        const s: KitSettings = { amqpUrl: broker.amqpUrl, prefix: `bench-footprint-${round}`, dataDir }
        if (last) yield* writeOutbox(s, rows, { parked: true })
        const running = new Map<string, RoleProcess>()
        for (const role of Roles) {
          const p = yield* startRoleProcess(projectDir, role, s, { logDir: dataDir })
          running.set(role, p)
          startMs.get(role)!.push(p.startMs)
        }
        yield* Effect.sleep(sizes.footprintIdleMs)
        for (const [role, p] of running) idleMb.get(role)!.push(mb(p.rssKb()))
        yield* say(
          `footprint round ${round}: start ${Roles.map((r) => `${r} ${running.get(r)!.startMs} ms`).join(", ")}; idle ${
            Roles.map((r) => `${r} ${Math.round(idleMb.get(r)!.at(-1)!)} MB`).join(", ")
          }`
        )
        if (!last) return
        const carryStartedAt = Date.now()
        yield* releaseOutbox(s)
        const api = running.get("api")!
        const load = yield* attempt(
          "footprint requests",
          () =>
            closedLoop({
              port: api.port,
              clients: sizes.apiClients,
              durationMs: 10 * 60_000,
              requests: sizes.footprintApiRequests,
              tag: "footprint-api"
            })
        )
        const expected = rows.length + load.eventIds.length
        for (;;) {
          const counts = receiptCounts(dataDir)
          if (counts.catalog >= expected && counts.audit >= expected) break
          if (Date.now() - carryStartedAt > 15 * 60_000) {
            return yield* new BenchFailure({
              what: "footprint",
              detail: `events not applied: ${JSON.stringify(counts)} of ${expected}`
            })
          }
          yield* Effect.sleep("200 millis")
        }
        carried = expected
        yield* say(
          `footprint: ${expected} events carried in ${
            ((Date.now() - carryStartedAt) / 1000).toFixed(1)
          } s (${load.eventIds.length} of them through the API)`
        )
        for (let sample = 0; sample < 3; sample++) {
          if (sample > 0) yield* Effect.sleep("1 second")
          for (const [role, p] of running) afterMb.get(role)!.push(mb(p.rssKb()))
        }
      }))
    }
    const figures: Array<Figure> = []
    for (const role of Roles) {
      figures.push(figure(`${role}: start to ready`, "ms", startMs.get(role)!, "spawn → /readyz 200, alone"))
      figures.push(figure(`${role}: RSS idle`, "MB", idleMb.get(role)!, `${sizes.footprintIdleMs} ms after ready`))
      figures.push(
        figure(`${role}: RSS after ${carried} events`, "MB", afterMb.get(role)!, "one run, 3 samples 1 s apart")
      )
    }
    return {
      suite: "footprint",
      ratios: [],
      figures,
      notes: [
        `Start and idle memory are medians of ${sizes.footprintRounds} round(s), each role started alone on a fresh data dir. Memory after events is one run (its rounds are three readings 1 s apart): the events are written to the outbox parked, released at once once the roles idle, and carried by the relay to both receivers while 16 clients post requests to the API.`
      ],
      headline: [["footprint api start ms", figures[0]!.median]]
    } satisfies SuiteResult
  })
