import { Effect, Layer } from "effect"
import { hostname } from "node:os"
import { AmqpClient } from "../adapters/amqp/AmqpClient.js"
import { EventBusAmqp } from "../adapters/amqp/EventBusAmqp.js"
import { ManagementApi } from "../adapters/amqp/ManagementApi.js"
import { zeroCounters } from "../app/Metrics.js"
import { runRelay } from "../app/relay.js"
import { Ids } from "../ports/Ids.js"
import { Supervisor } from "../ports/Supervisor.js"
import { declareAtStart, keepTopology } from "./broker.js"
import { ApiStores } from "./databases.js"

/**
 * The `relay` role: drains `api.db`'s outbox to the broker with pipelined publisher
 * confirms, on its own publishing connection, while it holds the relay lease. Needs
 * `Settings`, `OutboxSignal` and `Ids`.
 */
export const RelayRole = Layer.scopedDiscard(
  Effect.gen(function*() {
    yield* zeroCounters("relay")
    yield* declareAtStart("relay-setup", "relay")
    yield* keepTopology("relay-topology", "relay")
    // Added before the fork, so it runs after the relay fiber has been interrupted.
    yield* Effect.addFinalizer(() => Effect.logInfo("relay stopped"))
    const supervisor = yield* Supervisor
    // The lease owner's name: which machine and process, and unique even if a pid is reused.
    const unique = yield* Effect.flatMap(Ids, (ids) => ids.uuid)
    yield* supervisor.supervise("relay", runRelay(`${hostname()}:${process.pid}:${unique.slice(0, 8)}`))
  })
).pipe(
  Layer.provide(Layer.mergeAll(EventBusAmqp("relay-publisher"), ApiStores, ManagementApi.live)),
  Layer.provide(AmqpClient.live)
)
