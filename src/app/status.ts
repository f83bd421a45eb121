import { Clock, Context, Duration, Effect, Layer, Option } from "effect"
import { Settings } from "../config.js"
import { describeCause } from "../domain/errors.js"
import { type HandlerName, HandlerNames } from "../domain/HandlerName.js"
import { BrokerConnections, type ConnectionState } from "../ports/BrokerConnections.js"
import { BrokerStats, type HandlerQueueFigures, type QueueFigures } from "../ports/BrokerStats.js"
import { DeadLetters } from "../ports/DeadLetters.js"
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
    /** Age in ms of the oldest dead letter; `null` when there is none or it could not be read (`detail`). */
    readonly oldestAgeMs: number | null
    readonly detail?: string
  }
  /** The inbox's counts; `null` when its database could not be read (`detail`). */
  readonly inbox: InboxCounts | null
  /** Published over `GapAfter` ago and never applied (see `findGaps`); `null` when unknown (`detail`). */
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

const orNull = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.match(effect, {
    onFailure: (error) => ({ value: null, detail: describeCause(error) }),
    onSuccess: (value) => ({ value, detail: undefined })
  })

/**
 * Why the view does not read a quorum dead queue: `basic.get` then requeue counts as a
 * delivery there, and past the queue's delivery limit (20 by default since RabbitMQ 4.0,
 * RabbitMQ "Quorum Queues", "Poison Message Handling") the broker drops the message.
 * Watching the view must not change what it watches.
 */
export const QuorumDeadNotRead =
  "the oldest dead letter is not read on a quorum queue (each read counts toward its delivery limit); `dead list` shows it"

/** The oldest dead letter's age: peeked only when the dead queue holds something, and never on a quorum queue. */
const oldestDeadAgeMs = (handler: HandlerName, dead: QueueFigures, nowMs: number, queueType: "classic" | "quorum") =>
  dead.ready === 0
    ? Effect.succeed({ value: null, detail: undefined })
    : queueType === "quorum"
    ? Effect.succeed({ value: null, detail: QuorumDeadNotRead })
    : orNull(Effect.flatMap(DeadLetters, (letters) => letters.list(handler, 1))).pipe(
      Effect.map(({ detail, value }) => {
        const at = value?.[0]?.deadAtMs ?? null
        return { value: at === null ? null : Math.max(0, nowMs - at), detail }
      })
    )

/**
 * Makes the status view (see `StatusReport`). Its `report` reads the outbox stats, then
 * per handler, concurrently: the queue figures (`BrokerStats`), the oldest dead letter's
 * age (peeked through `DeadLetters` only when the dead queue is not empty, and not on
 * quorum queues: see `QuorumDeadNotRead`), the inbox
 * counts and the count of gaps (published over `GapAfter` ago and never applied; counted
 * incrementally, see `makeGapCounter`), and the states this process's broker connections
 * reported. Never fails: every part that cannot be read is `null` with its reason.
 */
export const makeStatusView = Effect.gen(function*() {
  const gaps = yield* makeGapCounter
  const settings = yield* Settings
  const context = yield* Effect.context<Outbox | HandlerInboxes | BrokerStats | DeadLetters>()
  const connections = yield* Effect.serviceOption(BrokerConnections)
  const report = Effect.gen(function*() {
    const nowMs = yield* Clock.currentTimeMillis
    const outbox = yield* orNull(Effect.flatMap(Outbox, (o) => o.stats(nowMs)))
    const handlers = yield* Effect.forEach(HandlerNames, (handler) =>
      Effect.gen(function*() {
        const queues = yield* Effect.flatMap(BrokerStats, (stats) => stats.handlerQueues(handler))
        const retryGraceMs = Math.max(0, ...settings.retry[handler].delays.map(Duration.toMillis))
        const [dead, inbox, gapCount] = yield* Effect.all([
          oldestDeadAgeMs(handler, queues.dead, nowMs, settings.queueType),
          orNull(Effect.scoped(Effect.flatMap(HandlerInboxes, (inboxes) =>
            Effect.flatMap(inboxes.of(handler), (i) => i.counts(handler))))),
          orNull(gaps.count(handler, { nowMs, olderThanMs: Duration.toMillis(GapAfter), retryGraceMs }))
        ], { concurrency: "unbounded" })
        const detail = inbox.detail ?? gapCount.detail
        return {
          handler,
          queue: queues.queue,
          retry: queues.retry,
          dead: {
            figures: queues.dead,
            oldestAgeMs: dead.value,
            ...(dead.detail === undefined ? {} : { detail: dead.detail })
          },
          inbox: inbox.value,
          gaps: gapCount.value,
          ...(detail === undefined ? {} : { detail })
        }
      }), { concurrency: "unbounded" })
    const states = Option.isSome(connections) ? yield* connections.value.all : new Map<string, ConnectionState>()
    return {
      asOfMs: nowMs,
      outbox: outbox.value,
      ...(outbox.detail === undefined ? {} : { outboxDetail: outbox.detail }),
      handlers,
      connections: [...states].map(([name, state]) => connectionOf(name, state))
    } satisfies StatusReport
  }).pipe(Effect.provide(context), Effect.withSpan("Status.report"))
  return { report }
})

/** The status view of this process (see `makeStatusView`), for the CLI and `GET /v1/status`. */
export class StatusView
  extends Context.Tag("dostavka/StatusView")<StatusView, { readonly report: Effect.Effect<StatusReport> }>()
{
  /** Needs `Settings`, `Outbox`, `HandlerInboxes`, `BrokerStats` and `DeadLetters`; `BrokerConnections` when the process has one. */
  static readonly layer = Layer.effect(StatusView, makeStatusView)
}
