/**
 * Invariants: the checks a chaos run ends with, each a figure with whether it holds.
 * - the API: every answer was one the request had to get; every 202 is in api.db;
 * - lost = 0: every accepted event has an audit record and a receipt in both inboxes;
 * - duplicate effects = 0: one audit record per event id, no inbox key twice, no effect
 *   for an event the API never accepted;
 * - catalog regressions = 0: per material, the catalog holds the newest revision the
 *   API accepted (and its event id);
 * - outbox pending = 0 and parked = 0; every queue empty, dead queues included (a dead
 *   letter whose event the handler applied anyway is counted but explained);
 * - no role died that the run did not kill, each stopped cleanly on SIGTERM; the run
 *   reached quiet; every fault was injected;
 * - no stack trace and no password in any log.
 */
import type { QueueDepth } from "./BrokerNodes.js"
import type { DeliveryFacts } from "./DeliveryFacts.js"
import type { FaultRecord } from "./FaultInjector.js"
import type { RequestRecord } from "./LoadClients.js"
import type { LogScanResult } from "./LogScan.js"

export interface Check {
  readonly name: string
  readonly value: string | number
  readonly ok: boolean
  readonly note?: string
}

export interface DeadLetterInfo {
  readonly handler: "catalog" | "audit"
  readonly messageId: string
  readonly reason: string
  readonly errorTag: string
  readonly error: string
}

export interface RunOutcome {
  readonly records: ReadonlyArray<RequestRecord>
  readonly facts: DeliveryFacts
  /** Queues once the run was quiet, and again after the roles stopped. */
  readonly queuesQuiet: ReadonlyArray<QueueDepth> | undefined
  readonly queuesFinal: ReadonlyArray<QueueDepth> | undefined
  readonly deadLetters: ReadonlyArray<DeadLetterInfo>
  readonly deadLettersError: string | undefined
  readonly quiet: { readonly reached: boolean; readonly detail: string }
  readonly deaths: ReadonlyArray<string>
  readonly unclean: ReadonlyArray<string>
  readonly faults: ReadonlyArray<FaultRecord>
  readonly logs: LogScanResult
}

const list = (items: ReadonlyArray<string>, max = 5) =>
  items.length === 0
    ? ""
    : `${items.slice(0, max).join(", ")}${items.length > max ? `, … (${items.length - max} more)` : ""}`

