import { Effect, Metric } from "effect"
import { brokerAccessOf, openConnection } from "../adapters/amqp/AmqpConnection.js"
import { ManagementApi } from "../adapters/amqp/ManagementApi.js"
import { declarePlan, declareTopology, type TopologyPart, topologyPlanOf } from "../adapters/amqp/Topology.js"
import { checkTopology } from "../adapters/amqp/TopologyDrift.js"
import { Metrics } from "../app/Metrics.js"
import { reconnectPolicy, Settings } from "../config.js"
import { registerCheck } from "../ports/Readiness.js"

/**
 * Declares the role's part of the topology once at its start, waiting for the broker by
 * `reconnectPolicy` while it is unreachable, so that a 406 mismatch, or a broker that
 * refuses the login, vhost or TLS (`BrokerRefused`), stops the role at start with one
 * line instead of in a background loop. The connection is named
 * `<prefix>-<connectionName>`.
 */
export const declareAtStart = (connectionName: string, part: TopologyPart) =>
  Effect.gen(function*() {
    const settings = yield* Settings
    const check = `topology:${part}`
    yield* registerCheck(check, Effect.fail("the topology is not declared yet"))
    yield* Effect.scoped(
      Effect.flatMap(openConnection(brokerAccessOf(settings), `${settings.prefix}-${connectionName}`), (connection) =>
        declarePlan(connection, topologyPlanOf(settings, part)))
    ).pipe(
      Effect.tapError((error) =>
        error._tag === "BrokerUnavailable"
          ? Effect.logWarning("waiting for the broker").pipe(Effect.annotateLogs({ error: error.message }))
          : Effect.void
      ),
      Effect.retry({
        schedule: reconnectPolicy,
        while: (error) =>
          error._tag === "BrokerUnavailable"
      })
    )
    yield* registerCheck(check, Effect.void)
  })

/**
 * Every `DOSTAVKA_TOPOLOGY_CHECK_MS` (30 s by default), checks that the role's own part of
 * the topology is still on the broker (`checkTopology`) and declares it again when
 * anything is missing, or when its bindings could not be checked (declaring is
 * idempotent): a queue or binding deleted by hand is back within one period, not at the
 * consumer's next reconnect. A repair is logged at warning level as `topology drift`,
 * naming what was missing, and counted in `dostavka_topology_repairs_total`. A check that
 * fails (the broker is away) is logged at debug level and tried at the next period.
 * Forked into the caller's scope; the connection, named `<prefix>-<connectionName>`,
 * lives for one check.
 */
export const keepTopology = (connectionName: string, part: TopologyPart) =>
  Effect.gen(function*() {
    const settings = yield* Settings
    const management = yield* Effect.serviceOption(ManagementApi)
    const own = topologyPlanOf(settings, part).own
    const once = Effect.scoped(Effect.gen(function*() {
      const connection = yield* openConnection(brokerAccessOf(settings), `${settings.prefix}-${connectionName}`)
      const found = yield* checkTopology(connection, own, management)
      if (found.missing.length === 0 && found.bindingsChecked) return
      yield* declareTopology(connection, own)
      if (found.missing.length === 0) return
      yield* Metric.incrementBy(Metric.tagged(Metrics.topologyRepairs, "role", part), found.missing.length)
      yield* Effect.logWarning("topology drift: declared again what was missing").pipe(
        Effect.annotateLogs({ missing: found.missing.join("; ") })
      )
    })).pipe(
      Effect.catchAll((error) =>
        Effect.logDebug("could not verify the topology").pipe(Effect.annotateLogs({ error: error.message }))
      )
    )
    yield* once.pipe(Effect.delay(settings.topologyCheck), Effect.forever, Effect.forkScoped)
  })
