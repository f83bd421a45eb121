import { Data, Deferred, Duration, Effect, Queue, Redacted, Schedule } from "effect"
import type { ConsumeMessage, Message } from "amqplib"
import { randomUUID } from "node:crypto"
import { SchemaVersionHeader } from "../../domain/Envelope.js"
import type { IncomingMessage, Verdict } from "../../app/receive.js"
import type { AmqpPublisher } from "./AmqpPublisher.js"
import { BrokerUnavailable, closeQuietly, openConnection } from "./AmqpConnection.js"
import { declareTopology, type Topology } from "./Topology.js"

/** The receiver stopped consuming because going on would lose what it applies (see the `Halt` verdict). */
export class ReceiverHalted extends Data.TaggedError("ReceiverHalted")<{ readonly detail: string }> {
  override get message() {
    return `receiver halted: ${this.detail}`
  }
}

/** Headers the kit adds to a dead-lettered copy; the body and the original properties stay as they were. */
export const DeadLetterHeaders = {
  reason: "x-dostavka-reason",
  error: "x-dostavka-error",
  handler: "x-dostavka-handler",
  deadAt: "x-dostavka-dead-at",
  originalExchange: "x-dostavka-original-exchange",
  originalRoutingKey: "x-dostavka-original-routing-key",
  originalExpiration: "x-dostavka-original-expiration"
} as const

export interface ConsumerOptions<R> {
  readonly url: Redacted.Redacted<string>
  readonly connectionName: string
  readonly topology: Topology
  readonly handler: string
  readonly queue: string
  readonly deadQueue: string
  /** Unacked deliveries the broker may push to this consumer (basic.qos, per consumer). */
  readonly prefetch: number
  readonly decide: (incoming: IncomingMessage) => Effect.Effect<Verdict, never, R>
  /** Publishes dead-lettered copies; on the receiver's publishing connection, not this one. */
  readonly deadLetters: AmqpPublisher
  readonly requeueDelay: Duration.DurationInput
  readonly reconnect: Schedule.Schedule<unknown, unknown>
}

/** What the use case needs of a delivery: the properties the kit sets, and the body's bytes, decoded later and strictly. */
export const toIncoming = (message: Message): IncomingMessage => ({
  messageId: typeof message.properties.messageId === "string" ? message.properties.messageId : undefined,
  correlationId: typeof message.properties.correlationId === "string" ? message.properties.correlationId : undefined,
  type: typeof message.properties.type === "string" ? message.properties.type : undefined,
  schemaVersion: message.properties.headers?.[SchemaVersionHeader],
  contentType: typeof message.properties.contentType === "string" ? message.properties.contentType : undefined,
  body: message.content
})

/**
 * Consumes `queue` with manual acks until interrupted, reconnecting by `reconnect` when
 * the connection or channel is lost (topology declared again, consumer registered again).
 *
 * Each delivery is decided by `decide` and then: `Ack` → basic.ack; `DeadLetter` → a copy
 * (same body and properties, plus the `x-dostavka-*` headers) is published to
 * `deadQueue` and confirmed before the original is acked; if the copy is not confirmed
 * for any reason, the original is rejected without requeue, and the queue's dead-letter
 * exchange puts it on the same dead queue; `Requeue` → basic.nack with
 * requeue after `requeueDelay`. A delivery tag is only ever acked on the channel that
 * delivered it, and only while that channel is open; after a loss the broker redelivers.
 * Deliveries are processed one at a time in arrival order; on interruption the one in
 * progress finishes (and is acked) before the consumer is cancelled and the channel
 * closed. Fails with `TopologyMismatch`, or `ReceiverHalted` on a `Halt` verdict (the
 * message is left unsettled).
 */
