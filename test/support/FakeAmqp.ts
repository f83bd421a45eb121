import type { ConsumeMessage, Message, Options, Replies } from "amqplib"
import { Either, Layer } from "effect"
import { EventEmitter } from "node:events"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { AmqpClient, type AmqpConfirmChannel, type AmqpConnection } from "../../src/adapters/amqp/AmqpClient.js"
import { decodeFieldTable, type FieldRecord } from "../../src/adapters/amqp/FieldTable.js"

const amqplibCodec = createRequire(import.meta.url)(
  join(dirname(createRequire(import.meta.url).resolve("amqplib")), "lib", "codec.js")
) as { encodeTable: (buffer: Buffer, table: object, offset: number) => number }

/** `properties` with its `headers` also as the patched amqplib's `rawHeaders`: the table's entries, encoded by amqplib. */
export const withRawHeaders = <P extends { headers?: object | undefined }>(properties: P): P => {
  if (properties.headers === undefined) return properties
  const scratch = Buffer.alloc(1024 * 1024)
  const size = amqplibCodec.encodeTable(scratch, properties.headers, 0)
  return Object.defineProperty({ ...properties }, "rawHeaders", { value: Buffer.from(scratch.subarray(4, size)) })
}

/** The headers a fake publish carried, decoded: the copies' tables come as encoded bytes (`encodeFieldTable`). */
export const publishedHeaders = (publish: FakePublish): FieldRecord => {
  const headers = publish.options.headers as unknown
  if (!Buffer.isBuffer(headers)) return (headers ?? {}) as FieldRecord
  return Either.getOrThrow(decodeFieldTable(headers.subarray(4))).values
}

/** One publish a fake confirm channel received, with the callback it owes a confirm to. */
export interface FakePublish {
  readonly exchange: string
  readonly routingKey: string
  readonly content: Buffer
  readonly options: Options.Publish
  readonly callback: (err: unknown, ok: Replies.Empty) => void
  settled: boolean
}

/** A settle call a fake channel received: ack (maybe `multiple`), or nack (with or without requeue). */
export type FakeSettlement =
  | { readonly kind: "ack"; readonly tag: number; readonly multiple: boolean }
  | { readonly kind: "nack"; readonly tag: number; readonly multiple: boolean; readonly requeue: boolean }

/**
 * A scripted amqplib channel: it records what the code under test does (publishes,
 * acks, nacks, consumers) and lets the test play the broker (confirm, nack, return,
 * deliver, close). Topology calls succeed at once.
 */
export class FakeChannel extends EventEmitter {
  readonly published: Array<FakePublish> = []
  readonly settlements: Array<FakeSettlement> = []
  private consumer: ((message: ConsumeMessage | null) => void) | undefined
  private nextTag = 1
  open = true

  // --- what the adapters call ---
  assertExchange = async (exchange: string) => ({ exchange })
  assertQueue = async (queue: string) => ({ queue, messageCount: 0, consumerCount: 0 })
  checkQueue = async (queue: string) => ({ queue, messageCount: 0, consumerCount: 0 })
  checkExchange = async () => ({})
  bindQueue = async () => ({})
  bindExchange = async () => ({})
  prefetch = async () => ({})
  consume = async (_queue: string, onMessage: (message: ConsumeMessage | null) => void) => {
    this.consumer = onMessage
    return { consumerTag: "fake-consumer" }
  }
  cancel = async () => ({ consumerTag: "fake-consumer" })
  get = async () => false as const
  ack = (message: Message, allUpTo = false) => {
    this.ensureOpen()
    this.settlements.push({ kind: "ack", tag: message.fields.deliveryTag, multiple: allUpTo })
  }
  nack = (message: Message, allUpTo = false, requeue = true) => {
    this.ensureOpen()
    this.settlements.push({ kind: "nack", tag: message.fields.deliveryTag, multiple: allUpTo, requeue })
  }
  nackAll = () => {}
  close = async () => this.closeChannel()
  publish = (
    exchange: string,
    routingKey: string,
    content: Buffer,
    options: Options.Publish = {},
    callback: (err: unknown, ok: Replies.Empty) => void = () => {}
  ) => {
    this.ensureOpen()
    this.published.push({ exchange, routingKey, content, options, callback, settled: false })
    return true
  }
  waitForConfirms = async () => {}

