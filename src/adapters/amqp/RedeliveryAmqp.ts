import { Effect, Layer } from "effect"
import { Settings } from "../../config.js"
import { Redelivery } from "../../ports/Redelivery.js"
import { AmqpClient } from "./AmqpClient.js"
import { makeOperatorPublisher } from "./AmqpPublisher.js"
import { brokerUserOf, toPublish } from "./EventBusAmqp.js"
import { HandlerRoutes, namesOf } from "./Topology.js"

/**
 * `Redelivery` over RabbitMQ: each event is published as the relay first published it
 * (same properties and body, `user_id` the operator's broker user), with confirms and
 * `mandatory`, to the handler's own exchange (`<prefix>.<handler>.dlx`) with the routing
 * key `redeliver`, which is bound to that handler's queue only. A publisher per call, on a
 * connection named `<prefix>-operator-publisher`.
 */
export const RedeliveryAmqp = Layer.effect(
  Redelivery,
  Effect.gen(function*() {
    const settings = yield* Settings
    const client = yield* AmqpClient
    const names = namesOf(settings.prefix)
    const user = brokerUserOf(settings.amqpUrl)
    return {
      send: (handler, envelopes) =>
        Effect.scoped(Effect.gen(function*() {
          const publisher = yield* makeOperatorPublisher(settings, handler)
          const exchange = names.handlerExchange(handler)
          return yield* publisher.publish(
            envelopes.map((e) => ({ ...toPublish(exchange, e, user), routingKey: HandlerRoutes.redeliver }))
          )
        })).pipe(Effect.provideService(AmqpClient, client))
    }
  })
).pipe(Layer.provide(AmqpClient.live))