export const runConsumer = <R>(options: ConsumerOptions<R>) => {
  const session = Effect.scoped(Effect.gen(function*() {
    const connection = yield* openConnection(options.url, options.connectionName)
    yield* declareTopology(connection, options.topology)
    const channel = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () => connection.createChannel(),
        catch: (cause) => new BrokerUnavailable({ detail: `opening a channel: ${String(cause)}` })
      }),
      (ch) => closeQuietly(() => ch.close())
    )
    const lost = yield* Deferred.make<string>()
    let open = true
    const onLost = (why: string) => () => {
      open = false
      Deferred.unsafeDone(lost, Effect.succeed(why))
    }
    channel.on("error", () => {})
    channel.on("close", onLost("channel closed"))
    connection.on("close", onLost("connection closed"))

    yield* Effect.tryPromise({
      try: () => channel.prefetch(options.prefetch, false),
      catch: (cause) => new BrokerUnavailable({ detail: `basic.qos: ${String(cause)}` })
    })
    const mailbox = yield* Queue.unbounded<ConsumeMessage>()
    const { consumerTag } = yield* Effect.tryPromise({
      try: () =>
        channel.consume(options.queue, (message) => {
          if (message === null) onLost("consumer cancelled by the broker")()
          else mailbox.unsafeOffer(message)
        }, { noAck: false }),
      catch: (cause) => new BrokerUnavailable({ detail: `basic.consume on '${options.queue}': ${String(cause)}` })
    })
    // Runs before the channel's release: stop deliveries first, so a shutdown leaves
    // nothing half-processed; unacked prefetched messages return to the queue on close.
    yield* Effect.addFinalizer(() =>
      open ? Effect.ignore(Effect.tryPromise(() => channel.cancel(consumerTag))) : Effect.void
    )
    yield* Effect.logInfo("consuming").pipe(Effect.annotateLogs({ queue: options.queue, prefetch: options.prefetch }))

    const settle = (message: ConsumeMessage, verdict: Verdict) =>
      Effect.gen(function*() {
        switch (verdict._tag) {
          case "Ack":
            if (open) channel.ack(message)
            return
          case "DeadLetter": {
            const [outcome] = yield* options.deadLetters.publish([deadLetterCopy(message, verdict, options)])
            if (outcome?._tag === "Confirmed") {
              yield* Effect.logWarning("dead-lettered").pipe(Effect.annotateLogs({ reason: verdict.reason, detail: verdict.detail }))
              if (open) channel.ack(message)
            } else {
              // The copy cannot be written, whatever the reason: refused by amqplib (headers
              // over 64 KiB, nesting it cannot encode), over the broker's frame_max, nacked,
              // or not confirmed. Handing the message back would bring it here again, maybe
              // forever; rejecting it lets the broker dead-letter it through the queue's own
              // dead-letter exchange onto the same dead queue, with its x-death header.
              yield* Effect.logError("dead-letter copy not written; rejecting the original to the queue's dead-letter exchange").pipe(
                Effect.annotateLogs({ reason: verdict.reason, outcome: outcome?._tag, detail: outcome?.detail })
              )
              if (open) channel.nack(message, false, false)
            }
            return
          }
          case "Halt":
            return yield* new ReceiverHalted({ detail: verdict.detail })
          case "Requeue":
            yield* Effect.logWarning("handler failed; handing the message back").pipe(
              Effect.annotateLogs({ detail: verdict.detail })
            )
            yield* Effect.sleep(options.requeueDelay)
            if (open) channel.nack(message, false, true)
        }
      })

    const processOne = (message: ConsumeMessage) =>
      options.decide(toIncoming(message)).pipe(
        Effect.flatMap((verdict) => settle(message, verdict)),
        Effect.annotateLogs({
          handler: options.handler,
          messageId: String(message.properties.messageId),
          deliveryTag: message.fields.deliveryTag,
          redelivered: message.fields.redelivered
        }),
        Effect.uninterruptible
      )

    const why = yield* Effect.raceFirst(
      Effect.forever(Effect.flatMap(Queue.take(mailbox), processOne)),
      Deferred.await(lost)
    )
    yield* Effect.logWarning("consumer lost its channel; reconnecting").pipe(
      Effect.annotateLogs({ queue: options.queue, reason: why })
    )
  }))

  // A session fails only while being established, and is retried by `reconnect`; one
  // that was established ends when its channel is lost, and the next one starts with
  // the policy afresh, so a long healthy connection does not inherit an old backoff.
  const establish = session.pipe(
    // amqplib throws synchronously from some calls on a channel that is going away; that
    // is a lost broker to us, not a reason to stop consuming for good.
    Effect.catchAllDefect((defect) => Effect.fail(new BrokerUnavailable({ detail: `amqplib: ${String(defect)}` }))),
    Effect.tapError((error) =>
      Effect.logWarning("consumer cannot reach the broker; retrying").pipe(
        Effect.annotateLogs({ queue: options.queue, error: error.message })
      )
    ),
    Effect.retry({ schedule: options.reconnect, while: (error) => error._tag === "BrokerUnavailable" })
  )
  return Effect.forever(establish)
}

/**
 * The copy of `message` for the handler's dead queue: the same body and basic properties,
 * persistent, plus the `x-dostavka-*` headers. Three properties are not carried over:
 * `expiration` (the copy must not expire; the original value is kept in a header),
 * `user_id` (the broker refuses one that is not the publishing connection's user), and
 * nothing amqplib did not receive.
 */
const deadLetterCopy = (
  message: ConsumeMessage,
  verdict: Extract<Verdict, { _tag: "DeadLetter" }>,
  options: Pick<ConsumerOptions<never>, "deadQueue" | "handler">
) => {
  const { expiration, userId: _, headers, ...rest } = message.properties
  const properties = Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined))
  const messageId = typeof message.properties.messageId === "string" && message.properties.messageId !== ""
    ? message.properties.messageId
    : `dead-${randomUUID()}`
  return {
    exchange: "",
    routingKey: options.deadQueue,
    content: message.content,
    options: {
      ...properties,
      messageId,
      persistent: true,
      headers: {
        ...headers,
        [DeadLetterHeaders.reason]: verdict.reason,
        [DeadLetterHeaders.error]: verdict.detail.slice(0, 4000),
        [DeadLetterHeaders.handler]: options.handler,
        [DeadLetterHeaders.deadAt]: new Date().toISOString(),
        [DeadLetterHeaders.originalExchange]: message.fields.exchange,
        [DeadLetterHeaders.originalRoutingKey]: message.fields.routingKey,
        ...(expiration === undefined ? {} : { [DeadLetterHeaders.originalExpiration]: String(expiration) })
      }
    }
  }
}
