import { describe, expect, it } from "@effect/vitest"
import * as amqp from "amqplib"
import { Effect } from "effect"
import { hasPrivateBrokerSupport, privateBroker, privateBrokerUnsupportedReason } from "../support/privateBroker.js"

if (!hasPrivateBrokerSupport) console.log(`privateBroker.it.test.ts skipped: ${privateBrokerUnsupportedReason}`)

/** An amqplib connection closed with the scope; a broker-side close is only recorded, never thrown. */
const connect = (url: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const connection = await amqp.connect(url)
      connection.on("error", () => undefined)
      return connection
    }),
    (c) => Effect.promise(() => c.close().catch(() => undefined))
  )

/** The frame_max the handshake settled on; amqplib keeps it on the connection but does not type it. */
const negotiatedFrameMax = (c: amqp.ChannelModel) => (c.connection as unknown as { readonly frameMax: number }).frameMax

/** Publishes `body` to `queue` with a confirm, then takes one message from it (acked). */
const roundTrip = (c: amqp.ChannelModel, queue: string, body: Buffer) =>
  Effect.promise(async () => {
    const channel = await c.createConfirmChannel()
    channel.on("error", () => undefined)
    await channel.assertQueue(queue, { durable: true })
    channel.sendToQueue(queue, body, { persistent: true })
    await channel.waitForConfirms()
    const message = await channel.get(queue, { noAck: true })
    await channel.close()
    return message === false ? undefined : message.content
  })

describe.skipIf(!hasPrivateBrokerSupport)("a private RabbitMQ node", () => {
  it.scopedLive(
    "takes its own config, carries a message, and serves new connections after stop_app / start_app",
    () =>
      Effect.gen(function*() {
        const broker = yield* privateBroker({ conf: ["frame_max = 4096"] })
        const queue = "private-broker-check"
        // Bigger than one 4096-byte frame, so the body has to travel in several.
        const body = Buffer.alloc(10_000, "m")

        const first = yield* connect(broker.url)
        expect(negotiatedFrameMax(first)).toBe(4096)
        expect(yield* roundTrip(first, queue, body)).toEqual(body)

        // stop_app closes every client connection (320 CONNECTION_FORCED), as a broker restart would.
        const closed = new Promise<void>((resolve) => first.once("close", () => resolve()))
        yield* broker.ctl("stop_app")
        yield* Effect.promise(() => closed).pipe(Effect.timeout("10 seconds"))
        yield* broker.ctl("start_app")
        yield* broker.ctl("await_startup")

        const second = yield* connect(broker.url)
        expect(negotiatedFrameMax(second)).toBe(4096)
        expect(yield* roundTrip(second, queue, Buffer.from("again"))).toEqual(Buffer.from("again"))
      }),
    120_000
  )
})
