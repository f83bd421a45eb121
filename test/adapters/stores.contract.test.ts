import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { AuditLogSqlite } from "../../src/adapters/sqlite/AuditLogSqlite.js"
import { CatalogStoreSqlite } from "../../src/adapters/sqlite/CatalogStoreSqlite.js"
import { databaseLayer } from "../../src/adapters/sqlite/Database.js"
import { ApiDb, AuditDb, CatalogDb } from "../../src/adapters/sqlite/DatabaseTags.js"
import { InboxSqlite } from "../../src/adapters/sqlite/InboxSqlite.js"
import { MaterialStoreSqlite } from "../../src/adapters/sqlite/MaterialStoreSqlite.js"
import { OutboxSqlite } from "../../src/adapters/sqlite/OutboxSqlite.js"
import { PublicationRequestsSqlite } from "../../src/adapters/sqlite/PublicationRequestsSqlite.js"
import { TransactionSqlite } from "../../src/adapters/sqlite/TransactionSqlite.js"
import { PersistenceError } from "../../src/domain/errors.js"
import { MaterialId, Revision } from "../../src/domain/Material.js"
import { AuditLog, type AuditRecord } from "../../src/ports/AuditLog.js"
import { type CatalogEntry, CatalogStore } from "../../src/ports/CatalogStore.js"
import { Inbox } from "../../src/ports/Inbox.js"
import { type MaterialRevision, MaterialStore } from "../../src/ports/MaterialStore.js"
import { Outbox } from "../../src/ports/Outbox.js"
import { type PublicationRequest, PublicationRequests } from "../../src/ports/PublicationRequests.js"
import { Transaction } from "../../src/ports/Transaction.js"
import { tempDataDir } from "../support/broker.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { ApiMemory, ReceiverMemory } from "../support/memory.js"

type ApiPorts = Transaction | Outbox | MaterialStore | PublicationRequests
type ReceiverPorts = Transaction | Inbox | CatalogStore | AuditLog

const sqliteApi = Layer.unwrapScoped(
  Effect.map(
    tempDataDir,
    (dir) =>
      Layer.mergeAll(
        TransactionSqlite(ApiDb, "5 seconds"),
        OutboxSqlite(ApiDb),
        MaterialStoreSqlite(ApiDb),
        PublicationRequestsSqlite(ApiDb)
      ).pipe(
        Layer.provide(databaseLayer(ApiDb, "api", `${dir}/api.db`))
      )
  )
)
const sqliteReceiver = Layer.unwrapScoped(
  Effect.map(
    tempDataDir,
    (dir) =>
      Layer.mergeAll(TransactionSqlite(CatalogDb, "5 seconds"), InboxSqlite(CatalogDb), CatalogStoreSqlite(CatalogDb))
        .pipe(
          Layer.provide(databaseLayer(CatalogDb, "catalog", `${dir}/catalog.db`)),
          Layer.merge(AuditLogSqlite(AuditDb).pipe(Layer.provide(databaseLayer(AuditDb, "audit", `${dir}/audit.db`))))
        )
  )
)

const adapters: ReadonlyArray<readonly [string, Layer.Layer<ApiPorts>, Layer.Layer<ReceiverPorts>]> = [
  ["memory", ApiMemory, ReceiverMemory],
  ["sqlite", Layer.orDie(sqliteApi), Layer.orDie(sqliteReceiver)]
]

const id = (materialId: string) => MaterialId.make(materialId)
const eventId = MaterialMother.eventId

const revision = (materialId: string, rev: number, event = eventId(`${materialId}-${rev}`)): MaterialRevision => ({
  materialId: id(materialId),
  revision: Revision.make(rev),
  title: "t",
  summary: "s",
  body: "b",
  eventId: event,
  publishedAtMs: 1000
})

