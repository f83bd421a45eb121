import { HttpApiBuilder, HttpServer } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { loopbackHttpServer, serveOperationsApi } from "../adapters/http/LoopbackHttpServer.js"
import { OperationsHttpApi, OperationsLive } from "../adapters/http/OperationsHttpApi.js"
import { Settings } from "../config.js"

/**
 * `/healthz`, `/readyz` and `/metrics` on 127.0.0.1:`port`, for a process without the
 * publication API (which serves them itself). Exposes the `HttpServer` (port 0 picks a
 * free one). Needs the process's `Readiness` and `MetricsExposition`.
 */
export const healthServer = (port: number) =>
  serveOperationsApi.pipe(
    Layer.provide(HttpApiBuilder.api(OperationsHttpApi)),
    Layer.provide(OperationsLive),
    HttpServer.withLogAddress,
    Layer.provideMerge(loopbackHttpServer(port))
  )

/** `healthServer` on `DOSTAVKA_HEALTH_PORT` when it is set; nothing otherwise. */
export const HealthRole = Layer.unwrapEffect(
  Effect.map(Settings, (s) => Option.match(s.healthPort, { onNone: () => Layer.empty, onSome: healthServer }))
)
