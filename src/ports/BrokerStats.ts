import { Context, type Effect } from "effect"
import type { HandlerName } from "../domain/HandlerName.js"

/** Where a queue's figures came from. */
export type FigureSource =
  /** The management HTTP API: all three figures, sampled by the broker up to `staleUpToMs` before `asOfMs`. */
  | "management"
  /** A passive `queue.declare`: ready messages and consumers now; unacked is not known (`null`). */
  | "queue.declare"
  /** Neither answered: every figure is `null`, and `detail` says why. */
  | "unavailable"

/** One queue's figures as the broker reports them; `null` is "not known", never zero. */
export interface QueueFigures {
  readonly queue: string
  /** False when the broker says the queue does not exist; `null` when nobody could tell. */
  readonly exists: boolean | null
  /** Messages ready for delivery. */
  readonly ready: number | null
  /** Messages delivered and not yet acknowledged. */
  readonly unacked: number | null
  /**
   * Every message the queue holds: ready, unacked, and those the broker holds back (a
   * quorum queue's at-least-once dead-lettering keeps a message whose route is gone until
   * it is back); absent where the source does not count them (a passive declare).
   */
  readonly messages?: number | null
  readonly consumers: number | null
  readonly source: FigureSource
  /** When the kit asked, in ms since the epoch. */
  readonly asOfMs: number
  /** How much older than `asOfMs` the figures may be, in ms (the management API samples every 5 s). */
  readonly staleUpToMs: number
  /** Why the figures are partial or missing, when they are. */
  readonly detail?: string | undefined
}

/** The message at the head of a dead-letter queue, as far as the broker tells without handing it over. */
export interface DeadQueueHead {
  /**
   * When it was first published: its AMQP `timestamp` (the event's publication), in ms
   * since the epoch; `null` when the queue is empty or this is not known (`detail`).
   */
  readonly publishedAtMs: number | null
  readonly detail?: string | undefined
}

/** A handler's queues: the one it consumes, one per retry tier (by delay, ascending), its dead-letter queue and that queue's head. */
export interface HandlerQueueFigures {
  readonly queue: QueueFigures
  readonly retry: ReadonlyArray<{ readonly delayMs: number; readonly figures: QueueFigures }>
  readonly dead: QueueFigures
  readonly deadHead: DeadQueueHead
}

/**
 * The broker's view of each handler's queues, for the status view. Contract:
 * `handlerQueues(handler)` never fails: what cannot be read is `null` with its `source`
 * and `detail`, so a figure is never a wrong zero.
 */
export interface BrokerStatsShape {
  /** Where the figures come from, for the view's header: the broker's `host:port` (the first of a cluster's list) and the vhost. */
  readonly target: { readonly broker: string; readonly vhost: string }
  readonly handlerQueues: (handler: HandlerName) => Effect.Effect<HandlerQueueFigures>
}

export class BrokerStats extends Context.Tag("dostavka/BrokerStats")<BrokerStats, BrokerStatsShape>() {}
