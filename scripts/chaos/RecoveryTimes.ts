/**
 * RecoveryTimes: how long the flow took to resume after each fault, computed after the
 * run from the timestamps the roles wrote (outbox confirms, inbox receipts) and the
 * clients saw (202 answers):
 * - resumed: from the fault's end to the first sign of life after it on every path the
 *   fault stood in: the API's next 202 (API killed), the relay's next confirmed publish
 *   (relay killed), the receiver's next receipt (receiver killed, catalog locked), or all
 *   three of publish, catalog receipt and audit receipt (anything done to the broker);
 * - fresh: from the fault's end until the first event the API accepted after it was
 *   applied by both receivers: the backlog the fault left included.
 */
import type { DeliveryFacts } from "./DeliveryFacts.js"
import type { FaultRecord } from "./FaultInjector.js"
import type { FaultKind } from "./FaultPlan.js"

type Stream = "api" | "relay" | "catalog" | "audit"

const streamsOf: Record<FaultKind, ReadonlyArray<Stream>> = {
  "kill-api": ["api"],
  "kill-relay": ["relay"],
  "kill-catalog": ["catalog"],
  "kill-audit": ["audit"],
  "catalog-lock": ["catalog"],
  "api-lock": ["api", "relay"],
  "close-connections": ["relay", "catalog", "audit"],
  "stop-app": ["relay", "catalog", "audit"],
  "broker-stop": ["relay", "catalog", "audit"],
  "broker-pause": ["relay", "catalog", "audit"],
  "memory-alarm": ["relay", "catalog", "audit"],
  "node-kill": ["relay", "catalog", "audit"],
  "leader-kill": ["relay", "catalog", "audit"]
}

/** The first time in ascending `times` after `t`, or undefined. */
const firstAfter = (times: ReadonlyArray<number>, t: number): number | undefined => {
  let lo = 0
  let hi = times.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (times[mid]! > t) hi = mid
    else lo = mid + 1
  }
  return times[lo]
}

export interface Recovery {
  readonly fault: FaultRecord
  /** ms from the fault's end until every path it stood in moved again; undefined if one never did. */
  readonly resumedMs: number | undefined
  /** Which path moved last. */
  readonly slowest: Stream | undefined
  /** ms from the fault's end until the first event accepted after it was applied at both receivers. */
  readonly freshMs: number | undefined
  /** No event was accepted after the fault's end (the load was over): `freshMs` says nothing. */
  readonly noLoadAfter: boolean
}

export const recoveryTimes = (
  faults: ReadonlyArray<FaultRecord>,
  facts: DeliveryFacts,
  apiAccepts: ReadonlyArray<number>
): Array<Recovery> => {
  const sorted = (values: Iterable<number>) => [...values].sort((a, b) => a - b)
  const streams: Record<Stream, ReadonlyArray<number>> = {
    api: sorted(apiAccepts),
    relay: facts.publishedTimes,
    catalog: sorted([...facts.catalog.receipts.values()].map((r) => r.receivedAt)),
    audit: sorted([...facts.audit.receipts.values()].map((r) => r.receivedAt))
  }
  const byAcceptance = [...facts.accepted].sort((a, b) => a.acceptedAt - b.acceptedAt)
  return faults.map((fault) => {
    const end = fault.endedAt
    let resumedMs: number | undefined = 0
    let slowest: Stream | undefined
    for (const stream of streamsOf[fault.kind]) {
      const next = firstAfter(streams[stream], end)
      if (next === undefined) {
        resumedMs = undefined
        slowest = stream
        break
      }
      if (next - end >= (resumedMs ?? 0)) {
        resumedMs = next - end
        slowest = stream
      }
    }
    const fresh = byAcceptance.find((a) => a.acceptedAt >= end)
    const applied = fresh === undefined
      ? undefined
      : [facts.catalog.receipts.get(fresh.eventId)?.receivedAt, facts.audit.receipts.get(fresh.eventId)?.receivedAt]
    const freshMs = applied === undefined || applied.some((t) => t === undefined)
      ? undefined
      : Math.max(...(applied as Array<number>)) - end
    return { fault, resumedMs, slowest, freshMs, noLoadAfter: fresh === undefined }
  })
}
