import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http"
import { BatchSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Config, Effect, Layer, Option } from "effect"
import { TracingEnabled } from "../../app/tracing.js"

/**
 * Exports traces through `@effect/opentelemetry` when `OTEL_EXPORTER_OTLP_ENDPOINT` is set
 * (OTLP over HTTP, batched; the exporter reads the OpenTelemetry environment variables,
 * "OpenTelemetry Protocol Exporter"), as the service `OTEL_SERVICE_NAME`, by default
 * `serviceName`; and turns `TracingEnabled` on, so that spans follow each message across
 * the broker. Without the variable it provides nothing: no exporter, no per-message span.
 */
export const TracingLive = (serviceName: string) =>
  Layer.unwrapEffect(
    Effect.map(
      Config.all({
        endpoint: Config.option(Config.string("OTEL_EXPORTER_OTLP_ENDPOINT")),
        service: Config.string("OTEL_SERVICE_NAME").pipe(Config.withDefault(serviceName))
      }),
      ({ endpoint, service }) =>
        Option.isNone(endpoint) || endpoint.value.trim() === ""
          ? Layer.empty
          : Layer.merge(
            NodeSdk.layer(() => ({
              resource: { serviceName: service },
              spanProcessor: new BatchSpanProcessor(new OTLPTraceExporter())
            })),
            Layer.succeed(TracingEnabled, true)
          )
    )
  )
