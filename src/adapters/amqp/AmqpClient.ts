import * as amqp from "amqplib"
import { Context, Layer } from "effect"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"

/**
 * The part of an amqplib channel the kit uses. amqplib's own channels have this shape;
 * so does the scripted fake of the unit tests (`test/support/FakeAmqp.ts`).
 */
export type AmqpChannel = Pick<
  amqp.Channel,
  | "assertExchange"
  | "assertQueue"
  | "bindQueue"
  | "bindExchange"
  | "checkQueue"
  | "checkExchange"
  | "prefetch"
  | "consume"
  | "cancel"
  | "ack"
  | "nack"
  | "nackAll"
  | "get"
  | "close"
  | "on"
>

/** A confirm channel (RabbitMQ "Publisher Confirms"): `publish` takes a callback, called with `null` on basic.ack and an error on basic.nack or close. */
export type AmqpConfirmChannel = AmqpChannel & Pick<amqp.ConfirmChannel, "publish" | "waitForConfirms">

/** The part of an amqplib connection the kit uses. It emits `close`, `error`, `blocked` (with a reason) and `unblocked`. */
export interface AmqpConnection {
  readonly createChannel: () => Promise<AmqpChannel>
  readonly createConfirmChannel: () => Promise<AmqpConfirmChannel>
  readonly close: () => Promise<void>
  // amqplib's listeners take different arguments per event (an Error, a reason string, none).
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly on: (event: "close" | "error" | "blocked" | "unblocked", listener: (...args: Array<any>) => void) => unknown
}

export interface AmqpConnectOptions {
  /** Shown as `connection_name` in the management UI and `rabbitmqctl list_connections`. */
  readonly name: string
  /** Gives up a connect whose socket stays idle this long before the AMQP handshake completes. */
  readonly timeoutMs: number
  /** Asked for as the heartbeat unless the URL sets one (`?heartbeat=`). */
  readonly heartbeatS: number
}

/**
 * The seam between the AMQP adapters and amqplib: how a connection is opened. Every
 * adapter opens its connections through it, so a unit test can hand them a scripted
 * fake and drive confirms, nacks, returns, closes and `connection.blocked` under
 * `TestClock`, without a broker.
 */
export class AmqpClient extends Context.Tag("dostavka/AmqpClient")<AmqpClient, {
  readonly connect: (url: string, options: AmqpConnectOptions) => Promise<AmqpConnection>
}>() {
  /**
   * amqplib: a socket timeout that covers the TCP connect and the handshake, and a
   * heartbeat. Dies at once, saying so, when amqplib lacks the kit's patch (see
   * `assertAmqplibPatched`).
   */
  static readonly live = Layer.sync(AmqpClient, () => {
    assertAmqplibPatched()
    return {
      connect: (url: string, options: AmqpConnectOptions) => {
        const parsed = new URL(url)
        if (!parsed.searchParams.has("heartbeat")) parsed.searchParams.set("heartbeat", String(options.heartbeatS))
        return amqp.connect(parsed.toString(), {
          timeout: options.timeoutMs,
          clientProperties: { connection_name: options.name }
        })
      }
    }
  })
}

/**
 * Throws unless the installed amqplib carries `patches/amqplib+2.3.1.patch` (applied by
 * patch-package on `npm ci`): without it a header table amqplib cannot decode closes the
 * consumer's whole connection, and the message comes back to do it again, for ever (see
 * `FieldTable.ts`).
 */
export const assertAmqplibPatched = (): void => {
  const require = createRequire(import.meta.url)
  const defs = require(join(dirname(require.resolve("amqplib")), "lib", "defs.js")) as { lazyHeaders?: unknown }
  if (defs.lazyHeaders !== true) {
    throw new Error("amqplib is installed without the kit's patch (patches/amqplib+2.3.1.patch): run npm ci")
  }
}
