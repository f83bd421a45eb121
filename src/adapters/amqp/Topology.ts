import { Data, Duration, Effect } from "effect"
import type { RetryPolicy } from "../../app/failures.js"
import { type HandlerName, HandlerNames } from "../../domain/HandlerName.js"
import { MaterialPublishedV1 } from "../../domain/MaterialPublished.js"
import type { AmqpChannel, AmqpConnection } from "./AmqpClient.js"
import { BrokerRefused, BrokerUnavailable, closeQuietly } from "./AmqpConnection.js"

export interface ExchangeSpec {
  readonly name: string
  readonly type: "topic" | "direct" | "fanout"
  readonly durable: true
  /** Exchange arguments (`alternate-exchange`); they must match what the broker has, or it answers 406. */
  readonly arguments?: Readonly<Record<string, string>>
}

export interface QueueSpec {
  readonly name: string
  readonly durable: true
  /** Queue arguments (`x-queue-type`, …); they must match what the broker has, or it answers 406. */
  readonly arguments: Readonly<Record<string, string | number>>
}

export interface BindingSpec {
  readonly queue: string
  readonly exchange: string
  readonly routingKey: string
}

/** A binding of one exchange to another (RabbitMQ "Exchange to Exchange Bindings"): what `source` routes with `routingKey` goes on to `destination`. */
export interface ExchangeBindingSpec {
  readonly source: string
  readonly destination: string
  readonly routingKey: string
}

/** The whole broker topology as one value: declaring, printing and tests all read it. */
export interface Topology {
  readonly exchanges: ReadonlyArray<ExchangeSpec>
  readonly queues: ReadonlyArray<QueueSpec>
  readonly bindings: ReadonlyArray<BindingSpec>
  readonly exchangeBindings: ReadonlyArray<ExchangeBindingSpec>
}

