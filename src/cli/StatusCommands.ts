import { Command, HelpDoc, Options, ValidationError } from "@effect/cli"
import { Clock, Console, Data, Duration, Effect, Option, Schedule } from "effect"
import { toStatusWire } from "../adapters/http/StatusWire.js"
import { printable, printableJson } from "../adapters/logging/TerminalText.js"
import { attentionOf } from "../app/attention.js"
import { findGaps, redeliverGaps } from "../app/reconcile.js"
import { GapAfter, gapsBeyond, type HandlerStatus, queueDepth, type StatusReport, StatusView } from "../app/status.js"
import { Settings } from "../config.js"
import { HandlerNames } from "../domain/HandlerName.js"
import { BrokerStats, type QueueFigures } from "../ports/BrokerStats.js"
import { HandlerInboxes } from "../ports/HandlerInboxes.js"
import { formatAge, table } from "./Table.js"

const json = Options.boolean("json").pipe(Options.withDescription("print JSON instead of a table"))
const printJson = (value: unknown) => Console.log(printableJson(JSON.stringify(value, null, 2)))

/** A figure, or `?` when it is not known. */
const figure = (n: number | null | undefined) => (n === null || n === undefined ? "?" : String(n))
/** Every message a retry or dead queue holds, held back ones included (`queueDepth`). */
const depth = (f: QueueFigures) => (f.exists === false ? "missing" : figure(queueDepth(f)))
const sourceOf = (report: StatusReport) => {
  const sources = new Set(
    report.handlers.flatMap((h) => [h.queue.source, h.dead.figures.source, ...h.retry.map((r) => r.figures.source)])
  )
  return sources.has("management") && sources.size === 1
    ? "queue figures: management API, up to 5 s old"
    : sources.has("queue.declare")
    ? "queue figures: passive queue.declare (management API unreachable); unacked unknown (?)"
    : `queue figures: ${[...sources].join(", ")}`
}

/** What the view could not read, or found missing, that is not a page by itself: printed under the tables without `!`. */
const notes = (h: HandlerStatus): Array<string> =>
  h.queue.exists === false && h.dead.figures.exists === false ? [] : [
    h.queue.exists === false ? `${h.handler}: its queue ${h.queue.queue} does not exist` : undefined,
    ...h.retry.filter((r) => r.figures.exists === false).map((r) =>
      `${h.handler}: retry queue ${r.figures.queue} does not exist`
    ),
    h.dead.figures.exists === false
      ? `${h.handler}: dead-letter queue ${h.dead.figures.queue} does not exist`
      : undefined,
    h.queue.source === "unavailable" ? `${h.handler}: queue figures unavailable: ${h.queue.detail ?? ""}` : undefined,
    h.dead.detail === undefined ? undefined : `${h.handler}: oldest dead letter unknown: ${h.dead.detail}`,
    h.detail === undefined ? undefined : `${h.handler}: ${h.detail}`
  ].filter((n): n is string => n !== undefined)

