import { HttpApiBuilder, HttpServer } from "@effect/platform"
import { Effect, Layer } from "effect"
import { Settings } from "../config.js"
import { PublicationQueries } from "../app/queries.js"
import { loopbackHttpServer, servePublicationApi } from "../adapters/http/LoopbackHttpServer.js"
import { PublicationHttpApi } from "../adapters/http/PublicationHttpApi.js"
import { PublicationsLive } from "../adapters/http/PublicationHttpHandlers.js"
import { ApiQueryStores, ApiStores } from "./databases.js"

/**
 * The `api` role: the publication API on 127.0.0.1:`DOSTAVKA_HTTP_PORT`, writing through
 * `api.db`'s stores and reading through a read-only connection of its own. Exposes the
 * `HttpServer` so a caller can read the bound address (port 0 picks a free one). Needs
 * `Settings`, the `OutboxSignal` it rings after each commit, and the `Supervisor` it
 * halts when `api.db` is removed under it.
 */
export const ApiRole = servePublicationApi.pipe(
  Layer.provide(HttpApiBuilder.api(PublicationHttpApi)),
  Layer.provide(PublicationsLive),
  Layer.provide(PublicationQueries.layer.pipe(Layer.provide(ApiQueryStores))),
  HttpServer.withLogAddress,
  Layer.merge(Layer.scopedDiscard(Effect.addFinalizer(() => Effect.logInfo("api stopped")))),
  Layer.provideMerge(Layer.unwrapEffect(Effect.map(Settings, (s) => loopbackHttpServer(s.httpPort)))),
  Layer.provide(ApiStores)
)
