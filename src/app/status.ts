import { Clock, Context, Duration, Effect, Layer, Option } from "effect"
import { Settings } from "../config.js"
import { describeCause } from "../domain/errors.js"
import { type HandlerName, HandlerNames } from "../domain/HandlerName.js"
import { BrokerConnections, type ConnectionState } from "../ports/BrokerConnections.js"
import { BrokerStats, type HandlerQueueFigures, type QueueFigures } from "../ports/BrokerStats.js"
import { HandlerInboxes } from "../ports/HandlerInboxes.js"
import type { InboxCounts } from "../ports/Inbox.js"
import { Outbox, type OutboxStats } from "../ports/Outbox.js"
import { makeGapCounter } from "./reconcile.js"

/** A broker connection of this process, as its owner last reported it. */
export interface ConnectionStatus {
  readonly name: string
  readonly state: "idle" | "up" | "blocked" | "reconnecting"
  /** Since when it is in that state, ms since the epoch; `null` while idle. */
  readonly sinceMs: number | null
  /** Failed attempts so far, while reconnecting. */
  readonly attempt?: number
  /** The last error while reconnecting, or the broker's reason while blocked. */
  readonly detail?: string
}

/** One handler's row of the status view. */
export interface HandlerStatus {
  readonly handler: HandlerName
  readonly queue: QueueFigures
  readonly retry: HandlerQueueFigures["retry"]
  readonly dead: {
    readonly figures: QueueFigures
    /** How long ago, in ms, the oldest dead letter was first published (its AMQP timestamp); `null` when there is none or it is not known (`detail`). */
    readonly oldestAgeMs: number | null
    readonly detail?: string
  }
  /** The inbox's counts; `null` when its database could not be read (`detail`). */
  readonly inbox: InboxCounts | null
  /**
   * Published over `GapAfter` ago, never applied, not retrying, not dead (see `findGaps`),
   * and more of them than the handler's queues hold unaccounted for (see `gapsBeyond`):
   * an event still waiting in a queue is on its way, not lost. `null` when unknown (`detail`).
   */
  readonly gaps: number | null
  readonly detail?: string
}

/**
 * The status view: the outbox, each handler's queues and inbox side by side, and this
 * process's broker connections. Times are ms since the epoch, ages in ms. A figure that
 * could not be read is `null`, with a `detail` saying why, never a wrong zero.
 */
export interface StatusReport {
  readonly asOfMs: number
  /** What the view looks at: the broker (`host:port`) and vhost of its figures, and the names' prefix. */
  readonly scope: { readonly broker: string; readonly vhost: string; readonly prefix: string }
  /** The outbox's figures; `null` when `api.db` could not be read (`outboxDetail`). */
  readonly outbox: OutboxStats | null
  readonly outboxDetail?: string
  readonly handlers: ReadonlyArray<HandlerStatus>
  readonly connections: ReadonlyArray<ConnectionStatus>
}

/** Published events younger than this are still on their way, not gaps: 60 s. */
export const GapAfter = Duration.seconds(60)

const connectionOf = (name: string, state: ConnectionState): ConnectionStatus => {
  switch (state._tag) {
    case "Idle":
      return { name, state: "idle", sinceMs: null }
    case "Up":
      return { name, state: "up", sinceMs: state.since }
    case "Blocked":
      return { name, state: "blocked", sinceMs: state.since, detail: state.reason }
    case "Reconnecting":
      return { name, state: "reconnecting", sinceMs: state.since, attempt: state.attempt, detail: state.error }
  }
}

/** Every message of a queue, held back ones included when the source counts them; `null` when unknown. */
export const queueDepth = (f: QueueFigures): number | null =>
  f.messages ?? (f.ready === null ? null : f.ready + (f.unacked ?? 0))

/**
 * How many messages `queues` hold that `inbox` does not account for: all of the handler's
 * queue, and what its retry and dead queues hold beyond the retrying and dead ones its
 * inbox remembers; `null` when a figure is unknown.
 */
const unaccounted = (queues: HandlerQueueFigures, inbox: InboxCounts): number | null => {
  const main = queueDepth(queues.queue)
  const retry = queues.retry.map((r) => queueDepth(r.figures))
  const dead = queueDepth(queues.dead)
  if (main === null || dead === null || retry.some((n) => n === null)) return null
  const retrying = retry.reduce<number>((sum, n) => sum + n!, 0)
  return main + Math.max(0, retrying - inbox.retrying) + Math.max(0, dead - inbox.dead)
}

