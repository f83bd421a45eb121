/**
 * ChaosOptions: the command line of `npm run chaos` and the profile each mode runs
 * (how many requests, how fast, which faults, how long each lasts).
 *
 *   npm run chaos                      full run: 10,000 requests, every fault kind 2–3 times
 *   npm run chaos -- --quick           about 1,500 requests, one fault of each kind, short holds
 *   npm run chaos -- --cluster         3-node cluster, quorum queues, node kills (with --quick: shorter)
 *   npm run chaos -- --seed N          replays run N's workload and fault plan
 *   --requests N, --rate R (req/s), --clients C   override the profile
 *   --faults KIND,KIND|none            only these fault kinds (as often as the profile has them, at least once)
 *   --keep                             keep the run's folder (data and logs) even when it passed
 */
import { randomInt } from "node:crypto"
import { type FaultKind, FaultKinds, type HoldRanges } from "./FaultPlan.js"
import type { RoleName } from "./RoleProcess.js"

export interface ChaosOptions {
  readonly seed: number
  readonly quick: boolean
  readonly cluster: boolean
  readonly keep: boolean
  readonly requests: number | undefined
  readonly rate: number | undefined
  readonly clients: number | undefined
  /** Only these fault kinds; an empty list for none. */
  readonly faults: ReadonlyArray<FaultKind> | undefined
}

export interface ChaosProfile {
  readonly name: string
  readonly requests: number
  /** Requests per second, all clients together. */
  readonly rate: number
  readonly clients: number
  /** Materials each client owns; plus `contended` shared by all. */
  readonly materialsPerClient: number
  readonly contended: number
  readonly faults: Partial<Record<FaultKind, number>>
  readonly holds: HoldRanges
  /** Least time between one fault's end and the next fault. */
  readonly minGapMs: number
  /** How long to wait, once the load and the faults are over, for every event to be applied and every queue empty. */
  readonly quietTimeoutMs: number
  /** Extra environment for every role. */
  readonly roleEnv: Readonly<Record<string, string>>
  /** Extra environment for one role. */
  readonly roleEnvOf: Readonly<Partial<Record<RoleName, Readonly<Record<string, string>>>>>
}

/**
 * The catalog gives up on a locked catalog.db after 1 s instead of 5 s, so that a lock
 * held 10–20 s fails many batches, not two or three: more messages go round the retry
 * tiers (1 s, 10 s, 60 s) and come back after newer revisions of their material were
 * applied, which the catalog must record `stale`.
 */
const catalogGivesUpSooner = { catalog: { DOSTAVKA_DB_BUSY_TIMEOUT_MS: "1000" } }

export class UsageError extends Error {}

export const usage =
  `usage: npm run chaos -- [--quick] [--cluster] [--seed N] [--requests N] [--rate R] [--clients C] [--faults KIND,…|none] [--keep]
fault kinds: ${FaultKinds.join(", ")}`

export const parseOptions = (argv: ReadonlyArray<string>): ChaosOptions => {
  let seed: number | undefined
  let quick = false
  let cluster = false
  let keep = false
  let requests: number | undefined
  let rate: number | undefined
  let clients: number | undefined
  let faults: Array<FaultKind> | undefined
  const number = (flag: string, value: string | undefined, min: number, max: number) => {
    const n = Number(value)
    if (value === undefined || !Number.isFinite(n) || n < min || n > max) {
      throw new UsageError(`${flag} needs a number from ${min} to ${max}`)
    }
    return n
  }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    switch (arg) {
      case "--quick":
        quick = true
        break
      case "--cluster":
        cluster = true
        break
      case "--keep":
        keep = true
        break
      case "--seed":
        seed = Math.floor(number(arg, argv[++i], 0, 2 ** 32 - 1))
        break
      case "--requests":
        requests = Math.floor(number(arg, argv[++i], 1, 1_000_000))
        break
      case "--rate":
        rate = number(arg, argv[++i], 0.1, 1_000)
        break
      case "--clients":
        clients = Math.floor(number(arg, argv[++i], 1, 100))
        break
      case "--faults": {
        const value = argv[++i] ?? ""
        faults = value === "none" ? [] : value.split(",").map((k) => k.trim()) as Array<FaultKind>
        const unknown = faults.filter((k) => !(FaultKinds as ReadonlyArray<string>).includes(k))
        if (value === "" || unknown.length > 0) {
          throw new UsageError(`--faults takes fault kinds or none, not ${unknown.join(",") || "nothing"}`)
        }
        break
      }
      default:
        throw new UsageError(`unknown argument ${arg}`)
    }
  }
  return { seed: seed ?? randomInt(1, 2 ** 31), quick, cluster, keep, requests, rate, clients, faults }
}

