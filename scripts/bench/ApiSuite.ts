/**
 * The API suite: `POST /v1/publications` throughput and latency with 16 concurrent
 * keep-alive clients (a closed loop: each sends its next request when the last is
 * answered), every request a new material. Variants, each in a process of its own and
 * alternating round by round: the kit's `api` role (`node dist/main.js
 * --role api`, nothing else running), and `RawApiServer` (bare node:http +
 * better-sqlite3, the same transaction, nothing else: the ceiling for one SQLite file).
 */
import { Effect } from "effect"
import { join } from "node:path"
import type { BenchBroker } from "./BenchBroker.js"
import { attempt } from "./BenchFailure.js"
import { say } from "./BenchLog.js"
import type { BenchOptions } from "./BenchOptions.js"
import { runs } from "./BenchOptions.js"
import { type Figure, figure, percentile, type Ratio, ratio, type SuiteResult } from "./Figures.js"
import { closedLoop } from "./LoadGenerator.js"
import { freePort, startProcess, startRoleProcess } from "./RoleProcesses.js"
import { tempDir } from "./TempDir.js"

interface RoundFigures {
  readonly rps: number
  readonly p50: number
  readonly p99: number
  readonly errors: number
}

export const apiSuite = (options: BenchOptions, broker: BenchBroker, projectDir: string) =>
  Effect.scoped(Effect.gen(function*() {
    const { sizes } = options
    const dir = yield* tempDir("api")
    const servers: Array<{ readonly name: string; readonly label: string; readonly port: number }> = []
    if (runs(options, "kit")) {
      const api = yield* startRoleProcess(projectDir, "api", {
        amqpUrl: broker.amqpUrl,
        prefix: "bench-api",
        dataDir: join(dir, "kit")
      }, { logDir: dir })
      servers.push({ name: "kit", label: "kit api role (HttpApi, schema, one transaction)", port: api.port })
    }
    if (runs(options, "raw")) {
      const port = yield* freePort
      yield* startProcess(projectDir, {
        name: "raw API server",
        args: ["--import", "tsx", "scripts/bench/RawApiServer.ts"],
        settings: { BENCH_PORT: String(port), BENCH_DB: join(dir, "raw-api.db") },
        port,
        logFile: join(dir, "raw-api.log")
      })
      servers.push({ name: "raw", label: "raw node:http + better-sqlite3, same transaction", port })
    }
    let tag = 0
    const round = (port: number, durationMs: number) =>
      Effect.map(
        attempt("api load", () => closedLoop({ port, clients: sizes.apiClients, durationMs, tag: `api-${tag++}` })),
        (r): RoundFigures => {
          const sorted = [...r.latencies].sort((a, b) => a - b)
          const ok = r.statuses[202] ?? 0
          return {
            rps: ok / (r.elapsedMs / 1000),
            p50: percentile(sorted, 50),
            p99: percentile(sorted, 99),
            errors: r.latencies.length - ok
          }
        }
      )
    for (const server of servers) yield* round(server.port, options.quick ? 300 : 2_000)
    const results = new Map<string, Array<RoundFigures>>(servers.map((s) => [s.name, []]))
    for (let r = 1; r <= sizes.rounds; r++) {
      for (const server of servers) {
        const f = yield* round(server.port, sizes.apiRoundMs)
        results.get(server.name)!.push(f)
        yield* say(
          `api round ${r}: ${server.name} ${Math.round(f.rps)} req/s, p50 ${f.p50.toFixed(1)} ms, p99 ${
            f.p99.toFixed(1)
          } ms${f.errors > 0 ? `, ${f.errors} not 202` : ""}`
        )
      }
    }
    const figures: Array<Figure> = []
    const get = new Map<string, Figure>()
    for (const server of servers) {
      const rounds = results.get(server.name)!
      const errors = rounds.reduce((n, r) => n + r.errors, 0)
      const note = `${sizes.apiClients} clients, ${sizes.apiRoundMs / 1000} s${errors > 0 ? `, ${errors} not 202` : ""}`
      for (const [key, unit] of [["rps", "req/s"], ["p50", "ms"], ["p99", "ms"]] as const) {
        const f = figure(`${server.label}: ${key === "rps" ? "accepted" : key}`, unit, rounds.map((r) => r[key]), note)
        figures.push(f)
        get.set(`${server.name}/${key}`, f)
      }
    }
    const ratios: Array<Ratio> = []
    const headline: Array<readonly [string, number]> = []
    if (get.has("kit/rps") && get.has("raw/rps")) {
      const r = ratio(
        "api: kit / raw node:http, req/s",
        get.get("kit/rps")!,
        get.get("raw/rps")!,
        "share of the raw server's throughput"
      )
      ratios.push(
        r,
        ratio(
          "api: kit / raw node:http, p99",
          get.get("kit/p99")!,
          get.get("raw/p99")!,
          "above 1: the kit's tail is longer"
        )
      )
      headline.push(["api kit/raw req/s", r.median])
    }
    if (get.has("kit/rps")) headline.push(["api kit req/s", get.get("kit/rps")!.median])
    return {
      suite: "api",
      ratios,
      figures,
      notes: [
        `${sizes.apiClients} keep-alive clients in a closed loop; a short warm-up round first. Each server is alone on its database file, with nothing draining the outbox.`
      ],
      headline
    } satisfies SuiteResult
  }))
