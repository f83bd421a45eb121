import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer } from "effect"
import { randomUUID } from "node:crypto"
import { namesOf } from "../../src/adapters/amqp/Topology.js"
import { ApiRole } from "../../src/roles/api.js"
import { RelayRole } from "../../src/roles/relay.js"
import {
  amqpUrl,
  cleanupTopology,
  depthOf,
  eventually,
  tempDataDir,
  testConnection,
  uniquePrefix
} from "../support/broker.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { baseUrl, countRows, killed, post, query, roleProcess, startRoles, testSettings } from "../support/roles.js"

/**
 * Receivers scale out as competing consumers: several processes of one handler consume
 * from the same queue and share that handler's database (SQLite in WAL mode, so on one
 * host). The inbox receipt and the effect commit in one transaction, so an event
 * redelivered to the other process, after a kill -9 of the first, is found there and
 * not applied again.
 */
describe("competing consumers", () => {
  it.scopedLive(
    "two catalog and two audit processes on the same queues, one of each killed under load: every event applied exactly once",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("compete")
        const names = namesOf(prefix)
        yield* cleanupTopology(prefix)
        const roles = yield* startRoles(Layer.merge(ApiRole, RelayRole), testSettings(prefix, dir))
        const base = baseUrl(roles.context)

        // A small prefetch, so that the killed process holds unacked deliveries of its own.
        const receivers = { DOSTAVKA_PREFETCH: "5" }
        const catalogs = [
          yield* roleProcess("catalog", dir, prefix, receivers),
          yield* roleProcess("catalog", dir, prefix, receivers)
        ]
        const audits = [
          yield* roleProcess("audit", dir, prefix, receivers),
          yield* roleProcess("audit", dir, prefix, receivers)
        ]
        const connection = yield* testConnection
        const channel = yield* Effect.promise(() => connection.createChannel())
        const consumers = (queue: string) =>
          Effect.promise(() => channel.checkQueue(queue).then((q) => q.consumerCount))
        // Four role processes start at once: on a loaded 2-core machine that takes a while.
        yield* eventually(consumers(names.queue("catalog")), (n) => n === 2, 60_000).pipe(
          Effect.tapError(() =>
            Effect.sync(() => console.log([...catalogs, ...audits].map((p) => p.log.text).join("\n---\n")))
          )
        )
        yield* eventually(consumers(names.queue("audit")), (n) => n === 2, 60_000)

        // 60 materials, 5 revisions each, posted in order at about 100 requests a second.
        const materials = 60
        const revisions = 5
        const load = yield* Effect.fork(
          Effect.forEach(Array.from({ length: revisions * materials }, (_, i) => i), (i) =>
            Effect.zipRight(
              post(
                base,
                randomUUID(),
                MaterialMother.wire(
                  MaterialMother.command({
                    materialId: `compete/m${i % materials}`,
                    revision: Math.floor(i / materials) + 1
                  })
                )
              ),
              Effect.sleep("10 millis")
            ), { discard: true })
        )
        // Kill once the receivers are applying the load, whatever the machine's speed.
        yield* eventually(
          Effect.sync(() => countRows(dir, "catalog", "inbox") + countRows(dir, "audit", "audit_records")),
          (n) => n >= 100,
          60_000
        )
        yield* killed(catalogs[0]!.child)
        yield* killed(audits[1]!.child)
        yield* Fiber.join(load)

        const events = revisions * materials
        yield* eventually(
          Effect.sync(() => countRows(dir, "catalog", "inbox") + countRows(dir, "audit", "audit_records")),
          (n) => n === 2 * events,
          60_000
        )
        // Each event has one receipt and one effect per handler; nothing failed on the way.
        expect(
          query(
            dir,
            "catalog",
            "SELECT COUNT(DISTINCT message_id) AS n, COUNT(*) AS all_rows FROM inbox WHERE handler = 'catalog'"
          )
        ).toEqual([{ n: events, all_rows: events }])
        expect(query(dir, "audit", "SELECT COUNT(DISTINCT event_id) AS n FROM audit_records")).toEqual([{ n: events }])
        expect(countRows(dir, "catalog", "delivery_failures")).toBe(0)
        expect(countRows(dir, "audit", "delivery_failures")).toBe(0)
        // The catalog holds every material at its newest revision.
        expect(query(dir, "catalog", "SELECT COUNT(*) AS n FROM catalog_entries WHERE revision = ?", revisions))
          .toEqual([{ n: materials }])
        for (const handler of ["catalog", "audit"] as const) {
          // The killed processes' deliveries come back to the queue when the broker notices, and a
          // survivor takes them after what it holds: one it has applied already may still be there.
          expect(yield* eventually(depthOf(amqpUrl, names.queue(handler)), (n) => n === 0)).toBe(0)
          expect(yield* depthOf(amqpUrl, names.deadQueue(handler))).toBe(0)
        }
        // The survivors are still consuming.
        expect(catalogs[1]!.child.exitCode).toBeNull()
        expect(audits[0]!.child.exitCode).toBeNull()
      }),
    120_000
  )
})
