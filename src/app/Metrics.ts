import { Effect, Metric, MetricBoundaries } from "effect"
import type { HandlerName } from "../domain/HandlerName.js"

/** Latency buckets in seconds, from 1 ms to about 33 s, doubling. */
const seconds = MetricBoundaries.exponential({ start: 0.001, factor: 2, count: 16 })

/**
 * The kit's metrics, as Effect `Metric`s. Names follow Prometheus conventions
 * ("Metric and label naming"): the `dostavka_` prefix, base units (seconds), and counters
 * whose exported name gains `_total`. `/metrics` exposes them in the Prometheus text
 * format; every label value is a small closed set (never an id, a body or a credential).
 */
export const Metrics = {
  /** API requests answered, by `status` (the HTTP status code) and `route`. */
  httpRequests: Metric.counter("dostavka_http_requests", {
    description: "API requests answered, by status code and route",
    incremental: true
  }),
  /** Publishes the broker answered, by `role` (relay, catalog, audit, operator) and `outcome`: confirmed, returned, nacked, refused, unknown. */
  publishes: Metric.counter("dostavka_publishes", { description: "Publishes by outcome", incremental: true }),
  /** Deliveries settled, by `handler` and `disposition`: applied, duplicate, stale, retried, dead. */
  deliveries: Metric.counter("dostavka_deliveries", {
    description: "Deliveries by handler and disposition",
    incremental: true
  }),
  /** Broker connections opened again after a loss, by `role`. */
  reconnects: Metric.counter("dostavka_reconnects", {
    description: "Broker connections opened again after a loss, by role",
    incremental: true
  }),
  /** Topology objects found missing by a periodic check and declared again, by `role`. */
  topologyRepairs: Metric.counter("dostavka_topology_repairs", {
    description: "Missing exchanges, queues and bindings declared again, by role",
    incremental: true
  }),
  /** From a publish to its confirm, seconds: one observation per confirmed publish. */
  publishConfirmSeconds: Metric.histogram(
    "dostavka_publish_confirm_seconds",
    seconds,
    "From a publish to its broker confirm, per confirmed publish"
  ),
  /** From the API's commit (the event's timestamp) to the receiver's commit of its effect, seconds, by `handler`. */
  commitToAppliedSeconds: Metric.histogram(
    "dostavka_commit_to_applied_seconds",
    seconds,
    "From the API's commit to a receiver's applied effect"
  ),
  /** How long a receiver's transaction for one batch took, seconds, by `handler`. */
  handlerSeconds: Metric.histogram("dostavka_handler_seconds", seconds, "A receiver's transaction for one batch"),

  // Gauges of the status view, set on a schedule (`StatusGauges`), never read from the broker per
  // scrape. A figure the view could not read is NaN: unknown, never a wrong zero.
  /** Outbox rows the broker has not confirmed yet, parked ones aside. */
  outboxPending: Metric.gauge("dostavka_outbox_pending", {
    description: "Outbox rows not confirmed yet (parked aside)"
  }),
  /** How old the oldest pending outbox row is, seconds; 0 when none is pending. */
  outboxOldestPendingSeconds: Metric.gauge("dostavka_outbox_oldest_pending_seconds", {
    description: "Age of the oldest pending outbox row, 0 when none"
  }),
  /** Outbox rows the relay parked after too many rejections. */
  outboxParked: Metric.gauge("dostavka_outbox_parked", { description: "Outbox rows parked after repeated rejections" }),
  /** Messages ready in a handler's queue, by `handler`. */
  queueReady: Metric.gauge("dostavka_queue_ready", { description: "Messages ready in the handler's queue" }),
  /** Messages delivered and not yet acked from a handler's queue, by `handler`. */
  queueUnacked: Metric.gauge("dostavka_queue_unacked", { description: "Messages delivered, not yet acked" }),
  /** Consumers of a handler's queue, by `handler`. */
  queueConsumers: Metric.gauge("dostavka_queue_consumers", { description: "Consumers of the handler's queue" }),
  /** Messages in a handler's retry queues, held ones included, by `handler`. */
  retrying: Metric.gauge("dostavka_retrying", { description: "Messages in the handler's retry queues" }),
  /** Messages on a handler's dead-letter queue, by `handler`. */
  dead: Metric.gauge("dostavka_dead", { description: "Messages on the handler's dead-letter queue" }),
  /** Published events a handler never got (see `gapsBeyond`), by `handler`. */
  gaps: Metric.gauge("dostavka_gaps", {
    description: "Published events in none of the handler's queues, never applied"
  }),
  /** 1 while a broker connection of this process is up, 0 otherwise, by `connection` (its connection_name). */
  connectionUp: Metric.gauge("dostavka_connection_up", { description: "1 while the broker connection is up" }),
  /** Page rules that hold now (`attentionOf`), by `rule`: what `status --check` exits 1 for. */
  attention: Metric.gauge("dostavka_attention", { description: "Page rules that hold, by rule" }),
  /** 1, with the kit's `version` and the Node.js `node` version as labels. */
  buildInfo: Metric.gauge("dostavka_build_info", { description: "The kit's version and Node.js's" }),

  // The process, under the names Node.js exporters use (prom-client's default metrics).
  processCpuSeconds: Metric.counter("process_cpu_seconds", {
    description: "CPU time of the process, user and system",
    incremental: true
  }),
  processResidentMemoryBytes: Metric.gauge("process_resident_memory_bytes", { description: "Resident memory" }),
  processStartTimeSeconds: Metric.gauge("process_start_time_seconds", {
    description: "When the process started, seconds since the epoch"
  }),
  heapUsedBytes: Metric.gauge("nodejs_heap_size_used_bytes", { description: "V8 heap in use" }),
  eventLoopLagSeconds: Metric.gauge("nodejs_eventloop_lag_mean_seconds", {
    description: "Mean event loop delay since the last sample"
  }),
  eventLoopLagP99Seconds: Metric.gauge("nodejs_eventloop_lag_p99_seconds", {
    description: "99th percentile of the event loop delay since the last sample"
  })
} as const

/**
 * Every documented counter of `role` at 0, for its start, so that `rate()` and absence
 * alerts work before the first event: reconnects and topology repairs per broker role,
 * publishes per outcome, deliveries per disposition.
 */
export const zeroCounters = (role: "relay" | HandlerName) =>
  Effect.gen(function*() {
    yield* Metric.incrementBy(Metric.tagged(Metrics.reconnects, "role", role), 0)
    yield* Metric.incrementBy(Metric.tagged(Metrics.topologyRepairs, "role", role), 0)
    for (const outcome of ["confirmed", "returned", "nacked", "refused", "unknown"]) {
      yield* Metric.incrementBy(Metric.tagged(Metric.tagged(Metrics.publishes, "role", role), "outcome", outcome), 0)
    }
    if (role === "relay") return
    for (const disposition of ["applied", "duplicate", "stale", "retried", "dead", "handed-back"]) {
      yield* Metric.incrementBy(
        Metric.tagged(Metric.tagged(Metrics.deliveries, "handler", role), "disposition", disposition),
        0
      )
    }
  })
