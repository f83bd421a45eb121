import type { ConsumeMessage, Message } from "amqplib"
import { Chunk, Clock, Data, Deferred, Duration, Effect, Metric, Queue, Schedule } from "effect"
import type { IncomingMessage } from "../../app/admission.js"
import { Metrics } from "../../app/Metrics.js"
import type { Verdict } from "../../app/verdict.js"
import { SchemaVersionHeader } from "../../domain/Envelope.js"
import { describeCause } from "../../domain/errors.js"
import type { HandlerName } from "../../domain/HandlerName.js"
import { ConnectionState, reportConnection } from "../../ports/BrokerConnections.js"
import { type PublishOutcome, Rejected } from "../../ports/EventBus.js"
import { type BrokerAccess, BrokerUnavailable, closeQuietly, openConnection } from "./AmqpConnection.js"
import type { AmqpPublisher, RawPublish } from "./AmqpPublisher.js"
import { TraceparentHeader } from "./EventBusAmqp.js"
import { attemptsOf, deadCopy, retryCopy } from "./FailureHeaders.js"
import { headersOf, headerValue } from "./FieldTable.js"
import { declarePlan, HandlerRoutes, namesOf, type TopologyPlan } from "./Topology.js"

/** The receiver stopped consuming because going on would lose what it applies (see the `Halt` verdict). */
export class ReceiverHalted extends Data.TaggedError("ReceiverHalted")<{ readonly detail: string }> {
  override get message() {
    return `receiver halted: ${this.detail}`
  }
}

export interface ConsumerOptions<R> {
  readonly access: BrokerAccess
  readonly connectionName: string
  readonly topology: TopologyPlan
  readonly prefix: string
  readonly handler: HandlerName
  /** The handler's retry delays; a `Retry` verdict's tier indexes them. */
  readonly retryDelays: ReadonlyArray<Duration.Duration>
  /** Unacked deliveries the broker may push to this consumer (basic.qos, per consumer); also the largest batch. */
  readonly prefetch: number
  /** Decides a batch of deliveries, one verdict each, in order (`judgeAll`). */
  readonly decide: (batch: ReadonlyArray<IncomingMessage>) => Effect.Effect<ReadonlyArray<Verdict>, never, R>
  /** Publishes retry and dead-letter copies, on the receiver's publishing connection, not this one. */
  readonly copies: AmqpPublisher
  /** How long to wait before handing back a message whose copy had an unknown outcome. */
  readonly requeueDelay: Duration.DurationInput
  /** Times a message may be handed back because its copy's outcome was unknown, before it is rejected to the dead-letter exchange. */
  readonly maxHandBacks: number
  readonly reconnect: Schedule.Schedule<unknown, unknown>
}

/** The exchanges whose names tell where a delivery came from. */
export interface DeliveryOrigins {
  /** The events exchange: a delivery from it came straight from a publisher. */
  readonly eventsExchange: string
  /** The handler's own exchange: only the kit writes to it (retries, replays), so only its copies' attempt headers count. */
  readonly handlerExchange: string
}

const stringProperty = (value: unknown) => (typeof value === "string" ? value : undefined)

/**
 * What the use case needs of a delivery: the properties the kit sets, the body's bytes
 * (decoded later, strictly), its failed attempts, who published it (`user_id`, and
 * whether it came straight from the events exchange), and why its header table could
 * not be decoded, if it could not (`headersOf`). Its attempts header counts only on a
 * copy that came through the handler's own exchange: anyone may publish to the events
 * exchange, and an event claiming 1,000,000,000 attempts must not be dead-lettered at its
 * first failure.
 */