describe.each(adapters)("store contract: %s", (_, api, receiver) => {
  it.effect("outbox: pending oldest first; markPublished; stats with the oldest pending age", () =>
    Effect.gen(function*() {
      const outbox = yield* Outbox
      const envelopes = [1, 2, 3].map((r) => MaterialMother.envelope(MaterialMother.event({ revision: r })))
      for (const [i, e] of envelopes.entries()) yield* outbox.enqueue(e, 1000 + i)
      const pending = yield* outbox.pending(2, 0)
      expect(pending.map((m) => m.envelope)).toEqual(envelopes.slice(0, 2))
      expect(pending[0]!.sequence).toBeLessThan(pending[1]!.sequence)
      yield* outbox.markPublished([envelopes[0]!.messageId], 5000)
      expect(yield* outbox.stats(1501)).toEqual({
        pending: 2,
        published: 1,
        parked: 0,
        oldestPendingAgeMs: 500,
        publishedLastMinute: 1
      })
      expect(yield* outbox.publishedAt(envelopes[0]!.messageId)).toEqual(Option.some(5000))
      expect(yield* outbox.publishedAt(envelopes[1]!.messageId)).toEqual(Option.some(null))
      expect(yield* outbox.publishedAt("nope")).toEqual(Option.none())
      const again = yield* Effect.flip(outbox.enqueue(envelopes[0]!, 9))
      expect(again).toBeInstanceOf(PersistenceError)
    }).pipe(Effect.provide(api)))

  it.effect("outbox: a rejected row waits for its own next attempt, a parked one until it is released", () =>
    Effect.gen(function*() {
      const outbox = yield* Outbox
      const envelopes = [1, 2, 3].map((r) => MaterialMother.envelope(MaterialMother.event({ revision: r })))
      for (const e of envelopes) yield* outbox.enqueue(e, 1000)
      const [a, b, c] = envelopes.map((e) => e.messageId) as [string, string, string]
      yield* outbox.reject([{ messageId: a, error: "returned: no route", retryAtMs: 5_000 }, {
        messageId: b,
        error: "nacked",
        retryAtMs: null
      }], 2_000)
      expect((yield* outbox.pending(10, 4_999)).map((m) => m.envelope.messageId)).toEqual([c])
      expect((yield* outbox.pending(10, 5_000)).map((m) => m.envelope.messageId)).toEqual([a, c])
      const [deferred] = yield* outbox.pending(1, 5_000)
      expect(deferred).toMatchObject({ rejections: 1, lastError: "returned: no route", parkedAtMs: null })
      expect((yield* outbox.parked(10)).map((m) => [m.envelope.messageId, m.rejections, m.parkedAtMs, m.lastError]))
        .toEqual([[b, 1, 2_000, "nacked"]])
      expect(yield* outbox.stats(3_000)).toMatchObject({ pending: 2, parked: 1 })
      expect(yield* outbox.release(["unknown-id"])).toBe(0)
      expect(yield* outbox.release([b])).toBe(1)
      expect(yield* outbox.release("all")).toBe(0)
      expect((yield* outbox.pending(10, 5_000)).map((m) => [m.envelope.messageId, m.rejections])).toEqual([[a, 1], [
        b,
        0
      ], [c, 0]])
      yield* outbox.markPublished([a], 6_000)
      yield* outbox.reject([{ messageId: a, error: "late", retryAtMs: null }], 6_000)
      expect(yield* outbox.parked(10)).toEqual([])
      yield* outbox.reject([{ messageId: b, error: "nacked", retryAtMs: null }, {
        messageId: c,
        error: "nacked",
        retryAtMs: null
      }], 7_000)
      expect(yield* outbox.release("all")).toBe(2)
      expect(yield* outbox.parked(10)).toEqual([])
    }).pipe(Effect.provide(api)))

  it.effect("transaction: a failed savepoint undoes only its own writes; the outer transaction commits the rest", () =>
    Effect.gen(function*() {
      const transaction = yield* Transaction
      const materials = yield* MaterialStore
      yield* transaction.run(Effect.gen(function*() {
        yield* materials.insert(revision("s", 1))
        const inner = yield* Effect.exit(
          transaction.run(Effect.zipRight(materials.insert(revision("s", 2)), Effect.fail("inner failed" as const)))
        )
        expect(inner._tag).toBe("Failure")
        yield* materials.insert(revision("s", 3))
      }))
      expect(Option.getOrThrow(yield* materials.latest(id("s"))).revision).toBe(3)
      expect(yield* Effect.flip(materials.insert(revision("s", 1)))).toBeInstanceOf(PersistenceError)
      yield* materials.insert(revision("s", 2))
    }).pipe(Effect.provide(api)))

  it.effect("outbox lease: one owner at a time, renewable, free after expiry or release", () =>
    Effect.gen(function*() {
      const outbox = yield* Outbox
      expect(yield* outbox.acquireLease("a", 100, 0)).toEqual({ owner: "a", expiresAtMs: 100 })
      expect(yield* outbox.acquireLease("b", 100, 50)).toEqual({ owner: "a", expiresAtMs: 100 })
      expect(yield* outbox.acquireLease("a", 100, 90)).toEqual({ owner: "a", expiresAtMs: 190 })
      expect(yield* outbox.acquireLease("b", 100, 150)).toEqual({ owner: "a", expiresAtMs: 190 })
      expect(yield* outbox.acquireLease("b", 100, 190)).toEqual({ owner: "b", expiresAtMs: 290 })
      yield* outbox.releaseLease("a")
      expect((yield* outbox.acquireLease("a", 100, 200)).owner).toBe("b")
      yield* outbox.releaseLease("b")
      expect(yield* outbox.acquireLease("a", 100, 200)).toEqual({ owner: "a", expiresAtMs: 300 })
    }).pipe(Effect.provide(api)))

  it.effect("materials and requests: latest revision, unique keys, a failed transaction keeps nothing", () =>
    Effect.gen(function*() {
      const materials = yield* MaterialStore
      const requests = yield* PublicationRequests
      const transaction = yield* Transaction
      yield* materials.insert(revision("m", 1))
      yield* materials.insert(revision("m", 3))
      yield* materials.insert(revision("m", 2))
      expect(Option.getOrThrow(yield* materials.latest(id("m"))).revision).toBe(3)
      expect(yield* Effect.flip(materials.insert(revision("m", 3, eventId("other"))))).toBeInstanceOf(PersistenceError)
      const request: PublicationRequest = {
        idempotencyKey: "k",
        requestHash: "h",
        requestId: "r",
        eventId: eventId("e"),
        materialId: id("m"),
        revision: Revision.make(4),
        acceptedAtMs: 1
      }
      const failed = yield* Effect.flip(transaction.run(Effect.gen(function*() {
        yield* materials.insert(revision("m", 4, eventId("e")))
        yield* requests.insert(request)
        return yield* Effect.fail("boom" as const)
      })))
      expect(failed).toBe("boom")
      expect(Option.getOrThrow(yield* materials.latest(id("m"))).revision).toBe(3)
      expect(yield* requests.byKey("k")).toEqual(Option.none())
      yield* requests.insert(request)
      expect(yield* requests.byId("r")).toEqual(Option.some(request))
      expect(yield* Effect.flip(requests.insert({ ...request, requestId: "r2", eventId: eventId("e2") })))
        .toBeInstanceOf(
          PersistenceError
        )
    }).pipe(Effect.provide(api)))

  it.effect("inbox, catalog and audit: one receipt per (handler, message), duplicates counted", () =>
    Effect.gen(function*() {
      const inbox = yield* Inbox
      const catalog = yield* CatalogStore
      const audit = yield* AuditLog
      yield* inbox.record({ handler: "catalog", messageId: "m1", outcome: "applied", receivedAtMs: 1 })
      yield* inbox.record({ handler: "catalog", messageId: "m2", outcome: "stale", receivedAtMs: 2 })
      yield* inbox.record({ handler: "audit", messageId: "m1", outcome: "applied", receivedAtMs: 3 })
      expect(
        yield* Effect.flip(inbox.record({ handler: "catalog", messageId: "m1", outcome: "applied", receivedAtMs: 4 }))
      )
        .toBeInstanceOf(PersistenceError)
      yield* inbox.noteDuplicate("catalog", "m1")
      yield* inbox.noteDuplicate("catalog", "m1")
      expect(yield* inbox.counts("catalog")).toEqual({
        applied: 1,
        stale: 1,
        duplicates: 2,
        lastAppliedAtMs: 1,
        retrying: 0,
        dead: 0
      })
      expect(yield* inbox.find("audit", "m1")).toEqual(
        Option.some({ handler: "audit", messageId: "m1", outcome: "applied", receivedAtMs: 3 })
      )
      expect(yield* inbox.find("audit", "m2")).toEqual(Option.none())
      expect(yield* inbox.received("audit", ["m2", "m1", "m3"])).toEqual(new Set(["m1"]))
      expect(yield* inbox.received("catalog", [])).toEqual(new Set())
      yield* inbox.recordAll([
        { handler: "audit", messageId: "m2", outcome: "applied", receivedAtMs: 6 },
        { handler: "audit", messageId: "m3", outcome: "stale", receivedAtMs: 7 }
      ])
      expect(yield* inbox.received("audit", ["m1", "m2", "m3", "m4"])).toEqual(new Set(["m1", "m2", "m3"]))
      expect(yield* inbox.find("audit", "m3")).toEqual(
        Option.some({ handler: "audit", messageId: "m3", outcome: "stale", receivedAtMs: 7 })
      )
      // One pair already received: the whole statement fails and keeps nothing.
      expect(
        yield* Effect.flip(inbox.recordAll([
          { handler: "audit", messageId: "m4", outcome: "applied", receivedAtMs: 8 },
          { handler: "audit", messageId: "m1", outcome: "applied", receivedAtMs: 8 }
        ]))
      ).toBeInstanceOf(PersistenceError)
      expect(yield* inbox.received("audit", ["m4"])).toEqual(new Set())

      const entry: CatalogEntry = {
        materialId: id("m"),
        revision: Revision.make(2),
        title: "t",
        summary: "s",
        publishedAtMs: 5,
        eventId: eventId("e2")
      }
      yield* catalog.put({ ...entry, revision: Revision.make(1), eventId: eventId("e1") })
      yield* catalog.put(entry)
      expect(yield* catalog.get(id("m"))).toEqual(Option.some(entry))
      expect(yield* catalog.count).toBe(1)

      const record: AuditRecord = {
        eventId: eventId("e1"),
        materialId: id("m"),
        revision: Revision.make(1),
        title: "t",
        publishedAtMs: 5,
        correlationId: "c",
        receivedAtMs: 6
      }
      yield* audit.append(record)
      expect(yield* Effect.flip(audit.append(record))).toBeInstanceOf(PersistenceError)
      expect(yield* audit.count).toBe(1)
    }).pipe(Effect.provide(receiver)))

  it.effect("outbox for reconciliation: published pages in sequence order, rows by id, the trace context kept", () =>
    Effect.gen(function*() {
      const outbox = yield* Outbox
      const envelopes = [1, 2, 3, 4].map((r) => MaterialMother.envelope(MaterialMother.event({ revision: r })))
      const traced = { ...envelopes[0]!, traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" }
      yield* outbox.enqueue(traced, 1)
      for (const e of envelopes.slice(1)) yield* outbox.enqueue(e, 1)
      yield* outbox.markPublished([envelopes[0]!.messageId, envelopes[1]!.messageId], 100)
      yield* outbox.markPublished([envelopes[3]!.messageId], 200)
      const [first, second, fourth] = yield* outbox.publishedPage(0, 1_000, 10)
      expect([first?.messageId, second?.messageId, fourth?.messageId]).toEqual([
        envelopes[0]!.messageId,
        envelopes[1]!.messageId,
        envelopes[3]!.messageId
      ])
      expect(fourth?.publishedAtMs).toBe(200)
      expect((yield* outbox.publishedPage(first!.sequence, 1_000, 1)).map((r) => r.messageId)).toEqual([
        envelopes[1]!.messageId
      ])
      expect((yield* outbox.publishedPage(0, 200, 10)).map((r) => r.messageId)).toEqual([
        envelopes[0]!.messageId,
        envelopes[1]!.messageId
      ])
      const found = yield* outbox.find([envelopes[3]!.messageId, "nope", envelopes[0]!.messageId])
      expect(found.map((r) => r.envelope)).toEqual([traced, envelopes[3]])
    }).pipe(Effect.provide(api)))

  it.effect("inbox failures: the latest of each message kept, counted while unreceived, and reported by unreceived", () =>
    Effect.gen(function*() {
      const inbox = yield* Inbox
      yield* inbox.noteFailures([
        { handler: "catalog", messageId: "m1", state: "retrying", attempts: 1, atMs: 10 },
        { handler: "catalog", messageId: "m2", state: "dead", attempts: 5, atMs: 20 },
        { handler: "audit", messageId: "m1", state: "dead", attempts: 1, atMs: 30 }
      ])
      yield* inbox.noteFailures([{ handler: "catalog", messageId: "m1", state: "retrying", attempts: 2, atMs: 40 }])
      yield* inbox.noteFailures([])
      expect(yield* inbox.counts("catalog")).toMatchObject({ retrying: 1, dead: 1, lastAppliedAtMs: null })
      expect(yield* inbox.unreceived("catalog", ["m3", "m1", "m2"])).toEqual([
        { messageId: "m3", failure: null },
        { messageId: "m1", failure: { handler: "catalog", messageId: "m1", state: "retrying", attempts: 2, atMs: 40 } },
        { messageId: "m2", failure: { handler: "catalog", messageId: "m2", state: "dead", attempts: 5, atMs: 20 } }
      ])
      // A receipt settles it, whatever failed before: a replay that applied.
      yield* inbox.record({ handler: "catalog", messageId: "m2", outcome: "applied", receivedAtMs: 50 })
      expect(yield* inbox.unreceived("catalog", ["m2"])).toEqual([])
      expect(yield* inbox.counts("catalog")).toMatchObject({ applied: 1, retrying: 1, dead: 0, lastAppliedAtMs: 50 })
      expect(yield* inbox.unreceived("audit", [])).toEqual([])
    }).pipe(Effect.provide(receiver)))
})
