import { Clock, Duration, Effect, Layer, Option } from "effect"
import { Settings } from "../../config.js"
import { describeCause } from "../../domain/errors.js"
import type { HandlerName } from "../../domain/HandlerName.js"
import { BrokerStats, type DeadQueueHead, type QueueFigures } from "../../ports/BrokerStats.js"
import { AmqpClient } from "./AmqpClient.js"
import { brokerAccessOf, brokerUrlsOf, nodeOf, scrubCredentials } from "./AmqpConnection.js"
import {
  managementAccessOf,
  ManagementApi,
  ManagementSampleMs,
  ManagementTimeout,
  type ManagementUnanswered,
  type QueueInfo
} from "./ManagementApi.js"
import { makeSharedConnection } from "./SharedConnection.js"
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
 * Why the head of a quorum dead queue is not read: `basic.get` then requeue counts as a
 * delivery there, and past the queue's delivery limit (20 by default since RabbitMQ 4.0,
 * RabbitMQ "Quorum Queues", "Poison Message Handling") the broker drops the message.
 * Watching the view must not change what it watches.
 */
export const QuorumDeadNotRead =
  "the oldest dead letter is not read on a quorum queue (each read counts toward its delivery limit); `dead list` shows it"

/** How long the status connection stays open after its last read. */
const StatusConnectionIdle = Duration.seconds(30)

/** How long one AMQP read of the view may take, a channel opened and closed included: as long as a management API request. */
const StatusReadTimeout = ManagementTimeout

/**
 * `BrokerStats` over RabbitMQ: each queue's figures from the management HTTP API
 * (`GET /api/queues/{vhost}/{name}`, RabbitMQ "Management Plugin", "HTTP API"), sampled
 * by the broker every `ManagementSampleMs`; a figure the broker has not sampled yet (a
 * queue just declared) is `null`. When the API does not answer within
 * `ManagementTimeout`, or refuses the user (it needs the `management` or `monitoring`
 * tag), falls back to a passive `queue.declare` per queue (ready and consumers; unacked
 * `null`), and says so in `source` and `detail`. A queue that does not exist has
 * `exists: false`. No figure or detail carries a password.
 *
 * The dead queue's head: its `head_message_timestamp` from the management API, which
 * moves no message; without the API, one `basic.get` and requeue of the head on a
 * classic queue (never on a quorum one: `QuorumDeadNotRead`), and only when the queue's
 * depth changed since the last read; the same when the API's sample has no timestamp. Every AMQP read of the process goes over one shared
 * connection, `<prefix>-status` (`makeSharedConnection`), however many views ask at once.
 * The dead queue's depth is counted at the time of asking (`countedNow`).
 */
