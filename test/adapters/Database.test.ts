import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { rmSync } from "node:fs"
import { databaseFile, databaseLayer, NativeBusyTimeoutMs } from "../../src/adapters/sqlite/Database.js"
import {
  ApiDb,
  AuditDb,
  CatalogDb,
  type DatabaseTag,
  type ServiceDatabase
} from "../../src/adapters/sqlite/DatabaseTags.js"
import { TransactionSqlite } from "../../src/adapters/sqlite/TransactionSqlite.js"
import { Transaction } from "../../src/ports/Transaction.js"
import { tempDataDir } from "../support/broker.js"

/** A writing connection to `<service>.db` in a temporary data dir of its own. */
const databaseLayerIn = <Self, S extends ServiceDatabase>(service: S, database: DatabaseTag<Self, S>) =>
  Layer.unwrapScoped(Effect.map(tempDataDir, (dir) => databaseLayer(database, service, databaseFile(dir, service))))

describe("the SQLite files", () => {
  // Each opened for the test's scope.
  const writers = {
    api: Effect.map(Layer.build(databaseLayerIn("api", ApiDb)), (c) => Context.get(c, ApiDb).sql),
    catalog: Effect.map(Layer.build(databaseLayerIn("catalog", CatalogDb)), (c) => Context.get(c, CatalogDb).sql),
    audit: Effect.map(Layer.build(databaseLayerIn("audit", AuditDb)), (c) => Context.get(c, AuditDb).sql)
  }

  it.scoped.each(["api", "catalog", "audit"] as const)(
    "every writing connection to %s.db commits with synchronous = FULL in WAL mode",
    (service: ServiceDatabase) =>
      Effect.gen(function*() {
        const sql = yield* writers[service]
        const pragma = (name: string) =>
          sql.unsafe<Record<string, unknown>>(`PRAGMA ${name}`).pipe(
            Effect.map((rows) => Object.values(rows[0]!)[0])
          )
        // 2 is FULL (SQLite, "PRAGMA synchronous"); NORMAL (1) may lose the last commits on power loss.
        expect(yield* pragma("synchronous")).toBe(2)
        expect(yield* pragma("journal_mode")).toBe("wal")
        expect(yield* pragma("busy_timeout")).toBe(NativeBusyTimeoutMs)
      })
  )

  it.scoped.each(["", "-wal"])(
    "a transaction over a file whose %s was removed commits nothing and fails as lost",
    (suffix: string) =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const file = databaseFile(dir, "api")
        const context = yield* Layer.build(
          TransactionSqlite(ApiDb, "1 second").pipe(Layer.provideMerge(databaseLayer(ApiDb, "api", file)))
        )
        const transaction = Context.get(context, Transaction)
        const sql = Context.get(context, ApiDb).sql
        yield* transaction.run(sql`INSERT INTO relay_lease VALUES ('a', 'x', 1)`)
        rmSync(`${file}${suffix}`)
        const error = yield* Effect.flip(transaction.run(sql`INSERT INTO relay_lease VALUES ('b', 'x', 1)`))
        expect(error).toMatchObject({ _tag: "PersistenceError", kind: "lost" })
        expect(yield* sql`SELECT name FROM relay_lease`).toEqual([{ name: "a" }])
      })
  )
})
