import { Cause, Duration, Effect, Layer, Metric, Schedule } from "effect"
import { monitorEventLoopDelay } from "node:perf_hooks"
import { type Attention, attentionOf } from "../app/attention.js"
import { Metrics } from "../app/Metrics.js"
import { queueDepth, type StatusReport, StatusView } from "../app/status.js"
import type { HandlerName } from "../domain/HandlerName.js"

/** How often the gauges are set from the status view: the management API samples queues every 5 s. */
export const GaugeRefresh = Duration.seconds(5)

/** The kit's version, for `dostavka_build_info`. */
export const KitVersion = "0.1.0"

const byHandler = (metric: Metric.Metric.Gauge<number>, handler: HandlerName) =>
  Metric.tagged(metric, "handler", handler)

/** `value`, or NaN when it is unknown: a gauge that could not be read is never a wrong zero. */
const known = (value: number | null | undefined) => value ?? Number.NaN

const sum = (values: ReadonlyArray<number | null>) =>
  values.some((v) => v === null) ? null : values.reduce<number>((total, v) => total + v!, 0)

const rules: ReadonlyArray<Attention["rule"]> = [
  "never-ran",
  "no-consumer",
  "dead",
  "gaps",
  "parked",
  "pending-old",
  "connection"
]

/**
 * Sets the status view's gauges from `report`: the outbox's pending, oldest pending age
 * (seconds) and parked rows; per handler its queue's ready, unacked and consumers, the
 * messages of its retry queues and of its dead queue, and its gaps; each connection of
 * this process, 1 while up; and how many of each page rule hold (`attentionOf`). A figure
 * the view could not read is NaN. The names and what to alert on: `ops/prometheus/alerts.yml`.
 */
export const setStatusGauges = (report: StatusReport) =>
  Effect.gen(function*() {
    const outbox = report.outbox
    yield* Metric.set(Metrics.outboxPending, known(outbox?.pending))
    yield* Metric.set(
      Metrics.outboxOldestPendingSeconds,
      outbox === null ? Number.NaN : (outbox.oldestPendingAgeMs ?? 0) / 1000
    )
    yield* Metric.set(Metrics.outboxParked, known(outbox?.parked))
    for (const h of report.handlers) {
      yield* Metric.set(byHandler(Metrics.queueReady, h.handler), known(h.queue.ready))
      yield* Metric.set(byHandler(Metrics.queueUnacked, h.handler), known(h.queue.unacked))
      yield* Metric.set(byHandler(Metrics.queueConsumers, h.handler), known(h.queue.consumers))
      yield* Metric.set(byHandler(Metrics.retrying, h.handler), known(sum(h.retry.map((r) => queueDepth(r.figures)))))
      yield* Metric.set(byHandler(Metrics.dead, h.handler), known(queueDepth(h.dead.figures)))
      yield* Metric.set(byHandler(Metrics.gaps, h.handler), known(h.gaps))
    }
    for (const c of report.connections) {
      yield* Metric.set(Metric.tagged(Metrics.connectionUp, "connection", c.name), c.state === "up" ? 1 : 0)
    }
    const holding = attentionOf(report)
    for (const rule of rules) {
      yield* Metric.set(Metric.tagged(Metrics.attention, "rule", rule), holding.filter((a) => a.rule === rule).length)
    }
  })

/**
 * The process's gauges (`StatusView`'s figures, `setStatusGauges`, and Node.js's own:
 * CPU, resident memory, heap, event loop delay), set every `GaugeRefresh` by one fiber of
 * the layer's scope, and `dostavka_build_info`. A scrape of `/metrics` only reads them: the broker is asked once per
 * refresh (and, through the view's cache, not more than once a second), whatever scrapes.
 * A refresh that fails is logged and the next one tried. Needs `StatusView`.
 */
export const statusGauges = Layer.scopedDiscard(Effect.gen(function*() {
  const view = yield* StatusView
  const delay = yield* Effect.acquireRelease(
    Effect.sync(() => {
      const histogram = monitorEventLoopDelay({ resolution: 10 })
      histogram.enable()
      return histogram
    }),
    (histogram) => Effect.sync(() => histogram.disable())
  )
  yield* Metric.set(
    Metric.tagged(Metric.tagged(Metrics.buildInfo, "version", KitVersion), "node", process.versions.node),
    1
  )
  yield* Metric.set(Metrics.processStartTimeSeconds, Math.round(Date.now() / 1000 - process.uptime()))
  let cpu = process.cpuUsage()
  const processGauges = Effect.gen(function*() {
    const now = process.cpuUsage()
    yield* Metric.incrementBy(Metrics.processCpuSeconds, (now.user - cpu.user + now.system - cpu.system) / 1e6)
    cpu = now
    const memory = process.memoryUsage()
    yield* Metric.set(Metrics.processResidentMemoryBytes, memory.rss)
    yield* Metric.set(Metrics.heapUsedBytes, memory.heapUsed)
    yield* Metric.set(Metrics.eventLoopLagSeconds, delay.count === 0 ? 0 : delay.mean / 1e9)
    yield* Metric.set(Metrics.eventLoopLagP99Seconds, delay.count === 0 ? 0 : delay.percentile(99) / 1e9)
    delay.reset()
  })
  const refresh = Effect.flatMap(view.report, setStatusGauges).pipe(
    Effect.zipRight(processGauges),
    Effect.catchAllCause((cause) =>
      Effect.logWarning("metrics refresh failed").pipe(Effect.annotateLogs({ cause: Cause.pretty(cause) }))
    )
  )
  yield* Effect.forkScoped(Effect.repeat(refresh, Schedule.spaced(GaugeRefresh)))
}))
