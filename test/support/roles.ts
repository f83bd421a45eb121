import { HttpServer } from "@effect/platform"
import { Duration, Effect, Exit, Layer, Logger, LogLevel, Scope } from "effect"
import Database from "better-sqlite3"
import { Settings, type SettingsShape } from "../../src/config.js"
import { databaseFile, type ServiceDatabase } from "../../src/adapters/sqlite/Database.js"
import { OutboxSignal } from "../../src/ports/OutboxSignal.js"
import { redactedUrl } from "./broker.js"

/** Settings for one integration test: its own prefix and data dir, a free port, quick polling. */
export const testSettings = (prefix: string, dataDir: string, overrides: Partial<SettingsShape> = {}) =>
  Settings.with({
    amqpUrl: redactedUrl,
    prefix,
    dataDir,
    httpPort: 0,
    relayPollInterval: Duration.millis(20),
    ...overrides
  })

/** Roles in tests log warnings and worse only; DOSTAVKA_TEST_LOGS=1 shows everything. */
const quietLogs = Logger.minimumLogLevel(process.env.DOSTAVKA_TEST_LOGS === "1" ? LogLevel.Debug : LogLevel.Warning)

/**
 * Starts `roles` in a scope of their own, so a test can stop them (close) while the rest
 * runs on, as a crashed or stopped process would. Returns the built context and `stop`.
 */
export const startRoles = <ROut, E>(roles: Layer.Layer<ROut, E, Settings | OutboxSignal>, settings: Layer.Layer<Settings>) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(
      roles.pipe(Layer.provide(Layer.mergeAll(settings, OutboxSignal.layer, quietLogs))),
      scope
    )
    const stop = Scope.close(scope, Exit.void)
    yield* Effect.addFinalizer(() => stop)
    return { context, stop }
  })

/** The base URL of the API in `context` (it was started on port 0). */
export const baseUrl = (context: { unsafeMap: Map<string, unknown> }) => {
  const server = context.unsafeMap.get(HttpServer.HttpServer.key) as HttpServer.HttpServer
  if (server.address._tag !== "TcpAddress") throw new Error("the API is not on TCP")
  return `http://127.0.0.1:${server.address.port}`
}

/** Runs a read-only query on a service's database file, as an operator with sqlite3 would. */
export const query = <T = Record<string, unknown>>(dataDir: string, service: ServiceDatabase, sql: string, ...params: Array<unknown>) => {
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
export const post = (base: string, key: string | undefined, body: unknown, raw?: string, contentType = "application/json") =>
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
