import { Effect } from "effect"
import { reconnectPolicy, Settings } from "../config.js"
import { brokerAccessOf, openConnection } from "../adapters/amqp/AmqpConnection.js"
import { declareTopology, topologyOf } from "../adapters/amqp/Topology.js"

/**
 * Declares the whole topology once at a role's start, waiting for the broker by
 * `reconnectPolicy` while it is unreachable, so that a 406 mismatch stops the role at
 * start with `TopologyMismatch` instead of in a background loop. The connection is named
 * `<prefix>-<connectionName>`.
 */
export const declareAtStart = (connectionName: string) =>
  Effect.gen(function*() {
    const settings = yield* Settings
    yield* Effect.scoped(
      Effect.flatMap(openConnection(brokerAccessOf(settings), `${settings.prefix}-${connectionName}`), (connection) =>
        declareTopology(connection, topologyOf(settings)))
    ).pipe(
      Effect.tapError((error) =>
        error._tag === "BrokerUnavailable"
          ? Effect.logWarning("waiting for the broker").pipe(Effect.annotateLogs({ error: error.message }))
          : Effect.void
      ),
      Effect.retry({ schedule: reconnectPolicy, while: (error) => error._tag === "BrokerUnavailable" })
    )
  })
