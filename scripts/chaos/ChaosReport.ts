/**
 * ChaosReport: the tables a chaos run prints at its end: the requests and their answers,
 * the faults by kind and one by one with their recovery times, what the receivers hold
 * (stale arrivals, duplicates absorbed), each role's memory, the log levels, and the
 * invariants with their verdict.
 */
import type { DeliveryFacts } from "./DeliveryFacts.js"
import { FaultDescriptions, type FaultKind } from "./FaultPlan.js"
import type { Check } from "./Invariants.js"
import type { LoadClients } from "./LoadClients.js"
import type { LogScanResult } from "./LogScan.js"
import type { Recovery } from "./RecoveryTimes.js"
import type { RoleName, RoleProcess } from "./RoleProcess.js"

const pad = (s: string | number, n: number) => String(s).padEnd(n)
const num = (s: string | number, n: number) => String(s).padStart(n)
const secs = (ms: number | undefined) => (ms === undefined ? "never" : `${(ms / 1000).toFixed(1)} s`)
const mb = (kb: number | undefined) => (kb === undefined ? "-" : `${(kb / 1024).toFixed(0)} MB`)

const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) =>
    `  ${cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join("  ")}`.trimEnd()
  return [line(header), ...rows.map(line)].join("\n")
}

const stats = (values: ReadonlyArray<number | undefined>) => {
  const known = values.filter((v): v is number => v !== undefined).sort((a, b) => a - b)
  if (known.length === 0) return { min: "-", median: "-", max: values.length > 0 ? "never" : "-" }
  return {
    min: secs(known[0]),
    median: secs(known[Math.floor((known.length - 1) / 2)]),
    max: known.length < values.length ? "never" : secs(known.at(-1))
  }
}

