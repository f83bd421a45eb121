import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Option, Schema } from "effect"
import { CatalogStoreSqlite } from "../../src/adapters/sqlite/CatalogStoreSqlite.js"
import { databaseLayer } from "../../src/adapters/sqlite/Database.js"
import { ApiDb, CatalogDb } from "../../src/adapters/sqlite/DatabaseTags.js"
import { PublicationRequestsSqlite } from "../../src/adapters/sqlite/PublicationRequestsSqlite.js"
import { tableRow } from "../../src/adapters/sqlite/TableRow.js"
import { MaterialPublishedV1 } from "../../src/domain/MaterialPublished.js"
import { PublishMaterial } from "../../src/domain/PublishMaterial.js"
import { CatalogEntry, CatalogStore } from "../../src/ports/CatalogStore.js"
import { PublicationRequests } from "../../src/ports/PublicationRequests.js"
import { tempDataDir } from "../support/broker.js"
import { MaterialMother } from "../support/MaterialMother.js"

const EntryRow = tableRow(CatalogEntry, {
  materialId: "material_id",
  publishedAtMs: "published_at",
  eventId: "event_id"
})

const row = {
  material_id: "guides/quorum-queues",
  revision: 3,
  title: "t",
  summary: "s",
  published_at: 1_000,
  event_id: MaterialMother.eventId("e")
}

describe("a port's record as a table row", () => {
  it("decodes the named columns into the port's fields, leaves other columns out, and encodes back", () => {
    const entry = Schema.decodeUnknownSync(EntryRow)({ ...row, rowid: 7 })
    expect(entry).toEqual({
      materialId: "guides/quorum-queues",
      revision: 3,
      title: "t",
      summary: "s",
      publishedAtMs: 1_000,
      eventId: row.event_id
    })
    expect(Schema.encodeSync(EntryRow)(entry)).toEqual(row)
  })

  it("checks the domain's rules on the way in and out: a material id with a space, revision 0, a non-UUID event id", () => {
    for (const bad of [{ material_id: "a b" }, { revision: 0 }, { event_id: "e-1" }, { published_at: null }]) {
      expect(Schema.decodeUnknownEither(EntryRow)({ ...row, ...bad })._tag).toBe("Left")
    }
    const entry = Schema.decodeUnknownSync(EntryRow)(row)
    expect(Schema.encodeEither(EntryRow)({ ...entry, revision: 0 as typeof entry.revision })._tag).toBe("Left")
  })

  it.scoped("a request row stored before the segment rule (material id 'a//b') still reads, while the doors refuse 'a//b'", () =>
    Effect.gen(function*() {
      const dir = yield* tempDataDir
      const context = yield* Layer.build(
        PublicationRequestsSqlite(ApiDb).pipe(Layer.provideMerge(databaseLayer(ApiDb, "api", `${dir}/api.db`)))
      )
      const { sql } = Context.get(context, ApiDb)
      const requests = Context.get(context, PublicationRequests)
      const eventId = MaterialMother.eventId("legacy")
      yield* sql`INSERT INTO publication_requests ${
        sql.insert({
          idempotency_key: "legacy-key",
          request_hash: "h",
          request_id: "legacy-req",
          event_id: eventId,
          material_id: "a//b",
          revision: 1,
          accepted_at: 1_000
        })
      }`
      expect(Option.map(yield* requests.byId("legacy-req"), (r) => [r.materialId, r.eventId])).toEqual(
        Option.some(["a//b", eventId])
      )
      expect(Option.map(yield* requests.byKey("legacy-key"), (r) => r.requestId)).toEqual(Option.some("legacy-req"))
      const command = MaterialMother.wire(MaterialMother.command())
      expect(Schema.decodeUnknownEither(PublishMaterial)({ ...command, material_id: "a//b" })._tag).toBe("Left")
      const event = Schema.encodeSync(MaterialPublishedV1)(MaterialMother.event())
      expect(Schema.decodeUnknownEither(MaterialPublishedV1)({ ...event, material_id: "a/./b" })._tag).toBe("Left")
    }))

  it.scoped("a stored row that breaks its record's rules is a defect of the read, not a PersistenceError", () =>
    Effect.gen(function*() {
      const dir = yield* tempDataDir
      const context = yield* Layer.build(
        CatalogStoreSqlite(CatalogDb).pipe(Layer.provideMerge(databaseLayer(CatalogDb, "catalog", `${dir}/catalog.db`)))
      )
      const { sql } = Context.get(context, CatalogDb)
      const catalog = Context.get(context, CatalogStore)
      yield* sql`INSERT INTO catalog_entries ${sql.insert({ ...row, event_id: "not-a-uuid" })}`
      const exit = yield* Effect.exit(catalog.get(MaterialMother.materialId))
      expect(Exit.isFailure(exit) && exit.cause._tag).toBe("Die")
      yield* sql`UPDATE catalog_entries SET event_id = ${row.event_id}`
      expect(Option.map(yield* catalog.get(MaterialMother.materialId), (e) => e.revision)).toEqual(Option.some(3))
    }))
})