/** The status view as text: one block for the outbox, a row per handler, a row per connection, then notes. */
export const statusTable = (report: StatusReport): string => {
  const now = report.asOfMs
  const o = report.outbox
  const outbox = o === null
    ? `outbox: unknown (${report.outboxDetail ?? "not readable"})`
    : table(
      ["OUTBOX", "PENDING", "OLDEST PENDING", "PARKED", "PUBLISHED", "LAST MINUTE"],
      [[
        "api.db",
        String(o.pending),
        o.oldestPendingAgeMs === null ? "-" : formatAge(now - o.oldestPendingAgeMs, now),
        String(o.parked),
        String(o.published),
        String(o.publishedLastMinute)
      ]]
    )
  const tiers = report.handlers[0]?.retry.map((r) => Duration.format(Duration.millis(r.delayMs)).replace(/ /g, "")) ??
    []
  const handlers = table(
    [
      "HANDLER",
      "READY",
      "UNACKED",
      "CONSUMERS",
      `RETRY ${tiers.join("/")}`,
      "DEAD",
      "OLDEST DEAD",
      "APPLIED",
      "STALE",
      "DUPLICATES",
      "LAST APPLIED",
      "GAPS"
    ],
    report.handlers.map((h) => [
      h.handler,
      h.queue.exists === false ? "missing" : figure(h.queue.ready),
      figure(h.queue.unacked),
      figure(h.queue.consumers),
      h.retry.map((r) => depth(r.figures)).join("/"),
      depth(h.dead.figures),
      h.dead.oldestAgeMs === null ? "-" : formatAge(now - h.dead.oldestAgeMs, now),
      figure(h.inbox?.applied),
      figure(h.inbox?.stale),
      figure(h.inbox?.duplicates),
      h.inbox === null ? "?" : formatAge(h.inbox.lastAppliedAtMs, now),
      figure(h.gaps)
    ])
  )
  const connections = report.connections.length === 0
    ? "connections: none in this process"
    : table(
      ["CONNECTION", "STATE", "SINCE", "DETAIL"],
      report.connections.map((
        c
      ) => [
        c.name,
        c.attempt === undefined ? c.state : `${c.state} (attempt ${c.attempt})`,
        formatAge(c.sinceMs, now),
        c.detail ?? ""
      ])
    )
  const pages = attentionOf(report)
  const info = report.handlers.flatMap(notes)
  const { broker, prefix, vhost } = report.scope
  return [
    `status at ${new Date(now).toISOString()} of broker ${broker}, vhost ${vhost}, prefix ${prefix}`,
    `(${sourceOf(report)})`,
    "",
    outbox,
    "",
    handlers,
    "",
    connections,
    ...(pages.length === 0 ? [] : ["", ...pages.map((a) => `! ${a.what}: ${a.next}`)]),
    ...(info.length === 0 ? [] : ["", ...info.map((n) => `  note: ${n}`)])
  ].join("\n").split("\n").map(printable).join("\n")
}

/** `status --check` found page rules that hold (see `attentionOf`): the report is printed, then this one line, exit 1. */
export class AttentionNeeded extends Data.TaggedError("AttentionNeeded")<{ readonly detail: string }> {
  override get message() {
    return this.detail
  }
}

const status = Command.make(
  "status",
  {
    json,
    watch: Options.boolean("watch").pipe(Options.withDescription("redraw every second until Ctrl-C")),
    check: Options.boolean("check").pipe(
      Options.withDescription("exit 1 when any page rule holds (the ! lines), 0 otherwise: for cron and health checks")
    )
  },
  ({ check, json, watch }) =>
    Effect.gen(function*() {
      const view = yield* StatusView
      const print = (report: StatusReport) => json ? printJson(toStatusWire(report)) : Console.log(statusTable(report))
      const once = Effect.flatMap(view.report, print)
      if (check) {
        const report = yield* view.report
        yield* print(report)
        const pages = attentionOf(report)
        if (pages.length > 0) {
          return yield* new AttentionNeeded({
            detail: `${pages.length} page rule(s) hold: ${pages.map((p) => p.rule).join(", ")}`
          })
        }
        return
      }
      if (!watch) return yield* once
      // Clear the screen and home the cursor (ANSI) on a terminal, then draw; JSON, or output to a
      // file or pipe, gets one report after another.
      const clear = !json && process.stdout.isTTY === true
      yield* Effect.repeat(
        Effect.zipRight(clear ? Console.log("\u001b[2J\u001b[H") : Effect.void, once),
        Schedule.spaced("1 second")
      )
    })
).pipe(Command.withDescription("the outbox, each handler's queues and inbox side by side, and what needs attention"))

/** `60s`, `5m`, `1h`, `1500ms` as ms; `undefined` when it is none of these. */
const parseAgeMs = (text: string): number | undefined => {
  const match = /^(\d+)(ms|s|m|h)$/.exec(text.trim())
  if (match === null) return undefined
  const ms = Number(match[1]) * { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }[match[2] as "ms" | "s" | "m" | "h"]
  return Number.isSafeInteger(ms) ? ms : undefined
}

/** Checked while the command line is parsed, before any database is opened. */
const olderThan = Options.text("older-than").pipe(
  Options.withDescription("only events published at least this long ago, e.g. 60s, 5m, 1h (default 60s)"),
  Options.mapEffect((text) => {
    const ms = parseAgeMs(text)
    return ms === undefined
      ? Effect.fail(ValidationError.invalidValue(HelpDoc.p(
        `dostavka: --older-than ${JSON.stringify(text)} is not an age: use e.g. 60s, 5m, 1h or 1500ms`
      )))
      : Effect.succeed(ms)
  }),
  Options.optional
)

