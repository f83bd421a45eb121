import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { createServer } from "node:http"
import { Settings } from "../config.js"
import { publicationApp } from "../adapters/http/PublicationApi.js"
import { ApiStores } from "./databases.js"

/**
 * A client gets this long (ms) to send a whole request. It also bounds how long a
 * shutdown waits for a client that stopped sending half-way (Node's default is 300 s).
 */
const RequestTimeoutMs = 30_000

/**
 * The `api` role: the publication API on 127.0.0.1:`DOSTAVKA_HTTP_PORT` over `api.db`.
 * Exposes the `HttpServer` so a caller can read the bound address (port 0 picks a free one).
 * Needs `Settings` and the `OutboxSignal` it rings after each commit.
 */
export const ApiRole = HttpServer.serve(publicationApp).pipe(
  HttpServer.withLogAddress,
  Layer.merge(Layer.scopedDiscard(Effect.addFinalizer(() => Effect.logInfo("api stopped")))),
  Layer.provideMerge(
    Layer.unwrapEffect(Effect.map(Settings, (s) =>
      NodeHttpServer.layer(() => createServer({ requestTimeout: RequestTimeoutMs }), { host: s.httpHost, port: s.httpPort })))
  ),
  Layer.provide(ApiStores)
)
