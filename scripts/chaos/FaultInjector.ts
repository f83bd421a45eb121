/**
 * FaultInjector: carries out a `FaultPlan`, one fault at a time, against the run's own
 * role processes and private broker node(s), and records each fault: when it took
 * effect, when it was lifted (the role or node running again, the VM resumed, the alarm
 * cleared, the lock released), and what it touched. Only private nodes are addressed,
 * through `BrokerNodes`; the machine's broker is never named.
 */
import { join } from "node:path"
import type { BrokerNode, BrokerNodes } from "./BrokerNodes.js"
import type { FaultKind, PlannedFault } from "./FaultPlan.js"
import type { RoleName, RoleProcess } from "./RoleProcess.js"
import type { SeededRandom } from "./SeededRandom.js"
import { WriteLockHolder } from "./WriteLockHolder.js"

export interface FaultRecord {
  readonly kind: FaultKind
  readonly plannedAtMs: number
  readonly holdMs: number
  /** How long the injector waited for the flow to be steady again before this fault, and what was missing if it gave up. */
  readonly steadyWaitMs: number
  readonly notSteady: string | undefined
  startedAt: number
  endedAt: number
  detail: string
  error: string | undefined
}

/** The longest wait for a steady flow before a fault; past it the fault goes in anyway, and the report says so. */
export const SteadyTimeoutMs = 120_000

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)))

export interface FaultContext {
  readonly roles: Readonly<Record<RoleName, RoleProcess>>
  readonly broker: BrokerNodes
  readonly prefix: string
  readonly dataDir: string
  readonly projectDir: string
  /** Printed as each fault starts and ends. */
  readonly say: (line: string) => void
  /** Resolves once the flow has recovered from a fault that ended at `sinceMs`, or with what is missing after `timeoutMs`. */
  readonly steady: (sinceMs: number, timeoutMs: number) => Promise<string | undefined>
}

export class FaultInjector {
  readonly records: Array<FaultRecord> = []
  private readonly lock = new WriteLockHolder()
  private aborted = false
  /** The fault in progress, for the progress line. */
  current: FaultKind | undefined

  constructor(
    private readonly context: FaultContext,
    private readonly random: SeededRandom,
    private readonly minGapMs: number
  ) {}

  abort() {
    this.aborted = true
    this.lock.kill()
  }

  /** Runs `plan` from `t0` (the load's start), each fault at its time or after the previous one ended and `minGapMs` passed. */
  async run(plan: ReadonlyArray<PlannedFault>, t0: number): Promise<void> {
    let previousEnd = 0
    for (const fault of plan) {
      await sleep(Math.max(t0 + fault.atMs, previousEnd + this.minGapMs) - Date.now())
      if (this.aborted) return
      const waitFrom = Date.now()
      const notSteady = await this.context.steady(previousEnd, SteadyTimeoutMs)
      if (notSteady !== undefined) {
        this.context.say(
          `the flow is not steady ${
            ((Date.now() - previousEnd) / 1000).toFixed(0)
          } s after the last fault (${notSteady}); injecting anyway`
        )
      }
      if (this.aborted) return
      const record: FaultRecord = {
        kind: fault.kind,
        plannedAtMs: fault.atMs,
        holdMs: fault.holdMs,
        steadyWaitMs: Date.now() - waitFrom,
        notSteady,
        startedAt: Date.now(),
        endedAt: 0,
        detail: "",
        error: undefined
      }
      this.records.push(record)
      this.current = fault.kind
      this.context.say(
        `fault ${this.records.length}/${plan.length}: ${fault.kind} (hold ${(fault.holdMs / 1000).toFixed(1)} s)`
      )
      try {
        await this.inject(fault, record)
      } catch (e) {
        record.error = e instanceof Error ? e.message : String(e)
        this.context.say(`fault ${fault.kind} did not go as planned: ${record.error}`)
      }
      record.endedAt ||= Date.now()
      this.current = undefined
      previousEnd = record.endedAt
      this.context.say(
        `fault ${fault.kind} lifted after ${((record.endedAt - record.startedAt) / 1000).toFixed(1)} s${
          record.detail ? `: ${record.detail}` : ""
        }`
      )
    }
  }

