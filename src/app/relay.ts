import { Clock, Data, Duration, Effect, Exit, Option, Ref, type Tracer } from "effect"
import { rejectedRowDelay, relayBackoff, Settings } from "../config.js"
import { describeCause, type PersistenceError } from "../domain/errors.js"
import { EventBus, type Unknown } from "../ports/EventBus.js"
import { type LeaseHolder, Outbox, type OutboxMessage, type Rejection } from "../ports/Outbox.js"
import { OutboxSignal } from "../ports/OutboxSignal.js"
import { Transaction } from "../ports/Transaction.js"
import { parseTraceparent, traceparentOf, TracingEnabled } from "./tracing.js"

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
export class RelayBatchIncomplete
  extends Data.TaggedError("RelayBatchIncomplete")<DrainResult & { readonly detail: string }>
{}

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
          attributes: {
            "messaging.system": "rabbitmq",
            "messaging.message.id": row.envelope.messageId,
            "messaging.destination.name": row.envelope.type
          },
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
  if (batch.length === 0) {
    return { attempted: 0, confirmed: 0, rejected: 0, parked: 0, unknown: 0 } satisfies DrainResult
  }
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
        Effect.annotateLogs({
          messageId: row.envelope.messageId,
          outcome: outcome._tag,
          reason: outcome.reason,
          detail: outcome.detail
        })
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
      Effect.annotateLogs({
        rejected: result.rejected,
        parked: result.parked,
        of: result.attempted,
        example: example.error
      })
    )
  }
  if (unknown !== undefined) {
    return yield* new RelayBatchIncomplete({ ...result, detail: `${unknown.reason}: ${unknown.detail}` })
  }
  return result
})

/** The relay lost its lease while it led: another relay took it, or it could not renew it in time. */
class LeaseLost extends Data.TaggedError("LeaseLost")<{ readonly detail: string }> {}

const isLost = (error: { readonly _tag: string }) =>
  error._tag === "PersistenceError" && (error as PersistenceError).kind === "lost"

/**
 * The relay. It waits for the outbox lease, polling every eighth of the lease
 * (`DOSTAVKA_RELAY_LEASE_MS`, 2 s: every 250 ms) and logging once per holder who holds
 * it and until when. Once it holds the lease it leads:
 * - a fiber of its own renews the lease every quarter of it, whatever the drain is
 *   waiting for (a confirm may take longer than the lease);
 * - the drain loop publishes up to `relayWindow` rows at a time, and sleeps until the API
 *   rings or `relayPollInterval` passes when the outbox is empty; after a failed drain it
 *   backs off by `relayBackoff`;
 * - it sends a batch only while at least half the lease is left, so that the rows it
 *   sends always go out before any other relay could take the lease: two relays never
 *   publish at the same time;
 * - another owner found at a renewal, or a lease that ran out unrenewed, ends the lead and
 *   it waits again.
 * A relay killed holds back publishing for at most the lease and one poll (about 2.25 s at
 * the defaults). Releases the lease when interrupted. Fails only with a `PersistenceError`
 * of kind `lost`: its database file is gone, and the role must stop.
 */
