import { Effect, Ref } from "effect"
import type { PersistenceError } from "../domain/errors.js"
import type { HandlerName } from "../domain/HandlerName.js"
import type { PublishOutcome } from "../ports/EventBus.js"
import { HandlerInboxes } from "../ports/HandlerInboxes.js"
import type { DeliveryFailure, InboxShape } from "../ports/Inbox.js"
import { Outbox, type PublishedRef } from "../ports/Outbox.js"
import { Redelivery } from "../ports/Redelivery.js"

/** Published rows read per page: one outbox query and one inbox query each. */
export const ReconcilePageSize = 1_000

/** How to look for gaps; times in ms. */
export interface GapSearch {
  readonly nowMs: number
  /** Only events published at least this long before `nowMs` count: younger ones may still be on their way. */
  readonly olderThanMs: number
  /**
   * How long a message sent to a retry tier stays "on its way" after its last failure:
   * the handler's longest retry delay. Past it, with no receipt, it counts as a gap.
   */
  readonly retryGraceMs: number
  /** Start after this sequence (everything up to it is known to be complete); 0 for all. */
  readonly afterSequence?: number
}

/** What reconciliation found for one handler. */
export interface HandlerGaps {
  readonly handler: HandlerName
  /**
   * Events the relay published (broker confirmed) that this handler has no receipt for,
   * did not dead-letter, and is not retrying, in commit order: they reached the exchange
   * but not its queue (a queue deleted or a binding removed for a while, which neither
   * confirms nor `mandatory` can reveal when another queue still matched).
   */
  readonly gaps: ReadonlyArray<PublishedRef>
  /** Published events compared. */
  readonly checked: number
  /** The highest sequence compared; 0 when none was. */
  readonly checkedThrough: number
  /**
   * The lowest sequence compared that is a gap or being retried (a retry may become a gap
   * later); `null` when there was none.
   */
  readonly firstOpen: number | null
  /**
   * The events compared that the handler dead-lettered. Not gaps, but not settled for
   * good either: a replay that fails again sends it back to retrying.
   */
  readonly dead: ReadonlyArray<PublishedRef>
}

/** A message with no receipt is lost unless it was dead-lettered, or sent to a retry tier since `retryingSinceMs`. */
const isLost = (failure: DeliveryFailure | null, retryingSinceMs: number): boolean =>
  failure === null || (failure.state === "retrying" && failure.atMs < retryingSinceMs)

/** How `refs` (one page, in sequence order) stand in `inbox`: those with no receipt, of them the lost ones and the dead ones, and the first open one. */
const classify = (
  inbox: InboxShape,
  handler: HandlerName,
  refs: ReadonlyArray<PublishedRef>,
  retryingSinceMs: number
) =>
  Effect.map(inbox.unreceived(handler, refs.map((r) => r.messageId)), (unreceived) => {
    const failures = new Map(unreceived.map((u) => [u.messageId, u.failure] as const))
    const unsettled = refs.filter((r) => failures.has(r.messageId))
    return {
      unsettled,
      lost: unsettled.filter((r) => isLost(failures.get(r.messageId)!, retryingSinceMs)),
      firstOpen: unsettled.find((r) => failures.get(r.messageId)?.state !== "dead")?.sequence,
      dead: unsettled.filter((r) => failures.get(r.messageId)?.state === "dead")
    }
  })

/**
 * Compares the outbox's published events with `handler`'s inbox, page by page in commit
 * order (`ReconcilePageSize`), and returns the gaps (see `HandlerGaps`). Reads only.
 * Fails with `PersistenceError` when either database cannot be read.
 */
export const findGaps = (
  handler: HandlerName,
  search: GapSearch
): Effect.Effect<HandlerGaps, PersistenceError, Outbox | HandlerInboxes> =>
  Effect.scoped(Effect.gen(function*() {
    const outbox = yield* Outbox
    const inbox = yield* Effect.flatMap(HandlerInboxes, (inboxes) => inboxes.of(handler))
    const publishedBeforeMs = search.nowMs - search.olderThanMs
    const retryingSinceMs = publishedBeforeMs - search.retryGraceMs
    const gaps: Array<PublishedRef> = []
    const dead: Array<PublishedRef> = []
    let after = search.afterSequence ?? 0
    let checked = 0
    let firstOpen: number | undefined
    for (;;) {
      const page = yield* outbox.publishedPage(after, publishedBeforeMs, ReconcilePageSize)
      if (page.length === 0) break
      const found = yield* classify(inbox, handler, page, retryingSinceMs)
      gaps.push(...found.lost)
      dead.push(...found.dead)
      firstOpen ??= found.firstOpen
      checked += page.length
      after = page[page.length - 1]!.sequence
      if (page.length < ReconcilePageSize) break
    }
    return { handler, gaps, checked, checkedThrough: after, firstOpen: firstOpen ?? null, dead }
  })).pipe(Effect.withSpan("Reconcile.findGaps", { attributes: { handler } }))

