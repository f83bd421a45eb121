import { describe, expect, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Duration, Effect, Fiber, Layer } from "effect"
import { spawn } from "node:child_process"
import { copyFileSync, renameSync, rmSync } from "node:fs"
import { toPublish } from "../../src/adapters/amqp/EventBusAmqp.js"
import { namesOf } from "../../src/adapters/amqp/Topology.js"
import { IdsRandom } from "../../src/adapters/ids/IdsRandom.js"
import { databaseFile, databaseLayer } from "../../src/adapters/sqlite/Database.js"
import { CatalogDb } from "../../src/adapters/sqlite/DatabaseTags.js"
import { migrationsOf } from "../../src/adapters/sqlite/migrations/Migrations.js"
import { publishMaterial } from "../../src/app/publishMaterial.js"
import { OutboxSignal } from "../../src/ports/OutboxSignal.js"
import { ApiRole } from "../../src/roles/api.js"
import { ApiStores } from "../../src/roles/databases.js"
import { CatalogRole } from "../../src/roles/receivers.js"
import { RelayRole } from "../../src/roles/relay.js"
import {
  amqpUrl,
  cleanupTopology,
  depthOf,
  eventually,
  publishRaw,
  tempDataDir,
  testConnection,
  uniquePrefix
} from "../support/broker.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { baseUrl, type CapturedLog, countRows, get, post, query, startRoles, testSettings } from "../support/roles.js"

/** Another process's connection holding `file`'s write lock until the scope closes. */
const holdWriteLock = (file: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const db = new Database(file)
      db.exec("BEGIN IMMEDIATE")
      return db
    }),
    (db) =>
      Effect.sync(() => {
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
    const child = spawn(process.execPath, [
      "-e",
      `
      const db = new (require("better-sqlite3"))(process.argv[1])
      db.pragma("journal_mode = WAL")
      db.exec("BEGIN IMMEDIATE")
      console.log("locked")
      setTimeout(() => { db.exec("ROLLBACK"); db.close() }, Number(process.argv[2]))
    `,
      file,
      String(ms)
    ], { stdio: ["ignore", "pipe", "inherit"] })
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
      const { context } = yield* startRoles(
        ApiRole,
        testSettings(uniquePrefix("locked"), dir, { storeBusyTimeout: Duration.millis(1_500) }),
        { logs }
      )
      const base = baseUrl(context)
      expect(
        (yield* post(base, "before", MaterialMother.wire(MaterialMother.command({ materialId: "locked/a" })))).status
      ).toBe(202)

      yield* Effect.scoped(Effect.gen(function*() {
        yield* holdWriteLock(databaseFile(dir, "api"))
        const blocked = yield* Effect.fork(
          post(base, "during", MaterialMother.wire(MaterialMother.command({ materialId: "locked/b" })))
        )
        // A fixed time for the POST to reach the lock: nothing outside shows that it waits there. Too
        // short on a slow machine, the GET below is only answered before the POST arrives, which still holds.
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
      expect(
        (yield* post(base, "after", MaterialMother.wire(MaterialMother.command({ materialId: "locked/c" })))).status
      ).toBe(202)
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
      yield* Effect.scoped(Layer.build(databaseLayer(CatalogDb, "catalog", file, "10 seconds")))
      expect(Date.now() - startedAt).toBeGreaterThan(1_000)
      expect(yield* other).toBe(0)
      // Every migration applied, each exactly once.
      expect(
        query(
          dir,
          "catalog",
          "SELECT migration_id || '_' || name AS m FROM effect_sql_migrations ORDER BY migration_id"
        )
      )
        .toEqual(migrationsOf("catalog").map((m) => ({ m })))
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
      // Its unacked delivery goes back to the queue once the broker has seen the consumer go.
      const ready = Effect.promise(() => channel.checkQueue(namesOf(prefix).queue("catalog"))).pipe(
        Effect.map((q) => q.messageCount)
      )
      expect(yield* eventually(ready, (n) => n === 1)).toBe(1)
    }))
})

