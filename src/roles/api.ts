import { HttpApiBuilder, HttpServer } from "@effect/platform"
import { Effect, Layer } from "effect"
import { BrokerStatsAmqp } from "../adapters/amqp/BrokerStatsAmqp.js"
import { loopbackHttpServer, namingPortSetting, servePublicationApi } from "../adapters/http/LoopbackHttpServer.js"
import { PublicationHttpApi } from "../adapters/http/PublicationHttpApi.js"
import {
  PublicationOperationsLive,
  PublicationsLive,
  PublicationStatusLive
} from "../adapters/http/PublicationHttpHandlers.js"
import { PublicationQueries } from "../app/queries.js"
import { StatusView } from "../app/status.js"
import { Settings } from "../config.js"
import type { MaterialStore } from "../ports/MaterialStore.js"
import type { Outbox } from "../ports/Outbox.js"
import type { PublicationRequests } from "../ports/PublicationRequests.js"
import type { Transaction } from "../ports/Transaction.js"
import { ApiQueryStores, ApiStores, HandlerInboxesSqlite } from "./databases.js"

type ApiPorts = Transaction | Outbox | MaterialStore | PublicationRequests

/**
 * The publication API on 127.0.0.1:`port`, writing through `writes` and reading through
 * `reads` (the same ports, over a read-only connection in production; memory in unit
 * tests), with `GET /v1/status` answered by `status`. Exposes the `HttpServer`, so a caller can read the bound address (port 0
 * picks a free one). Needs the `OutboxSignal` it rings after each commit, the
 * `Supervisor` it halts when its database is lost, and the process's `Readiness` and
 * `MetricsExposition` for `/readyz` and `/metrics`.
 */
export const publicationApi = <E1, R1, E2, R2, E3, R3>(
  port: number,
  writes: Layer.Layer<ApiPorts, E1, R1>,
  reads: Layer.Layer<Outbox | MaterialStore | PublicationRequests, E2, R2>,
  status: Layer.Layer<StatusView, E3, R3>
) =>
  servePublicationApi.pipe(
    Layer.provide(HttpApiBuilder.api(PublicationHttpApi)),
    Layer.provide([PublicationsLive, PublicationOperationsLive, PublicationStatusLive]),
    Layer.provide(PublicationQueries.layer.pipe(Layer.provide(reads))),
    Layer.provide(status),
    HttpServer.withLogAddress,
    Layer.merge(Layer.scopedDiscard(Effect.addFinalizer(() => Effect.logInfo("api stopped")))),
    Layer.provideMerge(loopbackHttpServer(port)),
    Layer.provide(writes)
  )

/**
 * The `api` role: the publication API on 127.0.0.1:`DOSTAVKA_HTTP_PORT`, writing through
 * `api.db`'s stores and reading through a read-only connection of its own. A port it
 * cannot listen on fails with `PortUnavailable` naming `DOSTAVKA_HTTP_PORT`. Needs
 * `Settings`, `OutboxSignal` and `Supervisor`.
 */
export const ApiRole = Layer.unwrapEffect(
  Effect.map(Settings, (s) => publicationApi(s.httpPort, ApiStores, ApiQueryStores, ApiStatusView))
).pipe(namingPortSetting("DOSTAVKA_HTTP_PORT"))

/**
 * The status view over `outbox` (read-only), the receivers' inboxes in the data dir, and
 * the broker's management API (or passive declares on one shared connection). Needs
 * `Settings`; reports this process's connections when it has a `BrokerConnections`.
 */
export const statusViewOver = <E, R>(outbox: Layer.Layer<Outbox, E, R>) =>
  StatusView.layer.pipe(Layer.provide([outbox, HandlerInboxesSqlite, BrokerStatsAmqp]))

/**
 * The API process's status view, over its read-only `api.db` connection: what
 * `GET /v1/status` answers, and what its gauges are set from (one value, so that a process
 * that builds both builds it once).
 */
export const ApiStatusView = statusViewOver(ApiQueryStores)
