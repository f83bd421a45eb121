import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { ApiRole } from "../../src/roles/api.js"
import { CatalogRole } from "../../src/roles/receivers.js"
import { RelayRole } from "../../src/roles/relay.js"
import {
  cleanupTopology,
  closeConnectionsNamed,
  eventually,
  hasRabbitmqctl,
  tempDataDir,
  uniquePrefix
} from "../support/broker.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { baseUrl, countRows, post, query, startRoles, testSettings } from "../support/roles.js"

if (!hasRabbitmqctl) {
  console.log("recovery.it.test.ts skipped: it closes connections with rabbitmqctl, which is not available here")
}

describe.skipIf(!hasRabbitmqctl)("recovery from lost connections", () => {
  it.scopedLive("the consumer and the relay reconnect after the broker closes their connections, and nothing is lost", () =>
    Effect.gen(function*() {
      const dir = yield* tempDataDir
      const prefix = uniquePrefix("recovery")
      yield* cleanupTopology(prefix)
      const { context } = yield* startRoles(Layer.mergeAll(ApiRole, RelayRole, CatalogRole), testSettings(prefix, dir))
      const base = baseUrl(context)
      const publish = (from: number, to: number) =>
        Effect.forEach(
          Array.from({ length: to - from + 1 }, (_, i) => from + i),
          (revision) => post(base, `rev-${revision}`, MaterialMother.wire(MaterialMother.command({ revision }))),
          { discard: true }
        )
      const applied = Effect.sync(() => countRows(dir, "catalog", "inbox"))

      yield* publish(1, 5)
      yield* eventually(applied, (n) => n === 5)

      expect(yield* closeConnectionsNamed(`${prefix}-catalog-consumer`)).toBe(1)
      yield* publish(6, 10)
      yield* eventually(applied, (n) => n === 10)

      expect(yield* closeConnectionsNamed(`${prefix}-relay-publisher`)).toBe(1)
      yield* publish(11, 15)
      yield* eventually(applied, (n) => n === 15)

      expect(query(dir, "catalog", "SELECT revision FROM catalog_entries")).toEqual([{ revision: 15 }])
      // The relay marks a row published after its confirm, in a transaction of its own: on a loaded
      // machine (or after it lost its lease for a moment) that may come after the receiver applied it.
      const pending = Effect.sync(() =>
        query<{ n: number }>(dir, "api", "SELECT COUNT(*) AS n FROM outbox WHERE published_at IS NULL")[0]!.n
      )
      expect(yield* eventually(pending, (n) => n === 0)).toBe(0)
    }))
})
