import type { Options } from "amqplib"
import { Clock, Deferred, Duration, Effect, FiberId, Metric, Option, ScopedRef } from "effect"
import { Metrics } from "../../app/Metrics.js"
import type { SettingsShape } from "../../config.js"
import { describeCause } from "../../domain/errors.js"
import type { HandlerName } from "../../domain/HandlerName.js"
import { BrokerConnections, ConnectionState } from "../../ports/BrokerConnections.js"
import { Confirmed, type PublishOutcome, Rejected, Unknown } from "../../ports/EventBus.js"
import { AmqpClient, type AmqpConfirmChannel } from "./AmqpClient.js"
import { type BrokerAccess, brokerAccessOf, BrokerUnavailable, closeQuietly, openConnection } from "./AmqpConnection.js"
import { declarePlan, type TopologyPlan, topologyPlanOf } from "./Topology.js"

/** One message to publish; `options.messageId` is required, it ties a basic.return to its publish. */
export interface RawPublish {
  readonly exchange: string
  readonly routingKey: string
  readonly content: Buffer
  readonly options: Options.Publish & { readonly messageId: string }
  /**
   * What makes two publishes the same message, for not sending it twice (see
   * `makeAmqpPublisher`); by default the exchange, routing key and message id. A copy
   * that differs from an earlier one with the same message id (another attempt) must
   * say so here.
   */
  readonly sameAs?: string
}

export interface AmqpPublisher {
  /**
   * Publishes in order on one confirm channel, all in flight at once, `mandatory` set,
   * and resolves one `PublishOutcome` per message in the same order. Never fails.
   */
  readonly publish: (messages: ReadonlyArray<RawPublish>) => Effect.Effect<ReadonlyArray<PublishOutcome>>
  /** Opens the session now rather than on the first publish; a failure is only reported (see `BrokerConnections`). */
  readonly connect: Effect.Effect<void>
}

/** The error amqplib passes to a confirm callback on basic.nack (lib/channel.js). */
const NackMessage = "message nacked"

/**
 * After this many batches in a row with every publish nacked, the channel is dropped and
 * the next batch opens a fresh connection. Seen with quorum queues: after a length limit
 * with `reject-publish` was lifted, a channel kept getting nacks for minutes while a fresh
 * one was accepted at once.
 */
export const NackedBatchesBeforeReopen = 3

/**
 * A publish still without a confirm after this many confirm timeouts, on a connection
 * the broker has not blocked, means the connection has stopped answering: it is dropped
 * and the next batch opens another.
 */
export const SilentConfirmTimeouts = 3

interface Pending {
  readonly outcome: Deferred.Deferred<PublishOutcome>
  readonly sentAtMs: number
  /** True once every call that awaited it gave up (its confirm timed out): a confirm after that is a late one. */
  abandoned: boolean
}

/** A message handed to the channel (or found in flight on it): its key, and its outcome to await. */
interface Sent {
  readonly key: string
  readonly outcome: Deferred.Deferred<PublishOutcome>
}

/** One open connection and confirm channel, and what is in flight on it. */
interface Session {
  readonly channel: AmqpConfirmChannel
  /** Message ids the broker returned as unroutable; read when their confirm arrives. */
  readonly returned: Set<string>
  /** Publishes sent on this channel and not yet confirmed, by exchange, routing key and message id. */
  readonly pending: Map<string, Pending>
  /** Completed when the connection or channel closes. */
  readonly lost: Deferred.Deferred<void>
  open: boolean
  /** Set while the broker blocks the connection (`connection.blocked`, RabbitMQ "Blocked Connection Notifications"). */
  blocked: { readonly reason: string; readonly lifted: Deferred.Deferred<void> } | undefined
  nackedBatches: number
}

const keyOf = (m: RawPublish) => m.sameAs ?? `${m.exchange}\u0000${m.routingKey}\u0000${m.options.messageId}`

/** How many late confirms (see `makeAmqpPublisher`) a publisher remembers, so that a message sent again is not sent twice. */
export const RememberedConfirms = 10_000

