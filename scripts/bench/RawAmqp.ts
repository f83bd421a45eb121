/**
 * RawAmqp: the baselines written straight on amqplib, as plain async code, with none of
 * the kit's bookkeeping: streaming publisher confirms (a sliding window of unconfirmed
 * publishes), publish-and-wait one message at a time, and a consumer that acks each
 * delivery after an optional synchronous piece of work. Each returns when it is done;
 * timings are the caller's.
 */
import * as amqp from "amqplib"
import type { RawPublish } from "../../src/adapters/amqp/AmqpPublisher.js"
import { type Mark, mark } from "./RoundClock.js"

export interface RawSession {
  readonly connection: amqp.ChannelModel
  readonly channel: amqp.ConfirmChannel
  readonly close: () => Promise<void>
}

/** A connection and a confirm channel on it; returned publishes fail the publish that caused them. */
export const openConfirmSession = async (url: string): Promise<RawSession> => {
  const connection = await amqp.connect(url)
  connection.on("error", () => {})
  const channel = await connection.createConfirmChannel()
  channel.on("error", () => {})
  return {
    connection,
    channel,
    close: async () => {
      await channel.close().catch(() => undefined)
      await connection.close().catch(() => undefined)
    }
  }
}

const sendOne = (channel: amqp.ConfirmChannel, m: RawPublish, done: (err: unknown) => void) =>
  channel.publish(m.exchange, m.routingKey, m.content, { ...m.options, mandatory: true }, done)

/**
 * Streaming confirms: keeps `window` publishes unconfirmed at most, sending the next one
 * as each confirm arrives. Rejects on a nack or a return (nothing should be refused).
 */
export const publishStreaming = (session: RawSession, messages: ReadonlyArray<RawPublish>, window: number) =>
  new Promise<void>((resolve, reject) => {
    let next = 0
    let confirmed = 0
    let failed = false
    const onReturn = (message: amqp.Message) => {
      failed = true
      reject(new Error(`returned: ${String(message.properties.messageId)}`))
    }
    session.channel.on("return", onReturn)
    const finish = () => {
      session.channel.off("return", onReturn)
      resolve()
    }
    const pump = () => {
      while (!failed && next < messages.length && next - confirmed < window) {
        sendOne(session.channel, messages[next++]!, (err) => {
          if (failed) return
          if (err != null) {
            failed = true
            return reject(err)
          }
          if (++confirmed === messages.length) finish()
          else pump()
        })
      }
    }
    if (messages.length === 0) resolve()
    else pump()
  })

/** The floor: one publish at a time, each waiting for its confirm before the next is sent. */
export const publishEach = async (session: RawSession, messages: ReadonlyArray<RawPublish>) => {
  for (const m of messages) {
    await new Promise<void>((resolve, reject) =>
      sendOne(session.channel, m, (err) => (err == null ? resolve() : reject(err)))
    )
  }
}

/**
 * Consumes `queue` with `prefetch` unacked deliveries (per consumer), acking each one
 * after `work` ran on it, until `count` are acked. Resolves with the marks (wall time and
 * this process's CPU) when consumption started (basic.consume answered) and when the last
 * ack was sent, so that neither connecting nor closing is counted.
 */
export const consumeCount = async (
  url: string,
  queue: string,
  prefetch: number,
  count: number,
  work: (message: amqp.ConsumeMessage) => void = () => {}
): Promise<{ readonly started: Mark; readonly ended: Mark }> => {
  const connection = await amqp.connect(url)
  connection.on("error", () => {})
  try {
    const channel = await connection.createChannel()
    await channel.prefetch(prefetch, false)
    let acked = 0
    let started = mark()
    const ended = await new Promise<Mark>((resolve, reject) => {
      channel.consume(queue, (message) => {
        if (message === null) return reject(new Error(`consumer of ${queue} cancelled by the broker`))
        try {
          work(message)
        } catch (cause) {
          return reject(cause)
        }
        channel.ack(message)
        if (++acked === count) resolve(mark())
      }, { noAck: false }).then(() => {
        started = mark()
      }, reject)
    })
    await channel.close().catch(() => undefined)
    return { started, ended }
  } finally {
    await connection.close().catch(() => undefined)
  }
}
