import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { rmSync } from "node:fs"
import {
  databaseFile,
  databaseLayer,
  NativeBusyTimeoutMs,
  type ServiceDatabase,
  TransactionSqlite
} from "../../src/adapters/sqlite/Database.js"
import { Transaction } from "../../src/ports/Transaction.js"
import { tempDataDir } from "../support/broker.js"

describe("the SQLite files", () => {
  it.scoped.each(["api", "catalog", "audit"] as const)(
    "every writing connection to %s.db commits with synchronous = FULL in WAL mode",
    (service: ServiceDatabase) =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const context = yield* Layer.build(databaseLayer(databaseFile(dir, service), service))
        const sql = SqlClient.SqlClient.pipe(Effect.provide(context))
        const pragma = (name: string) =>
          Effect.flatMap(sql, (s) => s.unsafe<Record<string, unknown>>(`PRAGMA ${name}`)).pipe(
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
          TransactionSqlite("1 second").pipe(Layer.provideMerge(databaseLayer(file, "api")))
        )
        const transaction = Context.get(context, Transaction)
        const sql = Context.get(context, SqlClient.SqlClient)
        yield* transaction.run(sql`INSERT INTO relay_lease VALUES ('a', 'x', 1)`)
        rmSync(`${file}${suffix}`)
        const error = yield* Effect.flip(transaction.run(sql`INSERT INTO relay_lease VALUES ('b', 'x', 1)`))
        expect(error).toMatchObject({ _tag: "PersistenceError", kind: "lost" })
        expect(yield* sql`SELECT name FROM relay_lease`).toEqual([{ name: "a" }])
      })
  )
})
