import { Clock, Data, Duration, Effect, Exit, Option, type Tracer } from "effect"
import { parseTraceparent, traceparentOf, TracingEnabled } from "./tracing.js"
import { rejectedRowDelay, relayBackoff, Settings } from "../config.js"
import { describeCause } from "../domain/errors.js"
import { EventBus, type Unknown } from "../ports/EventBus.js"
import { Outbox, type OutboxMessage, type Rejection } from "../ports/Outbox.js"
import { Transaction } from "../ports/Transaction.js"
import { OutboxSignal } from "../ports/OutboxSignal.js"

/** What one drain did: how many rows it sent and how each ended. */
export interface DrainResult {
  readonly attempted: number
  readonly confirmed: number
  /** Returned or nacked: deferred to a later attempt of their own, or parked. */
  readonly rejected: number
  /** Of the rejected, how many were parked now. */
  readonly parked: number
  /** No confirm, or no broker: still pending, published again after the relay's backoff. */
  readonly unknown: number
}

/** Some publishes of a batch had an unknown outcome; their rows stay pending and the relay backs off. */
export class RelayBatchIncomplete extends Data.TaggedError("RelayBatchIncomplete")<DrainResult & { readonly detail: string }> {}

/**
 * When tracing is on, a `Relay.publish` span per row, child of the span that wrote the row
 * (its `traceparent`); the message then carries the publish span's own context, so each
 * receiver's span is its child. Ended with the publish's outcome.
 */
const publishSpans = (batch: ReadonlyArray<OutboxMessage>) =>
  Effect.flatMap(TracingEnabled, (enabled) =>
    enabled
      ? Effect.forEach(batch, (row) => {
        const parent = parseTraceparent(row.envelope.traceparent)
        return Effect.makeSpan("Relay.publish", {
          kind: "producer",
          attributes: { "messaging.system": "rabbitmq", "messaging.message.id": row.envelope.messageId, "messaging.destination.name": row.envelope.type },
          ...(Option.isSome(parent) ? { parent: parent.value } : {})
        }).pipe(Effect.map((span): Tracer.Span | undefined => span))
      })
      : Effect.succeed(batch.map((): Tracer.Span | undefined => undefined)))

/**
 * Publishes up to `window` due outbox rows, oldest first, all in flight at once, then in
 * ONE transaction marks published exactly those the broker confirmed and deals with the
 * rejected ones (returned as unroutable, or nacked): each waits `rejectedRowDelay` of
 * its own before its next attempt, so it never holds back the rows behind it, and after
 * `parkAfter` rejections it is parked for an operator (`outbox retry`). An unknown
 * outcome keeps the row pending (same `message_id` next time), so a later row may reach
 * the broker before an earlier one: receivers order by revision, not by arrival.
 * Logs one line per batch that was not wholly confirmed, with the counts; each row's
 * outcome at debug level. Fails with `RelayBatchIncomplete` when an outcome was
 * unknown, or `PersistenceError`.
 */
