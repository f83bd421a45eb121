import { Effect, Layer } from "effect"
import { handlerRequeueDelay, reconnectPolicy, Settings } from "../config.js"
import { auditHandler, catalogHandler } from "../app/handlers.js"
import { type Handler, judge } from "../app/receive.js"
import { runConsumer } from "../adapters/amqp/AmqpConsumer.js"
import { makeAmqpPublisher } from "../adapters/amqp/AmqpPublisher.js"
import { namesOf, topologyOf } from "../adapters/amqp/Topology.js"
import type { Inbox } from "../ports/Inbox.js"
import { Supervisor } from "../ports/Supervisor.js"
import type { Transaction } from "../ports/Transaction.js"
import { AuditStores, CatalogStores } from "./databases.js"
import { declareAtStart } from "./broker.js"

/**
 * A receiver role: consumes `<prefix>.<handler>` on its own consuming connection, runs
 * the handler with its inbox in one transaction, acks after commit, and dead-letters
 * what it can never process through a separate publishing connection.
 */
const receiverRole = <R>(handler: Handler<R>) =>
  Layer.scopedDiscard(
    Effect.gen(function*() {
      const settings = yield* Settings
      const names = namesOf(settings.prefix)
      const topology = topologyOf(settings.prefix, settings.queueType)
      yield* declareAtStart(`${handler.name}-setup`)
      const deadLetters = yield* makeAmqpPublisher({
        url: settings.amqpUrl,
        connectionName: `${settings.prefix}-${handler.name}-publisher`,
        topology,
        confirmTimeout: settings.confirmTimeout
      })
      const context = yield* Effect.context<R | Transaction | Inbox>()
      const supervisor = yield* Supervisor
      // Added before the fork, so it runs after the consumer fiber has been interrupted.
      yield* Effect.addFinalizer(() => Effect.logInfo("receiver stopped").pipe(Effect.annotateLogs({ role: handler.name })))
      yield* supervisor.supervise(
        handler.name,
        runConsumer({
          url: settings.amqpUrl,
          connectionName: `${settings.prefix}-${handler.name}-consumer`,
          topology,
          handler: handler.name,
          queue: names.queue(handler.name),
          deadQueue: names.deadQueue(handler.name),
          prefetch: settings.prefetch,
          decide: (incoming) => Effect.provide(judge(handler)(incoming), context),
          deadLetters,
          requeueDelay: handlerRequeueDelay,
          reconnect: reconnectPolicy
        }).pipe(
          Effect.tapError((error) => Effect.logFatal("consumer stopped").pipe(Effect.annotateLogs({ error: error.message }))),
          Effect.annotateLogs({ role: handler.name })
        )
      )
    })
  )

/** The `catalog` role over `catalog.db`. Needs `Settings`. */
export const CatalogRole = receiverRole(catalogHandler).pipe(Layer.provide(CatalogStores))

/** The `audit` role over `audit.db`. Needs `Settings`. */
export const AuditRole = receiverRole(auditHandler).pipe(Layer.provide(AuditStores))
