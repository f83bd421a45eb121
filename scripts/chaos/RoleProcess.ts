/**
 * RoleProcess: one Dostavka role (`node dist/main.js --role R`, compiled as users run it) run as an OS
 * process of its own, as a supervisor would run it, with its output appended to a log
 * file. It can be killed with SIGKILL and started again, stopped with SIGTERM, and it
 * remembers every incarnation: when it started and became ready, how it ended, and its
 * resident memory (RSS) at ready, last seen and at peak. An exit the run did not cause is
 * recorded as a death, and the role is started again so the run goes on.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { appendFileSync, readFileSync } from "node:fs"

export type RoleName = "api" | "relay" | "catalog" | "audit"
export const RoleNames: ReadonlyArray<RoleName> = ["api", "relay", "catalog", "audit"]

/** The log line a role writes once it does its work. */
const readyLine: Record<RoleName, RegExp> = {
  api: /Listening on/,
  relay: /message="relay started"/,
  catalog: /message=consuming/,
  audit: /message=consuming/
}

export interface Incarnation {
  readonly pid: number
  readonly startedAt: number
  readyAt: number | undefined
  /** RSS in kB once ready (or 10 s after start if it never said so). */
  rssAtReady: number | undefined
  rssLast: number | undefined
  rssPeak: number
  exit: {
    readonly code: number | null
    readonly signal: string | null
    readonly at: number
    readonly cause: "killed" | "stopped" | "died"
  } | undefined
}

/** Resident set size of `pid` in kB, from /proc; undefined once it is gone. */
export const rssOf = (pid: number): number | undefined => {
  try {
    const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
    return match ? Number(match[1]) : undefined
  } catch {
    return undefined
  }
}

/**
 * The environment of a role process: the parent's without any `DOSTAVKA_` setting (none
 * may point at the machine's broker or data) or `OTEL_` setting (no trace exporter the run
 * did not ask for), plus `settings`.
 */
export const roleEnvironment = (settings: Record<string, string>): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {}
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("DOSTAVKA_") && !k.startsWith("OTEL_")) env[k] = v
  return { ...env, ...settings }
}

export class RoleProcess {
  readonly incarnations: Array<Incarnation> = []
  private child: ChildProcess | undefined
  private intent: "killed" | "stopped" | undefined
  private exited: Promise<void> = Promise.resolve()
  /** False once the run is over: a death then is recorded, not answered with a restart. */
  restartOnDeath = true

  constructor(
    readonly role: RoleName,
    private readonly cwd: string,
    private readonly env: NodeJS.ProcessEnv,
    readonly logFile: string,
    private readonly onDeath: (role: RoleName, incarnation: Incarnation) => void
  ) {}

  get current(): Incarnation | undefined {
    const last = this.incarnations.at(-1)
    return last?.exit === undefined ? last : undefined
  }

  get deaths(): ReadonlyArray<Incarnation> {
    return this.incarnations.filter((i) => i.exit?.cause === "died")
  }

  /** Spawns a new incarnation; returns at once (readiness is awaited with `ready`). */
  start(): Incarnation {
    if (this.current !== undefined) throw new Error(`${this.role} is already running`)
    this.intent = undefined
    const child = spawn(process.execPath, ["dist/main.js", "--role", this.role], {
      cwd: this.cwd,
      env: this.env,
      stdio: ["ignore", "pipe", "pipe"]
    })
    const startedAt = Date.now()
    const incarnation: Incarnation = {
      pid: child.pid ?? -1,
      startedAt,
      readyAt: undefined,
      rssAtReady: undefined,
      rssLast: undefined,
      rssPeak: 0,
      exit: undefined
    }
    this.incarnations.push(incarnation)
    this.child = child
    appendFileSync(
      this.logFile,
      `# chaos: ${this.role} started, pid ${incarnation.pid}, at ${new Date(startedAt).toISOString()}\n`
    )
    let pending = ""
    const onOutput = (chunk: Buffer) => {
      appendFileSync(this.logFile, chunk)
      if (incarnation.readyAt === undefined) {
        pending = (pending + chunk.toString("utf8")).slice(-4096)
        if (readyLine[this.role].test(pending)) {
          incarnation.readyAt = Date.now()
          incarnation.rssAtReady = rssOf(incarnation.pid)
        }
      }
    }
    child.stdout?.on("data", onOutput)
    child.stderr?.on("data", onOutput)
    const readyFallback = setTimeout(() => {
      if (incarnation.rssAtReady === undefined && incarnation.exit === undefined) {
        incarnation.rssAtReady = rssOf(incarnation.pid)
      }
    }, 10_000)
    this.exited = new Promise((resolve) => {
      child.once("exit", (code, signal) => {
        clearTimeout(readyFallback)
        const cause = this.intent ?? "died"
        incarnation.exit = { code, signal, at: Date.now(), cause }
        appendFileSync(
          this.logFile,
          `# chaos: ${this.role} pid ${incarnation.pid} ended (${cause}), code ${code}, signal ${signal}\n`
        )
        if (this.child === child) this.child = undefined
        resolve()
        if (cause === "died") {
          this.onDeath(this.role, incarnation)
          if (this.restartOnDeath) {
            setTimeout(() => this.current === undefined && this.restartOnDeath && this.start(), 1_000)
          }
        }
      })
    })
    return incarnation
  }

  /** Resolves once the current incarnation logged its ready line; false after `timeoutMs` or if it ended. */
  async ready(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const current = this.current
      if (current === undefined) return false
      if (current.readyAt !== undefined) return true
      if (Date.now() > deadline) return false
      await new Promise((r) => setTimeout(r, 100))
    }
  }

  /** kill -9 of the current incarnation; resolves once it is gone. */
  async kill9(): Promise<number | undefined> {
    const child = this.child
    const current = this.current
    if (child === undefined || current === undefined) return undefined
    this.sample()
    this.intent = "killed"
    child.kill("SIGKILL")
    await this.exited
    return current.pid
  }

  /** SIGTERM, as a supervisor stops a role; resolves with the exit once it is gone, or SIGKILLs it after `graceMs`. */
  async stop(
    graceMs = 20_000
  ): Promise<
    | { readonly code: number | null; readonly signal: string | null; readonly ms: number; readonly hung: boolean }
    | undefined
  > {
    const child = this.child
    const current = this.current
    if (child === undefined || current === undefined) return undefined
    this.sample()
    this.intent = "stopped"
    const t0 = Date.now()
    child.kill("SIGTERM")
    let hung = false
    const timer = setTimeout(() => {
      hung = true
      child.kill("SIGKILL")
    }, graceMs)
    await this.exited
    clearTimeout(timer)
    return { code: current.exit?.code ?? null, signal: current.exit?.signal ?? null, ms: Date.now() - t0, hung }
  }

  /** Takes an RSS sample of the current incarnation. */
  sample(): void {
    const current = this.current
    if (current === undefined) return
    const rss = rssOf(current.pid)
    if (rss === undefined) return
    current.rssLast = rss
    current.rssPeak = Math.max(current.rssPeak, rss)
  }
}
