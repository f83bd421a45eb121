import { Data, Effect } from "effect"
import type { Channel, ChannelModel } from "amqplib"
import { MaterialPublishedV1 } from "../../domain/MaterialPublished.js"
import { BrokerUnavailable, closeQuietly } from "./AmqpConnection.js"

/** The handlers this kit runs, each with its own queues. */
export const HandlerNames = ["catalog", "audit"] as const
export type HandlerName = (typeof HandlerNames)[number]

export interface ExchangeSpec {
  readonly name: string
  readonly type: "topic" | "direct"
  readonly durable: true
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

/** The whole broker topology as one value: declaring, printing and tests all read it. */
export interface Topology {
  /** Where the relay publishes events. */
  readonly exchange: ExchangeSpec
  /** Where the broker itself dead-letters a handler queue's messages (see `topologyOf`). */
  readonly deadLetterExchange: ExchangeSpec
  readonly queues: ReadonlyArray<QueueSpec>
  readonly bindings: ReadonlyArray<BindingSpec>
}

/** The names every role derives from `DOSTAVKA_PREFIX`. */
export const namesOf = (prefix: string) => ({
  exchange: `${prefix}.events`,
  deadLetterExchange: `${prefix}.dead-letter`,
  queue: (handler: string) => `${prefix}.${handler}`,
  deadQueue: (handler: string) => `${prefix}.${handler}.dead`
})

/**
 * The topology for `prefix`:
 * - `<prefix>.events`, a durable topic exchange the relay publishes to;
 * - per handler, a durable queue `<prefix>.<handler>` bound to it for
 *   `material.published.v1`, and a durable dead-letter queue `<prefix>.<handler>.dead`;
 * - `<prefix>.dead-letter`, a durable direct exchange routing `<prefix>.<handler>.dead`
 *   to that queue. Each handler queue names it as its dead-letter exchange, with its own
 *   dead queue as routing key, so what the broker itself dead-letters (a message the
 *   consumer rejects, or one past a quorum queue's delivery limit, 20 by default on
 *   RabbitMQ 4) lands on that handler's dead queue instead of being dropped.
 *
 * Queues are `classic` or `quorum` (RabbitMQ "Quorum Queues"). Quorum handler queues
 * dead-letter with `x-dead-letter-strategy: at-least-once`, which needs
 * `x-overflow: reject-publish` (RabbitMQ "Dead Letter Exchanges", at-least-once); classic
 * queues dead-letter at most once. No queue is transient or exclusive: RabbitMQ 4
 * deprecates transient non-exclusive queues.
 */
export const topologyOf = (prefix: string, queueType: "classic" | "quorum"): Topology => {
  const names = namesOf(prefix)
  const deadQueue = (name: string): QueueSpec => ({ name, durable: true, arguments: { "x-queue-type": queueType } })
  const handlerQueue = (handler: string): QueueSpec => ({
    name: names.queue(handler),
    durable: true,
    arguments: {
      "x-queue-type": queueType,
      "x-dead-letter-exchange": names.deadLetterExchange,
      "x-dead-letter-routing-key": names.deadQueue(handler),
      ...(queueType === "quorum" ? { "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish" } : {})
    }
  })
  return {
    exchange: { name: names.exchange, type: "topic", durable: true },
    deadLetterExchange: { name: names.deadLetterExchange, type: "direct", durable: true },
    queues: HandlerNames.flatMap((h) => [handlerQueue(h), deadQueue(names.deadQueue(h))]),
    bindings: HandlerNames.flatMap((h) => [
      { queue: names.queue(h), exchange: names.exchange, routingKey: MaterialPublishedV1.type },
      { queue: names.deadQueue(h), exchange: names.deadLetterExchange, routingKey: names.deadQueue(h) }
    ])
  }
}

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
        : new BrokerUnavailable({ detail: `declaring ${object}: ${describe(cause)}` })
  })

/**
 * Declares `topology` idempotently (exchange.declare, queue.declare, queue.bind with
 * the same arguments each time) on a channel of its own, closed afterwards: a 406 closes
 * the channel it happens on. Fails with `TopologyMismatch` naming the first object the
 * broker disagrees on, or `BrokerUnavailable`.
 */
export const declareTopology = (connection: ChannelModel, topology: Topology) =>
  Effect.acquireUseRelease(
    Effect.tryPromise({
      try: () => connection.createChannel(),
      catch: (cause) => new BrokerUnavailable({ detail: `opening a channel: ${describe(cause)}` })
    }),
    (channel: Channel) =>
      Effect.gen(function*() {
        channel.on("error", () => {})
        for (const exchange of [topology.exchange, topology.deadLetterExchange]) {
          yield* declareStep(`exchange '${exchange.name}'`, () =>
            channel.assertExchange(exchange.name, exchange.type, { durable: exchange.durable }))
        }
        for (const queue of topology.queues) {
          yield* declareStep(`queue '${queue.name}'`, () =>
            channel.assertQueue(queue.name, { durable: queue.durable, arguments: queue.arguments }))
        }
        for (const binding of topology.bindings) {
          yield* declareStep(
            `binding '${binding.exchange}' -> '${binding.queue}' (${binding.routingKey})`,
            () => channel.bindQueue(binding.queue, binding.exchange, binding.routingKey)
          )
        }
      }),
    (channel) => closeQuietly(() => channel.close())
  )
