/**
 * RascalClient: rascal (a config-driven wrapper over amqplib), used as its README
 * recommends: the default configuration (publications on confirm channels from its
 * channel pool, persistent and mandatory; subscriptions with manual ack), objects checked
 * rather than declared (the kit's topology is already there), a publication awaited by
 * its `success` event, and the broker's `busy` / `ready` events as back pressure.
 */
import type { ConsumeMessage } from "amqplib"
import rascal, { type BrokerAsPromised } from "rascal"
import type { RawPublish } from "../../src/adapters/amqp/AmqpPublisher.js"
import { type Mark, mark } from "./RoundClock.js"

export interface RascalTargets {
  readonly url: string
  readonly vhost: string
  readonly exchange: string
  readonly routingKey: string
  readonly queue: string
  readonly prefetch: number
}

export const PublicationName = "events"
export const SubscriptionName = "handler"

export const openRascal = (t: RascalTargets): Promise<BrokerAsPromised> =>
  rascal.BrokerAsPromised.create(rascal.withDefaultConfig({
    vhosts: {
      [t.vhost]: {
        connection: { url: t.url },
        exchanges: { [t.exchange]: { assert: false, check: true } },
        queues: { [t.queue]: { assert: false, check: true } },
        publications: { [PublicationName]: { exchange: t.exchange, routingKey: t.routingKey } },
        subscriptions: { [SubscriptionName]: { queue: t.queue, prefetch: t.prefetch } }
      }
    }
  })).then((broker) => {
    broker.on("error", () => {})
    return broker
  })

/**
 * Publishes every message through the publication, with `window` publications awaiting
 * their confirm at most, and pausing while rascal says its channel pool is busy.
 */
export const rascalPublish = (broker: BrokerAsPromised, messages: ReadonlyArray<RawPublish>, window: number) =>
  new Promise<void>((resolve, reject) => {
    let next = 0
    let confirmed = 0
    let busy = false
    let failed = false
    const fail = (error: unknown) => {
      if (failed) return
      failed = true
      reject(error)
    }
    broker.on("busy", () => {
      busy = true
    })
    broker.on("ready", () => {
      busy = false
      pump()
    })
    const pump = () => {
      while (!failed && !busy && next < messages.length && next - confirmed < window) {
        const m = messages[next++]!
        broker.publish(PublicationName, m.content, { options: m.options }).then((publication) => {
          publication
            .on("success", () => {
              if (++confirmed === messages.length) resolve()
              else pump()
            })
            .on("error", fail)
            .on("return", () => fail(new Error(`returned: ${m.options.messageId}`)))
        }, fail)
      }
    }
    if (messages.length === 0) resolve()
    else pump()
  })

/**
 * Subscribes, runs `work` on each message's parsed content and acks it, until `count` are
 * acked. Resolves with the marks (wall time and this process's CPU) when the subscription
 * started and when the last ack went out, so that neither subscribing nor cancelling is counted.
 */
export const rascalConsume = async (
  broker: BrokerAsPromised,
  count: number,
  work: (message: ConsumeMessage, content: unknown) => void
): Promise<{ readonly started: Mark; readonly ended: Mark }> => {
  const subscription = await broker.subscribe(SubscriptionName)
  const started = mark()
  let acked = 0
  try {
    const ended = await new Promise<Mark>((resolve, reject) => {
      subscription.on("error", reject)
      subscription.on("invalid_content", (error: unknown) => reject(error))
      subscription.on("message", (message: ConsumeMessage, content: unknown, ackOrNack: () => void) => {
        try {
          work(message, content)
        } catch (cause) {
          return reject(cause)
        }
        ackOrNack()
        if (++acked === count) resolve(mark())
      })
    })
    return { started, ended }
  } finally {
    await subscription.cancel().catch(() => undefined)
  }
}
