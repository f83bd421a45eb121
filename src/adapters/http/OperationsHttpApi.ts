import {
  HttpApi,
  HttpApiBuilder,
  HttpApiEndpoint,
  HttpApiGroup,
  HttpApiSchema,
  HttpServerResponse,
  OpenApi
} from "@effect/platform"
import { Effect, Schema } from "effect"
import { Readiness } from "../../ports/Readiness.js"
import { MetricsExposition, PrometheusContentType } from "../metrics/PrometheusExposition.js"

const Check = Schema.Struct({ name: Schema.String, ok: Schema.Boolean, detail: Schema.optional(Schema.String) })

/** `GET /readyz`'s body, 200 or 503: every check with its result. */
export const ReadinessView = Schema.Struct({
  status: Schema.Literal("ready", "not ready"),
  checks: Schema.Array(Check)
})

/**
 * What a supervisor or a scraper asks of any role process:
 * - `GET /healthz`: 200 while the process answers at all;
 * - `GET /readyz`: 200 when its database is open, its broker connections are up (not
 *   blocked) and its topology is declared; 503 with the same body naming the failed checks;
 * - `GET /metrics`: the Prometheus text exposition of every metric of the process.
 */
export class OperationsGroup extends HttpApiGroup.make("operations")
  .add(
    HttpApiEndpoint.get("healthz", "/healthz")
      .addSuccess(Schema.Struct({ status: Schema.Literal("ok") }))
      .annotate(OpenApi.Summary, "The process answers")
  )
  .add(
    HttpApiEndpoint.get("readyz", "/readyz")
      .addSuccess(ReadinessView)
      .addError(ReadinessView.annotations(HttpApiSchema.annotations({ status: 503 })))
      .annotate(OpenApi.Summary, "The process can do its work: database, broker connections, topology")
  )
  .add(
    HttpApiEndpoint.get("metrics", "/metrics")
      .addSuccess(HttpApiSchema.Text({ contentType: PrometheusContentType }))
      .annotate(OpenApi.Summary, "Metrics in the Prometheus text format")
  )
{}

/** The operations endpoints alone: what a relay or receiver serves on `DOSTAVKA_HEALTH_PORT`. */
export class OperationsHttpApi extends HttpApi.make("dostavka-operations").add(OperationsGroup) {}

/** What the operations endpoints answer, for any API that includes `OperationsGroup`. Needs `Readiness` and `MetricsExposition`. */
export const operationsAnswers = Effect.gen(function*() {
  const readiness = yield* Readiness
  const metrics = yield* MetricsExposition
  return {
    healthz: Effect.succeed({ status: "ok" as const }),
    readyz: Effect.map(readiness.check, (checks) => {
      const ready = checks.every((c) => c.ok)
      return HttpServerResponse.unsafeJson({ status: ready ? "ready" : "not ready", checks }, {
        status: ready ? 200 : 503
      })
    }),
    metrics: Effect.map(metrics.text, (text) => HttpServerResponse.text(text, { contentType: PrometheusContentType }))
  }
})

/** The handlers of `OperationsHttpApi`. */
export const OperationsLive = HttpApiBuilder.group(
  OperationsHttpApi,
  "operations",
  (handlers) =>
    Effect.map(operationsAnswers, (answers) =>
      handlers
        .handle("healthz", () => answers.healthz)
        .handleRaw("readyz", () => answers.readyz)
        .handleRaw("metrics", () => answers.metrics))
)
