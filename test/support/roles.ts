import { HttpServer } from "@effect/platform"
import Database from "better-sqlite3"
import { Duration, Effect, Exit, Layer, Logger, LogLevel, Scope } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { createConnection } from "node:net"
import type { MetricsExposition } from "../../src/adapters/metrics/PrometheusExposition.js"
import { databaseFile } from "../../src/adapters/sqlite/Database.js"
import { type ServiceDatabase } from "../../src/adapters/sqlite/DatabaseTags.js"
import { Settings, type SettingsShape } from "../../src/config.js"
import type { BrokerConnections } from "../../src/ports/BrokerConnections.js"
import type { Ids } from "../../src/ports/Ids.js"
import { OutboxSignal } from "../../src/ports/OutboxSignal.js"
import type { Readiness } from "../../src/ports/Readiness.js"
import { Supervisor } from "../../src/ports/Supervisor.js"
import { ProcessServices } from "../../src/roles/ProcessServices.js"
import { redactedUrl, testRetryByHandler } from "./broker.js"
import { projectRoot } from "./cli.js"

/** Settings for one integration test: its own prefix and data dir, a free port, quick polling. */
export const testSettings = (prefix: string, dataDir: string, overrides: Partial<SettingsShape> = {}) =>
  Settings.with({
    amqpUrl: redactedUrl,
    prefix,
    dataDir,
    httpPort: 0,
    relayPollInterval: Duration.millis(20),
    retry: testRetryByHandler,
    ...overrides
  })

/** Roles in tests log warnings and worse only; DOSTAVKA_TEST_LOGS=1 shows everything. */
const quietLogs = Logger.minimumLogLevel(process.env.DOSTAVKA_TEST_LOGS === "1" ? LogLevel.Debug : LogLevel.Warning)

/** A log line a role wrote: its level, message and annotations (`logs` of `startRoles`). */
export interface CapturedLog {
  readonly level: string
  readonly message: string
  readonly annotations: Record<string, unknown>
}

const capturing = (into: Array<CapturedLog>) =>
  Logger.add(Logger.make(({ annotations, logLevel, message }) => {
    into.push({
      level: logLevel.label,
      message: (Array.isArray(message) ? message : [message]).map(String).join(" "),
      annotations: Object.fromEntries(annotations)
    })
  }))

/**
 * Starts `roles` in a scope of their own, so a test can stop them (close) while the rest
 * runs on, as a crashed or stopped process would. Returns the built context, `stop`, and
 * `failed` (see `Supervisor`). With `logs`, every line of warning level or worse is also
 * appended there; with `allLevels` too, every line of every level.
 */
export const startRoles = <ROut, E>(
  roles: Layer.Layer<
    ROut,
    E,
    Settings | OutboxSignal | Supervisor | Readiness | BrokerConnections | MetricsExposition | Ids
  >,
  settings: Layer.Layer<Settings>,
  options: { readonly logs?: Array<CapturedLog>; readonly allLevels?: boolean } = {}
) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const shared = yield* Layer.buildWithScope(ProcessServices, scope)
    const level = options.allLevels === true ? Logger.minimumLogLevel(LogLevel.Debug) : quietLogs
    const logging = options.logs === undefined ? level : Layer.merge(level, capturing(options.logs))
    const context = yield* Layer.buildWithScope(
      roles.pipe(Layer.provide(Layer.mergeAll(settings, logging, Layer.succeedContext(shared)))),
      scope
    )
    const stop = Scope.close(scope, Exit.void)
    yield* Effect.addFinalizer(() => stop)
    /** Fails with `RoleFailed` once a role of this start has failed; a test races it or awaits it. */
    const failed = Supervisor.pipe(Effect.flatMap((s) => s.failed), Effect.provide(shared))
    return { context, stop, failed }
  })

/** The base URL of the API in `context` (it was started on port 0). */
export const baseUrl = (context: { unsafeMap: Map<string, unknown> }) => {
  const server = context.unsafeMap.get(HttpServer.HttpServer.key) as HttpServer.HttpServer
  if (server.address._tag !== "TcpAddress") throw new Error("the API is not on TCP")
  return `http://127.0.0.1:${server.address.port}`
}