export const evaluate = (run: RunOutcome): Array<Check> => {
  const { facts, records } = run
  const checks: Array<Check> = []
  const add = (name: string, value: string | number, ok: boolean, note?: string) =>
    checks.push(note === undefined ? { name, value, ok } : { name, value, ok, note })

  // The API's answers.
  const unexpected = records.filter((r) => r.outcome === "unexpected")
  const gaveUp = records.filter((r) => r.outcome === "gave-up")
  add(
    "unexpected API answers",
    unexpected.length,
    unexpected.length === 0,
    list(unexpected.map((r) => `${r.key}: ${r.detail}`), 3)
  )
  add(
    "requests without a final answer",
    gaveUp.length,
    gaveUp.length === 0,
    list(gaveUp.map((r) => `${r.key}: ${r.detail}`), 3)
  )
  const acceptedIds = new Set(facts.accepted.map((a) => a.eventId))
  const answered202 = new Set(records.flatMap((r) => (r.status === 202 && r.eventId !== undefined ? [r.eventId] : [])))
  const notStored = [...answered202].filter((id) => !acceptedIds.has(id))
  add("202 answers not in api.db", notStored.length, notStored.length === 0, list(notStored))

  // Lost: every event the API accepted (and every 202) applied at both receivers.
  const events = new Set([...acceptedIds, ...answered202])
  const noCatalog = [...events].filter((id) => !facts.catalog.receipts.has(id))
  const noAuditReceipt = [...events].filter((id) => !facts.audit.receipts.has(id))
  const noAuditRecord = [...events].filter((id) => !facts.audit.records.has(id))
  const lost = new Set([...noCatalog, ...noAuditReceipt, ...noAuditRecord])
  add(
    "lost",
    lost.size,
    lost.size === 0,
    lost.size === 0
      ? `${events.size} events, each with an audit record and a receipt in both inboxes`
      : `missing: catalog receipt ${noCatalog.length}, audit receipt ${noAuditReceipt.length}, audit record ${noAuditRecord.length}; e.g. ${
        list([...lost], 3)
      }`
  )

  // Duplicate effects.
  const doubleRecords = [...facts.audit.records.entries()].filter(([, n]) => n > 1)
  const phantom = [
    ...[...facts.audit.records.keys()].filter((id) => !events.has(id)),
    ...[...facts.catalog.receipts.keys()].filter((id) => !events.has(id)),
    ...[...facts.audit.receipts.keys()].filter((id) => !events.has(id))
  ]
  const duplicates = doubleRecords.length + facts.catalog.repeatedKeys + facts.audit.repeatedKeys
  add(
    "duplicate effects",
    duplicates,
    duplicates === 0,
    `audit records twice ${doubleRecords.length}, inbox keys twice: catalog ${facts.catalog.repeatedKeys}, audit ${facts.audit.repeatedKeys}`
  )
  add("effects of unknown events", phantom.length, phantom.length === 0, list(phantom, 3))

  // Catalog regressions.
  const regressed: Array<string> = []
  const wrongEvent: Array<string> = []
  for (const [material, newest] of facts.newestAccepted) {
    const entry = facts.catalog.entries.get(material)
    if (entry === undefined || entry.revision < newest.revision) {
      regressed.push(`${material}: holds ${entry?.revision ?? "nothing"}, accepted ${newest.revision}`)
    } else if (entry.revision > newest.revision || entry.eventId !== newest.eventId) {
      wrongEvent.push(
        `${material}: holds r${entry.revision} ${entry.eventId}, accepted r${newest.revision} ${newest.eventId}`
      )
    }
  }
  add(
    "catalog regressions",
    regressed.length + wrongEvent.length,
    regressed.length + wrongEvent.length === 0,
    regressed.length + wrongEvent.length === 0
      ? `${facts.newestAccepted.size} materials at their newest accepted revision`
      : list([...regressed, ...wrongEvent], 3)
  )

  // Outbox and broker.
  add("outbox pending", facts.outbox.pending, facts.outbox.pending === 0)
  add("outbox parked", facts.outbox.parked, facts.outbox.parked === 0)
  const depth = (queues: ReadonlyArray<QueueDepth> | undefined, dead: boolean) =>
    queues === undefined
      ? undefined
      : queues.filter((q) => q.name.endsWith(".dead") === dead).reduce((n, q) => n + q.ready + q.unacked, 0)
  const nonEmpty = (queues: ReadonlyArray<QueueDepth> | undefined) =>
    list(
      (queues ?? []).filter((q) => !q.name.endsWith(".dead") && q.ready + q.unacked > 0).map((q) =>
        `${q.name} ${q.ready}+${q.unacked}`
      )
    )
  const quietDepth = depth(run.queuesQuiet, false)
  const finalDepth = depth(run.queuesFinal, false)
  add(
    "queue depth when quiet (ready+unacked, retry queues included)",
    quietDepth ?? "unknown",
    quietDepth === 0,
    nonEmpty(run.queuesQuiet)
  )
  add("queue depth after the roles stopped", finalDepth ?? "unknown", finalDepth === 0, nonEmpty(run.queuesFinal))
  const deadDepth = depth(run.queuesFinal ?? run.queuesQuiet, true) ?? 0
  const unexplained = run.deadLetters.filter((d) =>
    !(d.handler === "catalog" ? facts.catalog.receipts : facts.audit.receipts).has(d.messageId)
  )
  const deadOk = deadDepth === 0 ||
    (run.deadLettersError === undefined && run.deadLetters.length === deadDepth && unexplained.length === 0)
  add(
    "dead letters",
    deadDepth,
    deadOk,
    run.deadLettersError !== undefined
      ? `could not list them: ${run.deadLettersError}`
      : deadDepth === 0
      ? undefined
      : `${deadDepth - unexplained.length} explained (a copy of an event the handler applied anyway); unexplained: ${
        list(unexplained.map((d) => `${d.handler} ${d.messageId} ${d.reason} ${d.errorTag}: ${d.error}`), 3)
      }`
  )

  // Processes and the run itself.
  add("quiet reached", run.quiet.reached ? "yes" : "no", run.quiet.reached, run.quiet.detail)
  add("roles that died without being killed", run.deaths.length, run.deaths.length === 0, list(run.deaths, 4))
  add("roles that did not stop cleanly on SIGTERM", run.unclean.length, run.unclean.length === 0, list(run.unclean))
  const failedFaults = run.faults.filter((f) => f.error !== undefined)
  add(
    "faults not injected as planned",
    failedFaults.length,
    failedFaults.length === 0,
    list(failedFaults.map((f) => `${f.kind}: ${f.error}`), 3)
  )

  // Logs.
  add(
    "stack trace lines in logs",
    run.logs.stackTraceLines,
    run.logs.stackTraceLines === 0,
    list(run.logs.examples.filter((e) => e.text.startsWith("stack")).map((e) => `${e.file}:${e.line} ${e.text}`), 2)
  )
  add(
    "log lines with the broker password",
    run.logs.passwordLines,
    run.logs.passwordLines === 0,
    list(run.logs.examples.filter((e) => e.text.startsWith("password")).map((e) => `${e.file}:${e.line}`), 3)
  )
  return checks
}