/**
 * A publisher over its own connection and confirm channel (RabbitMQ "Publisher
 * Confirms"). The session (connection, channel, what is in flight) is a resource in a
 * `ScopedRef`: opened, with `topology` declared, on first use, and opened again after it
 * was lost or dropped; while the broker cannot be reached every outcome is `Unknown` and
 * the caller's backoff decides when to try again.
 *
 * Outcomes: basic.ack → `Confirmed`; basic.nack → `Rejected(nacked)`; basic.return then
 * basic.ack (RabbitMQ sends the return first) → `Rejected(returned)`; amqplib refusing to
 * encode the message → `Rejected(refused)`; no confirm within `confirmTimeout`, or the
 * channel closed first → `Unknown`.
 *
 * Duplicates are bounded, whatever a fault's length:
 * - while the broker blocks the connection (a memory or disk alarm), nothing is sent:
 *   `publish` waits until it is unblocked (or the connection is lost), interruptibly;
 * - a message still in flight on the session from an earlier call whose confirm timed
 *   out is not sent again: the call waits for that confirm instead; one the broker
 *   confirmed late, after its call had given up, is `Confirmed` at once the next time it
 *   is sent, once (the last `RememberedConfirms` late confirms are remembered). A confirm
 *   its call received is not remembered: a later publish with the same key is a message
 *   of its own (a dead letter purged, then published again), and is sent;
 * - a session with a publish unconfirmed for `SilentConfirmTimeouts` confirm timeouts,
 *   and not blocked, is dropped, and its unconfirmed publishes end `Unknown`.
 * After a return the session is dropped too, so the next publish declares the topology
 * again and a deleted queue or binding is repaired; and after `NackedBatchesBeforeReopen`
 * wholly nacked batches in a row. Needs `AmqpClient` and a scope.
 */
