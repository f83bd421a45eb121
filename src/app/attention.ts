import { Duration } from "effect"
import type { HandlerName } from "../domain/HandlerName.js"
import { GapAfter, type HandlerStatus, queueDepth, type StatusReport } from "./status.js"

/** A condition of the status view that someone should be paged for, with what to do next. */
export interface Attention {
  /** Which page rule holds (README, "The status view": "Page someone when"). */
  readonly rule: "never-ran" | "no-consumer" | "dead" | "gaps" | "parked" | "pending-old" | "connection"
  readonly handler?: HandlerName
  /** What holds, with its figures. */
  readonly what: string
  /** The next step, as a command where there is one. */
  readonly next: string
}

/** The oldest pending outbox row may be this old (ms) before it is a page: the relay publishes within a second when it runs. */
export const PendingAttentionMs = 60_000

/** A connection may reconnect or be blocked this long (ms) before it is a page: a broker restart takes seconds. */
export const ConnectionAttentionMs = 30_000

const seconds = (ms: number) => `${Math.round(ms / 1000)} s`

/** True when none of the handler's queues exists: it never ran against this broker and prefix. */
const neverRan = (h: HandlerStatus) =>
  h.queue.exists === false && h.dead.figures.exists === false && h.retry.every((r) => r.figures.exists === false)

const handlerRules = (h: HandlerStatus, prefix: string): ReadonlyArray<Attention> => {
  const handler = h.handler
  if (neverRan(h)) {
    return [{
      rule: "never-ran",
      handler,
      what: `${handler} has never run on this broker and prefix: none of its queues (${prefix}.${handler}…) exist`,
      next: `start it once (npm run main -- --role ${handler}), which declares them`
    }]
  }
  const rules: Array<Attention> = []
  const waiting = h.queue.ready ?? 0
  if (h.queue.exists === true && waiting > 0 && h.queue.consumers === 0) {
    rules.push({
      rule: "no-consumer",
      handler,
      what: `${handler}: ${waiting} message(s) wait in ${h.queue.queue} and no receiver consumes it`,
      next: `start the ${handler} receiver (npm run main -- --role ${handler}); if it keeps stopping, read its log`
    })
  }
  const dead = queueDepth(h.dead.figures) ?? 0
  if (dead > 0) {
    rules.push({
      rule: "dead",
      handler,
      what: `${handler}: ${dead} dead letter(s) in ${h.dead.figures.queue}`,
      next: `npm run main -- dead list --handler ${handler}; fix the cause, then dead replay --handler ${handler} --all`
    })
  }
  if (h.gaps !== null && h.gaps > 0) {
    rules.push({
      rule: "gaps",
      handler,
      what: `${handler}: ${h.gaps} event(s) published over ${seconds(Duration.toMillis(GapAfter))} ago ` +
        "are in none of its queues and were never applied",
      next: `npm run main -- reconcile --handler ${handler}, then add --redeliver`
    })
  }
  return rules
}

/**
 * The page rules that hold in `report`, in the order an operator should look at them,
 * each once, with its next step. They are the README's, and only those: a handler that
 * never ran (one line, not one per missing queue); messages waiting with no consumer; any
 * dead letter; gaps; a parked outbox row; an outbox row pending for over
 * `PendingAttentionMs`; a connection reconnecting or blocked for over
 * `ConnectionAttentionMs`. What the view could not read is not a page (it has its
 * `detail`). `status` prints each with `!`, and `status --check` exits 1 when any holds.
 */
export const attentionOf = (report: StatusReport): ReadonlyArray<Attention> => {
  const rules: Array<Attention> = [...report.handlers.flatMap((h) => handlerRules(h, report.scope.prefix))]
  const outbox = report.outbox
  if (outbox !== null && outbox.parked > 0) {
    rules.push({
      rule: "parked",
      what: `${outbox.parked} outbox row(s) parked: the broker refused each DOSTAVKA_RELAY_PARK_AFTER times`,
      next:
        "npm run main -- outbox list --parked; fix what refused them (a queue's limit, a binding), then outbox retry --all"
    })
  }
  if (outbox !== null && outbox.oldestPendingAgeMs !== null && outbox.oldestPendingAgeMs > PendingAttentionMs) {
    rules.push({
      rule: "pending-old",
      what: `the oldest pending outbox row is ${seconds(outbox.oldestPendingAgeMs)} old`,
      next: "is the relay running (npm run main -- --role relay)? If it is, its log says why the broker refuses it"
    })
  }
  for (const c of report.connections) {
    if ((c.state === "reconnecting" || c.state === "blocked") && c.sinceMs !== null) {
      const forMs = report.asOfMs - c.sinceMs
      if (forMs > ConnectionAttentionMs) {
        rules.push({
          rule: "connection",
          what: `connection ${c.name} has been ${c.state} for ${seconds(forMs)}${
            c.detail === undefined ? "" : ` (${c.detail})`
          }`,
          next: c.state === "blocked"
            ? "the broker blocks publishers on a memory or disk alarm: free memory or disk on the broker"
            : `is the broker at ${report.scope.broker} up, and does it accept this user and vhost?`
        })
      }
    }
  }
  return rules
}
