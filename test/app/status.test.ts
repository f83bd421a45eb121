import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, TestClock } from "effect"
import { toStatusWire } from "../../src/adapters/http/StatusWire.js"
import { type StatusReport, StatusView } from "../../src/app/status.js"
import { statusTable } from "../../src/cli/StatusCommands.js"
import { Settings } from "../../src/config.js"
import { BrokerConnections, ConnectionState } from "../../src/ports/BrokerConnections.js"
import { Inbox } from "../../src/ports/Inbox.js"
import { Outbox } from "../../src/ports/Outbox.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { ApiMemory } from "../support/memory.js"
import { managementFigures, memoryStatusView } from "../support/status.js"

const Minute = 60_000

const view = Layer.merge(memoryStatusView(ApiMemory, {}, { catalog: 7 * Minute }), ApiMemory).pipe(
  Layer.provideMerge(Layer.merge(Settings.with({}), BrokerConnections.layer))
)

describe("the status view", () => {
  it.effect("shows what was arranged: pending and its age, published last minute, inbox counts, gaps, the oldest dead letter, connections", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(10 * Minute)
      const outbox = yield* Outbox
      const envelopes = Array.from(
        { length: 6 },
        (_, i) => MaterialMother.envelope(MaterialMother.event({ materialId: `s/m${i}` }))
      )
      for (const [i, e] of envelopes.entries()) yield* outbox.enqueue(e, i < 3 ? 2 * Minute : 9 * Minute + i * 1000)
      // Three published: two long ago, one within the last minute; three pending, the oldest 57 s old.
      yield* outbox.markPublished([envelopes[0]!.messageId, envelopes[1]!.messageId], 3 * Minute)
      yield* outbox.markPublished([envelopes[2]!.messageId], 10 * Minute - 30_000)
      const inbox = yield* Inbox
      yield* inbox.record({
        handler: "catalog",
        messageId: envelopes[0]!.messageId,
        outcome: "applied",
        receivedAtMs: 4 * Minute
      })
      yield* inbox.record({
        handler: "audit",
        messageId: envelopes[0]!.messageId,
        outcome: "applied",
        receivedAtMs: 4 * Minute
      })
      yield* inbox.record({
        handler: "audit",
        messageId: envelopes[1]!.messageId,
        outcome: "stale",
        receivedAtMs: 5 * Minute
      })
      yield* inbox.noteDuplicate("audit", envelopes[1]!.messageId)
      yield* Effect.flatMap(
        BrokerConnections,
        (c) =>
          c.report(
            "t-catalog-consumer",
            ConnectionState.Reconnecting({ since: 9 * Minute, attempt: 3, error: "ECONNREFUSED" })
          )
      )

      const report = yield* Effect.flatMap(StatusView, (v) => v.report)
      expect(report.outbox).toEqual({
        pending: 3,
        parked: 0,
        published: 3,
        oldestPendingAgeMs: 57_000,
        publishedLastMinute: 1
      })
      const [catalog, audit] = report.handlers
      expect(catalog).toMatchObject({
        handler: "catalog",
        inbox: { applied: 1, stale: 0, duplicates: 0, lastAppliedAtMs: 4 * Minute, retrying: 0, dead: 0 },
        gaps: 1,
        dead: { oldestAgeMs: 3 * Minute }
      })
      expect(audit).toMatchObject({
        handler: "audit",
        inbox: { applied: 1, stale: 1, duplicates: 1 },
        gaps: 0,
        dead: { oldestAgeMs: null }
      })
      expect(report.connections).toEqual([{
        name: "t-catalog-consumer",
        state: "reconnecting",
        sinceMs: 9 * Minute,
        attempt: 3,
        detail: "ECONNREFUSED"
      }])

      const wire = toStatusWire(report)
      expect(wire.outbox).toEqual({
        pending: 3,
        parked: 0,
        published: 3,
        oldest_pending_age_ms: 57_000,
        published_last_minute: 1
      })
      expect(wire.handlers[0]!.inbox!.last_applied_at).toBe(new Date(4 * Minute).toISOString())
      const text = statusTable(report)
      expect(text).toContain(
        "! catalog: 1 event(s) published over 60 s ago are in none of its queues and were never applied"
      )
      expect(text).toContain("broker 127.0.0.1:5672, vhost /, prefix")
      // A table is its lines, not one escaped string.
      expect(text).toMatch(/\nHANDLER +READY[^\n]+\ncatalog +0 /)
      expect(text).toMatch(/t-catalog-consumer\s+reconnecting \(attempt 3\)\s+60s\s+ECONNREFUSED/)
    }).pipe(Effect.provide(view)))

  it("the table escapes what came from the broker: a connection's error and a dead queue's detail with ESC, C1 CSI and a bidi override", () => {
    const figures = managementFigures("q", 0, 0, 0)
    const hostile = "closed: \u001b]8;;http://evil.example\u001b\\click\u001b]8;;\u001b\\ \u009b2J \u202eesrever"
    const report: StatusReport = {
      asOfMs: 1_000_000,
      scope: { broker: "127.0.0.1:5672", vhost: "/", prefix: "p" },
      outbox: null,
      outboxDetail: "api.db is not here",
      handlers: [{
        handler: "catalog",
        queue: figures,
        retry: [],
        dead: { figures: { ...figures, ready: 1 }, oldestAgeMs: null, detail: hostile },
        inbox: null,
        gaps: null
      }],
      connections: [{ name: "p-status", state: "reconnecting", sinceMs: 0, attempt: 2, detail: hostile }]
    }
    const text = statusTable(report)
    // eslint-disable-next-line no-control-regex -- none may be left
    expect(text).not.toMatch(/[\u001b\u009b\u202e]/)
    expect(text).toContain("\\x1b]8;;http://evil.example")
  })
})
