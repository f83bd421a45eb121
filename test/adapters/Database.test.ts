import { describe, expect, it } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import { databaseFile, databaseLayer, NativeBusyTimeoutMs, type ServiceDatabase } from "../../src/adapters/sqlite/Database.js"
import { tempDataDir } from "../support/broker.js"

describe("the SQLite files", () => {
  it.scoped.each(["api", "catalog", "audit"] as const)("every writing connection to %s.db commits with synchronous = FULL in WAL mode", (service: ServiceDatabase) =>
    Effect.gen(function*() {
      const dir = yield* tempDataDir
      const context = yield* Layer.build(databaseLayer(databaseFile(dir, service), service))
      const sql = SqlClient.SqlClient.pipe(Effect.provide(context))
      const pragma = (name: string) => Effect.flatMap(sql, (s) => s.unsafe<Record<string, unknown>>(`PRAGMA ${name}`)).pipe(Effect.map((rows) => Object.values(rows[0]!)[0]))
      // 2 is FULL (SQLite, "PRAGMA synchronous"); NORMAL (1) may lose the last commits on power loss.
      expect(yield* pragma("synchronous")).toBe(2)
      expect(yield* pragma("journal_mode")).toBe("wal")
      expect(yield* pragma("busy_timeout")).toBe(NativeBusyTimeoutMs)
    }))
})
