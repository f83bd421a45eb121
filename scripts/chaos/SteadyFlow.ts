/**
 * SteadyFlow: waits, before the next fault, until the flow has recovered from the last
 * one: every role running and ready, a consumer on both receivers' queues, and (while
 * the load still runs) a publish confirmed and a receipt at both receivers since the
 * last fault ended. Without it a fault can land on a flow that is not moving yet (a
 * catalog lock while the relay still waits for a dead relay's lease, say) and test
 * nothing. How long it waited is part of the fault's record.
 */
import type { BrokerNodes } from "./BrokerNodes.js"
import { readLatest } from "./DeliveryFacts.js"
import type { RoleName, RoleProcess } from "./RoleProcess.js"

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

export interface SteadyFlowOptions {
  readonly roles: Readonly<Record<RoleName, RoleProcess>>
  readonly broker: BrokerNodes
  readonly prefix: string
  readonly dataDir: string
  /** True while the clients still send requests (new events to watch for). */
  readonly loadRunning: () => boolean
}

/** Resolves with what was still missing when `timeoutMs` ran out, or undefined once the flow is steady. */
export const waitForSteadyFlow = async (
  options: SteadyFlowOptions,
  sinceMs: number,
  timeoutMs: number
): Promise<string | undefined> => {
  const deadline = Date.now() + timeoutMs
  let missing: Array<string> = []
  for (;;) {
    missing = Object.values(options.roles).filter((r) => r.current?.readyAt === undefined).map((r) =>
      `${r.role} not ready`
    )
    const live = options.broker.nodes
    let consumed: Array<string> = []
    for (const node of live) {
      consumed = await options.broker.consumedQueues(node.name).catch(() => [])
      if (consumed.length > 0) break
    }
    for (const handler of ["catalog", "audit"]) {
      if (!consumed.includes(`${options.prefix}.${handler}`)) {
        missing.push(`no consumer on ${options.prefix}.${handler}`)
      }
    }
    if (options.loadRunning()) {
      const latest = readLatest(options.dataDir)
      if (latest.published <= sinceMs) missing.push("no publish confirmed since")
      if (latest.catalog <= sinceMs) missing.push("no catalog receipt since")
      if (latest.audit <= sinceMs) missing.push("no audit receipt since")
    }
    if (missing.length === 0) return undefined
    if (Date.now() > deadline) return missing.join(", ")
    await sleep(1_000)
  }
}