export const drainOnce = Effect.fnUntraced(function*(options: { readonly window: number; readonly parkAfter: number }) {
  const outbox = yield* Outbox
  const bus = yield* EventBus
  const transaction = yield* Transaction
  const batch = yield* outbox.pending(options.window, yield* Clock.currentTimeMillis)
  if (batch.length === 0) return { attempted: 0, confirmed: 0, rejected: 0, parked: 0, unknown: 0 } satisfies DrainResult
  const spans = yield* publishSpans(batch)
  const outcomes = yield* bus.publish(batch.map((row, i) => {
    const span = spans[i]
    return span === undefined ? row.envelope : { ...row.envelope, traceparent: traceparentOf(span) }
  }))
  const now = yield* Clock.currentTimeMillis
  const endedAt = yield* Clock.currentTimeNanos
  for (const [i, span] of spans.entries()) {
    const outcome = outcomes[i]!
    span?.attribute("dostavka.publish.outcome", outcome._tag)
    span?.end(endedAt, outcome._tag === "Confirmed" ? Exit.void : Exit.fail(`${outcome._tag}: ${outcome.reason}`))
  }
  const confirmed: Array<string> = []
  const rejections: Array<Rejection> = []
  let unknown: Unknown | undefined
  for (const [i, row] of batch.entries()) {
    const outcome = outcomes[i]!
    if (outcome._tag === "Confirmed") confirmed.push(row.envelope.messageId)
    else if (outcome._tag === "Rejected") {
      const rejections_ = row.rejections + 1
      rejections.push({
        messageId: row.envelope.messageId,
        error: `${outcome.reason}: ${outcome.detail}`,
        retryAtMs: rejections_ >= options.parkAfter ? null : now + Duration.toMillis(rejectedRowDelay(rejections_))
      })
    } else unknown ??= outcome
    if (outcome._tag !== "Confirmed") {
      yield* Effect.logDebug("publish not confirmed").pipe(
        Effect.annotateLogs({ messageId: row.envelope.messageId, outcome: outcome._tag, reason: outcome.reason, detail: outcome.detail })
      )
    }
  }
  yield* transaction.run(Effect.zipRight(outbox.markPublished(confirmed, now), outbox.reject(rejections, now)))
  const result: DrainResult = {
    attempted: batch.length,
    confirmed: confirmed.length,
    rejected: rejections.length,
    parked: rejections.filter((r) => r.retryAtMs === null).length,
    unknown: outcomes.filter((o) => o._tag === "Unknown").length
  }
  if (result.rejected > 0) {
    const example = rejections[0]!
    yield* Effect.logWarning("broker rejected publishes; rows deferred").pipe(
      Effect.annotateLogs({ rejected: result.rejected, parked: result.parked, of: result.attempted, example: example.error })
    )
  }
  if (unknown !== undefined) {
    return yield* new RelayBatchIncomplete({ ...result, detail: `${unknown.reason}: ${unknown.detail}` })
  }
  return result
})

/**
 * The relay: forever, while it holds the outbox lease, drains the outbox in windows of
 * `relayWindow`; when the outbox is empty it sleeps until the API rings or
 * `relayPollInterval` passes. After a failed drain it backs off by `relayBackoff`. Without
 * the lease (another relay is publishing) it only polls for it. Releases the lease when
 * interrupted. Fails only with a `PersistenceError` of kind `lost`: its database file is
 * gone, and the role must stop.
 */
export const runRelay = (owner: string) =>
  Effect.gen(function*() {
    const settings = yield* Settings
    const outbox = yield* Outbox
    const transaction = yield* Transaction
    const signal = yield* OutboxSignal
    const leaseMs = Duration.toMillis(settings.relayLeaseTtl)

    const step = Effect.gen(function*() {
      const leader = yield* transaction.run(outbox.acquireLease(owner, leaseMs, yield* Clock.currentTimeMillis))
      if (!leader) return yield* signal.wait(settings.relayPollInterval)
      const result = yield* drainOnce({ window: settings.relayWindow, parkAfter: settings.parkAfter })
      if (result.attempted < settings.relayWindow) yield* signal.wait(settings.relayPollInterval)
    }).pipe(
      Effect.tapError((error) =>
        error._tag === "RelayBatchIncomplete"
          ? Effect.logWarning("publishes without a confirm; backing off").pipe(Effect.annotateLogs({
            unknown: error.unknown,
            confirmed: error.confirmed,
            of: error.attempted,
            cause: error.detail
          }))
          : Effect.logWarning("relay drain failed; backing off").pipe(
            Effect.annotateLogs({ operation: error.operation, kind: error.kind, cause: describeCause(error.cause) })
          )
      ),
      // A database file removed under the relay is not a failure to wait out.
      Effect.retry({ schedule: relayBackoff, while: (error) => !(error._tag === "PersistenceError" && error.kind === "lost") })
    )

    yield* Effect.logInfo("relay started").pipe(
      Effect.annotateLogs({ owner, window: settings.relayWindow, pollMs: Duration.toMillis(settings.relayPollInterval) })
    )
    return yield* Effect.forever(step).pipe(
      Effect.ensuring(Effect.ignore(outbox.releaseLease(owner)))
    )
  })
