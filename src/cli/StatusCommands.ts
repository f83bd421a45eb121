import { Command, HelpDoc, Options, ValidationError } from "@effect/cli"
import { Clock, Console, Data, Duration, Effect, Option, Schedule } from "effect"
import { toStatusWire } from "../adapters/http/StatusWire.js"
import { findGaps, redeliverGaps } from "../app/reconcile.js"
import { GapAfter, type HandlerStatus, type StatusReport, StatusView } from "../app/status.js"
import { Settings } from "../config.js"
import { HandlerNames } from "../domain/HandlerName.js"
import type { QueueFigures } from "../ports/BrokerStats.js"
import { formatAge, table } from "./Table.js"

const json = Options.boolean("json").pipe(Options.withDescription("print JSON instead of a table"))
const printJson = (value: unknown) => Console.log(JSON.stringify(value, null, 2))

/** A figure, or `?` when it is not known. */
const figure = (n: number | null | undefined) => (n === null || n === undefined ? "?" : String(n))
const depth = (
  f: QueueFigures
) => (f.exists === false ? "missing" : f.ready === null ? "?" : String(f.ready + (f.unacked ?? 0)))
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

const notes = (h: HandlerStatus): Array<string> =>
  [
    h.queue.exists === false ? `${h.handler}: its queue ${h.queue.queue} does not exist` : undefined,
    ...h.retry.filter((r) => r.figures.exists === false).map((r) =>
      `${h.handler}: retry queue ${r.figures.queue} does not exist`
    ),
    h.dead.figures.exists === false
      ? `${h.handler}: dead-letter queue ${h.dead.figures.queue} does not exist`
      : undefined,
    h.queue.source === "unavailable" ? `${h.handler}: queue figures unavailable: ${h.queue.detail ?? ""}` : undefined,
    h.dead.detail === undefined ? undefined : `${h.handler}: oldest dead letter unknown: ${h.dead.detail}`,
    h.detail === undefined ? undefined : `${h.handler}: ${h.detail}`,
    h.gaps !== null && h.gaps > 0
      ? `${h.handler}: ${h.gaps} published event(s) never reached it: npm run main -- reconcile --handler ${h.handler}`
      : undefined
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
  const all = report.handlers.flatMap(notes)
  return [
    `status at ${new Date(now).toISOString()} (${sourceOf(report)})`,
    "",
    outbox,
    "",
    handlers,
    "",
    connections,
    ...(all.length === 0 ? [] : ["", ...all.map((n) => `! ${n}`)])
  ].join("\n")
}

const status = Command.make(
  "status",
  {
    json,
    watch: Options.boolean("watch").pipe(Options.withDescription("redraw every second until Ctrl-C"))
  },
  ({ json, watch }) =>
    Effect.gen(function*() {
      const view = yield* StatusView
      const once = Effect.flatMap(
        view.report,
        (report) => (json ? printJson(toStatusWire(report)) : Console.log(statusTable(report)))
      )
      if (!watch) return yield* once
      // Clear the screen and home the cursor (ANSI), then draw; JSON is printed one report after another.
      yield* Effect.repeat(
        Effect.zipRight(json ? Effect.void : Console.log("\u001b[2J\u001b[H"), once),
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
          const found = yield* findGaps(h, { nowMs, olderThanMs, retryGraceMs })
          const redelivered = redeliver && found.gaps.length > 0 ? yield* redeliverGaps(h, found.gaps) : undefined
          return { found, redelivered }
        }))
      if (json) {
        yield* printJson(results.map(({ found, redelivered }) => ({
          handler: found.handler,
          checked: found.checked,
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
      for (const { found, redelivered } of json ? [] : results) {
        yield* Console.log(
          `${found.handler}: ${found.gaps.length} of ${found.checked} published event(s) older than ${olderThanMs} ms never applied`
        )
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