export const requestsSection = (load: LoadClients, planned: number): string => {
  const r = load.records
  const count = (f: (x: typeof r[number]) => boolean) => r.filter(f).length
  const retries = [...load.retries.entries()].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} ${n}`).join(", ") ||
    "none"
  const rows: Array<[string, number, string?]> = [
    [
      "requests sent",
      r.length,
      r.length > planned ? `${planned} planned, ${r.length - planned} more while the last faults ran` : ""
    ],
    ["202 accepted (new)", count((x) => x.outcome === "new")],
    [
      "202 replay of a retried request",
      count((x) => x.outcome === "replay" && x.intent !== "repeat"),
      "its first answer was lost (API killed), the retry got the same ids"
    ],
    [
      "202 replay of a repeated request",
      count((x) => x.outcome === "replay" && x.intent === "repeat"),
      "same Idempotency-Key and body, same ids"
    ],
    ["409 stale, asked for", count((x) => x.outcome === "stale" && x.intent === "stale")],
    [
      "409 stale, lost a race",
      count((x) => x.outcome === "stale" && x.intent === "contended"),
      "two clients on one shared material"
    ],
    ["unexpected answers", count((x) => x.outcome === "unexpected")],
    ["no final answer", count((x) => x.outcome === "gave-up")],
    ["requests retried", count((x) => x.attempts > 1), `retries: ${retries}`]
  ]
  return ["Requests", ...rows.map(([label, n, note]) => `  ${pad(label, 34)}${num(n, 7)}${note ? `   ${note}` : ""}`)]
    .join("\n")
}

export const faultsSection = (recoveries: ReadonlyArray<Recovery>, t0: number): string => {
  const kinds = [...new Set(recoveries.map((r) => r.fault.kind))] as Array<FaultKind>
  const byKind = table(
    ["fault", "count", "held (median)", "resumed min", "median", "max", "fresh event through, max"],
    kinds.map((kind) => {
      const of = recoveries.filter((r) => r.fault.kind === kind)
      const held = stats(of.map((r) => r.fault.endedAt - r.fault.startedAt))
      const resumed = stats(of.map((r) => r.resumedMs))
      const fresh = stats(of.filter((r) => !r.noLoadAfter).map((r) => r.freshMs))
      return [kind, String(of.length), held.median, resumed.min, resumed.median, resumed.max, fresh.max]
    })
  )
  const one = table(
    ["#", "at", "waited", "fault", "held", "resumed", "(last path)", "fresh", "detail"],
    recoveries.map((r, i) => [
      String(i + 1),
      `${((r.fault.startedAt - t0) / 1000).toFixed(0)} s`,
      `${(r.fault.steadyWaitMs / 1000).toFixed(0)} s${r.fault.notSteady !== undefined ? "!" : ""}`,
      r.fault.kind,
      secs(r.fault.endedAt - r.fault.startedAt),
      secs(r.resumedMs),
      r.slowest ?? "",
      r.noLoadAfter ? "no load" : secs(r.freshMs),
      [
        r.fault.error !== undefined ? `NOT INJECTED: ${r.fault.error}` : r.fault.detail,
        r.fault.notSteady !== undefined ? `(not steady before: ${r.fault.notSteady})` : ""
      ].join(" ").trim()
    ])
  )
  const legend = kinds.map((k) => `  ${pad(k, 18)}${FaultDescriptions[k]}`).join("\n")
  return [
    `Faults injected: ${recoveries.length}`,
    byKind,
    "",
    "  resumed: from the fault's end to the next 202 / confirmed publish / receipt on each path it stood in;",
    "  fresh: from the fault's end until the first event accepted after it was applied at both receivers;",
    "  at: seconds after the load started; waited: how long the run waited for the flow to be steady after the",
    "  previous fault (! = it gave up, see detail).",
    "",
    one,
    "",
    legend
  ].join("\n")
}

export const deliverySection = (facts: DeliveryFacts, logs: LogScanResult): string => {
  const catalog = [...facts.catalog.receipts.values()]
  const retried = logs.retried.get("catalog.log") ?? new Set<string>()
  const stale = [...facts.catalog.receipts.entries()].filter(([, r]) => r.outcome === "stale").map(([id]) => id)
  const staleRetried = stale.filter((id) => retried.has(id)).length
  const audit = [...facts.audit.receipts.values()]
  const sum = (xs: ReadonlyArray<{ duplicates: number }>) => xs.reduce((n, x) => n + x.duplicates, 0)
  const rows: Array<[string, number, string?]> = [
    ["events accepted (api.db)", facts.accepted.length],
    ["published (confirmed)", facts.outbox.published, `pending ${facts.outbox.pending}, parked ${facts.outbox.parked}`],
    [
      "catalog: applied",
      catalog.filter((r) => r.outcome === "applied").length,
      `entries ${facts.catalog.entries.size}`
    ],
    [
      "catalog: stale arrivals",
      stale.length,
      `an older revision came after a newer one: ${staleRetried} back from a retry queue, ${
        stale.length - staleRetried
      } reordered before the queue`
    ],
    ["catalog: messages sent to retry", retried.size, "transient failures (the lock), per catalog.log"],
    ["catalog: duplicates absorbed", sum(catalog), "sum of inbox.duplicates"],
    [
      "audit: applied",
      audit.filter((r) => r.outcome === "applied").length,
      `records ${[...facts.audit.records.values()].reduce((a, b) => a + b, 0)}`
    ],
    ["audit: duplicates absorbed", sum(audit), "sum of inbox.duplicates"]
  ]
  return ["Delivery", ...rows.map(([label, n, note]) => `  ${pad(label, 34)}${num(n, 7)}${note ? `   ${note}` : ""}`)]
    .join("\n")
}

export const memorySection = (
  roles: Readonly<Record<RoleName, RoleProcess>>,
  broker: { readonly start: number | undefined; readonly end: number | undefined }
): string => {
  const rows = Object.values(roles).map((role) => {
    const first = role.incarnations[0]
    const last = role.incarnations.at(-1)
    const peak = Math.max(0, ...role.incarnations.map((i) => i.rssPeak))
    const killed = role.incarnations.filter((i) => i.exit?.cause === "killed").length
    const lastLife = last === undefined
      ? "-"
      : `${(((last.exit?.at ?? Date.now()) - last.startedAt) / 1000).toFixed(0)} s`
    const startUp = stats(role.incarnations.map((i) => (i.readyAt === undefined ? undefined : i.readyAt - i.startedAt)))
    return [
      role.role,
      String(role.incarnations.length),
      String(killed),
      `${startUp.median} / ${startUp.max}`,
      mb(first?.rssAtReady),
      mb(last?.rssLast),
      lastLife,
      mb(peak)
    ]
  })
  rows.push(["broker (beam.smp)", "-", "-", "-", mb(broker.start), mb(broker.end), "-", "-"])
  return [
    "Processes: start-up (spawn to ready, median / max) and memory (RSS)",
    table(["process", "processes", "killed", "start-up", "RSS at start", "at end", "(end process lived)", "peak"], rows)
  ].join("\n")
}

export const logSection = (logs: LogScanResult): string => {
  const rows = [...logs.levels.entries()].map(([file, c]) => [file, String(c.warn), String(c.error), String(c.fatal)])
  const messages = [...logs.errorMessages.entries()].flatMap(([file, m]) =>
    [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, 6).map(([msg, n]) =>
      `  ${pad(file, 14)}${num(n, 5)}  ${msg.slice(0, 140)}`
    )
  )
  return [
    "Logs",
    table(["file", "WARN", "ERROR", "FATAL"], rows),
    ...(messages.length > 0 ? ["  error and fatal messages:", ...messages] : [])
  ].join("\n")
}

export const invariantsSection = (checks: ReadonlyArray<Check>): string =>
  [
    "Invariants",
    ...checks.map((c) =>
      `  ${c.ok ? "ok  " : "FAIL"}  ${pad(c.name, 62)}${num(c.value, 7)}${c.note ? `   ${c.note}` : ""}`
    )
  ].join("\n")
