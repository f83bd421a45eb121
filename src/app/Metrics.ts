import { Metric, MetricBoundaries } from "effect"

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
  /** From a publish to its confirm, seconds. */
  publishConfirmSeconds: Metric.histogram(
    "dostavka_publish_confirm_seconds",
    seconds,
    "From a publish to its broker confirm"
  ),
  /** From the API's commit (the event's timestamp) to the receiver's commit of its effect, seconds, by `handler`. */
  commitToAppliedSeconds: Metric.histogram(
    "dostavka_commit_to_applied_seconds",
    seconds,
    "From the API's commit to a receiver's applied effect"
  ),
  /** How long a receiver's transaction for one batch took, seconds, by `handler`. */
  handlerSeconds: Metric.histogram("dostavka_handler_seconds", seconds, "A receiver's transaction for one batch")
} as const