/**
 * The gaps among `candidates` (events with no receipt, retry or dead note): those beyond
 * what the handler's queues hold unaccounted for, since the view cannot tell which events
 * wait in a queue (a stopped receiver's backlog, retries whose failure could not be noted
 * while its database was locked). A gap hidden so shows once the queues have drained. When
 * a figure is unknown, every candidate counts, and `detail` says so.
 */
export const gapsBeyond = (
  candidates: number,
  queues: HandlerQueueFigures,
  inbox: InboxCounts
): { readonly gaps: number; readonly detail?: string } => {
  const held = unaccounted(queues, inbox)
  return held === null
    ? { gaps: candidates, detail: "gaps may count events still in its queues: their figures are unknown" }
    : { gaps: Math.max(0, candidates - held) }
}

const orNull = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.match(effect, {
    onFailure: (error) => ({ value: null, detail: describeCause(error) }),
    onSuccess: (value) => ({ value, detail: undefined })
  })

/** How long one computed view is served (ms): however many ask, the view is computed at most this often per process. */
export const StatusFreshMs = 1_000

/**
 * Makes the status view (see `StatusReport`). Its `report` reads the outbox stats, then
 * per handler, concurrently: the queue figures and the dead queue's head
 * (`BrokerStats`), the inbox counts and the count of gaps (published over `GapAfter` ago
 * and never applied; counted incrementally, see `makeGapCounter`), and the states this
 * process's broker connections reported. Never fails: every part that cannot be read is
 * `null` with its reason. A report is served for `StatusFreshMs`: callers at the same
 * time wait for one computation and share it, so 1,000 status requests cost the broker
 * what one does.
 */
export const makeStatusView = Effect.gen(function*() {
  const gaps = yield* makeGapCounter
  const settings = yield* Settings
  const context = yield* Effect.context<Outbox | HandlerInboxes | BrokerStats>()
  const connections = yield* Effect.serviceOption(BrokerConnections)
  const stats = yield* BrokerStats
  const compute = Effect.gen(function*() {
    const nowMs = yield* Clock.currentTimeMillis
    const outbox = yield* orNull(Effect.flatMap(Outbox, (o) => o.stats(nowMs)))
    const handlers = yield* Effect.forEach(HandlerNames, (handler) =>
      Effect.gen(function*() {
        const queues = yield* Effect.flatMap(BrokerStats, (stats) => stats.handlerQueues(handler))
        const retryGraceMs = Math.max(0, ...settings.retry[handler].delays.map(Duration.toMillis))
        const [inbox, gapCount] = yield* Effect.all([
          orNull(Effect.scoped(Effect.flatMap(HandlerInboxes, (inboxes) =>
            Effect.flatMap(inboxes.of(handler), (i) => i.counts(handler))))),
          orNull(gaps.count(handler, { nowMs, olderThanMs: Duration.toMillis(GapAfter), retryGraceMs }))
        ], { concurrency: "unbounded" })
        const counted = gapCount.value === null || inbox.value === null
          ? undefined
          : gapsBeyond(gapCount.value, queues, inbox.value)
        const detail = inbox.detail ?? gapCount.detail ?? counted?.detail
        return {
          handler,
          queue: queues.queue,
          retry: queues.retry,
          dead: {
            figures: queues.dead,
            oldestAgeMs: queues.deadHead.publishedAtMs === null
              ? null
              : Math.max(0, nowMs - queues.deadHead.publishedAtMs),
            ...(queues.deadHead.detail === undefined ? {} : { detail: queues.deadHead.detail })
          },
          inbox: inbox.value,
          gaps: counted?.gaps ?? null,
          ...(detail === undefined ? {} : { detail })
        }
      }), { concurrency: "unbounded" })
    const states = Option.isSome(connections) ? yield* connections.value.all : new Map<string, ConnectionState>()
    return {
      asOfMs: nowMs,
      scope: { ...stats.target, prefix: settings.prefix },
      outbox: outbox.value,
      ...(outbox.detail === undefined ? {} : { outboxDetail: outbox.detail }),
      handlers,
      connections: [...states].map(([name, state]) => connectionOf(name, state))
    } satisfies StatusReport
  }).pipe(Effect.provide(context), Effect.withSpan("Status.report"))
  const report = yield* Effect.cachedWithTTL(compute, Duration.millis(StatusFreshMs))
  return { report }
})

/** The status view of this process (see `makeStatusView`), for the CLI and `GET /v1/status`. */
export class StatusView
  extends Context.Tag("dostavka/StatusView")<StatusView, { readonly report: Effect.Effect<StatusReport> }>()
{
  /** Needs `Settings`, `Outbox`, `HandlerInboxes` and `BrokerStats`; `BrokerConnections` when the process has one. */
  static readonly layer = Layer.effect(StatusView, makeStatusView)
}