export const toIncoming = (message: Message, origins?: DeliveryOrigins): IncomingMessage => {
  const headers = headersOf(message.properties)
  return {
    messageId: stringProperty(message.properties.messageId),
    correlationId: stringProperty(message.properties.correlationId),
    type: stringProperty(message.properties.type),
    schemaVersion: headerValue(headers, SchemaVersionHeader),
    contentType: stringProperty(message.properties.contentType),
    body: message.content,
    attempts: origins === undefined || message.fields.exchange === origins.handlerExchange ? attemptsOf(message) : 0,
    userId: stringProperty(message.properties.userId),
    fromEventsExchange: origins !== undefined && message.fields.exchange === origins.eventsExchange,
    traceparent: headerValue(headers, TraceparentHeader),
    ...(headers._tag === "Undecodable" ? { headersRefused: headers.refusal.message } : {})
  }
}

/** Why a copy was not written, for the log line that says so: the broker's or the kit's reason. */
const whyNot = (outcome: PublishOutcome | undefined) =>
  outcome?._tag === "Rejected" ? { reason: outcome.reason, detail: outcome.detail } : {}

/** How one delivery of a batch is settled once its verdict and its copy's outcome are known. */
type Settlement = "ack" | "reject" | "hand-back"

/**
 * Consumes the handler's queue with manual acks until interrupted, reconnecting by
 * `reconnect` when the connection or channel is lost (topology declared again, consumer
 * registered again).
 *
 * Deliveries are taken in batches of what has arrived (at most `prefetch`), in arrival
 * order, and decided by `decide` (one transaction for the batch). Then:
 * - `Ack` → acked;
 * - `Retry` / `DeadLetter` → a copy goes to the handler's exchange (routing key
 *   `retry.<tier>` or `dead`, `FailureHeaders`), all of a batch's copies in flight at
 *   once with publisher confirms, and the original is acked only once its copy is
 *   confirmed. A copy the broker refuses (returned, nacked, or refused by amqplib) will
 *   not be taken later either: the original is rejected without requeue, and the queue's
 *   own dead-letter exchange puts it on the dead queue. A copy whose outcome is unknown
 *   (no confirm, the publishing connection lost) hands the original back after
 *   `requeueDelay`, at most `maxHandBacks` times per message, then rejects it the same
 *   way: no message is redelivered forever by the kit;
 * - `Halt` → nothing of the batch is settled, and the consumer fails with
 *   `ReceiverHalted`; closing the channel returns the messages to the queue.
 * Acks go out after the rest is settled, as one `basic.ack` with `multiple` set. A
 * delivery tag is only ever settled on the channel that delivered it, and only while
 * that channel is open; after a loss the broker redelivers. A defect while deciding (a
 * bug outside any handler) hands the batch back like an unknown outcome. On interruption
 * the batch in progress finishes before the consumer is cancelled and the channel
 * closed. Only amqplib's own failures count as a lost broker; a broker that refuses the
 * login or vhost is logged at error level on each attempt and tried again. Fails with
 * `TopologyMismatch` or `ReceiverHalted`.
 */
