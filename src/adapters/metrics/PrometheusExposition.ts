import * as OtelMetrics from "@effect/opentelemetry/Metrics"
import * as Resource from "@effect/opentelemetry/Resource"
import { PrometheusExporter, PrometheusSerializer } from "@opentelemetry/exporter-prometheus"
import { Context, Effect, Layer } from "effect"

/** The process's metrics as text, for `GET /metrics`. */
export class MetricsExposition extends Context.Tag("dostavka/MetricsExposition")<MetricsExposition, {
  /** Every Effect `Metric` of the process, in the Prometheus text exposition format (version 0.0.4). */
  readonly text: Effect.Effect<string>
}>() {
  /**
   * Over OpenTelemetry's Prometheus exporter, fed by `@effect/opentelemetry` from Effect's
   * metric registry: the exporter writes the format (names, `_total` on counters,
   * escaping), so the kit does not. Every series carries `service_name` (`serviceName`,
   * e.g. `dostavka-relay`), none the exporter's `otel_scope_name`; Effect's own runtime
   * metrics (`effect_fiber_*`, undescribed) are left out, and so are `# UNIT` lines, which
   * the text format 0.0.4 this page declares does not have. The exporter's own HTTP server
   * is not started; the kit's servers answer `GET /metrics` with `text`.
   */
  static readonly live = (serviceName: string) =>
    Layer.unwrapEffect(Effect.sync(() => {
      const exporter = new PrometheusExporter({ preventServerStart: true })
      const serializer = new PrometheusSerializer(undefined, false, /^service\.name$/, false, true)
      const text = Effect.promise(() => exporter.collect()).pipe(
        Effect.map(({ resourceMetrics }) =>
          serializer.serialize({
            ...resourceMetrics,
            scopeMetrics: resourceMetrics.scopeMetrics.map((scope) => ({
              ...scope,
              metrics: scope.metrics.filter((m) => !m.descriptor.name.startsWith("effect_"))
            }))
          }).replace(/^# UNIT .*\n/gm, "")
        )
      )
      return Layer.merge(
        Layer.succeed(MetricsExposition, { text }),
        OtelMetrics.layer(() => exporter).pipe(Layer.provide(Resource.layer({ serviceName })))
      )
    }))
}

/** The media type of the Prometheus text exposition format. */
export const PrometheusContentType = "text/plain; version=0.0.4; charset=utf-8"
