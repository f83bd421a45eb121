import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { randomUUID } from "node:crypto"
import { ApiRole } from "../../src/roles/api.js"
import { cleanupTopology, eventually, tempDataDir, uniquePrefix } from "../support/broker.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { baseUrl, killed, post, query, roleProcess, startRoles, testSettings } from "../support/roles.js"

const relayProcess = (dir: string, prefix: string) => roleProcess("relay", dir, prefix)

const leaseOwner = (dir: string) => query<{ owner: string }>(dir, "api", "SELECT owner FROM relay_lease")[0]?.owner

describe("the relay's failover", () => {
  it.scopedLive(
    "kill -9 of the leading relay under load: the standby publishes within 3 s, and logged whom it waited for",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("failover")
        yield* cleanupTopology(prefix)
        const api = yield* startRoles(ApiRole, testSettings(prefix, dir))
        const base = baseUrl(api.context)
        const pending = () =>
          query<{ n: number }>(dir, "api", "SELECT COUNT(*) AS n FROM outbox WHERE published_at IS NULL")[0]!.n
        yield* post(base, randomUUID(), MaterialMother.wire(MaterialMother.command({ materialId: "failover/first" })))

        const first = yield* relayProcess(dir, prefix)
        yield* eventually(Effect.sync(pending), (n) => n === 0, 30_000)
        const leader = leaseOwner(dir)!
        const second = yield* relayProcess(dir, prefix)
        yield* eventually(Effect.sync(() => second.log.text), (text) =>
          text.includes("relay waits for the lease"), 30_000)

        // A steady 50 requests a second, before and after the kill.
        const load = yield* Effect.fork(Effect.forEach(
          Array.from({ length: 250 }, (_, i) =>
            i),
          (i) =>
            Effect.zipRight(
              post(base, randomUUID(), MaterialMother.wire(MaterialMother.command({ materialId: `failover/m${i}` }))),
              Effect.sleep("20 millis")
            ),
          { discard: true }
        ))
        // Deliberately a fixed time: what is under test is that nothing happens in it (the standby
        // does not take the lease from a leader that is alive and publishing under this load).
        yield* Effect.sleep("1500 millis")
        // Until the kill, the standby never led: never two relays publishing at once.
        expect(second.log.text).not.toContain("relay holds the lease")
        expect(leaseOwner(dir)).toBe(leader)
        const killedAt = Date.now()
        yield* killed(first.child)
        yield* Fiber.join(load)
        yield* eventually(Effect.sync(pending), (n) =>
          n === 0, 30_000)

        const firstAfter = query<{ t: number }>(
          dir,
          "api",
          "SELECT MIN(published_at) AS t FROM outbox WHERE published_at > ?",
          killedAt
        )[0]!.t
        const gapMs = firstAfter - killedAt
        console.log(`relay failover: the standby published ${gapMs} ms after the leader was killed`)
        expect(gapMs).toBeLessThanOrEqual(3_000)
        expect(leaseOwner(dir)).not.toBe(leader)
        // The standby's log comes through a pipe from another process: what it wrote when it took
        // the lease may reach us after the rows it then published.
        yield* eventually(Effect.sync(() => second.log.text), (text) => text.includes("relay holds the lease"))
        // The standby said once who held the lease and until when.
        const waits = second.log.text.split("\n").filter((line) => line.includes("relay waits for the lease"))
        expect(waits).toHaveLength(1)
        expect(waits[0]).toContain(leader)
        expect(waits[0]).toMatch(/until=\S*\d{4}-\d\d-\d\dT/)
        expect(second.log.text).toContain("relay holds the lease")
      }),
    120_000
  )
})