  private async inject(fault: PlannedFault, record: FaultRecord): Promise<void> {
    const { broker, roles } = this.context
    const first = broker.nodes[0]!
    switch (fault.kind) {
      case "kill-relay":
      case "kill-catalog":
      case "kill-audit":
      case "kill-api": {
        const role = roles[fault.kind.slice("kill-".length) as RoleName]
        const pid = await role.kill9()
        record.startedAt = Date.now()
        await sleep(fault.holdMs)
        const next = role.current ?? role.start()
        record.endedAt = next.startedAt
        record.detail = pid === undefined ? "was not running" : `pid ${pid} killed, pid ${next.pid} started`
        return
      }
      case "close-connections": {
        let closed = 0
        for (const node of broker.nodes) {
          for (const c of await broker.connections(node.name)) {
            await broker.ctl(node.name, "close_connection", c.pid, "closed by the chaos run").then(
              () => closed++,
              () => undefined
            )
          }
        }
        record.endedAt = Date.now()
        record.detail = `${closed} connections closed`
        return
      }
      case "stop-app": {
        await broker.ctl(first.name, "stop_app")
        record.startedAt = Date.now()
        await sleep(fault.holdMs)
        await broker.ctl(first.name, "start_app")
        record.endedAt = Date.now()
        record.detail = `app down ${((record.endedAt - record.startedAt) / 1000).toFixed(1)} s`
        return
      }
      case "broker-stop": {
        await broker.stop(first)
        const stoppedAt = Date.now()
        await sleep(fault.holdMs)
        await broker.start(first)
        record.endedAt = Date.now()
        record.detail = `stopped in ${((stoppedAt - record.startedAt) / 1000).toFixed(1)} s, down ${
          ((record.endedAt - stoppedAt) / 1000).toFixed(1)
        } s (start included)`
        return
      }
      case "broker-pause": {
        const pid = await broker.pid(first.name)
        process.kill(pid, "SIGSTOP")
        record.startedAt = Date.now()
        try {
          await sleep(fault.holdMs)
        } finally {
          process.kill(pid, "SIGCONT")
        }
        record.endedAt = Date.now()
        record.detail = `beam.smp ${pid} paused ${((record.endedAt - record.startedAt) / 1000).toFixed(1)} s`
        return
      }
      case "memory-alarm": {
        await broker.ctl(first.name, "set_vm_memory_high_watermark", "absolute", "1")
        record.startedAt = Date.now()
        try {
          await sleep(fault.holdMs)
        } finally {
          await broker.ctl(first.name, "set_vm_memory_high_watermark", "0.4")
        }
        record.endedAt = Date.now()
        record.detail = `alarm on ${((record.endedAt - record.startedAt) / 1000).toFixed(1)} s`
        return
      }
      case "catalog-lock":
      case "api-lock": {
        const file = fault.kind === "api-lock" ? "api.db" : "catalog.db"
        const held = await this.lock.hold(this.context.projectDir, join(this.context.dataDir, file), fault.holdMs)
        record.startedAt = held.lockedAt
        record.endedAt = await held.released
        record.detail = `${file}'s write lock held ${((record.endedAt - record.startedAt) / 1000).toFixed(1)} s`
        return
      }
      case "node-kill":
      case "leader-kill": {
        let target: BrokerNode
        let why = "picked at random"
        if (fault.kind === "node-kill") target = this.random.pick(broker.nodes)
        else {
          const queue = `${this.context.prefix}.catalog`
          const leader = await broker.quorumLeader(first.name, queue).catch(() =>
            broker.quorumLeader(broker.nodes[1]!.name, queue)
          )
          const found = leader === undefined ? undefined : broker.nodeNamed(leader.node)
          if (found === undefined) throw new Error(`no leader found for ${queue} (got ${leader?.node})`)
          target = found
          why = `leader of ${queue} per ${leader!.source}`
        }
        const pid = await broker.pid(target.name)
        process.kill(pid, "SIGKILL")
        record.startedAt = Date.now()
        await sleep(fault.holdMs)
        await broker.start(target)
        record.endedAt = Date.now()
        record.detail = `${target.name}@localhost (${why}; beam.smp ${pid}) killed, back after ${
          ((record.endedAt - record.startedAt) / 1000).toFixed(1)
        } s`
        return
      }
    }
  }
}
