import { Effect, Layer } from "effect"
import { AmqpClient } from "../adapters/amqp/AmqpClient.js"
import { brokerAccessOf } from "../adapters/amqp/AmqpConnection.js"
import { runConsumer } from "../adapters/amqp/AmqpConsumer.js"
import { makeAmqpPublisher } from "../adapters/amqp/AmqpPublisher.js"
import { ManagementApi } from "../adapters/amqp/ManagementApi.js"
import { topologyPlanOf } from "../adapters/amqp/Topology.js"
import { auditHandler, catalogHandler } from "../app/handlers.js"
import type { Handler } from "../app/inboxRule.js"
import { zeroCounters } from "../app/Metrics.js"
import { judgeAll } from "../app/receive.js"
import { copyRequeueDelay, reconnectPolicy, Settings } from "../config.js"
import { registerConnectionCheck } from "../ports/BrokerConnections.js"
import type { Inbox } from "../ports/Inbox.js"
import { Supervisor } from "../ports/Supervisor.js"
import type { Transaction } from "../ports/Transaction.js"
import { declareAtStart, keepTopology } from "./broker.js"
import { AuditStores, CatalogStores } from "./databases.js"

/**
 * A receiver role for `handler`: consumes `<prefix>.<handler>` on its own consuming
 * connection, decides each batch with `judgeAll` (inbox and effect in one transaction,
 * failures routed by the handler's retry policy), acks after commit, and publishes retry
 * and dead-letter copies through a separate publishing connection. Needs `Settings`,
 * `Supervisor`, and the handler's stores with `Transaction` and `Inbox`. Exported so that
 * a test can run a receiver whose handler misbehaves on purpose.
 */
export const receiverRole = <R>(handler: Handler<R>) =>
  Layer.scopedDiscard(
    Effect.gen(function*() {
      const settings = yield* Settings
      yield* zeroCounters(handler.name)
      const topology = topologyPlanOf(settings, handler.name)
      const policy = settings.retry[handler.name]
      const limits = { trustedPublisher: settings.trustedPublisher, maxEventBytes: settings.maxEventBytes }
      yield* declareAtStart(`${handler.name}-setup`, handler.name)
      yield* keepTopology(`${handler.name}-topology`, handler.name)
      const copies = yield* makeAmqpPublisher({
        access: brokerAccessOf(settings),
        connectionName: `${settings.prefix}-${handler.name}-publisher`,
        role: handler.name,
        topology,
        confirmTimeout: settings.confirmTimeout
      })
      const consumerName = `${settings.prefix}-${handler.name}-consumer`
      yield* registerConnectionCheck(consumerName)
      const context = yield* Effect.context<R | Transaction | Inbox>()
      const supervisor = yield* Supervisor
      // Added before the loop starts, so it runs after the consumer fiber has been interrupted.
      yield* Effect.addFinalizer(() =>
        Effect.logInfo("receiver stopped").pipe(Effect.annotateLogs({ role: handler.name }))
      )
      yield* supervisor.supervise(
        handler.name,
        runConsumer({
          access: brokerAccessOf(settings),
          connectionName: consumerName,
          topology,
          prefix: settings.prefix,
          handler: handler.name,
          retryDelays: policy.delays,
          prefetch: settings.prefetch,
          decide: (batch) => Effect.provide(judgeAll(handler, policy, limits)(batch), context),
          copies,
          requeueDelay: copyRequeueDelay,
          maxHandBacks: 3,
          reconnect: reconnectPolicy
        }).pipe(
          Effect.tapError((error) =>
            Effect.logFatal("consumer stopped").pipe(Effect.annotateLogs({ error: error.message }))
          ),
          Effect.annotateLogs({ role: handler.name })
        )
      )
    })
  ).pipe(Layer.provide(Layer.merge(AmqpClient.live, ManagementApi.live)))

/** The `catalog` role over `catalog.db`. Needs `Settings` and `Supervisor`. */
export const CatalogRole = receiverRole(catalogHandler).pipe(Layer.provide(CatalogStores))

/** The `audit` role over `audit.db`. Needs `Settings` and `Supervisor`. */
export const AuditRole = receiverRole(auditHandler).pipe(Layer.provide(AuditStores))