export const runRelay = (owner: string) =>
  Effect.gen(function*() {
    const settings = yield* Settings
    const outbox = yield* Outbox
    const transaction = yield* Transaction
    const signal = yield* OutboxSignal
    const leaseMs = Duration.toMillis(settings.relayLeaseTtl)
    const acquire = Effect.flatMap(Clock.currentTimeMillis, (now) =>
      transaction.run(outbox.acquireLease(owner, leaseMs, now)))

    /** Leads from `held` until the lease is lost (then succeeds) or the database file is (then fails). */
    const lead = (held: LeaseHolder) =>
      Effect.gen(function*() {
        const expiresAt = yield* Ref.make(held.expiresAtMs)
        yield* Effect.logInfo("relay holds the lease").pipe(
          Effect.annotateLogs({ until: new Date(held.expiresAtMs).toISOString() })
        )
        const renew = Effect.gen(function*() {
          yield* Effect.sleep(Duration.millis(leaseMs / 4))
          const renewed = yield* Effect.either(acquire)
          const now = yield* Clock.currentTimeMillis
          if (renewed._tag === "Right") {
            if (renewed.right.owner !== owner) {
              return yield* new LeaseLost({ detail: `taken by ${renewed.right.owner}` })
            }
            yield* Ref.set(expiresAt, renewed.right.expiresAtMs)
          } else if (isLost(renewed.left)) {
            return yield* renewed.left
          } else if (now >= (yield* Ref.get(expiresAt))) {
            return yield* new LeaseLost({ detail: `not renewed in time: ${describeCause(renewed.left.cause)}` })
          }
        }).pipe(Effect.forever)
        // Every send, a retry's included, waits for half the lease left: a renewal stuck
        // on a database lock pauses publishing before the lease can run out.
        const halfTheLeaseLeft = Effect.gen(function*() {
          for (;;) {
            const left = (yield* Ref.get(expiresAt)) - (yield* Clock.currentTimeMillis)
            if (left >= leaseMs / 2) {
              return
            }
            if (left <= 0) {
              return yield* new LeaseLost({ detail: "the lease ran out unrenewed" })
            }
            yield* Effect.sleep(Duration.millis(Math.min(left, leaseMs / 8)))
          }
        })
        const drainStep = Effect.gen(function*() {
          yield* halfTheLeaseLeft
          const result = yield* drainOnce({ window: settings.relayWindow, parkAfter: settings.parkAfter })
          if (result.attempted < settings.relayWindow) {
            yield* signal.wait(settings.relayPollInterval)
          }
        }).pipe(
          Effect.tapError((error) =>
            error._tag === "RelayBatchIncomplete"
              ? Effect.logWarning("publishes without a confirm; backing off").pipe(Effect.annotateLogs({
                unknown: error.unknown,
                confirmed: error.confirmed,
                of: error.attempted,
                cause: error.detail
              }))
              : error._tag === "PersistenceError"
              ? Effect.logWarning("relay drain failed; backing off").pipe(
                Effect.annotateLogs({ operation: error.operation, kind: error.kind, cause: describeCause(error.cause) })
              )
              : Effect.void
          ),
          // A database file removed under the relay is not a failure to wait out, nor a lost lease.
          Effect.retry({
            schedule: relayBackoff,
            while: (error) =>
              error._tag !== "LeaseLost" && !isLost(error)
          })
        )
        const drain = Effect.forever(drainStep)
        return yield* Effect.raceFirst(renew, drain).pipe(
          Effect.catchTag(
            "LeaseLost",
            (lost) => Effect.logWarning("relay lost the lease").pipe(Effect.annotateLogs({ detail: lost.detail }))
          )
        )
      })

    /** Waits for the lease: logs the holder once per holder, and polls every eighth of the lease. */
    const follow = Effect.gen(function*() {
      let waitingFor: string | undefined
      for (;;) {
        const holder = yield* Effect.either(acquire)
        if (holder._tag === "Left") {
          if (isLost(holder.left)) return yield* holder.left
          yield* Effect.logWarning("relay could not read the lease; trying again").pipe(
            Effect.annotateLogs({ cause: describeCause(holder.left.cause) })
          )
        } else if (holder.right.owner === owner) {
          yield* lead(holder.right)
          waitingFor = undefined
          continue
        } else if (holder.right.owner !== waitingFor) {
          waitingFor = holder.right.owner
          yield* Effect.logInfo("relay waits for the lease").pipe(
            Effect.annotateLogs({ holder: holder.right.owner, until: new Date(holder.right.expiresAtMs).toISOString() })
          )
        }
        yield* Effect.sleep(Duration.millis(leaseMs / 8))
      }
    })

    yield* Effect.logInfo("relay started").pipe(
      Effect.annotateLogs({
        owner,
        window: settings.relayWindow,
        pollMs: Duration.toMillis(settings.relayPollInterval),
        leaseMs
      })
    )
    return yield* follow.pipe(Effect.ensuring(Effect.ignore(outbox.releaseLease(owner))))
  })
