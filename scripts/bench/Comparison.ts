/**
 * Comparison: the shape the relay and receiver suites share. Variants run back to back in
 * each round (after the same preparation), each round yielding a rate and the CPU per
 * message (`RoundClock`); the kit's figures are then compared with each other variant's,
 * round by round: its rate as a share, its CPU per message as a multiple.
 */
import { Effect } from "effect"
import type { BenchBrokerError } from "./BenchBroker.js"
import type { BenchFailure } from "./BenchFailure.js"
import { say } from "./BenchLog.js"
import { type Figure, figure, type Ratio, ratio } from "./Figures.js"
import type { RoundResult } from "./RoundClock.js"

export interface Variant {
  readonly name: string
  readonly label: string
  /** What one round is, e.g. `50000 rows, window 100`. */
  readonly note: string
  /** One round; `round` is its number, from 1. */
  readonly round: (round: number) => Effect.Effect<RoundResult, BenchFailure | BenchBrokerError>
}

export interface Against {
  readonly variant: string
  /** The ratio's name, e.g. `relay: kit / rascal`. */
  readonly name: string
  readonly meaning: string
  /** Its name on the summary line. */
  readonly short: string
}

/** Runs `rounds` rounds of every variant, `prepare` before each. */
export const runRounds = <E>(
  suite: string,
  rounds: number,
  variants: ReadonlyArray<Variant>,
  prepare: Effect.Effect<void, E>
) =>
  Effect.gen(function*() {
    const results = new Map<string, Array<RoundResult>>(variants.map((v) => [v.name, []]))
    for (let round = 1; round <= rounds; round++) {
      for (const variant of variants) {
        yield* prepare
        const result = yield* variant.round(round)
        results.get(variant.name)!.push(result)
        yield* say(
          `${suite} round ${round}: ${variant.name} ${Math.round(result.rate)} msgs/s, ${
            Math.round(result.cpuUs)
          } µs CPU/msg`
        )
      }
    }
    return results
  })

/** The rate and CPU figures of every variant, and the kit's ratios against those of `against` that ran. */
export const compare = (
  suite: string,
  variants: ReadonlyArray<Variant>,
  results: ReadonlyMap<string, ReadonlyArray<RoundResult>>,
  against: ReadonlyArray<Against>
) => {
  const rates = new Map<string, Figure>()
  const cpus = new Map<string, Figure>()
  for (const v of variants) {
    const rounds = results.get(v.name)!
    rates.set(v.name, figure(v.label, "msgs/s", rounds.map((r) => r.rate), v.note))
    cpus.set(
      v.name,
      figure(`${v.label}: CPU per message`, "µs", rounds.map((r) => r.cpuUs), "this process, user + system")
    )
  }
  const ratios: Array<Ratio> = []
  const headline: Array<readonly [string, number]> = []
  const kitRate = rates.get("kit")
  const kitCpu = cpus.get("kit")
  for (const a of against) {
    const rate = rates.get(a.variant)
    const cpu = cpus.get(a.variant)
    if (kitRate === undefined || kitCpu === undefined || rate === undefined || cpu === undefined) continue
    const r = ratio(a.name, kitRate, rate, a.meaning)
    ratios.push(
      r,
      ratio(`${a.name}, CPU per message`, kitCpu, cpu, "the kit spends this many times its CPU per message")
    )
    headline.push([a.short, r.median])
  }
  return { ratios, figures: [...rates.values(), ...cpus.values()], headline, suite }
}