/** A retry tier's name in queue names and routing keys: `1s`, `10s`, `60s`, or `1500ms`. */
export const tierName = (delay: Duration.Duration): string => {
  const ms = Math.round(Duration.toMillis(delay))
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`
}

/** Routing keys on a handler's own exchange (`<prefix>.<handler>.dlx`). */
export const HandlerRoutes = {
  /** To the handler's queue: a retry whose delay is over, a replay, a redelivery after reconciliation. */
  redeliver: "redeliver",
  /** To the handler's dead-letter queue. */
  dead: "dead",
  /** To the retry queue of the tier with `delay`. */
  retry: (delay: Duration.Duration) => `retry.${tierName(delay)}`
} as const

/** The names every role derives from `DOSTAVKA_PREFIX`. */
export const namesOf = (prefix: string) => ({
  exchange: `${prefix}.events`,
  queue: (handler: HandlerName) => `${prefix}.${handler}`,
  deadQueue: (handler: HandlerName) => `${prefix}.${handler}.dead`,
  handlerExchange: (handler: HandlerName) => `${prefix}.${handler}.dlx`,
  redeliveryExchange: (handler: HandlerName) => `${prefix}.${handler}.redeliver`,
  unroutableExchange: (handler: HandlerName) => `${prefix}.${handler}.unroutable`,
  retryQueue: (handler: HandlerName, delay: Duration.Duration) => `${prefix}.${handler}.retry.${tierName(delay)}`
})

/** What the topology depends on: the names' prefix, the queue type, and each handler's retry tiers. */
export interface TopologySettings {
  readonly prefix: string
  readonly queueType: "classic" | "quorum"
  readonly retry: Readonly<Record<HandlerName, RetryPolicy>>
}

/**
 * The topology for `settings`:
 * - `<prefix>.events`, a durable topic exchange the relay publishes to;
 * - per handler `H`:
 *   - `<prefix>.H`, its queue, bound to the events exchange for `material.published.v1`;
 *   - `<prefix>.H.dlx`, a durable direct exchange of its own, which is both the queue's
 *     dead-letter exchange and where the consumer publishes retries and dead copies. It
 *     routes `dead` to `<prefix>.H.dead`, `retry.<tier>` to `<prefix>.H.retry.<tier>`, and
 *     `redeliver` back to `<prefix>.H` only, so no other handler ever sees a retry;
 *   - one retry queue per delay, with that delay as `x-message-ttl`, dead-lettering with
 *     the routing key `redeliver` into the handler's exchange: a message waits there the
 *     tier's delay, then returns to `<prefix>.H` (RabbitMQ "Dead Letter Exchanges",
 *     "Time-To-Live and Expiration"). One TTL per queue keeps expiry in arrival order;
 *   - a second way back that no single lost binding can cut: `<prefix>.H.dlx` is bound
 *     (exchange to exchange, `redeliver`) to `<prefix>.H.redeliver`, a direct exchange
 *     bound to `<prefix>.H` with `redeliver` too, whose alternate exchange is the fanout
 *     `<prefix>.H.unroutable`, bound to `<prefix>.H.dead`. A message reaching the queue
 *     both ways is enqueued once. A retry that expires while both bindings to the queue
 *     are gone, or the queue itself, lands on the dead queue, which an operator replays
 *     from, instead of being dropped in silence (broker dead-lettering confirms nothing,
 *     and a classic queue's expiry into no route is not even logged). Checked on RabbitMQ
 *     3.10, classic and quorum: the alternate exchange applies to dead-lettered messages;
 *   - `<prefix>.H.dead`, where the consumer puts what it can never process or gave up
 *     on, and where the broker dead-letters what the queue itself rejects, drops from its
 *     head on overflow, or delivers past a quorum queue's delivery limit.
 *
 * Queues are `classic` or `quorum` (RabbitMQ "Quorum Queues"). Quorum handler and retry
 * queues dead-letter with `x-dead-letter-strategy: at-least-once`, which needs
 * `x-overflow: reject-publish`; a quorum handler queue's `x-delivery-limit` is its
 * handler's attempt limit plus 20, so that only a consumer that dies again and again on a
 * message (never the kit's own retries, which ack) reaches it. Classic queues dead-letter
 * at most once. No queue is transient or exclusive: RabbitMQ 4 deprecates transient
 * non-exclusive queues.
 */
export const topologyOf = (settings: TopologySettings, part: TopologyPart = "all"): Topology => {
  const { prefix, queueType } = settings
  const names = namesOf(prefix)
  const atLeastOnce = queueType === "quorum"
    ? { "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish" }
    : {}
  const perHandler = (handler: HandlerName) => {
    const exchange = names.handlerExchange(handler)
    const policy = settings.retry[handler]
    const retryQueues: Array<QueueSpec> = policy.delays.map((delay) => ({
      name: names.retryQueue(handler, delay),
      durable: true,
      arguments: {
        "x-queue-type": queueType,
        "x-message-ttl": Math.round(Duration.toMillis(delay)),
        "x-dead-letter-exchange": exchange,
        "x-dead-letter-routing-key": HandlerRoutes.redeliver,
        ...atLeastOnce
      }
    }))
    const redelivery = names.redeliveryExchange(handler)
    const unroutable = names.unroutableExchange(handler)
    return {
      exchanges: [
        { name: exchange, type: "direct", durable: true },
        { name: unroutable, type: "fanout", durable: true },
        { name: redelivery, type: "direct", durable: true, arguments: { "alternate-exchange": unroutable } }
      ] satisfies Array<ExchangeSpec>,
      queues: [
        {
          name: names.queue(handler),
          durable: true,
          arguments: {
            "x-queue-type": queueType,
            "x-dead-letter-exchange": exchange,
            "x-dead-letter-routing-key": HandlerRoutes.dead,
            ...atLeastOnce,
            ...(queueType === "quorum" ? { "x-delivery-limit": policy.maxAttempts + 20 } : {})
          }
        } satisfies QueueSpec,
        ...retryQueues,
        { name: names.deadQueue(handler), durable: true, arguments: { "x-queue-type": queueType } } satisfies QueueSpec
      ],
      bindings: [
        { queue: names.queue(handler), exchange: names.exchange, routingKey: MaterialPublishedV1.type },
        { queue: names.queue(handler), exchange, routingKey: HandlerRoutes.redeliver },
        ...policy.delays.map((delay) => ({
          queue: names.retryQueue(handler, delay),
          exchange,
          routingKey: HandlerRoutes.retry(delay)
        })),
        { queue: names.deadQueue(handler), exchange, routingKey: HandlerRoutes.dead },
        { queue: names.queue(handler), exchange: redelivery, routingKey: HandlerRoutes.redeliver },
        { queue: names.deadQueue(handler), exchange: unroutable, routingKey: "" }
      ] satisfies Array<BindingSpec>,
      exchangeBindings: [
        { source: exchange, destination: redelivery, routingKey: HandlerRoutes.redeliver }
      ] satisfies Array<ExchangeBindingSpec>
    }
  }
  const handlers = (part === "all" ? HandlerNames : part === "relay" ? [] : [part]).map(perHandler)
  return {
    exchanges: [{ name: names.exchange, type: "topic", durable: true }, ...handlers.flatMap((h) => h.exchanges)],
    queues: handlers.flatMap((h) => h.queues),
    bindings: handlers.flatMap((h) => h.bindings),
    exchangeBindings: handlers.flatMap((h) => h.exchangeBindings)
  }
}

/**
 * The part of the topology a role declares, and so needs broker permissions for: the
 * relay only the events exchange; a receiver the events exchange and its own objects;
 * `all` everything (the demo, tests, the status view).
 */
export type TopologyPart = "all" | "relay" | HandlerName

/**
 * The broker already has `object` with other properties or arguments than the topology
 * declares (AMQP 406 PRECONDITION_FAILED, "inequivalent arg"). Not retried: an operator
 * must delete the object or change the configuration.
 */
export class TopologyMismatch extends Data.TaggedError("TopologyMismatch")<{
  readonly object: string
  readonly detail: string
}> {
  override get message() {
    return `broker topology mismatch on ${this.object}: ${this.detail}`
  }
}

const replyCode = (cause: unknown): number | undefined =>
  typeof cause === "object" && cause !== null && typeof (cause as { code?: unknown }).code === "number"
    ? (cause as { code: number }).code
    : undefined

const describe = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

const declareStep = (object: string, declare: () => Promise<unknown>) =>
  Effect.tryPromise({
    try: declare,
    catch: (cause) =>
      replyCode(cause) === 406
        ? new TopologyMismatch({ object, detail: describe(cause) })
        : replyCode(cause) === 403
        ? new BrokerRefused({ reason: "permissions", detail: `declaring ${object}: ${describe(cause)}` })
        : new BrokerUnavailable({ detail: `declaring ${object}: ${describe(cause)}` })
  })

/**
 * Declares `topology` idempotently (exchange.declare, queue.declare, queue.bind and
 * exchange.bind with the same arguments each time) on a channel of its own, closed afterwards: a 406 closes
 * the channel it happens on. Fails with `TopologyMismatch` naming the first object the
 * broker disagrees on, or `BrokerUnavailable`.
 */
export const declareTopology = (connection: AmqpConnection, topology: Topology) =>
  Effect.acquireUseRelease(
    Effect.tryPromise({
      try: () => connection.createChannel(),
      catch: (cause) => new BrokerUnavailable({ detail: `opening a channel: ${describe(cause)}` })
    }),
    (channel: AmqpChannel) =>
      Effect.gen(function*() {
        channel.on("error", () => {})
        for (const exchange of topology.exchanges) {
          yield* declareStep(
            `exchange '${exchange.name}'`,
            () =>
              channel.assertExchange(exchange.name, exchange.type, {
                durable: exchange.durable,
                ...(exchange.arguments === undefined ? {} : { arguments: exchange.arguments })
              })
          )
        }
        for (const queue of topology.queues) {
          yield* declareStep(
            `queue '${queue.name}'`,
            () => channel.assertQueue(queue.name, { durable: queue.durable, arguments: queue.arguments })
          )
        }
        for (const binding of topology.bindings) {
          yield* declareStep(
            `binding '${binding.exchange}' -> '${binding.queue}' (${binding.routingKey})`,
            () => channel.bindQueue(binding.queue, binding.exchange, binding.routingKey)
          )
        }
        for (const binding of topology.exchangeBindings) {
          yield* declareStep(
            `binding '${binding.source}' -> exchange '${binding.destination}' (${binding.routingKey})`,
            () => channel.bindExchange(binding.destination, binding.source, binding.routingKey)
          )
        }
      }),
    (channel) => closeQuietly(() => channel.close())
  )

/**
 * What a role declares: the whole topology when its broker user may (the demo's `guest`,
 * an admin), else only its own part (`topologyOf(settings, part)`), which a
 * least-privilege user may (see `scripts/broker-users.sh`). Declaring the whole lets a
 * relay started before any receiver publish to queues that already exist.
 */
export interface TopologyPlan {
  readonly full: Topology
  readonly own: Topology
}

export const topologyPlanOf = (settings: TopologySettings, part: TopologyPart): TopologyPlan => ({
  full: topologyOf(settings, "all"),
  own: topologyOf(settings, part)
})

/**
 * Declares `plan.full`; if the broker refuses a declaration for lack of permissions
 * (403), declares `plan.own` instead. Fails with `TopologyMismatch`, `BrokerUnavailable`,
 * or `BrokerRefused` (`permissions`) when even its own part is refused.
 */
export const declarePlan = (connection: AmqpConnection, plan: TopologyPlan) =>
  declareTopology(connection, plan.full).pipe(
    Effect.catchIf(
      (error): error is BrokerRefused => error._tag === "BrokerRefused" && error.reason === "permissions",
      (refused) =>
        Effect.logDebug("declaring only the role's own part of the topology").pipe(
          Effect.annotateLogs({ refused: refused.detail }),
          Effect.zipRight(declareTopology(connection, plan.own))
        )
    )
  )
