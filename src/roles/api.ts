import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { createServer } from "node:http"
import { Settings } from "../config.js"
import { publicationApp } from "../adapters/http/PublicationApi.js"
import { ApiStores } from "./databases.js"

/**
 * The `api` role: the publication API on 127.0.0.1:`DOSTAVKA_HTTP_PORT` over `api.db`.
 * Exposes the `HttpServer` so a caller can read the bound address (port 0 picks a free one).
 * Needs `Settings` and the `OutboxSignal` it rings after each commit.
 */
export const ApiRole = HttpServer.serve(publicationApp).pipe(
  HttpServer.withLogAddress,
  Layer.merge(Layer.scopedDiscard(Effect.addFinalizer(() => Effect.logInfo("api stopped")))),
  Layer.provideMerge(
    Layer.unwrapEffect(Effect.map(Settings, (s) => NodeHttpServer.layer(createServer, { host: s.httpHost, port: s.httpPort })))
  ),
  Layer.provide(ApiStores)
)
