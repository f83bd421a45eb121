import { describe, expect, it } from "@effect/vitest"
import { attentionOf } from "../../src/app/attention.js"
import { gapsBeyond, type HandlerStatus, type StatusReport } from "../../src/app/status.js"
import type { HandlerQueueFigures, QueueFigures } from "../../src/ports/BrokerStats.js"
import type { InboxCounts } from "../../src/ports/Inbox.js"
import { managementFigures } from "../support/status.js"

const nowMs = 1_000_000_000_000

const missing = (queue: string): QueueFigures => ({ ...managementFigures(queue, 0), exists: false, ready: null })

const inbox: InboxCounts = { applied: 5, stale: 0, duplicates: 0, lastAppliedAtMs: nowMs, retrying: 0, dead: 0 }

/** A handler's row: its queue with `ready` waiting and `consumers`, one retry tier, its dead queue holding `dead`. */
const handler = (
  name: "catalog" | "audit",
  over: { ready?: number; consumers?: number; dead?: number; gaps?: number; retrying?: number } = {}
): HandlerStatus => ({
  handler: name,
  queue: managementFigures(`p.${name}`, over.ready ?? 0, 0, over.consumers ?? 1),
  retry: [{ delayMs: 1000, figures: managementFigures(`p.${name}.retry.1s`, over.retrying ?? 0, 0, 0) }],
  dead: { figures: managementFigures(`p.${name}.dead`, over.dead ?? 0, 0, 0), oldestAgeMs: null },
  inbox,
  gaps: over.gaps ?? 0
})

const neverRan = (name: "catalog" | "audit"): HandlerStatus => ({
  handler: name,
  queue: missing(`p.${name}`),
  retry: [{ delayMs: 1000, figures: missing(`p.${name}.retry.1s`) }],
  dead: { figures: missing(`p.${name}.dead`), oldestAgeMs: null },
  inbox: null,
  gaps: null
})

const report = (over: Partial<StatusReport>): StatusReport => ({
  asOfMs: nowMs,
  scope: { broker: "127.0.0.1:5672", vhost: "/", prefix: "p" },
  outbox: { pending: 0, parked: 0, published: 5, oldestPendingAgeMs: null, publishedLastMinute: 0 },
  handlers: [handler("catalog"), handler("audit")],
  connections: [],
  ...over
})

describe("the page rules", () => {
  it("20 waiting with no consumer, one dead letter, one parked row: each a page with its next step, and nothing else", () => {
    const pages = attentionOf(report({
      outbox: { pending: 0, parked: 1, published: 5, oldestPendingAgeMs: null, publishedLastMinute: 0 },
      handlers: [handler("catalog", { ready: 20, consumers: 0 }), handler("audit", { dead: 1 })]
    }))
    expect(pages.map((p) => [p.rule, p.handler])).toEqual([
      ["no-consumer", "catalog"],
      ["dead", "audit"],
      ["parked", undefined]
    ])
    expect(pages[0]!.what).toBe("catalog: 20 message(s) wait in p.catalog and no receiver consumes it")
    expect(pages[1]!.next).toContain("dead list --handler audit")
    expect(pages[2]!.next).toContain("outbox retry --all")
  })

  it("a clean deployment, and a backlog that has a consumer, page nobody", () => {
    expect(attentionOf(report({}))).toEqual([])
    expect(attentionOf(report({ handlers: [handler("catalog", { ready: 500 }), handler("audit")] }))).toEqual([])
  })

  it("a handler that never ran on this broker and prefix is one line, not one per missing queue", () => {
    const pages = attentionOf(report({ handlers: [neverRan("catalog"), neverRan("audit")] }))
    expect(pages.map((p) => p.rule)).toEqual(["never-ran", "never-ran"])
    expect(pages[0]!.what).toBe(
      "catalog has never run on this broker and prefix: none of its queues (p.catalog…) exist"
    )
  })

  it("gaps, an old pending row and a connection reconnecting for over 30 s page; a fresh reconnect does not", () => {
    const pages = attentionOf(report({
      outbox: { pending: 3, parked: 0, published: 5, oldestPendingAgeMs: 61_000, publishedLastMinute: 0 },
      handlers: [handler("catalog", { gaps: 2 }), handler("audit")],
      connections: [
        {
          name: "p-relay-publisher",
          state: "reconnecting",
          sinceMs: nowMs - 31_000,
          attempt: 5,
          detail: "ECONNREFUSED"
        },
        { name: "p-audit-consumer", state: "reconnecting", sinceMs: nowMs - 2_000, attempt: 1 }
      ]
    }))
    expect(pages.map((p) => p.rule)).toEqual(["gaps", "pending-old", "connection"])
    expect(pages[2]!.what).toBe("connection p-relay-publisher has been reconnecting for 31 s (ECONNREFUSED)")
  })
})

describe("gaps count only loss", () => {
  const queues = (ready: number, retrying: number, dead = 0): HandlerQueueFigures => ({
    queue: managementFigures("p.catalog", ready, 0, 0),
    retry: [{ delayMs: 1000, figures: managementFigures("p.catalog.retry.1s", retrying, 0, 0) }],
    dead: managementFigures("p.catalog.dead", dead, 0, 0),
    deadHead: { publishedAtMs: null }
  })

  it("events waiting in a stopped receiver's queue are not gaps", () => {
    expect(gapsBeyond(20, queues(20, 0), inbox)).toEqual({ gaps: 0 })
  })

  it("events retrying while the receiver could not note their failures are not gaps", () => {
    expect(gapsBeyond(3, queues(0, 3), inbox)).toEqual({ gaps: 0 })
  })

  it("retries the inbox knows of do not hide a loss; empty queues hide none", () => {
    expect(gapsBeyond(2, queues(0, 4), { ...inbox, retrying: 4 })).toEqual({ gaps: 2 })
    expect(gapsBeyond(2, queues(0, 0), inbox)).toEqual({ gaps: 2 })
  })

  it("with a figure unknown, every candidate counts, and it says so", () => {
    const unknown = { ...queues(0, 0), queue: { ...managementFigures("p.catalog", 0), ready: null } }
    expect(gapsBeyond(2, unknown, inbox)).toMatchObject({ gaps: 2, detail: expect.stringContaining("unknown") })
  })
})