describe("files removed or replaced under running roles", () => {
  it.scopedLive("catalog.db-wal removed under a running catalog: it stops acking before the next commit, and its role fails", () =>
    Effect.gen(function*() {
      const dir = yield* tempDataDir
      const prefix = uniquePrefix("lost-wal")
      yield* cleanupTopology(prefix)
      const catalog = yield* startRoles(CatalogRole, testSettings(prefix, dir))
      const publish = (revision: number) => {
        const message = toPublish(namesOf(prefix).exchange, MaterialMother.envelope(MaterialMother.event({ revision })))
        return publishRaw(amqpUrl, [message])
      }
      yield* publish(1)
      yield* eventually(Effect.sync(() => countRows(dir, "catalog", "inbox")), (n) => n === 1)
      rmSync(`${databaseFile(dir, "catalog")}-wal`)
      yield* publish(2)
      const failure = yield* Effect.flip(catalog.failed)
      expect(failure.reason).toContain("catalog.db-wal was removed")
      yield* catalog.stop
      // Its unacked delivery goes back to the queue once the broker has seen the consumer go.
      expect(yield* eventually(depthOf(amqpUrl, namesOf(prefix).queue("catalog")), (n) => n === 1)).toBe(1)
    }))

  it.scopedLive("api.db replaced under a running relay: the relay notices before its next write and its role fails", () =>
    Effect.gen(function*() {
      const dir = yield* tempDataDir
      const prefix = uniquePrefix("lost-relay")
      yield* cleanupTopology(prefix)
      const settings = testSettings(prefix, dir)
      const stores = Layer.mergeAll(ApiStores, OutboxSignal.layer, IdsRandom).pipe(Layer.provideMerge(settings))
      yield* publishMaterial(MaterialMother.key(), MaterialMother.command({ revision: 1 })).pipe(Effect.provide(stores))
      const relay = yield* startRoles(RelayRole, settings)
      yield* eventually(
        Effect.sync(() =>
          query<{ n: number }>(dir, "api", "SELECT COUNT(*) AS n FROM outbox WHERE published_at IS NULL")[0]!.n
        ),
        (n) => n === 0
      )
      const file = databaseFile(dir, "api")
      copyFileSync(file, `${file}.copy`)
      renameSync(`${file}.copy`, file)
      const failure = yield* Effect.flip(relay.failed)
      expect(failure).toMatchObject({ role: "relay" })
      expect(failure.reason).toContain("api.db was replaced by another file")
    }))

  it.scopedLive("api.db-wal removed under a running API: the next POST gets a 503, and the role halts", () =>
    Effect.gen(function*() {
      const dir = yield* tempDataDir
      const api = yield* startRoles(ApiRole, testSettings(uniquePrefix("lost-api"), dir))
      const base = baseUrl(api.context)
      expect((yield* post(base, "a", MaterialMother.wire(MaterialMother.command({ revision: 1 })))).status).toBe(202)
      rmSync(`${databaseFile(dir, "api")}-wal`)
      expect((yield* post(base, "b", MaterialMother.wire(MaterialMother.command({ revision: 2 })))).status).toBe(503)
      const failure = yield* Effect.flip(api.failed)
      expect(failure).toMatchObject({ role: "api" })
      expect(failure.reason).toContain("api.db-wal was removed")
    }))
})

describe("many writers waiting for a lock another process holds", () => {
  it.scopedLive(
    "60 POSTs waiting: a GET is answered at once, every POST gets its 503 within the busy time, and a stop answers them at once",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const api = yield* startRoles(
          ApiRole,
          testSettings(uniquePrefix("many-locked"), dir, { storeBusyTimeout: Duration.seconds(2) })
        )
        const base = baseUrl(api.context)
        expect(
          (yield* post(base, "first", MaterialMother.wire(MaterialMother.command({ materialId: "many/first" })))).status
        ).toBe(202)
        yield* Effect.scoped(Effect.gen(function*() {
          yield* holdWriteLock(databaseFile(dir, "api"))
          const startedAt = Date.now()
          const waiting = yield* Effect.fork(Effect.forEach(
            Array.from({ length: 60 }, (_, i) => i),
            (i) =>
              post(base, `many-${i}`, MaterialMother.wire(MaterialMother.command({ materialId: `many/m${i}` }))).pipe(
                Effect.map((r) => ({ status: r.status, afterMs: Date.now() - startedAt }))
              ),
            { concurrency: "unbounded" }
          ))
          // A fixed time for the POSTs to reach the lock: nothing outside shows that they wait there.
          yield* Effect.sleep("300 millis")
          const getAt = Date.now()
          expect((yield* get(base, "/v1/materials/many/first")).status).toBe(200)
          expect(Date.now() - getAt).toBeLessThan(300)
          const answers = yield* Fiber.join(waiting)
          expect(
            new Set(answers.map((a) => a.status))
          ).toEqual(new Set([503]))
          expect(Math.max(...answers.map((a) => a.afterMs))).toBeLessThan(3_500)
        }))

        // With the lock held again, a stop answers the waiting POSTs at once instead of at the end of their busy time.
        yield* Effect.scoped(Effect.gen(function*() {
          yield* holdWriteLock(databaseFile(dir, "api"))
          const waiting = yield* Effect.fork(Effect.forEach(
            Array.from({ length: 10 }, (_, i) => i),
            (i) => post(base, `stop-${i}`, MaterialMother.wire(MaterialMother.command({ materialId: `stop/m${i}` }))),
            { concurrency: "unbounded" }
          ))
          // A fixed time for the POSTs to reach the lock: nothing outside shows that they wait there.
          yield* Effect.sleep("300 millis")
          const stoppedAt = Date.now()
          yield* api.stop
          expect(Date.now() - stoppedAt).toBeLessThan(1_500)
          const answers = yield* Fiber.join(waiting)
          expect(
            new Set(answers.map((a) => a.status))
          ).toEqual(new Set([503]))
        }))
      }),
    60_000
  )
})
