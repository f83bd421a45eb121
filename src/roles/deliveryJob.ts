import { FileSystem, HttpClient, HttpClientRequest, HttpServer } from "@effect/platform"
import { Clock, Console, Data, Duration, Effect, Layer, Option, Schema } from "effect"
import { AuditLog } from "../ports/AuditLog.js"
import { CatalogStore } from "../ports/CatalogStore.js"
import { Inbox } from "../ports/Inbox.js"
import { Outbox } from "../ports/Outbox.js"
import { ApiReader, AuditReader, CatalogReader } from "./databases.js"

/** One line of `data/materials.jsonl`: a publication request and the answer it must get. */
const DatasetLine = Schema.parseJson(Schema.Struct({
  idempotency_key: Schema.String,
  material_id: Schema.String,
  revision: Schema.Number,
  title: Schema.String,
  summary: Schema.String,
  body: Schema.String,
  expect: Schema.Literal("accepted", "replay", "stale")
}))

/** The job did not end as the data set says it must. */
export class DeliveryJobFailed extends Data.TaggedError("DeliveryJobFailed")<{ readonly detail: string }> {
  override get message() {
    return this.detail
  }
}

/** What the job saw: the API's answers and what each receiver holds afterwards. */
export interface DeliveryReport {
  readonly requests: number
  readonly accepted: number
  readonly replayed: number
  readonly rejectedStale: number
  readonly rejectedOther: number
  readonly unexpected: number
  readonly published: number
  readonly pending: number
  readonly catalog: {
    readonly applied: number
    readonly stale: number
    readonly duplicates: number
    readonly entries: number
  }
  readonly audit: { readonly applied: number; readonly duplicates: number; readonly records: number }
}

const Accepted = Schema.Struct({ request_id: Schema.String, event_id: Schema.String, status: Schema.String })

/**
 * The main job: POSTs every line of `datasetPath` (JSON Lines) to the running API, in
 * file order, with its idempotency key; checks each answer against the line's `expect`
 * (202 new, 202 replayed, 409 stale); then waits (at most `deadline`) until the catalog
 * and the audit inboxes hold a receipt for every accepted event, and returns the report.
 * Fails with `DeliveryJobFailed` if an answer was not the expected one or the deadline passed.
 */
