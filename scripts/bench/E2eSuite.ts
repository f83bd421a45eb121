/**
 * The end-to-end latency suite: `POST /v1/publications` → applied by both receivers,
 * under open-loop offered loads (200, 500, 1000 requests/s), with every role in one
 * process (`--role all`: the API rings the relay at once) and as four processes (`api`,
 * `relay`, `catalog`, `audit`: the relay polls the outbox every 100 ms). The load comes
 * from this process; the roles run in their own. Each load runs three rounds; a round's
 * p50/p95/p99/max are over its accepted requests, from the moment each request was due
 * to the later of the two receivers' receipts (`AppliedTimes`), and the figure is the
 * median of the rounds. The next round starts once every accepted event of the last one
 * is applied.
 */
import { Effect } from "effect"
import { appliedByBoth } from "./AppliedTimes.js"
import type { BenchBroker } from "./BenchBroker.js"
import { attempt } from "./BenchFailure.js"
import { say } from "./BenchLog.js"
import type { BenchOptions } from "./BenchOptions.js"
import { type Figure, figure, percentile, type Ratio, ratio, type SuiteResult } from "./Figures.js"
import { openLoop } from "./LoadGenerator.js"
import { type RoleName, startRoleProcess } from "./RoleProcesses.js"
import { tempDir } from "./TempDir.js"

type Mode = "one" | "four"
const modeLabel: Record<Mode, string> = { one: "one process", four: "four processes" }
const rolesOf: Record<Mode, ReadonlyArray<RoleName>> = { one: ["all"], four: ["api", "relay", "catalog", "audit"] }

interface RoundFigures {
  readonly p50: number
  readonly p95: number
  readonly p99: number
  readonly max: number
  /** Accepted events per second, from the round's start to the last one applied. */
  readonly applied: number
  readonly shed: number
  readonly refused: number
}

/** Warm-up before the measured rounds: JIT, SQLite caches, the broker's queues. */
const warmUpMs = (options: BenchOptions) => (options.quick ? 300 : 3_000)

/** How long a round's events may take to be applied after its last answer. */
const DrainTimeoutMs = 120_000

const runMode = (options: BenchOptions, broker: BenchBroker, projectDir: string, mode: Mode) =>
  Effect.scoped(Effect.gen(function*() {
    const dataDir = yield* tempDir(`e2e-${mode}`)
    const env = { amqpUrl: broker.amqpUrl, prefix: `bench-e2e-${mode}`, dataDir }
    const roles = yield* Effect.forEach(
      rolesOf[mode],
      (role) => startRoleProcess(projectDir, role, env, { logDir: dataDir }),
      { concurrency: "unbounded" }
    )
    const api = roles[0]!
    yield* say(`e2e ${modeLabel[mode]}: ready (${roles.map((r) => `${r.role} ${r.startMs} ms`).join(", ")})`)
    let tag = 0
    const round = (rate: number, durationMs: number) =>
      Effect.gen(function*() {
        const load = yield* attempt("e2e load", () =>
          openLoop({
            port: api.port,
            rate,
            durationMs,
            maxOutstanding: options.sizes.e2eMaxOutstanding,
            tag: `e2e-${mode}-${tag++}`
          }))
        const accepted = load.sent.filter((s) => s.answer.status === 202 && s.answer.eventId !== undefined)
        const applied = yield* appliedByBoth(dataDir, accepted.map((s) => s.answer.eventId!), DrainTimeoutMs)
        const latencies = accepted.map((s) => applied.get(s.answer.eventId!)! - s.dueAt).sort((a, b) => a - b)
        const startedAt = load.sent.reduce((t, s) => Math.min(t, s.dueAt), Number.POSITIVE_INFINITY)
        const lastApplied = [...applied.values()].reduce((a, b) => Math.max(a, b), 0)
        return {
          p50: percentile(latencies, 50),
          p95: percentile(latencies, 95),
          p99: percentile(latencies, 99),
          max: latencies.at(-1) ?? Number.NaN,
          applied: accepted.length / (Math.max(durationMs, lastApplied - startedAt) / 1000),
          shed: load.shed,
          refused: load.sent.length - accepted.length
        } satisfies RoundFigures
      })
    yield* round(200, warmUpMs(options))
    const byLoad = new Map<number, Array<RoundFigures>>()
    for (const rate of options.sizes.e2eLoads) {
      const rounds: Array<RoundFigures> = []
      for (let r = 1; r <= options.sizes.rounds; r++) {
        const f = yield* round(rate, options.sizes.e2eRoundMs)
        rounds.push(f)
        yield* say(
          `e2e ${modeLabel[mode]} ${rate}/s round ${r}: p50 ${Math.round(f.p50)} p99 ${Math.round(f.p99)} max ${
            Math.round(f.max)
          } ms, applied ${Math.round(f.applied)}/s, shed ${f.shed}, refused ${f.refused}`
        )
      }
      byLoad.set(rate, rounds)
    }
    return byLoad
  }))

