import { describe, expect, it } from "@effect/vitest"
import * as amqp from "amqplib"
import { Effect, Layer } from "effect"
import { toIncoming } from "../../src/adapters/amqp/AmqpConsumer.js"
import { namesOf } from "../../src/adapters/amqp/Topology.js"
import { catalogHandler } from "../../src/app/handlers.js"
import { judge } from "../../src/app/receive.js"
import { Verdict } from "../../src/app/verdict.js"
import { ApiRole } from "../../src/roles/api.js"
import { CatalogStores } from "../../src/roles/databases.js"
import { AuditRole, CatalogRole } from "../../src/roles/receivers.js"
import { RelayRole } from "../../src/roles/relay.js"
import {
  amqpUrl,
  cleanupTopology,
  eventually,
  tempDataDir,
  testConnection,
  testRetry,
  uniquePrefix
} from "../support/broker.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { baseUrl, countRows, post, query, startRoles, testSettings } from "../support/roles.js"

/** `materials` × `revisions` publication requests, revisions of each material in order. */
const publishAll = (base: string, materials: number, revisions: number, tag: string) =>
  Effect.forEach(
    Array.from({ length: materials }, (_, m) => m),
    (m) =>
      Effect.forEach(Array.from({ length: revisions }, (_, r) => r + 1), (revision) =>
        post(
          base,
          `${tag}-${m}-${revision}`,
          MaterialMother.wire(MaterialMother.command({
            materialId: `${tag}/material-${m}`,
            revision,
            title: `Material ${m}, revision ${revision}`
          }))
        ).pipe(Effect.tap((response) => expect(response.status).toBe(202)))),
    { concurrency: 10, discard: true }
  )

const queueDepth = (queue: string) =>
  Effect.flatMap(testConnection, (connection) =>
    Effect.promise(async () => {
      const channel = await connection.createChannel()
      const { messageCount } = await channel.checkQueue(queue)
      await channel.close()
      return messageCount
    }))

describe("end to end on the real broker", () => {
  it.scopedLive("300 events reach both receivers: the newest revision per material in the catalog, one audit record per event", () =>
    Effect.gen(function*() {
      const dir = yield* tempDataDir
      const prefix = uniquePrefix("e2e")
      yield* cleanupTopology(prefix)
      const { context } = yield* startRoles(
        Layer.mergeAll(ApiRole, RelayRole, CatalogRole, AuditRole),
        testSettings(prefix, dir)
      )
      yield* publishAll(baseUrl(context), 60, 5, "e2e")

      yield* eventually(Effect.sync(() => countRows(dir, "audit", "audit_records")), (n) => n >= 300, 60_000)
      yield* eventually(Effect.sync(() => countRows(dir, "catalog", "inbox")), (n) => n >= 300, 60_000)
      expect(countRows(dir, "audit", "audit_records")).toBe(300)
      expect(query(dir, "audit", "SELECT COUNT(DISTINCT event_id) AS n FROM audit_records")[0]).toEqual({ n: 300 })
      const events = query<{ event_id: string }>(dir, "api", "SELECT event_id FROM materials").map((r) => r.event_id)
        .sort()
      expect(
        query<{ event_id: string }>(dir, "audit", "SELECT event_id FROM audit_records").map((r) => r.event_id).sort()
      ).toEqual(events)
      const catalog = query<{ material_id: string; revision: number; title: string }>(
        dir,
        "catalog",
        "SELECT material_id, revision, title FROM catalog_entries ORDER BY material_id"
      )
      expect(catalog).toHaveLength(60)
      for (const entry of catalog) {
        expect(entry).toEqual({
          material_id: entry.material_id,
          revision: 5,
          title: `Material ${entry.material_id.split("-")[1]}, revision 5`
        })
      }
      // The relay marks a row published after its confirm; a receiver may apply the event first.
      yield* eventually(
        Effect.sync(() =>
          query<{ n: number }>(dir, "api", "SELECT COUNT(*) AS n FROM outbox WHERE published_at IS NULL")[0]!.n
        ),
        (n) => n === 0
      )
    }))

  it.scopedLive("a receiver that dies after its commit but before its ack gets the redelivery and applies nothing twice", () =>
    Effect.gen(function*() {
      const dir = yield* tempDataDir
      const prefix = uniquePrefix("crash")
      yield* cleanupTopology(prefix)
      const settings = testSettings(prefix, dir)
      const { context } = yield* startRoles(Layer.merge(ApiRole, RelayRole), settings)
      yield* publishAll(baseUrl(context), 1, 1, "crash")
      const queue = namesOf(prefix).queue("catalog")
      yield* eventually(queueDepth(queue), (n) => n === 1)

      // The "receiver" takes the delivery, commits its transaction, and dies before acking.
      const dying = yield* Effect.promise(() => amqp.connect(amqpUrl))
      const channel = yield* Effect.promise(() => dying.createChannel())
      const delivery = yield* Effect.promise(() => channel.get(queue, { noAck: false }))
      if (delivery === false) return expect.unreachable("no delivery")
      const verdict = yield* judge(catalogHandler, testRetry)(toIncoming(delivery)).pipe(
        Effect.provide(CatalogStores),
        Effect.provide(settings)
      )
      expect(verdict).toEqual(Verdict.Ack({ disposition: "applied" }))
      yield* Effect.promise(() => dying.close())

      // The real catalog starts, gets the redelivery, and finds the receipt.
      yield* startRoles(CatalogRole, settings)
      yield* eventually(
        Effect.sync(() => query<{ duplicates: number }>(dir, "catalog", "SELECT duplicates FROM inbox")[0]?.duplicates),
        (n) => n === 1
      )
      expect(countRows(dir, "catalog", "inbox")).toBe(1)
      expect(query(dir, "catalog", "SELECT revision FROM catalog_entries")).toEqual([{ revision: 1 }])
      yield* eventually(queueDepth(queue), (n) => n === 0)
    }))

  it.scopedLive("the audit receiver stopped while events flow: the catalog is not held back, and audit catches up on restart", () =>
    Effect.gen(function*() {
      const dir = yield* tempDataDir
      const prefix = uniquePrefix("resume")
      yield* cleanupTopology(prefix)
      const settings = testSettings(prefix, dir)
      const { context } = yield* startRoles(Layer.mergeAll(ApiRole, RelayRole, CatalogRole), settings)
      const audit = yield* startRoles(AuditRole, settings)
      const base = baseUrl(context)
      yield* publishAll(base, 10, 2, "before")
      yield* eventually(Effect.sync(() => countRows(dir, "audit", "audit_records")), (n) => n === 20)

      yield* audit.stop
      yield* publishAll(base, 20, 3, "while-down")
      yield* eventually(Effect.sync(() => countRows(dir, "catalog", "inbox")), (n) => n === 80)
      expect(countRows(dir, "audit", "audit_records")).toBe(20)
      yield* eventually(queueDepth(namesOf(prefix).queue("audit")), (n) => n === 60)

      yield* startRoles(AuditRole, settings)
      yield* eventually(Effect.sync(() => countRows(dir, "audit", "audit_records")), (n) => n === 80)
      yield* eventually(queueDepth(namesOf(prefix).queue("audit")), (n) => n === 0)
      expect(query(dir, "audit", "SELECT COUNT(*) AS n FROM inbox WHERE duplicates > 0")[0]).toEqual({ n: 0 })
    }))
})