/** What a redelivery did: ids the broker confirmed, and the others with why. */
export interface RedeliveryResult {
  readonly redelivered: ReadonlyArray<string>
  readonly failed: ReadonlyArray<{ readonly messageId: string; readonly detail: string }>
}

const detailOf = (outcome: PublishOutcome): string =>
  outcome._tag === "Confirmed" ? "confirmed" : `${outcome._tag.toLowerCase()} (${outcome.reason}): ${outcome.detail}`

/**
 * Publishes the events of `gaps` again, from the outbox as they were first published
 * (same message id, body and properties), to `handler`'s queue only, with confirms
 * (`Redelivery`), in pages of `ReconcilePageSize`. The handler's inbox makes a copy that
 * arrives twice harmless. Fails with `PersistenceError` when the outbox cannot be read.
 */
export const redeliverGaps = (
  handler: HandlerName,
  gaps: ReadonlyArray<PublishedRef>
): Effect.Effect<RedeliveryResult, PersistenceError, Outbox | Redelivery> =>
  Effect.gen(function*() {
    const outbox = yield* Outbox
    const redelivery = yield* Redelivery
    const redelivered: Array<string> = []
    const failed: Array<{ messageId: string; detail: string }> = []
    for (let i = 0; i < gaps.length; i += ReconcilePageSize) {
      const ids = gaps.slice(i, i + ReconcilePageSize).map((g) => g.messageId)
      const rows = yield* outbox.find(ids)
      const outcomes = yield* redelivery.send(handler, rows.map((r) => r.envelope))
      for (const [k, row] of rows.entries()) {
        const outcome = outcomes[k]!
        if (outcome._tag === "Confirmed") redelivered.push(row.envelope.messageId)
        else failed.push({ messageId: row.envelope.messageId, detail: detailOf(outcome) })
      }
    }
    return { redelivered, failed }
  }).pipe(Effect.withSpan("Reconcile.redeliver", { attributes: { handler, gaps: gaps.length } }))

/**
 * Counts each handler's gaps again and again cheaply, for a view refreshed every second.
 * Per handler it remembers the sequence up to which every published event is settled
 * (applied, as receipts are never removed, or dead-lettered) and compares only what
 * follows; the dead letters it passed are looked at again each time, since a replay may
 * send one back to retrying. Always equals `findGaps(...).gaps.length`. Fails like it.
 */
export const makeGapCounter = Effect.map(
  Ref.make(new Map<HandlerName, { readonly through: number; readonly dead: ReadonlyArray<PublishedRef> }>()),
  (marks) => ({
    count: (handler: HandlerName, search: Omit<GapSearch, "afterSequence">) =>
      Effect.gen(function*() {
        const mark = (yield* Ref.get(marks)).get(handler) ?? { through: 0, dead: [] }
        const found = yield* findGaps(handler, { ...search, afterSequence: mark.through })
        // The dead letters passed before: each may have been applied, or replayed and lost since.
        const again = mark.dead.length === 0 ?
          { lost: 0, unsettled: [] } :
          yield* Effect.scoped(Effect.gen(function*() {
            const inbox = yield* Effect.flatMap(HandlerInboxes, (inboxes) => inboxes.of(handler))
            const retryingSinceMs = search.nowMs - search.olderThanMs - search.retryGraceMs
            let lost = 0
            const unsettled: Array<PublishedRef> = []
            for (let i = 0; i < mark.dead.length; i += ReconcilePageSize) {
              const page = yield* classify(inbox, handler, mark.dead.slice(i, i + ReconcilePageSize), retryingSinceMs)
              lost += page.lost.length
              unsettled.push(...page.unsettled)
            }
            return { lost, unsettled }
          }))
        const through = Math.max(mark.through, found.firstOpen === null ? found.checkedThrough : found.firstOpen - 1)
        const dead = [...again.unsettled, ...found.dead.filter((d) => d.sequence <= through)]
        yield* Ref.update(marks, (m) => new Map(m).set(handler, { through, dead }))
        return found.gaps.length + again.lost
      })
  })
)
