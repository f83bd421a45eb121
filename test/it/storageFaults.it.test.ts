import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Layer } from "effect"
import Database from "better-sqlite3"
import { spawn } from "node:child_process"
import { rmSync } from "node:fs"
import { toPublish } from "../../src/adapters/amqp/EventBusAmqp.js"
import { namesOf } from "../../src/adapters/amqp/Topology.js"
import { databaseFile, databaseLayer } from "../../src/adapters/sqlite/Database.js"
import { ApiRole } from "../../src/roles/api.js"
import { CatalogRole } from "../../src/roles/receivers.js"
import { cleanupTopology, eventually, tempDataDir, testConnection, uniquePrefix } from "../support/broker.js"
import { baseUrl, type CapturedLog, countRows, get, post, query, startRoles, testSettings } from "../support/roles.js"
import { MaterialMother } from "../support/MaterialMother.js"

/** Another process's connection holding `file`'s write lock until the scope closes. */
const holdWriteLock = (file: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const db = new Database(file)
      db.exec("BEGIN IMMEDIATE")
      return db
    }),
    (db) => Effect.sync(() => {
      db.exec("ROLLBACK")
      db.close()
    })
  )

/**
 * Starts a node process that creates `file` in WAL mode, takes its write lock and keeps
 * it for `ms`; returns once the lock is held, with the process's exit code to await.
 */
const lockInAnotherProcess = (file: string, ms: number) =>
  Effect.async<Effect.Effect<number | null>>((resume) => {
    const child = spawn(process.execPath, ["-e", `
      const db = new (require("better-sqlite3"))(process.argv[1])
      db.pragma("journal_mode = WAL")
      db.exec("BEGIN IMMEDIATE")
      console.log("locked")
      setTimeout(() => { db.exec("ROLLBACK"); db.close() }, Number(process.argv[2]))
    `, file, String(ms)], { stdio: ["ignore", "pipe", "inherit"] })
    const exited = Effect.async<number | null>((done) => {
      if (child.exitCode !== null) done(Effect.succeed(child.exitCode))
      else child.once("exit", (code) => done(Effect.succeed(code)))
    })
    child.stdout.once("data", () => resume(Effect.succeed(exited)))
  })

describe("the stores under faults from outside", () => {
  it.scopedLive("a write lock held elsewhere: POST waits the busy time without blocking GETs, then 503 with Retry-After and a log line", () =>
    Effect.gen(function*() {
      const dir = yield* tempDataDir
      const logs: Array<CapturedLog> = []
      const { context } = yield* startRoles(ApiRole, testSettings(uniquePrefix("locked"), dir, { storeBusyTimeout: Duration.millis(1_500) }), { logs })
      const base = baseUrl(context)
      expect((yield* post(base, "before", MaterialMother.wire(MaterialMother.command({ materialId: "locked/a" })))).status).toBe(202)

      yield* Effect.scoped(Effect.gen(function*() {
        yield* holdWriteLock(databaseFile(dir, "api"))
        const blocked = yield* Effect.fork(post(base, "during", MaterialMother.wire(MaterialMother.command({ materialId: "locked/b" }))))
        yield* Effect.sleep("200 millis")
        const read = yield* get(base, "/v1/materials/locked/a")
        expect(read.status).toBe(200)
        // The GET was answered while the POST was still waiting for the lock.
        expect(blocked.unsafePoll()).toBeNull()
        const answer = yield* Fiber.join(blocked)
        expect(answer.status).toBe(503)
        expect(answer.headers.get("retry-after")).toBe("1")
        expect(answer.body).toMatchObject({ type: "urn:dostavka:problem:storage-unavailable", status: 503 })
      }))
      expect(logs.filter((l) => l.level === "ERROR" && l.message.includes("storage unavailable"))).toHaveLength(1)
      expect((yield* post(base, "after", MaterialMother.wire(MaterialMother.command({ materialId: "locked/c" })))).status).toBe(202)
      expect(countRows(dir, "api", "materials")).toBe(2)
    }))

  it.scopedLive("a new database locked by another process at start: opening and migrating wait for it instead of failing", () =>
    Effect.gen(function*() {
      const dir = yield* tempDataDir
      const file = databaseFile(dir, "catalog")
      // Another process creates the file in WAL mode and holds its write lock for 1.5 s,
      // as a second role starting on a fresh data dir does while it migrates.
      const other = yield* lockInAnotherProcess(file, 1_500)
      const startedAt = Date.now()
      yield* Effect.scoped(Layer.build(databaseLayer(file, "catalog", "10 seconds")))
      expect(Date.now() - startedAt).toBeGreaterThan(1_000)
      expect(yield* other).toBe(0)
      expect(query(dir, "catalog", "SELECT COUNT(*) AS n FROM effect_sql_migrations")).toEqual([{ n: 1 }])
    }))

  it.scopedLive("catalog.db removed under a running catalog: it stops acking, says why, and its role fails", () =>
    Effect.gen(function*() {
      const dir = yield* tempDataDir
      const prefix = uniquePrefix("lost")
      yield* cleanupTopology(prefix)
      const logs: Array<CapturedLog> = []
      const catalog = yield* startRoles(CatalogRole, testSettings(prefix, dir), { logs })
      const connection = yield* testConnection
      const channel = yield* Effect.promise(() => connection.createConfirmChannel())
      const publish = (revision: number) => {
        const message = toPublish(namesOf(prefix).exchange, MaterialMother.envelope(MaterialMother.event({ revision })))
        return Effect.promise(() => {
          channel.publish(message.exchange, message.routingKey, message.content, message.options)
          return channel.waitForConfirms()
        })
      }
      yield* publish(1)
      yield* eventually(Effect.sync(() => countRows(dir, "catalog", "inbox")), (n) => n === 1)

      rmSync(databaseFile(dir, "catalog"))
      yield* publish(2)
      const failure = yield* Effect.flip(catalog.failed)
      expect(failure).toMatchObject({ _tag: "RoleFailed", role: "catalog" })
      expect(failure.reason).toContain("was removed")
      expect(logs.some((l) => l.level === "FATAL" && l.message === "consumer stopped")).toBe(true)

      // Nothing was acked into the unlinked file: once the process is gone, revision 2 waits in the queue.
      yield* catalog.stop
      const { messageCount } = yield* Effect.promise(() => channel.checkQueue(namesOf(prefix).queue("catalog")))
      expect(messageCount).toBe(1)
    }))
})
