import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { Inbox } from "../../src/ports/Inbox.js"
import { AuditReader, AuditStores, CatalogReader, CatalogStores } from "../../src/roles/databases.js"
import { tempDataDir } from "../support/broker.js"
import { testSettings } from "../support/roles.js"

// That an adapter over another service's database does not compile is checked by `tsc`
// (npm run typecheck, in CI) on databaseTags.typecheck.ts beside this file.

// Two services that both need an `Inbox`, seen side by side in one Layer graph, as the
// `all` role builds them: each must get the inbox of its own database.
class CatalogInbox extends Context.Tag("test/CatalogInbox")<CatalogInbox, Context.Tag.Service<Inbox>>() {}
class AuditInbox extends Context.Tag("test/AuditInbox")<AuditInbox, Context.Tag.Service<Inbox>>() {}
class CatalogInboxRead extends Context.Tag("test/CatalogInboxRead")<CatalogInboxRead, Context.Tag.Service<Inbox>>() {}
class AuditInboxRead extends Context.Tag("test/AuditInboxRead")<AuditInboxRead, Context.Tag.Service<Inbox>>() {}

describe("the service databases of one process", () => {
  it.scoped("the catalog's and the audit's stores in one Layer graph write and read their own files", () =>
    Effect.gen(function*() {
      const dir = yield* tempDataDir
      const writers = yield* Layer.build(
        Layer.mergeAll(
          Layer.effect(CatalogInbox, Inbox).pipe(Layer.provide(CatalogStores)),
          Layer.effect(AuditInbox, Inbox).pipe(Layer.provide(AuditStores))
        ).pipe(Layer.provide(testSettings("unused", dir)))
      )
      const at = { outcome: "applied", receivedAtMs: 1 } as const
      yield* Context.get(writers, CatalogInbox).record({ handler: "catalog", messageId: "m-1", ...at })
      yield* Context.get(writers, AuditInbox).record({ handler: "audit", messageId: "m-2", ...at })
      yield* Context.get(writers, AuditInbox).record({ handler: "audit", messageId: "m-3", ...at })

      const readers = yield* Layer.build(
        Layer.mergeAll(
          Layer.effect(CatalogInboxRead, Inbox).pipe(Layer.provide(CatalogReader)),
          Layer.effect(AuditInboxRead, Inbox).pipe(Layer.provide(AuditReader))
        ).pipe(Layer.provide(testSettings("unused", dir)))
      )
      const catalog = Context.get(readers, CatalogInboxRead)
      const audit = Context.get(readers, AuditInboxRead)
      expect((yield* catalog.counts("catalog")).applied).toBe(1)
      expect((yield* catalog.counts("audit")).applied).toBe(0)
      expect((yield* audit.counts("audit")).applied).toBe(2)
      expect((yield* audit.counts("catalog")).applied).toBe(0)
    }))
})
