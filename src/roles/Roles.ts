import { Effect, Layer, Option } from "effect"
import { Settings } from "../config.js"
import { ApiRole, ApiStatusView, statusViewOver } from "./api.js"
import { ApiReaderIfPresent } from "./databases.js"
import { HealthRole, listeningFirst } from "./health.js"
import { AuditRole, CatalogRole } from "./receivers.js"
import { RelayRole } from "./relay.js"
import { statusGauges } from "./StatusGauges.js"

/**
 * The roles a process can run (`--role`), each one Layer composed of the role proper, the
 * port it serves first, and its gauges. Each role binds its ports first: a port in use
 * stops it before anything talks to the broker. A process without the API serves
 * /healthz, /readyz and /metrics on DOSTAVKA_HEALTH_PORT when set. `all` is the four in
 * one process, and what the main job runs.
 */

// The gauges of /metrics: over the API's own status view where the API runs; elsewhere only
// when DOSTAVKA_HEALTH_PORT serves /metrics, over a view that reads api.db only if it is here.
const apiGauges = statusGauges.pipe(Layer.provide(ApiStatusView))
const healthGauges = Layer.unwrapEffect(
  Effect.map(
    Settings,
    (s) =>
      Option.isSome(s.healthPort) ? statusGauges.pipe(Layer.provide(statusViewOver(ApiReaderIfPresent))) : Layer.empty
  )
)

export const Roles = {
  api: Layer.merge(ApiRole, apiGauges),
  relay: listeningFirst(HealthRole, Layer.merge(RelayRole, healthGauges)),
  catalog: listeningFirst(HealthRole, Layer.merge(CatalogRole, healthGauges)),
  audit: listeningFirst(HealthRole, Layer.merge(AuditRole, healthGauges)),
  all: listeningFirst(
    ApiRole,
    Layer.mergeAll(RelayRole, CatalogRole, AuditRole, apiGauges)
  )
} as const

/** A role's name, as `--role` takes it. */
export type RoleName = keyof typeof Roles