export const runDeliveryJob = (datasetPath: string, deadline: Duration.DurationInput = "120 seconds") =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const server = yield* HttpServer.HttpServer
    const port = server.address._tag === "TcpAddress" ? server.address.port : 0
    const client = (yield* HttpClient.HttpClient).pipe(HttpClient.filterStatus(() => true))
    const lines = (yield* fs.readFileString(datasetPath)).split("\n").filter((l) => l.trim() !== "")

    const eventIds = new Set<string>()
    let accepted = 0, replayed = 0, rejectedStale = 0, rejectedOther = 0, unexpected = 0
    for (const [index, text] of lines.entries()) {
      const line = yield* Schema.decodeUnknown(DatasetLine)(text).pipe(
        Effect.mapError((e) => new DeliveryJobFailed({ detail: `${datasetPath}:${index + 1}: ${e.message}` }))
      )
      const { idempotency_key, expect, ...command } = line
      const response = yield* HttpClientRequest.post(`http://127.0.0.1:${port}/v1/publications`).pipe(
        HttpClientRequest.setHeader("idempotency-key", idempotency_key),
        HttpClientRequest.bodyUnsafeJson(command),
        client.execute
      )
      const isReplay = response.headers["idempotent-replayed"] === "true"
      const outcome = response.status === 202
        ? (isReplay ? "replay" : "accepted")
        : response.status === 409
        ? "stale"
        : `HTTP ${response.status}`
      if (response.status === 202) {
        const body = yield* Effect.flatMap(response.json, Schema.decodeUnknown(Accepted))
        eventIds.add(body.event_id)
        if (isReplay) replayed++
        else accepted++
      } else if (response.status === 409) rejectedStale++
      else rejectedOther++
      // A second run finds every request already accepted: "accepted" lines come back as replays.
      const expected = outcome === expect || (expect === "accepted" && outcome === "replay")
      if (!expected) {
        unexpected++
        yield* Effect.logError("unexpected answer").pipe(
          Effect.annotateLogs({ line: index + 1, expected: expect, got: outcome, body: yield* response.text })
        )
      }
    }

    // Read-only connections of the job's own: the roles' stores are private to them,
    // and a second writer in this process could stall theirs.
    const api = yield* Layer.build(ApiReader)
    const catalogDb = yield* Layer.build(CatalogReader)
    const auditDb = yield* Layer.build(AuditReader)
    // Each poll asks only for the receipts still missing, so the whole wait costs about
    // one lookup per event and receiver, not one per event, receiver and poll.
    const awaiting = { catalog: new Set(eventIds), audit: new Set(eventIds) }
    const collect = (handler: "catalog" | "audit") =>
      Effect.flatMap(
        Inbox,
        (inbox) =>
          Effect.forEach([...awaiting[handler]], (id) =>
            Effect.map(inbox.find(handler, id), (receipt) => {
              if (Option.isSome(receipt)) awaiting[handler].delete(id)
            }), { discard: true })
      )
    const startedAt = yield* Clock.currentTimeMillis
    for (;;) {
      yield* Effect.provide(collect("catalog"), catalogDb)
      yield* Effect.provide(collect("audit"), auditDb)
      if (awaiting.catalog.size === 0 && awaiting.audit.size === 0) break
      if ((yield* Clock.currentTimeMillis) - startedAt > Duration.toMillis(deadline)) {
        return yield* new DeliveryJobFailed({
          detail: `receivers did not apply every event within ${Duration.format(deadline)}: ` +
            `${awaiting.catalog.size} missing at the catalog, ${awaiting.audit.size} at the audit`
        })
      }
      yield* Effect.sleep("100 millis")
    }

    const outbox = yield* Effect.provide(
      Effect.flatMap(Outbox, (o) => Effect.flatMap(Clock.currentTimeMillis, o.stats)),
      api
    )
    const catalog = yield* Effect.provide(
      Effect.all({
        counts: Effect.flatMap(Inbox, (i) => i.counts("catalog")),
        entries: Effect.flatMap(CatalogStore, (c) => c.count)
      }),
      catalogDb
    )
    const audit = yield* Effect.provide(
      Effect.all({
        counts: Effect.flatMap(Inbox, (i) => i.counts("audit")),
        records: Effect.flatMap(AuditLog, (a) => a.count)
      }),
      auditDb
    )
    const report: DeliveryReport = {
      requests: lines.length,
      accepted,
      replayed,
      rejectedStale,
      rejectedOther,
      unexpected,
      published: outbox.published,
      pending: outbox.pending,
      catalog: { ...catalog.counts, entries: catalog.entries },
      audit: { applied: audit.counts.applied, duplicates: audit.counts.duplicates, records: audit.records }
    }
    if (unexpected > 0) {
      return yield* new DeliveryJobFailed({ detail: `${unexpected} answers differed from the data set's expectations` })
    }
    return report
  }).pipe(Effect.scoped, Effect.withSpan("DeliveryJob.run"))

/** The report as a person reads it: this run's answers, then what the databases hold. */
export const formatReport = (r: DeliveryReport): string => {
  const line = (label: string, n: number, note = "") =>
    `  ${label.padEnd(30)}${String(n).padStart(5)}${note ? `   ${note}` : ""}`
  return [
    "Dostavka delivery report",
    line("requests sent", r.requests),
    line("accepted (new)", r.accepted),
    line("accepted again (replay)", r.replayed, "same Idempotency-Key and body: same ids, nothing written"),
    line("rejected, stale revision 409", r.rejectedStale),
    line("rejected, other", r.rejectedOther),
    line("published (confirmed)", r.published, `outbox pending: ${r.pending}`),
    line(
      "catalog: applied",
      r.catalog.applied,
      `stale skipped ${r.catalog.stale}, duplicates suppressed ${r.catalog.duplicates}, entries ${r.catalog.entries}`
    ),
    line("audit: applied", r.audit.applied, `duplicates suppressed ${r.audit.duplicates}, records ${r.audit.records}`)
  ].join("\n")
}

export const printReport = (r: DeliveryReport) => Console.log(formatReport(r))
