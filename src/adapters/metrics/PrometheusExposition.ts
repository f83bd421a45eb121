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
   * metric registry: the exporter writes the format (names, `_total` on counters, units,
   * escaping), so the kit does not. The exporter's own HTTP server is not started; the
   * kit's servers answer `GET /metrics` with `text`.
   */
  static readonly live = Layer.unwrapEffect(Effect.sync(() => {
    const exporter = new PrometheusExporter({ preventServerStart: true })
    const serializer = new PrometheusSerializer()
    const text = Effect.promise(() => exporter.collect()).pipe(
      Effect.map(({ resourceMetrics }) => serializer.serialize(resourceMetrics))
    )
    return Layer.merge(
      Layer.succeed(MetricsExposition, { text }),
      OtelMetrics.layer(() => exporter).pipe(Layer.provide(Resource.layer({ serviceName: "dostavka" })))
    )
  }))
}

/** The media type of the Prometheus text exposition format. */
export const PrometheusContentType = "text/plain; version=0.0.4; charset=utf-8"
