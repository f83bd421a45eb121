/** Why the main job's receivers missed the deadline, told from the outbox, the inboxes and the broker's figures. */
import { Effect } from "effect"
import { type HandlerName, HandlerNames } from "../domain/HandlerName.js"
import { BrokerStats, type HandlerQueueFigures } from "../ports/BrokerStats.js"

/** What the job knows when the deadline passes: receipts missing per receiver, the outbox, and the broker's figures. */
export interface Stall {
  readonly missing: Readonly<Record<HandlerName, number>>
  readonly outboxPending: number
  /** Each handler's queues as `BrokerStats` reports them; absent when they were not read. */
  readonly queues: Partial<Record<HandlerName, HandlerQueueFigures>>
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`

/**
 * Why receipts are missing, most telling first, from what the job can see. The main job
 * runs one receiver per handler in its own process, so a handler queue should have
 * exactly one consumer: two or more means another process takes deliveries away (round
 * robin among consumers, RabbitMQ "Consumers"), none means this process's receiver is not
 * consuming. Then what holds the missing events: the outbox (not yet confirmed), the
 * dead and retry queues, the queue itself (the receiver is behind); a queue holding none
 * of them while the outbox is drained means something took them off it, which
 * `reconcile` repairs. Management API figures may be up to 5 s old (`QueueFigures`).
 */
export const likelyCauses = (stall: Stall): ReadonlyArray<string> => {
  const causes: Array<string> = []
  if (stall.outboxPending > 0) {
    causes.push(
      `${plural(stall.outboxPending, "event")} still in the outbox, not confirmed by the broker (see the relay's log)`
    )
  }
  for (const handler of HandlerNames) {
    const missing = stall.missing[handler]
    const figures = stall.queues[handler]
    if (missing === 0 || figures === undefined) continue
    const { queue } = figures
    const before = causes.length
    if (queue.exists === false) {
      causes.push(`the ${handler} queue ${queue.queue} does not exist`)
      continue
    }
    if (queue.source === "unavailable") {
      causes.push(`the ${handler} queue's figures could not be read: ${queue.detail ?? "no detail"}`)
      continue
    }
    if (queue.consumers !== null && queue.consumers > 1) {
      causes.push(
        `the ${handler} queue has ${queue.consumers} consumers: another process consumes ${queue.queue} ` +
          "(stop it, or use another DOSTAVKA_PREFIX)"
      )
    }
    if (queue.consumers === 0) {
      causes.push(
        `the ${handler} queue has no consumer: this process's ${handler} receiver is not consuming (see its log)`
      )
    }
    const dead = figures.dead.ready ?? 0
    if (dead > 0) {
      causes.push(
        `${plural(dead, "message")} on ${figures.dead.queue} (npm run main -- dead list --handler ${handler})`
      )
    }
    const retrying = figures.retry.reduce((n, r) => n + (r.figures.ready ?? 0), 0)
    if (retrying > 0) causes.push(`${plural(retrying, "message")} waiting in the ${handler} retry queues`)
    const held = (queue.ready ?? 0) + (queue.unacked ?? 0)
    if (causes.length === before && held > 0) {
      causes.push(`${plural(held, "message")} still on ${queue.queue}: the ${handler} receiver is behind`)
    }
    if (causes.length === before && stall.outboxPending === 0) {
      causes.push(
        `${queue.queue} holds none of the ${missing} events ${handler} misses: something else took them off it ` +
          `(npm run main -- reconcile --handler ${handler} sends them again)`
      )
    }
  }
  return causes
}

/** The queues of each of `handlers` as `BrokerStats` reports them (it never fails). */
export const queuesOf = (handlers: ReadonlyArray<HandlerName>) =>
  Effect.flatMap(BrokerStats, (stats) =>
    Effect.map(
      Effect.forEach(handlers, (h) => Effect.map(stats.handlerQueues(h), (figures) => [h, figures] as const)),
      (pairs): Partial<Record<HandlerName, HandlerQueueFigures>> => Object.fromEntries(pairs)
    ))