  private ensureOpen() {
    if (!this.open) {
      const error = new Error("Channel closed")
      error.name = "IllegalOperationError"
      throw error
    }
  }

  // --- what the test, playing the broker, calls ---
  /** basic.ack for publish `i`. */
  confirm(i: number) {
    this.settle(i, null)
  }
  /** basic.ack for every publish not yet settled. */
  confirmAll() {
    this.published.forEach((p, i) => !p.settled && this.confirm(i))
  }
  /** basic.nack for publish `i`, as amqplib reports it. */
  nackPublish(i: number) {
    this.settle(i, new Error("message nacked"))
  }
  /** basic.return of publish `i` (unroutable under `mandatory`), then its basic.ack, in the broker's order. */
  returnPublish(i: number) {
    this.emit("return", { properties: { messageId: this.published[i]!.options.messageId } })
    this.confirm(i)
  }
  /**
   * A delivery on the consumer, with the next delivery tag. Its `headers` reach the code
   * under test as the patched amqplib delivers them: encoded, in `rawHeaders` (amqplib's
   * own encoder writes them, so numbers take the types amqplib picks).
   */
  deliver(content: Buffer, properties: Partial<Message["properties"]> = {}, fields: Partial<Message["fields"]> = {}) {
    const message = {
      content,
      fields: {
        deliveryTag: this.nextTag++,
        redelivered: false,
        exchange: "fake.events",
        routingKey: "material.published.v1",
        consumerTag: "fake-consumer",
        ...fields
      },
      properties: withRawHeaders({ headers: {}, ...properties })
    } as ConsumeMessage
    this.consumer!(message)
    return message
  }
  /** The channel closes (a channel error, the broker going away): unconfirmed publishes fail as amqplib fails them. */
  closeChannel() {
    if (!this.open) return
    this.open = false
    this.published.forEach((p, i) => !p.settled && this.settle(i, new Error("channel closed")))
    this.emit("close")
  }

  private settle(i: number, err: Error | null) {
    const publish = this.published[i]!
    if (publish.settled) return
    publish.settled = true
    publish.callback(err, {})
  }
}

/** A scripted connection: its channels, in the order they were opened, and `blocked` / `unblocked` / `close` to play. */
export class FakeConnection extends EventEmitter {
  readonly channels: Array<FakeChannel> = []
  closed = false
  constructor(readonly name: string) {
    super()
  }
  createChannel = async () => this.open()
  createConfirmChannel = async () => this.open()
  close = async () => {
    this.closed = true
    this.channels.forEach((c) => c.closeChannel())
    this.emit("close")
  }
  block(reason = "low on memory") {
    this.emit("blocked", reason)
  }
  unblock() {
    this.emit("unblocked")
  }
  /** The channel the code under test publishes or consumes on: the last one it opened (topology is declared on its own, earlier). */
  get last(): FakeChannel {
    return this.channels.at(-1)!
  }
  private open(): FakeChannel & AmqpConfirmChannel {
    if (this.closed) throw new Error("Connection closed")
    const channel = new FakeChannel()
    this.channels.push(channel)
    return channel as unknown as FakeChannel & AmqpConfirmChannel
  }
}

/**
 * A fake broker for the AMQP adapters: every `connect` gives a new `FakeConnection`, or
 * fails with the next error in `failures`. Provide `layer` in place of `AmqpClient.live`.
 */
export class FakeAmqp {
  readonly connections: Array<FakeConnection> = []
  readonly failures: Array<Error> = []
  /** Every URL a connect was attempted to, in order. */
  readonly attempts: Array<string> = []
  readonly layer = Layer.succeed(AmqpClient, {
    connect: async (url: string, options: { readonly name: string }): Promise<AmqpConnection> => {
      this.attempts.push(url)
      const failure = this.failures.shift()
      if (failure !== undefined) throw failure
      const connection = new FakeConnection(options.name)
      this.connections.push(connection)
      return connection as unknown as AmqpConnection
    }
  })
  get last(): FakeConnection {
    return this.connections.at(-1)!
  }
}