export const e2eSuite = (options: BenchOptions, broker: BenchBroker, projectDir: string) =>
  Effect.gen(function*() {
    const modes: ReadonlyArray<Mode> = ["one", "four"]
    const results = new Map<Mode, Map<number, Array<RoundFigures>>>()
    for (const mode of modes) results.set(mode, yield* runMode(options, broker, projectDir, mode))

    const figures: Array<Figure> = []
    const get = new Map<string, Figure>()
    for (const mode of modes) {
      for (const [rate, rounds] of results.get(mode)!) {
        const shed = rounds.reduce((n, r) => n + r.shed, 0)
        const refused = rounds.reduce((n, r) => n + r.refused, 0)
        const note = `${options.sizes.e2eRoundMs / 1000} s at ${rate}/s${shed > 0 ? `, ${shed} shed` : ""}${
          refused > 0 ? `, ${refused} refused` : ""
        }`
        for (const key of ["p50", "p95", "p99", "max"] as const) {
          const f = figure(`${modeLabel[mode]}, ${rate} req/s offered: ${key}`, "ms", rounds.map((r) => r[key]), note)
          figures.push(f)
          get.set(`${mode}/${rate}/${key}`, f)
        }
        figures.push(
          figure(`${modeLabel[mode]}, ${rate} req/s offered: applied`, "events/s", rounds.map((r) => r.applied), note)
        )
      }
    }
    const ratios: Array<Ratio> = []
    const headline: Array<readonly [string, number]> = []
    for (const rate of options.sizes.e2eLoads) {
      for (const key of ["p50", "p99"] as const) {
        const r = ratio(
          `e2e ${rate}/s ${key}: four processes / one process`,
          get.get(`four/${rate}/${key}`)!,
          get.get(`one/${rate}/${key}`)!,
          "above 1: four processes are slower"
        )
        ratios.push(r)
        if (rate === options.sizes.e2eLoads[0]) headline.push([`e2e ${rate}/s ${key} 4proc/1proc`, r.median])
      }
    }
    const p50 = get.get(`one/${options.sizes.e2eLoads[0]}/p50`)
    if (p50 !== undefined) headline.push([`e2e ${options.sizes.e2eLoads[0]}/s p50 ms (1 proc)`, p50.median])
    return {
      suite: "e2e",
      ratios,
      figures,
      notes: [
        "Latency runs from the moment a request was due (open loop: a late send counts) to the later of the two receivers' inbox receipts, whose `received_at` each receiver stamps in its applying transaction just before the commit: the batch's commit (one fsync) and the ack are left out.",
        "`applied` is the round's accepted events over the time from its first due request to its last applied event (at least the round's length): what the deployment sustained.",
        `At most ${options.sizes.e2eMaxOutstanding} requests are unanswered at once; a request due beyond that is shed (not sent) and counted in the note. In four processes the relay polls every 100 ms; in one process the API rings it.`
      ],
      headline
    } satisfies SuiteResult
  })
