import { HttpApiBuilder, HttpServer } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { loopbackHttpServer, namingPortSetting, serveOperationsApi } from "../adapters/http/LoopbackHttpServer.js"
import { OperationsHttpApi, OperationsLive } from "../adapters/http/OperationsHttpApi.js"
import { Settings } from "../config.js"
import { registerCheck } from "../ports/Readiness.js"

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

/**
 * `healthServer` on `DOSTAVKA_HEALTH_PORT` when it is set; nothing otherwise. A port it
 * cannot listen on fails with `PortUnavailable` naming `DOSTAVKA_HEALTH_PORT`.
 */
export const HealthRole = Layer.unwrapEffect(
  Effect.map(Settings, (s) => Option.match(s.healthPort, { onNone: () => Layer.empty, onSome: healthServer }))
).pipe(namingPortSetting("DOSTAVKA_HEALTH_PORT"))

/** The readiness check that fails until the role behind the listeners is built (`listeningFirst`). */
const StartCheck = "start"

/**
 * `role` after `listeners` (the API's port, or the health port): a port that is taken
 * stops the process before anything talks to the broker or declares a queue, and the
 * broker is waited for with `/healthz` already answering. Until `role` is built,
 * `/readyz` answers 503 with the check `start` failing, so the moment between the bind
 * and the role's own checks is never taken for ready. Exposes both layers' services.
 */
export const listeningFirst = <A1, E1, R1, A2, E2, R2>(
  listeners: Layer.Layer<A1, E1, R1>,
  role: Layer.Layer<A2, E2, R2>
) =>
  Layer.effectDiscard(registerCheck(StartCheck, Effect.void)).pipe(
    Layer.provideMerge(role),
    Layer.provideMerge(listeners),
    Layer.provideMerge(Layer.effectDiscard(registerCheck(StartCheck, Effect.fail("the role is starting"))))
  )
