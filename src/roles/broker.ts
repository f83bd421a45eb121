import { Effect } from "effect"
import { reconnectPolicy, Settings } from "../config.js"
import { registerCheck } from "../ports/Readiness.js"
import { brokerAccessOf, openConnection } from "../adapters/amqp/AmqpConnection.js"
import { declarePlan, topologyPlanOf, type TopologyPart } from "../adapters/amqp/Topology.js"

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
      Effect.retry({ schedule: reconnectPolicy, while: (error) => error._tag === "BrokerUnavailable" })
    )
    yield* registerCheck(check, Effect.void)
  })
