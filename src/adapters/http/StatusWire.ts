import { Schema } from "effect"
import { attentionOf } from "../../app/attention.js"
import type { StatusReport } from "../../app/status.js"
import type { QueueFigures } from "../../ports/BrokerStats.js"

const Count = Schema.NullOr(Schema.Number)
const Instant = Schema.NullOr(Schema.String.annotations({ description: "ISO 8601 UTC instant" }))

const QueueFiguresWire = Schema.Struct({
  queue: Schema.String,
  exists: Schema.NullOr(Schema.Boolean).annotations({
    description: "false when the broker says the queue does not exist"
  }),
  ready: Count,
  unacked: Count,
  messages: Schema.optional(Count).annotations({
    description: "every message it holds, held back ones included; absent where the source does not count them"
  }),
  consumers: Count,
  source: Schema.Literal("management", "queue.declare", "unavailable").annotations({
    description:
      "management: the management API; queue.declare: a passive declare (unacked unknown); unavailable: neither answered"
  }),
  as_of: Schema.String.annotations({ description: "when the kit asked, ISO 8601 UTC" }),
  stale_up_to_ms: Schema.Number.annotations({
    description: "how much older than as_of the figures may be (the management API samples every 5 s)"
  }),
  detail: Schema.optional(Schema.String)
}).annotations({
  identifier: "QueueFigures",
  description: "a queue as the broker reports it; null is unknown, never zero"
})

/**
 * `GET /v1/status` and `status --json`: the outbox, each handler's queues and inbox side by
 * side, and the broker connections of the answering process. Ages are in ms; a figure
 * that could not be read is `null` and a `detail` says why.
 */
export const StatusWire = Schema.Struct({
  as_of: Schema.String,
  scope: Schema.Struct({ broker: Schema.String, vhost: Schema.String, prefix: Schema.String }).annotations({
    description: "the broker (host:port) and vhost the figures come from, and the names' prefix"
  }),
  attention: Schema.Array(Schema.Struct({
    rule: Schema.String,
    handler: Schema.optional(Schema.String),
    what: Schema.String,
    next: Schema.String
  })).annotations({ description: "the page rules that hold, each with its next step; empty when none does" }),
  outbox: Schema.NullOr(Schema.Struct({
    pending: Schema.Number,
    parked: Schema.Number,
    published: Schema.Number,
    oldest_pending_age_ms: Count,
    published_last_minute: Schema.Number
  })),
  outbox_detail: Schema.optional(Schema.String),
  handlers: Schema.Array(Schema.Struct({
    handler: Schema.String,
    queue: QueueFiguresWire,
    retry: Schema.Array(Schema.Struct({ delay_ms: Schema.Number, figures: QueueFiguresWire })),
    dead: Schema.Struct({ figures: QueueFiguresWire, oldest_age_ms: Count, detail: Schema.optional(Schema.String) }),
    inbox: Schema.NullOr(Schema.Struct({
      applied: Schema.Number,
      stale: Schema.Number,
      duplicates: Schema.Number.annotations({ description: "redeliveries the inbox absorbed" }),
      last_applied_at: Instant,
      retrying: Schema.Number,
      dead: Schema.Number
    })),
    gaps: Count.annotations({
      description:
        "events published over 60 s ago that this handler never applied, is not retrying and did not dead-letter"
    }),
    detail: Schema.optional(Schema.String)
  })),
  connections: Schema.Array(Schema.Struct({
    name: Schema.String,
    state: Schema.Literal("idle", "up", "blocked", "reconnecting"),
    since: Instant,
    attempt: Schema.optional(Schema.Number),
    detail: Schema.optional(Schema.String)
  }))
}).annotations({ identifier: "Status" })

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())
const withDetail = (detail: string | undefined) => (detail === undefined ? {} : { detail })

const figuresWire = (f: QueueFigures): typeof QueueFiguresWire.Type => ({
  queue: f.queue,
  exists: f.exists,
  ready: f.ready,
  unacked: f.unacked,
  ...(f.messages === undefined ? {} : { messages: f.messages }),
  consumers: f.consumers,
  source: f.source,
  as_of: new Date(f.asOfMs).toISOString(),
  stale_up_to_ms: f.staleUpToMs,
  ...withDetail(f.detail)
})

/** The report on the wire: snake_case, instants as ISO 8601 strings. */
export const toStatusWire = (report: StatusReport): typeof StatusWire.Type => ({
  as_of: new Date(report.asOfMs).toISOString(),
  scope: report.scope,
  attention: attentionOf(report).map((a) => ({
    rule: a.rule,
    ...(a.handler === undefined ? {} : { handler: a.handler }),
    what: a.what,
    next: a.next
  })),
  outbox: report.outbox === null ? null : {
    pending: report.outbox.pending,
    parked: report.outbox.parked,
    published: report.outbox.published,
    oldest_pending_age_ms: report.outbox.oldestPendingAgeMs,
    published_last_minute: report.outbox.publishedLastMinute
  },
  ...(report.outboxDetail === undefined ? {} : { outbox_detail: report.outboxDetail }),
  handlers: report.handlers.map((h) => ({
    handler: h.handler,
    queue: figuresWire(h.queue),
    retry: h.retry.map((r) => ({ delay_ms: r.delayMs, figures: figuresWire(r.figures) })),
    dead: { figures: figuresWire(h.dead.figures), oldest_age_ms: h.dead.oldestAgeMs, ...withDetail(h.dead.detail) },
    inbox: h.inbox === null ? null : {
      applied: h.inbox.applied,
      stale: h.inbox.stale,
      duplicates: h.inbox.duplicates,
      last_applied_at: iso(h.inbox.lastAppliedAtMs),
      retrying: h.inbox.retrying,
      dead: h.inbox.dead
    },
    gaps: h.gaps,
    ...withDetail(h.detail)
  })),
  connections: report.connections.map((c) => ({
    name: c.name,
    state: c.state,
    since: iso(c.sinceMs),
    ...(c.attempt === undefined ? {} : { attempt: c.attempt }),
    ...withDetail(c.detail)
  }))
})
