import { Duration, Effect, Exit, Redacted, Scope } from "effect"
import type { ConfirmChannel, Options } from "amqplib"
import { Rejected, type PublishOutcome, Unknown, Confirmed } from "../../ports/EventBus.js"
import { BrokerUnavailable, openConnection } from "./AmqpConnection.js"
import { declareTopology, type Topology } from "./Topology.js"

/** One message to publish; `options.messageId` is required, it ties a basic.return to its publish. */
export interface RawPublish {
  readonly exchange: string
  readonly routingKey: string
  readonly content: Buffer
  readonly options: Options.Publish & { readonly messageId: string }
}

export interface AmqpPublisher {
  /**
   * Publishes in order on one confirm channel, all in flight at once, `mandatory` set,
   * and resolves one `PublishOutcome` per message in the same order. Never fails.
   */
  readonly publish: (messages: ReadonlyArray<RawPublish>) => Effect.Effect<ReadonlyArray<PublishOutcome>>
}

/** The error amqplib passes to a confirm callback on basic.nack (lib/channel.js). */
const NackMessage = "message nacked"

interface Session {
  readonly scope: Scope.CloseableScope
  readonly channel: ConfirmChannel
  /** Message ids the broker returned as unroutable; read when their confirm arrives. */
  readonly returned: Set<string>
  open: boolean
  /** Batches in a row whose every publish was nacked; see `NackedBatchesBeforeReopen`. */
  nackedBatches: number
}

/**
 * After this many batches in a row with every publish nacked, the channel is dropped and
 * the next batch opens a fresh connection. Seen with quorum queues: after a length limit
 * with `reject-publish` was lifted, a channel kept getting nacks for minutes while a fresh
 * one was accepted at once.
 */
export const NackedBatchesBeforeReopen = 3

/**
 * A publisher over its own connection and confirm channel (RabbitMQ "Publisher
 * Confirms"). The connection is opened, and `topology` declared, on first use and again
 * after it was lost; while the broker cannot be reached every outcome is `Unknown` and
 * the caller's backoff decides when to try again.
 *
 * Outcomes: basic.ack → `Confirmed`; basic.nack → `Rejected(nacked)`; basic.return then
 * basic.ack (RabbitMQ sends the return first) → `Rejected(returned)`; amqplib refusing to
 * encode the message → `Rejected(refused)`; no confirm within `confirmTimeout`, or the
 * channel closed first → `Unknown`. After a return the connection is dropped, so the
 * next publish declares the topology again and a deleted queue or binding is repaired;
 * after `NackedBatchesBeforeReopen` wholly nacked batches in a row, too.
 */
export const makeAmqpPublisher = (options: {
  readonly url: Redacted.Redacted<string>
  readonly connectionName: string
  readonly topology: Topology
  readonly confirmTimeout: Duration.DurationInput
}) =>
  Effect.gen(function*() {
    const lock = yield* Effect.makeSemaphore(1)
    let session: Session | undefined

    const connect = Effect.gen(function*() {
      const scope = yield* Scope.make()
      return yield* Effect.gen(function*() {
        const connection = yield* openConnection(options.url, options.connectionName)
        yield* declareTopology(connection, options.topology)
        const channel = yield* Effect.tryPromise({
          try: () => connection.createConfirmChannel(),
          catch: (cause) => new BrokerUnavailable({ detail: `opening a confirm channel: ${String(cause)}` })
        })
        const next: Session = { scope, channel, returned: new Set(), open: true, nackedBatches: 0 }
        const lost = () => {
          next.open = false
        }
        channel.on("close", lost)
        channel.on("error", () => {})
        connection.on("close", lost)
        channel.on("return", (message) => {
          const id = message.properties.messageId
          if (typeof id === "string") next.returned.add(id)
        })
        return next
      }).pipe(Scope.extend(scope), Effect.onError((cause) => Scope.close(scope, Exit.failCause(cause))))
    })

    const current = lock.withPermits(1)(Effect.gen(function*() {
      if (session?.open) return session
      if (session) yield* Scope.close(session.scope, Exit.void)
      session = undefined
      session = yield* connect
      return session
    }))

    yield* Effect.addFinalizer(() =>
      lock.withPermits(1)(Effect.suspend(() => (session ? Scope.close(session.scope, Exit.void) : Effect.void)))
    )

    const publish = (messages: ReadonlyArray<RawPublish>): Effect.Effect<ReadonlyArray<PublishOutcome>> =>
      Effect.gen(function*() {
        const opened = yield* Effect.either(current)
        if (opened._tag === "Left") {
          const detail = opened.left.message
          return messages.map(() => new Unknown({ reason: "broker-unavailable", detail }))
        }
        const s = opened.right
        const confirms = messages.map((m) =>
          new Promise<PublishOutcome>((resolve) => {
            try {
              s.channel.publish(m.exchange, m.routingKey, m.content, { ...m.options, mandatory: true }, (err) => {
                if (s.returned.delete(m.options.messageId)) {
                  resolve(new Rejected({ reason: "returned", detail: `no queue is bound for '${m.routingKey}' on '${m.exchange || "(default)"}'` }))
                } else if (err == null) {
                  resolve(new Confirmed())
                } else if (err instanceof Error && err.message === NackMessage) {
                  resolve(new Rejected({ reason: "nacked", detail: "the broker nacked the message" }))
                } else {
                  // amqplib fails every unconfirmed publish with 'channel closed' before
                  // the channel's own 'close' event: the broker may or may not have it.
                  resolve(new Unknown({ reason: "channel-closed", detail: String(err?.message ?? err) }))
                }
              })
            } catch (cause) {
              const detail = cause instanceof Error ? cause.message : String(cause)
              resolve(
                s.open && !(cause instanceof Error && cause.name === "IllegalOperationError")
                  ? new Rejected({ reason: "refused", detail })
                  : new Unknown({ reason: "channel-closed", detail })
              )
            }
          })
        )
        const outcomes = yield* Effect.forEach(
          confirms,
          (confirm) =>
            Effect.promise(() => confirm).pipe(
              Effect.timeoutTo({
                duration: options.confirmTimeout,
                onSuccess: (outcome) => outcome,
                onTimeout: () =>
                  new Unknown({ reason: "confirm-timeout", detail: `no confirm within ${Duration.format(options.confirmTimeout)}` })
              })
            ),
          { concurrency: "unbounded" }
        )
        if (outcomes.some((o) => o._tag === "Rejected" && o.reason === "returned")) s.open = false
        if (outcomes.every((o) => o._tag === "Rejected" && o.reason === "nacked")) {
          if (++s.nackedBatches >= NackedBatchesBeforeReopen) s.open = false
        } else if (outcomes.some((o) => o._tag === "Confirmed")) {
          s.nackedBatches = 0
        }
        return outcomes
      })

    return { publish } satisfies AmqpPublisher
  })