/** Runs a read-only query on a service's database file, as an operator with sqlite3 would. */
export const query = <T = Record<string, unknown>>(
  dataDir: string,
  service: ServiceDatabase,
  sql: string,
  ...params: Array<unknown>
) => {
  const db = new Database(databaseFile(dataDir, service), { readonly: true })
  try {
    return db.prepare(sql).all(...params) as Array<T>
  } finally {
    db.close()
  }
}

export const countRows = (dataDir: string, service: ServiceDatabase, table: string): number =>
  query<{ n: number }>(dataDir, service, `SELECT COUNT(*) AS n FROM ${table}`)[0]!.n

/** POSTs a publication request; returns status, headers and the parsed body. */
export const post = (
  base: string,
  key: string | undefined,
  body: unknown,
  raw?: string,
  contentType = "application/json"
) =>
  Effect.promise(async () => {
    const response = await fetch(`${base}/v1/publications`, {
      method: "POST",
      headers: { "content-type": contentType, ...(key === undefined ? {} : { "idempotency-key": key }) },
      body: raw ?? JSON.stringify(body)
    })
    const text = await response.text()
    return { status: response.status, headers: response.headers, body: text === "" ? undefined : JSON.parse(text) }
  })

export const get = (base: string, path: string) =>
  Effect.promise(async () => {
    const response = await fetch(`${base}${path}`)
    return { status: response.status, headers: response.headers, body: await response.json() }
  })

/** A raw HTTP exchange over one TCP connection: writes `request` as given, returns what came back. */
export const rawHttp = (port: number, request: string | Buffer) =>
  Effect.promise(() =>
    new Promise<{ status: number; headers: Record<string, string>; body: string }>((resolve, reject) => {
      const socket = createConnection({ host: "127.0.0.1", port })
      const chunks: Array<Buffer> = []
      socket.on("data", (chunk) => chunks.push(chunk))
      socket.on("error", reject)
      socket.on("close", () => {
        const text = Buffer.concat(chunks).toString("utf8")
        const [head = "", ...rest] = text.split("\r\n\r\n")
        const [statusLine = "", ...headerLines] = head.split("\r\n")
        const headers = Object.fromEntries(headerLines.map((line) => {
          const at = line.indexOf(":")
          return [line.slice(0, at).trim().toLowerCase(), line.slice(at + 1).trim()]
        }))
        resolve({ status: Number(statusLine.split(" ")[1]), headers, body: rest.join("\r\n\r\n") })
      })
      socket.write(request)
    })
  )

/**
 * `--role <role>` as its own OS process on `dir` and `prefix`, with the tests' retry tiers
 * (0.3 s, 0.6 s; three attempts, as `cleanupTopology` expects) and `env` on top; its
 * stderr (the log) is collected in `log.text`. Killed with SIGKILL when the scope closes.
 */
export const roleProcess = (
  role: "api" | "relay" | "catalog" | "audit",
  dir: string,
  prefix: string,
  env: Record<string, string> = {}
) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts", "--role", role], {
        cwd: projectRoot,
        env: {
          ...process.env,
          DOSTAVKA_DATA_DIR: dir,
          DOSTAVKA_PREFIX: prefix,
          DOSTAVKA_RETRY_DELAYS_MS: "300,600",
          DOSTAVKA_MAX_ATTEMPTS: "3",
          ...env
        },
        stdio: ["ignore", "ignore", "pipe"]
      })
      const log = { text: "" }
      child.stderr!.on("data", (chunk: Buffer) => (log.text += chunk.toString("utf8")))
      return { child, log }
    }),
    ({ child }) => Effect.sync(() => child.exitCode === null && child.kill("SIGKILL"))
  )

/** Kills `child` with SIGKILL (as `kill -9`) and waits for it to exit. */
export const killed = (child: ChildProcess) =>
  Effect.async<void>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
    child.once("exit", () => resume(Effect.void))
    child.kill("SIGKILL")
  })