export const makeAmqpPublisher = (options: {
  readonly access: BrokerAccess
  readonly connectionName: string
  /** The role it publishes for, as a metric label: `relay`, `catalog`, `audit`, `operator`. */
  readonly role: string
  readonly topology: TopologyPlan
  readonly confirmTimeout: Duration.DurationInput
}) =>
  Effect.gen(function*() {
    const confirmTimeout = Duration.decode(options.confirmTimeout)
    // amqplib's callbacks run outside any fiber: they read the time from this clock.
    const clock = yield* Effect.clock
    const client = yield* AmqpClient
    const registry = yield* Effect.serviceOption(BrokerConnections)
    const report = (
      state: ConnectionState
    ) => (registry._tag === "Some" ? registry.value.report(options.connectionName, state) : Effect.void)
    let failedAttempts = 0
    let failingSince = 0
    let opened = 0
    yield* report(ConnectionState.Idle())
    const lock = yield* Effect.makeSemaphore(1)
    const ref = yield* ScopedRef.make((): Option.Option<Session> => Option.none())
    // Late confirms, each kept until one call is given it.
    const confirmedLate = new Map<string, true>()
    const remember = (key: string) => {
      confirmedLate.set(key, true)
      if (confirmedLate.size > RememberedConfirms) confirmedLate.delete(confirmedLate.keys().next().value!)
    }

    const connect = Effect.gen(function*() {
      const connection = yield* openConnection(options.access, options.connectionName)
      yield* declarePlan(connection, options.topology)
      const channel = yield* Effect.acquireRelease(
        Effect.tryPromise({
          try: () => connection.createConfirmChannel(),
          catch: (cause) => new BrokerUnavailable({ detail: `opening a confirm channel: ${describeCause(cause)}` })
        }),
        (ch) => closeQuietly(() => ch.close())
      )
      const session: Session = {
        channel,
        returned: new Set(),
        pending: new Map(),
        lost: yield* Deferred.make<void>(),
        open: true,
        blocked: undefined,
        nackedBatches: 0
      }
      // Reports only a loss it did not cause: a session dropped on purpose is closed already.
      const lost = () => {
        const wasOpen = session.open
        session.open = false
        Deferred.unsafeDone(session.lost, Effect.void)
        if (wasOpen) {
          Effect.runFork(
            report(
              ConnectionState.Reconnecting({
                since: clock.unsafeCurrentTimeMillis(),
                attempt: 0,
                error: "the connection closed"
              })
            )
          )
        }
      }
      channel.on("close", lost)
      channel.on("error", () => {})
      connection.on("close", lost)
      connection.on("blocked", (reason: unknown) => {
        session.blocked = { reason: String(reason), lifted: Deferred.unsafeMake<void>(FiberId.none) }
        Effect.runFork(
          report(ConnectionState.Blocked({ since: clock.unsafeCurrentTimeMillis(), reason: String(reason) }))
        )
      })
      connection.on("unblocked", () => {
        const blocked = session.blocked
        session.blocked = undefined
        if (blocked !== undefined) Deferred.unsafeDone(blocked.lifted, Effect.void)
        Effect.runFork(report(ConnectionState.Up({ since: clock.unsafeCurrentTimeMillis() })))
      })
      channel.on("return", (message: { readonly properties: { readonly messageId?: unknown } }) => {
        const id = message.properties.messageId
        if (typeof id === "string") session.returned.add(id)
      })
      const now = yield* Clock.currentTimeMillis
      yield* report(ConnectionState.Up({ since: now }))
      if (opened++ > 0) yield* Metric.increment(Metric.tagged(Metrics.reconnects, "role", options.role))
      failedAttempts = 0
      return Option.some(session)
    }).pipe(
      Effect.provideService(AmqpClient, client),
      Effect.tapError((error) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          if (failedAttempts++ === 0) failingSince = now
          yield* report(
            ConnectionState.Reconnecting({ since: failingSince, attempt: failedAttempts, error: error.message })
          )
        })
      )
    )

    /** The session to publish on: the current one while it is sound, else a new one (the old one released). */
    const current = lock.withPermits(1)(Effect.gen(function*() {
      const existing = yield* ScopedRef.get(ref)
      const now = yield* Clock.currentTimeMillis
      if (Option.isSome(existing)) {
        const s = existing.value
        const silent = s.blocked === undefined &&
          [...s.pending.values()].some((p) =>
            now - p.sentAtMs > SilentConfirmTimeouts * Duration.toMillis(confirmTimeout)
          )
        if (s.open && !silent) return s
        s.open = false
        yield* ScopedRef.set(ref, Effect.succeed(Option.none()))
      }
      yield* ScopedRef.set(ref, connect)
      return Option.getOrThrow(yield* ScopedRef.get(ref))
    }))

    const publishesOf = Metric.tagged(Metrics.publishes, "role", options.role)
    const publishesBy = (outcome: string) => Metric.tagged(publishesOf, "outcome", outcome)

    const outcomeOfConfirm = (s: Session, m: RawPublish, err: unknown): PublishOutcome => {
      if (s.returned.delete(m.options.messageId)) {
        return new Rejected({
          reason: "returned",
          detail: `no queue is bound for '${m.routingKey}' on '${m.exchange || "(default)"}'`
        })
      }
      if (err == null) return new Confirmed()
      if (err instanceof Error && err.message === NackMessage) {
        return new Rejected({ reason: "nacked", detail: "the broker nacked the message" })
      }
      // amqplib fails every unconfirmed publish with 'channel closed' before the channel's
      // own 'close' event: the broker may or may not have it.
      return new Unknown({ reason: "channel-closed", detail: describeCause(err) })
    }

    /**
     * Sends `m` now, unless it is in flight already on this session, or the broker
     * confirmed it late; either way, its outcome to await. Plain code, not an Effect: it runs once per message, and the
     * relay sends a window of them at a time.
     */
    const send = (s: Session, m: RawPublish, nowMs: number): Sent => {
      const key = keyOf(m)
      const inFlight = s.pending.get(key)
      if (inFlight !== undefined) {
        inFlight.abandoned = false
        return { key, outcome: inFlight.outcome }
      }
      const outcome = Deferred.unsafeMake<PublishOutcome>(FiberId.none)
      if (confirmedLate.delete(key)) {
        Deferred.unsafeDone(outcome, Effect.succeed(new Confirmed()))
        return { key, outcome }
      }
      const pending: Pending = { outcome, sentAtMs: nowMs, abandoned: false }
      s.pending.set(key, pending)
      const settle = (result: PublishOutcome) => {
        s.pending.delete(key)
        if (result._tag === "Confirmed" && pending.abandoned) remember(key)
        Deferred.unsafeDone(outcome, Effect.succeed(result))
      }
      try {
        s.channel.publish(
          m.exchange,
          m.routingKey,
          m.content,
          { ...m.options, mandatory: true },
          (err) => settle(outcomeOfConfirm(s, m, err))
        )
      } catch (cause) {
        const detail = describeCause(cause)
        settle(
          s.open && !(cause instanceof Error && cause.name === "IllegalOperationError")
            ? new Rejected({ reason: "refused", detail })
            : new Unknown({ reason: "channel-closed", detail })
        )
      }
      return { key, outcome }
    }

    const timedOut = new Unknown({
      reason: "confirm-timeout",
      detail: `no confirm within ${Duration.format(confirmTimeout)}`
    })

    /**
     * The outcomes of a batch sent together, under one deadline of `confirmTimeout`: each
     * confirmed by then has its outcome, the others are `Unknown(confirm-timeout)`. One
     * timer for the batch, not a fiber and a timer per message.
     */
    const awaitConfirms = (s: Session, inFlight: ReadonlyArray<Sent>) =>
      Effect.forEach(inFlight, (sent) => Deferred.await(sent.outcome)).pipe(
        Effect.timeoutOption(confirmTimeout),
        Effect.flatMap(Option.match({
          onSome: (outcomes): Effect.Effect<ReadonlyArray<PublishOutcome>> => Effect.succeed(outcomes),
          onNone: () =>
            Effect.forEach(inFlight, (sent) =>
              Effect.flatMap(
                Deferred.poll(sent.outcome),
                Option.match({
                  onNone: (): Effect.Effect<PublishOutcome> =>
                    Effect.sync(() => {
                      // Nobody waits for it any more: a confirm that still comes is a late one.
                      const pending = s.pending.get(sent.key)
                      if (pending !== undefined) pending.abandoned = true
                      return timedOut
                    }),
                  onSome: (done) => done
                })
              ))
        }))
      )

    const publish = (messages: ReadonlyArray<RawPublish>): Effect.Effect<ReadonlyArray<PublishOutcome>> =>
      Effect.gen(function*() {
        if (messages.length === 0) {
          return []
        }
        const opened = yield* Effect.either(current)
        if (opened._tag === "Left") {
          const detail = opened.left.message
          return messages.map(() => new Unknown({ reason: "broker-unavailable", detail }))
        }
        const s = opened.right
        const blocked = s.blocked
        if (blocked !== undefined) {
          yield* Effect.logWarning("the broker blocks publishing; waiting").pipe(
            Effect.annotateLogs({ reason: blocked.reason })
          )
          yield* Effect.raceFirst(Deferred.await(blocked.lifted), Deferred.await(s.lost))
        }
        if (!s.open) {
          return messages.map(() => new Unknown({ reason: "channel-closed", detail: "the connection closed" }))
        }
        const now = yield* Clock.currentTimeMillis
        const inFlight = messages.map((m) => send(s, m, now))
        const outcomes = yield* awaitConfirms(s, inFlight)
        const confirmedAt = yield* Clock.currentTimeMillis
        const counts = new Map<string, number>()
        for (const o of outcomes) {
          const label = o._tag === "Confirmed" ? "confirmed" : o._tag === "Rejected" ? o.reason : "unknown"
          counts.set(label, (counts.get(label) ?? 0) + 1)
        }
        for (const [label, n] of counts) yield* Metric.incrementBy(publishesBy(label), n)
        // One observation per confirmed publish, as the histogram's help says.
        for (const _ of outcomes.filter((o) => o._tag === "Confirmed")) {
          yield* Metric.update(Metrics.publishConfirmSeconds, (confirmedAt - now) / 1000)
        }
        if (outcomes.some((o) => o._tag === "Rejected" && o.reason === "returned")) s.open = false
        if (outcomes.every((o) => o._tag === "Rejected" && o.reason === "nacked")) {
          if (++s.nackedBatches >= NackedBatchesBeforeReopen) s.open = false
        } else if (outcomes.some((o) => o._tag === "Confirmed")) {
          s.nackedBatches = 0
        }
        return outcomes
      })

    return { publish, connect: Effect.ignore(current) } satisfies AmqpPublisher
  })

/**
 * The publisher an operator command uses to send copies to one handler's exchange (a dead
 * letter's replay, reconciliation's redelivery): its own connection,
 * `<prefix>-operator-publisher`, declaring that handler's part of the topology. Needs
 * `AmqpClient` and a scope.
 */
export const makeOperatorPublisher = (settings: SettingsShape, handler: HandlerName) =>
  makeAmqpPublisher({
    access: brokerAccessOf(settings),
    connectionName: `${settings.prefix}-operator-publisher`,
    role: "operator",
    topology: topologyPlanOf(settings, handler),
    confirmTimeout: settings.confirmTimeout
  })
