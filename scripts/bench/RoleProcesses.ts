/**
 * RoleProcesses: a Dostavka role run as an OS process of its own, the way the README
 * runs it (`node dist/main.js --role R`, compiled as users run it), with the bench's broker, prefix,
 * data dir and ports in its environment and nothing else of ours (no other DOSTAVKA_ or
 * OTEL_ variable leaks in). It is ready when `/readyz` answers 200: on the API's own port
 * for `api` and `all`, on `DOSTAVKA_HEALTH_PORT` for the others. Stopped with SIGTERM
 * (SIGKILL after 10 s) when its scope closes; its stderr goes to a log file, whose tail
 * is shown when it fails to start.
 */
import { Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { closeSync, openSync, readFileSync } from "node:fs"
import { createServer } from "node:net"
import { join } from "node:path"
import { roleEnvironment, rssOf } from "../chaos/RoleProcess.js"
import { BenchFailure } from "./BenchFailure.js"

export type RoleName = "api" | "relay" | "catalog" | "audit" | "all"

export interface RoleProcess {
  readonly role: RoleName
  readonly pid: number
  /** The port `/readyz` is served on (the API's own for `api` and `all`). */
  readonly port: number
  /** From spawn to the first 200 from `/readyz`, in ms. */
  readonly startMs: number
  /** Resident set size now, in kB (`undefined` once it exited). */
  readonly rssKb: () => number | undefined
}

export interface RoleEnvironment {
  readonly amqpUrl: string
  readonly prefix: string
  readonly dataDir: string
}

/** A TCP port nobody listens on now. */
export const freePort = Effect.async<number>((resume) => {
  const server = createServer()
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(Effect.succeed(port)))
  })
})

const isReady = async (port: number) => {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(2_000) })
    await response.arrayBuffer()
    return response.status === 200
  } catch {
    return false
  }
}

const exited = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve()
    else child.once("exit", () => resolve())
  })

const tail = (file: string) => {
  try {
    return readFileSync(file, "utf8").trim().split("\n").slice(-5).join("\n")
  } catch {
    return "(no log)"
  }
}

/** A process of the bench's: what to run, its environment, where its log goes, and the port its `/readyz` answers on. */
export interface ProcessSpec {
  readonly name: string
  readonly args: ReadonlyArray<string>
  readonly settings: Record<string, string>
  readonly port: number
  readonly logFile: string
  readonly readyTimeoutMs?: number
}

/** Spawns `node <args>` in `projectDir` and waits until it is ready; stops it when the scope closes. */
export const startProcess = (projectDir: string, spec: ProcessSpec) =>
  Effect.gen(function*() {
    const child = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const fd = openSync(spec.logFile, "a")
        try {
          return spawn(process.execPath, [...spec.args], {
            cwd: projectDir,
            env: roleEnvironment(spec.settings),
            stdio: ["ignore", "ignore", fd]
          })
        } finally {
          closeSync(fd)
        }
      }),
      (child) =>
        Effect.promise(async () => {
          if (child.exitCode !== null || child.signalCode !== null) return
          child.kill("SIGTERM")
          const killer = setTimeout(() => child.kill("SIGKILL"), 10_000)
          await exited(child)
          clearTimeout(killer)
        })
    )
    const spawnedAt = Date.now()
    const timeoutMs = spec.readyTimeoutMs ?? 120_000
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) {
        return yield* new BenchFailure({
          what: spec.name,
          detail: `exited (${child.exitCode ?? child.signalCode}) before it was ready:\n${tail(spec.logFile)}`
        })
      }
      if (yield* Effect.promise(() => isReady(spec.port))) break
      if (Date.now() > spawnedAt + timeoutMs) {
        return yield* new BenchFailure({
          what: spec.name,
          detail: `not ready within ${timeoutMs} ms:\n${tail(spec.logFile)}`
        })
      }
      yield* Effect.sleep("20 millis")
    }
    return { pid: child.pid ?? -1, startMs: Date.now() - spawnedAt }
  })

/**
 * Starts `role` (`node dist/main.js --role R`, compiled as users run it) and waits until it is ready;
 * stops it when the scope closes. `extra` adds settings.
 */
export const startRoleProcess = (
  projectDir: string,
  role: RoleName,
  env: RoleEnvironment,
  options: { readonly logDir: string; readonly extra?: Record<string, string> }
) =>
  Effect.gen(function*() {
    const port = yield* freePort
    const ports: Record<string, string> = role === "api" || role === "all"
      ? { DOSTAVKA_HTTP_PORT: String(port) }
      : { DOSTAVKA_HEALTH_PORT: String(port), DOSTAVKA_HTTP_PORT: String(yield* freePort) }
    const { pid, startMs } = yield* startProcess(projectDir, {
      name: `role ${role}`,
      args: ["dist/main.js", "--role", role],
      settings: {
        DOSTAVKA_AMQP_URL: env.amqpUrl,
        DOSTAVKA_PREFIX: env.prefix,
        DOSTAVKA_DATA_DIR: env.dataDir,
        DOSTAVKA_LOG_LEVEL: "warning",
        ...ports,
        ...options.extra
      },
      port,
      logFile: join(options.logDir, `${role}.log`)
    })
    return { role, pid, port, startMs, rssKb: () => rssOf(pid) } satisfies RoleProcess
  })