const s = (a: number, b = a): readonly [number, number] => [a * 1000, b * 1000]

const killHold = s(0.3, 2)

const fullHolds: HoldRanges = {
  "kill-relay": killHold,
  "kill-catalog": killHold,
  "kill-audit": killHold,
  "kill-api": killHold,
  "close-connections": s(0),
  "stop-app": s(3, 10),
  "broker-stop": s(30, 60),
  // Longer than the 5 s confirm timeout; past 20 s (two heartbeats) the clients also drop their connections.
  "broker-pause": s(8, 30),
  "memory-alarm": s(20),
  "catalog-lock": s(10, 20),
  // Past DOSTAVKA_DB_BUSY_TIMEOUT_MS (5 s): the API answers 503 and the clients retry.
  "api-lock": s(7, 12),
  "node-kill": s(15, 30),
  "leader-kill": s(15, 30)
}

const quickHolds: HoldRanges = {
  ...fullHolds,
  "stop-app": s(3),
  "broker-stop": s(10),
  "broker-pause": s(7, 9),
  "memory-alarm": s(8),
  "catalog-lock": s(6),
  "api-lock": s(6.5),
  "node-kill": s(10),
  "leader-kill": s(10)
}

export const profileOf = (options: ChaosOptions): ChaosProfile => {
  const base: ChaosProfile = options.cluster
    ? {
      name: options.quick ? "cluster quick" : "cluster",
      requests: options.quick ? 1_500 : 4_000,
      rate: 10,
      clients: 6,
      materialsPerClient: 30,
      contended: 6,
      faults: { "node-kill": 1, "leader-kill": 1 },
      holds: options.quick ? quickHolds : fullHolds,
      minGapMs: 15_000,
      quietTimeoutMs: 300_000,
      roleEnv: { DOSTAVKA_QUEUE_TYPE: "quorum" },
      roleEnvOf: catalogGivesUpSooner
    }
    : options.quick
    ? {
      name: "quick",
      requests: 1_500,
      rate: 10,
      clients: 6,
      materialsPerClient: 25,
      contended: 6,
      faults: {
        "kill-relay": 1,
        "kill-catalog": 1,
        "kill-audit": 1,
        "kill-api": 1,
        "close-connections": 1,
        "stop-app": 1,
        "broker-stop": 1,
        "broker-pause": 1,
        "memory-alarm": 1,
        "catalog-lock": 1,
        "api-lock": 1
      },
      holds: quickHolds,
      minGapMs: 2_000,
      quietTimeoutMs: 240_000,
      roleEnv: {},
      roleEnvOf: catalogGivesUpSooner
    }
    : {
      name: "full",
      requests: 10_000,
      rate: 11,
      clients: 8,
      materialsPerClient: 60,
      contended: 12,
      faults: {
        "kill-relay": 3,
        "kill-catalog": 3,
        "kill-audit": 3,
        "kill-api": 3,
        "close-connections": 3,
        "stop-app": 2,
        "broker-stop": 2,
        "broker-pause": 2,
        "memory-alarm": 2,
        "catalog-lock": 2,
        "api-lock": 2
      },
      holds: fullHolds,
      minGapMs: 8_000,
      quietTimeoutMs: 600_000,
      roleEnv: {},
      roleEnvOf: catalogGivesUpSooner
    }
  const only = options.faults
  return {
    ...base,
    faults: only === undefined
      ? base.faults
      : Object.fromEntries(only.map((k) => [k, Math.max(1, base.faults[k] ?? 0)])),
    requests: options.requests ?? base.requests,
    rate: options.rate ?? base.rate,
    clients: options.clients ?? base.clients
  }
}
