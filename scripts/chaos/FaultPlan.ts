/**
 * FaultPlan: which faults a chaos run injects, when, and for how long, drawn from the
 * seed. The kinds are shuffled and spread over the load's duration, one after another
 * (a fault starts no sooner than a few seconds after the previous one ended, so each
 * recovery can be timed on its own).
 */
import type { SeededRandom } from "./SeededRandom.js"

export const FaultKinds = [
  "kill-relay",
  "kill-catalog",
  "kill-audit",
  "kill-api",
  "close-connections",
  "stop-app",
  "broker-stop",
  "broker-pause",
  "memory-alarm",
  "catalog-lock",
  "api-lock",
  "node-kill",
  "leader-kill"
] as const
export type FaultKind = typeof FaultKinds[number]

/** What each kind does, for the report. */
export const FaultDescriptions: Record<FaultKind, string> = {
  "kill-relay": "kill -9 of the relay, restarted",
  "kill-catalog": "kill -9 of the catalog receiver, restarted",
  "kill-audit": "kill -9 of the audit receiver, restarted",
  "kill-api": "kill -9 of the API, restarted",
  "close-connections": "rabbitmqctl close_connection on every connection",
  "stop-app": "rabbitmqctl stop_app, then start_app",
  "broker-stop": "the broker node stopped, then started",
  "broker-pause": "the broker's Erlang VM paused (SIGSTOP), then SIGCONT",
  "memory-alarm": "memory alarm (vm_memory_high_watermark absolute 1), then back to 0.4",
  "catalog-lock": "catalog.db's write lock held by another process (BEGIN IMMEDIATE)",
  "api-lock": "api.db's write lock held by another process, past the API's busy timeout (503s)",
  "node-kill": "SIGKILL of one cluster node's Erlang VM, restarted",
  "leader-kill": "SIGKILL of the node holding the catalog queue's leader, restarted"
}

export interface PlannedFault {
  readonly kind: FaultKind
  /** When to inject it, in ms after the load started. */
  readonly atMs: number
  /** How long the fault lasts (the broker down, paused, alarmed, the lock held, a killed role or node down). */
  readonly holdMs: number
}

/** Hold time ranges in ms, per kind. */
export type HoldRanges = Readonly<Record<FaultKind, readonly [number, number]>>

export const planFaults = (
  random: SeededRandom,
  counts: Partial<Record<FaultKind, number>>,
  holds: HoldRanges,
  window: { readonly fromMs: number; readonly toMs: number }
): Array<PlannedFault> => {
  const kinds = random.shuffle(
    Object.entries(counts).flatMap(([kind, n]) => Array.from({ length: n ?? 0 }, () => kind as FaultKind))
  )
  if (kinds.length === 0) return []
  const slot = (window.toMs - window.fromMs) / kinds.length
  return kinds.map((kind, i) => {
    const [min, max] = holds[kind]
    return {
      kind,
      atMs: Math.round(window.fromMs + i * slot + random.between(0, slot * 0.5)),
      holdMs: Math.round(random.between(min, max))
    }
  })
}