export const runConsumer = <R>(options: ConsumerOptions<R>) => {
  const names = namesOf(options.prefix)
  const queue = names.queue(options.handler)
  const exchange = names.handlerExchange(options.handler)
  const origins: DeliveryOrigins = { eventsExchange: names.exchange, handlerExchange: exchange }
  const deliveriesOf = Metric.tagged(Metrics.deliveries, "handler", options.handler)
  // Hand-backs per message id, across sessions; cleared when the message is settled for good.
  const handBacks = new Map<string, number>()
  let sessions = 0
  // Deliveries the current session settled: a session that settled any was healthy, however short.
  let settledInSession = 0

  const session = Effect.scoped(Effect.gen(function*() {
    const connection = yield* openConnection(options.access, options.connectionName)
    yield* declarePlan(connection, options.topology)
    const channel = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () => connection.createChannel(),
        catch: (cause) => new BrokerUnavailable({ detail: `opening a channel: ${describeCause(cause)}` })
      }),
      (ch) => closeQuietly(() => ch.close())
    )
    settledInSession = 0
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
      catch: (cause) => new BrokerUnavailable({ detail: `basic.qos: ${describeCause(cause)}` })
    })
    const mailbox = yield* Queue.unbounded<ConsumeMessage>()
    const { consumerTag } = yield* Effect.tryPromise({
      try: () =>
        channel.consume(queue, (message) => {
          if (message === null) onLost("consumer cancelled by the broker")()
          else mailbox.unsafeOffer(message)
        }, { noAck: false }),
      catch: (cause) => new BrokerUnavailable({ detail: `basic.consume on '${queue}': ${describeCause(cause)}` })
    })
    // Runs before the channel's release: stop deliveries first, so a shutdown leaves
    // nothing half-processed; unacked prefetched messages return to the queue on close.
    yield* Effect.addFinalizer(() =>
      open ? Effect.ignore(Effect.tryPromise(() => channel.cancel(consumerTag))) : Effect.void
    )
    yield* Effect.logInfo("consuming").pipe(Effect.annotateLogs({ queue, prefetch: options.prefetch }))
    yield* reportConnection(options.connectionName, ConnectionState.Up({ since: yield* Clock.currentTimeMillis }))
    if (sessions++ > 0) yield* Metric.increment(Metric.tagged(Metrics.reconnects, "role", options.handler))

    /** Settles on this channel while it is open; amqplib throws on a closed one, and then the broker redelivers anyway. */
    const settle = (message: Message, how: Settlement | "ack-up-to") => {
      if (!open) return
      try {
        if (how === "ack") channel.ack(message)
        else if (how === "ack-up-to") channel.ack(message, true)
        else channel.nack(message, false, how === "hand-back")
      } catch {
        open = false
      }
    }

    const copyOf = (message: Message, verdict: Verdict, nowMs: number): RawPublish | undefined => {
      const kitHeadersTrusted = message.fields.exchange === exchange
      switch (verdict._tag) {
        case "Retry":
          return retryCopy(
            message,
            {
              handler: options.handler,
              failure: verdict.failure,
              attempts: verdict.attempts,
              nowMs,
              kitHeadersTrusted
            },
            exchange,
            HandlerRoutes.retry(options.retryDelays[verdict.tier]!)
          )
        case "DeadLetter":
          return deadCopy(
            message,
            {
              handler: options.handler,
              failure: verdict.failure,
              attempts: verdict.attempts,
              nowMs,
              reason: verdict.reason,
              kitHeadersTrusted
            },
            exchange,
            HandlerRoutes.dead
          )
        default:
          return undefined
      }
    }

    const keyOf = (message: Message) =>
      typeof message.properties.messageId === "string"
        ? message.properties.messageId
        : `tag:${message.fields.deliveryTag}`

    /** Hands a message back, unless it was handed back `maxHandBacks` times already: then it is rejected. */
    const handBackOrReject = (message: Message): Settlement => {
      const key = keyOf(message)
      const count = (handBacks.get(key) ?? 0) + 1
      if (handBacks.size > 10_000) handBacks.clear()
      handBacks.set(key, count)
      return count > options.maxHandBacks ? "reject" : "hand-back"
    }

    /**
     * Settlement of a delivery whose copy ended in `outcome`. A copy returned as
     * unroutable is handed back like an unknown outcome: the publisher has dropped its
     * connection, and declaring the topology again on the next one restores a deleted
     * retry or dead queue, so that nothing is rejected into a dead-letter route that
     * leads nowhere.
     */
    const afterCopy = (message: Message, outcome: PublishOutcome): Settlement =>
      outcome._tag === "Confirmed"
        ? "ack"
        : outcome._tag === "Rejected" && outcome.reason !== "returned"
        ? "reject"
        : handBackOrReject(message)

    const logVerdict = (
      message: Message,
      verdict: Verdict,
      settlement: Settlement,
      outcome: PublishOutcome | undefined
    ) => {
      const annotations = {
        handler: options.handler,
        messageId: String(message.properties.messageId),
        deliveryTag: message.fields.deliveryTag,
        redelivered: message.fields.redelivered
      }
      if (verdict._tag === "Retry") {
        return Effect.logWarning("handler failed; retrying later").pipe(Effect.annotateLogs({
          ...annotations,
          attempt: verdict.attempts,
          retryIn: Duration.format(verdict.delay),
          errorTag: `${verdict.failure._tag}/${verdict.failure.errorTag}`,
          error: verdict.failure.detail,
          ...(settlement === "ack" ? {} : { copy: outcome?._tag, settlement })
        }))
      }
      if (verdict._tag === "DeadLetter") {
        return Effect.logWarning("dead-lettered").pipe(Effect.annotateLogs({
          ...annotations,
          reason: verdict.reason,
          attempts: verdict.attempts,
          errorTag: `${verdict.failure._tag}/${verdict.failure.errorTag}`,
          error: verdict.failure.detail,
          ...(settlement === "ack" ? {} : { copy: outcome?._tag, settlement })
        }))
      }
      return Effect.void
    }

    const processBatch = (batch: ReadonlyArray<ConsumeMessage>) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function*() {
          settledInSession += batch.length
          const verdicts = yield* options.decide(batch.map((message) => toIncoming(message, origins))).pipe(
            Effect.map((verdicts) => verdicts as ReadonlyArray<Verdict | undefined>),
            Effect.catchAllDefect((defect) =>
              Effect.as(
                Effect.logError("deciding a batch failed; handing it back").pipe(
                  Effect.annotateLogs({ error: describeCause(defect) })
                ),
                batch.map(() => undefined)
              )
            )
          )
          const halt = verdicts.find((v) => v?._tag === "Halt")
          if (halt?._tag === "Halt") return yield* new ReceiverHalted({ detail: halt.detail })

          const nowMs = yield* Clock.currentTimeMillis
          const copies: Array<readonly [number, RawPublish]> = []
          const outcomeOf = new Map<number, PublishOutcome>()
          for (const [i, message] of batch.entries()) {
            const verdict = verdicts[i]
            if (verdict === undefined) continue
            try {
              const copy = copyOf(message, verdict, nowMs)
              if (copy !== undefined) copies.push([i, copy])
            } catch (cause) {
              // A copy we cannot even build is one the broker could never take either.
              outcomeOf.set(
                i,
                new Rejected({ reason: "refused", detail: `building the copy: ${describeCause(cause)}` })
              )
            }
          }
          // Interruptible: the copies may wait for a broker that blocks publishing; stopped
          // meanwhile, nothing of the batch is settled and the broker redelivers it.
          const outcomes = copies.length === 0
            ? []
            : yield* restore(options.copies.publish(copies.map(([, copy]) => copy)))
          copies.forEach(([i], k) => outcomeOf.set(i, outcomes[k]!))

          const settlements = batch.map((message, i): Settlement => {
            const verdict = verdicts[i]
            if (verdict === undefined) return handBackOrReject(message)
            if (verdict._tag === "Ack") return "ack"
            return afterCopy(message, outcomeOf.get(i)!)
          })
          for (const [i, message] of batch.entries()) {
            const verdict = verdicts[i]
            if (verdict !== undefined) yield* logVerdict(message, verdict, settlements[i]!, outcomeOf.get(i))
            if (settlements[i] === "reject") {
              yield* Effect.logError("copy not written; rejecting the message to the queue's dead-letter exchange")
                .pipe(
                  Effect.annotateLogs({
                    handler: options.handler,
                    messageId: String(message.properties.messageId),
                    copy: outcomeOf.get(i)?._tag ?? "none",
                    ...whyNot(outcomeOf.get(i))
                  })
                )
            }
          }
          if (settlements.includes("hand-back")) yield* Effect.sleep(options.requeueDelay)
          let lastAck: Message | undefined
          for (const [i, message] of batch.entries()) {
            const settlement = settlements[i]!
            if (settlement === "ack") lastAck = message
            else settle(message, settlement)
            if (settlement !== "hand-back") handBacks.delete(keyOf(message))
          }
          // Every other delivery of the batch is settled, and earlier batches were settled
          // in full, so this acks exactly the batch's remaining deliveries.
          if (lastAck !== undefined) settle(lastAck, "ack-up-to")
          const counts = new Map<string, number>()
          for (const [i, settlement] of settlements.entries()) {
            const verdict = verdicts[i]
            const disposition = settlement === "hand-back"
              ? "handed-back"
              : settlement === "reject" || verdict?._tag === "DeadLetter"
              ? "dead"
              : verdict?._tag === "Retry"
              ? "retried"
              : verdict?._tag === "Ack"
              ? verdict.disposition
              : "handed-back"
            counts.set(disposition, (counts.get(disposition) ?? 0) + 1)
          }
          // One update per disposition and batch, not per delivery.
          for (const [disposition, n] of counts) {
            yield* Metric.incrementBy(Metric.tagged(deliveriesOf, "disposition", disposition), n)
          }
        })
      )

    const why = yield* Effect.raceFirst(
      Effect.forever(
        Effect.flatMap(
          Queue.takeBetween(mailbox, 1, options.prefetch),
          (chunk) => processBatch(Chunk.toReadonlyArray(chunk))
        )
      ),
      Deferred.await(lost)
    )
    yield* Effect.logWarning("consumer lost its channel; reconnecting").pipe(
      Effect.annotateLogs({ queue, reason: why })
    )
  }))

  return Effect.gen(function*() {
    // One backoff across sessions: a session that fails to be established, or is lost
    // within `HealthySessionMs` of starting without having settled a delivery (a
    // connection the broker drops at once, or one amqplib cannot decode a message on),
    // waits for the next step of `reconnect`; one that worked (it lived longer, or it
    // settled deliveries) starts the policy afresh, so a loss soon after a broker outage
    // is not waited out at the outage's longest delay.
    const backoff = yield* Schedule.driver(options.reconnect)
    let failing = { since: 0, attempt: 0 }
    const reconnecting = (error: string) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        failing = failing.attempt === 0
          ? { since: now, attempt: 1 }
          : { since: failing.since, attempt: failing.attempt + 1 }
        yield* reportConnection(
          options.connectionName,
          ConnectionState.Reconnecting({ since: failing.since, attempt: failing.attempt, error })
        )
      })
    for (;;) {
      const startedAt = yield* Clock.currentTimeMillis
      const ended = yield* Effect.either(session)
      if (ended._tag === "Right") failing = { since: 0, attempt: 0 }
      if (ended._tag === "Left") {
        const error = ended.left
        if (error._tag === "BrokerUnavailable" || error._tag === "BrokerRefused") yield* reconnecting(error.message)
        if (error._tag === "BrokerUnavailable") {
          yield* Effect.logWarning("consumer cannot reach the broker; retrying").pipe(
            Effect.annotateLogs({ queue, error: error.message })
          )
        } else if (error._tag === "BrokerRefused") {
          yield* Effect.logError("the broker refuses the consumer's connection; retrying").pipe(
            Effect.annotateLogs({ queue, error: error.message })
          )
        } else {
          return yield* Effect.fail(error)
        }
        yield* Effect.ignore(backoff.next(error))
      } else if ((yield* Clock.currentTimeMillis) - startedAt < HealthySessionMs && settledInSession === 0) {
        yield* reconnecting("the session was lost soon after it started")
        yield* Effect.ignore(backoff.next(undefined))
      } else {
        yield* reconnecting("the channel was lost")
        yield* backoff.reset
      }
    }
  })
}

/** A consumer session lost sooner than this after it started (ms), having settled nothing, counts as a failed attempt for the backoff. */
export const HealthySessionMs = 10_000
