/**
 * BenchOptions: what `npm run bench` was asked to do. Suites are chosen by name
 * (`npm run bench -- relay receiver`), all of them by default; `--quick` shrinks every
 * size so that the whole run ends in under two minutes; `--variant kit` runs only the
 * kit's own variant of each comparison (for a profile of the kit alone).
 */
import { Data } from "effect"

export const SuiteNames = ["relay", "receiver", "e2e", "api", "footprint"] as const
export type SuiteName = (typeof SuiteNames)[number]

export class BenchUsageError extends Data.TaggedError("BenchUsageError")<{ readonly detail: string }> {
  override get message() {
    return this.detail
  }
}

/**
 * How much each suite does. Rounds are at least 3, every figure being a median of rounds,
 * except the quick run's footprint: one round, since a role's start alone costs seconds of CPU.
 */
export interface BenchSizes {
  readonly rounds: number
  /** Outbox rows the kit's relay, the raw streaming publisher and rascal publish per round. */
  readonly relayMessages: number
  /** Messages the publish-and-wait floor sends per round (it is two orders slower). */
  readonly relayFloorMessages: number
  /** Messages rascal publishes per round (its pool keeps at most 5 publishes unconfirmed). */
  readonly relayRascalMessages: number
  /** Messages waiting in the handler queue for the kit's receiver and the no-work consumer. */
  readonly receiverMessages: number
  /** Messages for the consumers that commit one SQLite transaction per message (fsync-bound). */
  readonly receiverPerMessageTxMessages: number
  /** Offered loads of the latency suite, requests per second. */
  readonly e2eLoads: ReadonlyArray<number>
  /** One round at one load; three rounds per load. */
  readonly e2eRoundMs: number
  /** Requests an open-loop client keeps outstanding at most; beyond that, a request is shed (counted, not sent). */
  readonly e2eMaxOutstanding: number
  readonly apiRoundMs: number
  readonly apiClients: number
  /** Rounds of the footprint suite (each starts the four roles one after another; a start costs seconds of CPU). */
  readonly footprintRounds: number
  /** Events the relay and both receivers carry before their memory is read again. */
  readonly footprintEvents: number
  /** Requests the API answers before its memory is read again. */
  readonly footprintApiRequests: number
  /** How long a role idles after it is ready before its memory is read. */
  readonly footprintIdleMs: number
}

export const fullSizes: BenchSizes = {
  rounds: 3,
  relayMessages: 50_000,
  relayFloorMessages: 1_000,
  relayRascalMessages: 10_000,
  receiverMessages: 20_000,
  receiverPerMessageTxMessages: 2_000,
  e2eLoads: [200, 500, 1000],
  e2eRoundMs: 10_000,
  e2eMaxOutstanding: 1_000,
  apiRoundMs: 10_000,
  apiClients: 16,
  footprintRounds: 3,
  footprintEvents: 100_000,
  footprintApiRequests: 5_000,
  footprintIdleMs: 2_000
}

export const quickSizes: BenchSizes = {
  rounds: 3,
  relayMessages: 2_000,
  relayFloorMessages: 100,
  relayRascalMessages: 2_000,
  receiverMessages: 2_000,
  receiverPerMessageTxMessages: 300,
  e2eLoads: [200, 500, 1000],
  e2eRoundMs: 600,
  e2eMaxOutstanding: 1_000,
  apiRoundMs: 1_000,
  apiClients: 16,
  footprintRounds: 1,
  footprintEvents: 2_000,
  footprintApiRequests: 300,
  footprintIdleMs: 500
}

export interface BenchOptions {
  readonly quick: boolean
  readonly suites: ReadonlyArray<SuiteName>
  /** `undefined`: every variant; otherwise only these (e.g. `kit`). */
  readonly variants: ReadonlyArray<string> | undefined
  /** Where to write a CPU profile of each in-process kit round's measured window (`--cpu-profile DIR`). */
  readonly cpuProfileDir: string | undefined
  readonly sizes: BenchSizes
}

export const usage = `usage: npm run bench -- [--quick] [--variant NAME]... [--cpu-profile DIR] [SUITE...]
  SUITE      ${SuiteNames.join(", ")} (all when none is named)
  --quick    a reduced run, under two minutes, ending with one summary line of ratios
  --variant  run only this variant of each comparison (kit, ceiling, floor, rascal, raw-sqlite, raw), e.g. to profile the kit alone
  --cpu-profile DIR  write a V8 CPU profile of each in-process kit round (relay, receiver) to DIR; runs the kit variants only`

export const parseOptions = (argv: ReadonlyArray<string>): BenchOptions => {
  let quick = false
  const suites: Array<SuiteName> = []
  const variants: Array<string> = []
  let cpuProfileDir: string | undefined
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === "--quick") quick = true
    else if (arg === "--variant") {
      const name = argv[++i]
      if (name === undefined) throw new BenchUsageError({ detail: `--variant needs a name\n${usage}` })
      variants.push(name)
    } else if (arg === "--cpu-profile") {
      cpuProfileDir = argv[++i]
      if (cpuProfileDir === undefined) {
        throw new BenchUsageError({ detail: `--cpu-profile needs a directory\n${usage}` })
      }
    } else if ((SuiteNames as ReadonlyArray<string>).includes(arg)) {
      if (!suites.includes(arg as SuiteName)) suites.push(arg as SuiteName)
    } else throw new BenchUsageError({ detail: `unknown argument ${JSON.stringify(arg)}\n${usage}` })
  }
  return {
    quick,
    suites: suites.length === 0 ? SuiteNames : SuiteNames.filter((s) => suites.includes(s)),
    // A profiled kit round runs slower than an unprofiled baseline would: no ratio is taken
    // against one, so profiling runs the kit alone.
    variants: cpuProfileDir !== undefined ? ["kit"] : variants.length === 0 ? undefined : variants,
    cpuProfileDir,
    sizes: quick ? quickSizes : fullSizes
  }
}

/** True when `variant` is to run (the kit's own always runs when it was named, or when none was). */
export const runs = (options: BenchOptions, variant: string): boolean =>
  options.variants === undefined || options.variants.includes(variant)