const reconcile = Command.make(
  "reconcile",
  {
    json,
    handler: Options.choice("handler", HandlerNames).pipe(
      Options.withDescription("one handler (default: every handler)"),
      Options.optional
    ),
    olderThan,
    redeliver: Options.boolean("redeliver").pipe(
      Options.withDescription("publish the missing events again, to that handler's queue only")
    )
  },
  ({ handler, json, olderThan, redeliver }) =>
    Effect.gen(function*() {
      const settings = yield* Settings
      const olderThanMs = Option.getOrElse(olderThan, () => Duration.toMillis(GapAfter))
      const nowMs = yield* Clock.currentTimeMillis
      const handlers = Option.match(handler, { onNone: () => HandlerNames, onSome: (h) => [h] as const })
      const results = yield* Effect.forEach(handlers, (h) =>
        Effect.gen(function*() {
          const retryGraceMs = Math.max(0, ...settings.retry[h].delays.map(Duration.toMillis))
          const candidates = yield* findGaps(h, { nowMs, olderThanMs, retryGraceMs })
          // The status view's rule (`gapsBeyond`): no gap while the handler's queues may hold them all.
          const counts = yield* Effect.scoped(
            Effect.flatMap(HandlerInboxes, (i) => Effect.flatMap(i.of(h), (inbox) => inbox.counts(h)))
          )
          const queues = yield* Effect.flatMap(BrokerStats, (stats) => stats.handlerQueues(h))
          const inQueues = candidates.gaps.length > 0 &&
            gapsBeyond(candidates.gaps.length, queues, counts).gaps === 0
          const found = inQueues ? { ...candidates, gaps: [] } : candidates
          const redelivered = redeliver && found.gaps.length > 0 ? yield* redeliverGaps(h, found.gaps) : undefined
          return { found, redelivered, mayBeInQueues: inQueues ? candidates.gaps.length : 0 }
        }))
      if (json) {
        yield* printJson(results.map(({ found, mayBeInQueues, redelivered }) => ({
          handler: found.handler,
          checked: found.checked,
          may_be_in_queues: mayBeInQueues,
          gaps: found.gaps.map((g) => ({
            event_id: g.messageId,
            sequence: g.sequence,
            published_at: new Date(g.publishedAtMs).toISOString()
          })),
          ...(redelivered === undefined
            ? {}
            : {
              redelivered: redelivered.redelivered,
              failed: redelivered.failed.map((f) => ({ event_id: f.messageId, detail: f.detail }))
            })
        })))
      }
      for (const { found, mayBeInQueues, redelivered } of json ? [] : results) {
        yield* Console.log(
          `${found.handler}: ${found.gaps.length} of ${found.checked} published event(s) older than ${olderThanMs} ms never applied`
        )
        if (mayBeInQueues > 0) {
          yield* Console.log(
            `  ${mayBeInQueues} more have no receipt, but ${found.handler}'s queues hold as many messages it has ` +
              "not accounted for: they may be among them. Look again once its queues have drained"
          )
        }
        if (found.gaps.length > 0) {
          yield* Console.log(table(
            ["SEQUENCE", "EVENT ID", "PUBLISHED"],
            found.gaps.slice(0, 50).map((g) => [String(g.sequence), g.messageId, formatAge(g.publishedAtMs, nowMs)])
          ))
          if (found.gaps.length > 50) yield* Console.log(`… and ${found.gaps.length - 50} more (--json lists all)`)
        }
        if (redelivered !== undefined) {
          yield* Console.log(
            `${found.handler}: redelivered ${redelivered.redelivered.length}, failed ${redelivered.failed.length}`
          )
          for (const f of redelivered.failed.slice(0, 20)) yield* Console.log(`  ${f.messageId}: ${f.detail}`)
        } else if (found.gaps.length > 0) {
          yield* Console.log(`  add --redeliver to publish them again to ${found.handler}'s queue only`)
        }
      }
      const unresolved = results.some(({ found, redelivered }) =>
        found.gaps.length > 0 && (redelivered === undefined || redelivered.failed.length > 0)
      )
      if (unresolved) return yield* new GapsFound({ detail: "some published events never reached a handler" })
    })
).pipe(
  Command.withDescription("find the published events a handler never applied (and, with --redeliver, send them again)")
)

/** Reconciliation found gaps and did not repair them all: one line on stderr after the listing, exit 1. */
export class GapsFound extends Data.TaggedError("GapsFound")<{ readonly detail: string }> {
  override get message() {
    return this.detail
  }
}

export { reconcile as reconcileCommand, status as statusCommand }
