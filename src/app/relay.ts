import { Clock, Data, Duration, Effect } from "effect"
import { relayBackoff, Settings } from "../config.js"
import { EventBus } from "../ports/EventBus.js"
import { Outbox } from "../ports/Outbox.js"
import { OutboxSignal } from "../ports/OutboxSignal.js"

/** What one drain did: how many rows it sent and how each ended. */
export interface DrainResult {
  readonly attempted: number
  readonly confirmed: number
  readonly rejected: number
  readonly unknown: number
}

/** Some publishes of a batch were not confirmed; their rows stay pending and the relay backs off. */
export class RelayBatchIncomplete extends Data.TaggedError("RelayBatchIncomplete")<DrainResult> {}

/**
 * Publishes up to `window` pending outbox rows, oldest first, all in flight at once, and
 * marks published exactly those the broker confirmed. A rejected or unknown publish keeps
 * its row pending (same `message_id` next time), so a later row may reach the broker
 * before an earlier one: receivers order by revision, not by arrival. Fails with
 * `RelayBatchIncomplete` when any publish was not confirmed, or `PersistenceError`.
 */
export const drainOnce = Effect.fn("Relay.drain")(function*(window: number) {
  const outbox = yield* Outbox
  const bus = yield* EventBus
  const batch = yield* outbox.pending(window)
  if (batch.length === 0) return { attempted: 0, confirmed: 0, rejected: 0, unknown: 0 } satisfies DrainResult
  const outcomes = yield* bus.publish(batch.map((row) => row.envelope))
  const confirmed = batch.filter((_, i) => outcomes[i]?._tag === "Confirmed").map((row) => row.envelope.messageId)
  yield* outbox.markPublished(confirmed, yield* Clock.currentTimeMillis)
  const result: DrainResult = {
    attempted: batch.length,
    confirmed: confirmed.length,
    rejected: outcomes.filter((o) => o._tag === "Rejected").length,
    unknown: outcomes.filter((o) => o._tag === "Unknown").length
  }
  for (const [i, outcome] of outcomes.entries()) {
    if (outcome._tag !== "Confirmed") {
      yield* Effect.logWarning("publish not confirmed; the row stays pending").pipe(
        Effect.annotateLogs({ messageId: batch[i]?.envelope.messageId, outcome: outcome._tag, reason: outcome.reason, detail: outcome.detail })
      )
    }
  }
  if (result.confirmed < result.attempted) return yield* new RelayBatchIncomplete(result)
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
    const signal = yield* OutboxSignal
    const leaseMs = Duration.toMillis(settings.relayLeaseTtl)

    const step = Effect.gen(function*() {
      const leader = yield* outbox.acquireLease(owner, leaseMs, yield* Clock.currentTimeMillis)
      if (!leader) return yield* signal.wait(settings.relayPollInterval)
      const result = yield* drainOnce(settings.relayWindow)
      if (result.attempted < settings.relayWindow) yield* signal.wait(settings.relayPollInterval)
    }).pipe(
      Effect.tapError((error) => Effect.logWarning("relay drain failed; backing off", error)),
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