export const BrokerStatsAmqp = Layer.scoped(
  BrokerStats,
  Effect.gen(function*() {
    const settings = yield* Settings
    const management = yield* ManagementApi
    const names = namesOf(settings.prefix)
    const scrub = (text: string) => scrubCredentials(text, settings.amqpUrl)
    const shared = yield* makeSharedConnection(
      brokerAccessOf(settings),
      `${settings.prefix}-status`,
      StatusConnectionIdle,
      StatusReadTimeout
    )
    // What the last read of each dead queue's head found, and at which depth: read again only when it changed.
    const heads = new Map<string, { readonly depth: number; readonly head: DeadQueueHead }>()

    const fromManagement = (
      queue: string,
      asOfMs: number
    ): Effect.Effect<readonly [QueueFigures, typeof QueueInfo.Type | undefined], ManagementUnanswered> =>
      Effect.map(management.queue(queue), (found) =>
        Option.match(found, {
          onNone: () =>
            [
              { ...unavailable(queue, asOfMs, "the queue does not exist"), exists: false, source: "management" },
              undefined
            ] as const,
          onSome: (info) =>
            [{
              queue,
              exists: true,
              ready: info.messages_ready ?? null,
              unacked: info.messages_unacknowledged ?? null,
              messages: info.messages ?? null,
              consumers: info.consumers ?? null,
              source: "management",
              asOfMs,
              staleUpToMs: ManagementSampleMs,
              ...(info.messages_ready === undefined ? { detail: "the broker has not sampled this queue yet" } : {})
            }, info] as const
        }))

    const declared = (queue: string, asOfMs: number, why: string) =>
      shared.withChannel((channel) =>
        Effect.tryPromise(() => channel.checkQueue(queue)).pipe(
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
      )

    /**
     * Passive declares of `queues`, one after the other; once one finds the broker silent
     * or gone, the others of the round are not tried (each would wait its own timeout).
     */
    const fromDeclare = (queues: ReadonlyArray<string>, asOfMs: number, why: string) => {
      let silent: string | undefined
      return Effect.forEach(queues, (queue) =>
        silent !== undefined
          ? Effect.succeed(unavailable(queue, asOfMs, `management API: ${why}; AMQP: ${silent}`))
          : declared(queue, asOfMs, why).pipe(
            Effect.catchAll((error) =>
              Effect.sync(() => {
                silent = scrub(error.message)
                return unavailable(queue, asOfMs, `management API: ${why}; AMQP: ${silent}`)
              })
            )
          ))
    }

    /** The head's timestamp by `basic.get` and requeue, on the shared connection (see the layer's docstring). */
    const peekHead = (queue: string, depth: number): Effect.Effect<DeadQueueHead> => {
      const known = heads.get(queue)
      if (known !== undefined && known.depth === depth) return Effect.succeed(known.head)
      return shared.withChannel((channel) =>
        Effect.tryPromise(async () => {
          const message = await channel.get(queue, { noAck: false })
          if (message === false) return { publishedAtMs: null }
          channel.nack(message, false, true)
          const seconds = message.properties.timestamp
          return typeof seconds === "number"
            ? { publishedAtMs: seconds * 1000 }
            : { publishedAtMs: null, detail: "the oldest dead letter has no timestamp property" }
        })
      ).pipe(
        Effect.tap((head) => Effect.sync(() => heads.set(queue, { depth, head }))),
        Effect.catchAll((error) =>
          Effect.succeed({ publishedAtMs: null, detail: scrub(describeCause(error)) } satisfies DeadQueueHead)
        )
      )
    }

    const deadHeadOf = (
      dead: QueueFigures,
      info: typeof QueueInfo.Type | undefined
    ): Effect.Effect<DeadQueueHead> => {
      if (dead.ready === null || dead.ready === 0) return Effect.succeed({ publishedAtMs: null })
      if (info?.head_message_timestamp !== undefined && info.head_message_timestamp !== null) {
        return Effect.succeed({ publishedAtMs: info.head_message_timestamp * 1000 })
      }
      if (settings.queueType === "quorum") return Effect.succeed({ publishedAtMs: null, detail: QuorumDeadNotRead })
      // No timestamp in the API's sample: the head has none, or the sample is older than the
      // letters (5 s); the head itself tells, read once per depth.
      return peekHead(dead.queue, dead.ready)
    }

    /**
     * The dead queue counted now, by a passive declare on the shared connection, over the
     * management API's sample (up to 5 s old): right after a replay or a purge, the view
     * shows what that command left.
     */
    const countedNow = (dead: QueueFigures): Effect.Effect<QueueFigures> =>
      dead.source !== "management" || dead.exists !== true
        ? Effect.succeed(dead)
        : shared.withChannel((channel) => Effect.tryPromise(() => channel.checkQueue(dead.queue))).pipe(
          Effect.map((ok): QueueFigures => ({
            ...dead,
            ready: ok.messageCount,
            consumers: ok.consumerCount,
            messages: ok.messageCount + (dead.unacked ?? 0)
          })),
          Effect.orElseSucceed(() => dead)
        )

    const figuresOf = (queues: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const asOfMs = yield* Clock.currentTimeMillis
        const answered = yield* Effect.either(
          Effect.forEach(queues, (q) => fromManagement(q, asOfMs), { concurrency: "unbounded" })
        )
        return answered._tag === "Right"
          ? answered.right
          : (yield* fromDeclare(queues, asOfMs, answered.left.detail)).map((f) => [f, undefined] as const)
      })

    const firstUrl = brokerUrlsOf(settings.amqpUrl)[0]!
    return {
      target: { broker: nodeOf(firstUrl), vhost: managementAccessOf(settings).vhost },
      handlerQueues: (handler: HandlerName) =>
        Effect.gen(function*() {
          const delays = settings.retry[handler].delays
          const all = yield* figuresOf([
            names.queue(handler),
            ...delays.map((d) => names.retryQueue(handler, d)),
            names.deadQueue(handler)
          ])
          const [sampled, deadInfo] = all[all.length - 1]!
          const dead = yield* countedNow(sampled)
          return {
            queue: all[0]![0],
            retry: delays.map((delay, i) => ({ delayMs: Duration.toMillis(delay), figures: all[i + 1]![0] })),
            dead,
            deadHead: yield* deadHeadOf(dead, deadInfo)
          }
        })
    }
  })
).pipe(Layer.provide(Layer.merge(AmqpClient.live, ManagementApi.live)))
