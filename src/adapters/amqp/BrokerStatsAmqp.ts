import { Clock, Duration, Effect, Layer, Option } from "effect"
import { Settings } from "../../config.js"
import { describeCause } from "../../domain/errors.js"
import type { HandlerName } from "../../domain/HandlerName.js"
import { BrokerStats, type QueueFigures } from "../../ports/BrokerStats.js"
import { AmqpClient } from "./AmqpClient.js"
import { brokerAccessOf, closeQuietly, openConnection, scrubCredentials } from "./AmqpConnection.js"
import { ManagementApi, ManagementSampleMs, type ManagementUnanswered } from "./ManagementApi.js"
import { namesOf } from "./Topology.js"

const unavailable = (queue: string, asOfMs: number, detail: string): QueueFigures => ({
  queue,
  exists: null,
  ready: null,
  unacked: null,
  consumers: null,
  source: "unavailable",
  asOfMs,
  staleUpToMs: 0,
  detail
})

/**
 * `BrokerStats` over RabbitMQ: each queue's figures from the management HTTP API
 * (`GET /api/queues/{vhost}/{name}`, RabbitMQ "Management Plugin", "HTTP API"), sampled
 * by the broker every `ManagementSampleMs`; a figure the broker has not sampled yet (a
 * queue just declared) is `null`. When the API does not answer within
 * `ManagementTimeout`, or refuses the user (it needs the `management` or `monitoring`
 * tag), falls back to a passive `queue.declare` per queue (ready and consumers; unacked
 * `null`), and says so in `source` and `detail`. A queue that does not exist has
 * `exists: false`. No figure or detail carries a password.
 */
export const BrokerStatsAmqp = Layer.effect(
  BrokerStats,
  Effect.gen(function*() {
    const settings = yield* Settings
    const client = yield* AmqpClient
    const management = yield* ManagementApi
    const names = namesOf(settings.prefix)
    const scrub = (text: string) => scrubCredentials(text, settings.amqpUrl)

    const fromManagement = (queue: string, asOfMs: number): Effect.Effect<QueueFigures, ManagementUnanswered> =>
      Effect.map(management.queue(queue), (found): QueueFigures =>
        Option.match(found, {
          onNone: () => ({
            ...unavailable(queue, asOfMs, "the queue does not exist"),
            exists: false,
            source: "management"
          }),
          onSome: (info) => ({
            queue,
            exists: true,
            ready: info.messages_ready ?? null,
            unacked: info.messages_unacknowledged ?? null,
            consumers: info.consumers ?? null,
            source: "management",
            asOfMs,
            staleUpToMs: ManagementSampleMs,
            ...(info.messages_ready === undefined ? { detail: "the broker has not sampled this queue yet" } : {})
          })
        }))

    // One channel per queue: a passive declare of a missing queue closes its channel (404).
    const fromDeclare = (queues: ReadonlyArray<string>, asOfMs: number, why: string) =>
      Effect.scoped(Effect.gen(function*() {
        const connection = yield* openConnection(brokerAccessOf(settings), `${settings.prefix}-status`)
        return yield* Effect.forEach(queues, (queue) =>
          Effect.acquireUseRelease(
            Effect.tryPromise(() => connection.createChannel()),
            (channel) => {
              channel.on("error", () => {})
              return Effect.tryPromise(() => channel.checkQueue(queue)).pipe(
                Effect.map((ok): QueueFigures => ({
                  queue,
                  exists: true,
                  ready: ok.messageCount,
                  unacked: null,
                  consumers: ok.consumerCount,
                  source: "queue.declare",
                  asOfMs,
                  staleUpToMs: 0,
                  detail: `management API: ${why}; unacked is not known`
                })),
                Effect.catchAll((error) =>
                  Effect.succeed(
                    /\b404\b|NOT_FOUND/.test(describeCause(error))
                      ? {
                        ...unavailable(queue, asOfMs, "the queue does not exist"),
                        exists: false,
                        source: "queue.declare" as const
                      }
                      : unavailable(queue, asOfMs, scrub(describeCause(error)))
                  )
                )
              )
            },
            (channel) => closeQuietly(() => channel.close())
          ))
      })).pipe(
        Effect.provideService(AmqpClient, client),
        Effect.catchAll((error) =>
          Effect.succeed(
            queues.map((q) => unavailable(q, asOfMs, `management API: ${why}; AMQP: ${scrub(error.message)}`))
          )
        )
      )

    const figuresOf = (queues: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const asOfMs = yield* Clock.currentTimeMillis
        const answered = yield* Effect.either(
          Effect.forEach(queues, (q) => fromManagement(q, asOfMs), { concurrency: "unbounded" })
        )
        return answered._tag === "Right" ? answered.right : yield* fromDeclare(queues, asOfMs, answered.left.detail)
      })

    return {
      handlerQueues: (handler: HandlerName) =>
        Effect.gen(function*() {
          const delays = settings.retry[handler].delays
          const all = yield* figuresOf([
            names.queue(handler),
            ...delays.map((d) => names.retryQueue(handler, d)),
            names.deadQueue(handler)
          ])
          return {
            queue: all[0]!,
            retry: delays.map((delay, i) => ({ delayMs: Duration.toMillis(delay), figures: all[i + 1]! })),
            dead: all[all.length - 1]!
          }
        })
    }
  })
).pipe(Layer.provide(Layer.merge(AmqpClient.live, ManagementApi.live)))
