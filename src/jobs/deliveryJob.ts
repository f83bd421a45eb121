import { FileSystem, HttpClient, HttpClientRequest, HttpServer } from "@effect/platform"
import {
  Clock,
  Console,
  type Context,
  Data,
  Duration,
  Effect,
  HashSet,
  Layer,
  Option,
  Ref,
  Schedule,
  Schema
} from "effect"
import { AuditLog } from "../ports/AuditLog.js"
import { CatalogStore } from "../ports/CatalogStore.js"
import { Inbox } from "../ports/Inbox.js"
import { Outbox } from "../ports/Outbox.js"

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
 * Where the job reads its report from, each opened only once every line is posted: the
 * API owner's outbox, and each receiver's inbox and store. The roles' own stores are
 * private to them, so the process gives the job read-only connections of its own.
 */
export interface DeliveryReaders<E, R> {
  readonly api: Layer.Layer<Outbox, E, R>
  readonly catalog: Layer.Layer<Inbox | CatalogStore, E, R>
  readonly audit: Layer.Layer<Inbox | AuditLog, E, R>
}

/** How one request was answered: the `expect` values of the data set, or any other status. */
type Outcome = "accepted" | "replay" | "stale" | `HTTP ${number}`

interface Answer {
  readonly outcome: Outcome
  /** The event of a 202, new or replayed. */
  readonly eventId: Option.Option<string>
  readonly expected: boolean
}

/** This run's answers, counted. */
interface Answers {
  readonly accepted: number
  readonly replayed: number
  readonly rejectedStale: number
  readonly rejectedOther: number
  readonly unexpected: number
  readonly eventIds: HashSet.HashSet<string>
}

const noAnswers: Answers = {
  accepted: 0,
  replayed: 0,
  rejectedStale: 0,
  rejectedOther: 0,
  unexpected: 0,
  eventIds: HashSet.empty()
}

const count = (condition: boolean) => (condition ? 1 : 0)

const tally = (answers: Answers, answer: Answer): Answers => ({
  accepted: answers.accepted + count(answer.outcome === "accepted"),
  replayed: answers.replayed + count(answer.outcome === "replay"),
  rejectedStale: answers.rejectedStale + count(answer.outcome === "stale"),
  rejectedOther: answers.rejectedOther + count(answer.outcome.startsWith("HTTP ")),
  unexpected: answers.unexpected + count(!answer.expected),
  eventIds: Option.match(answer.eventId, {
    onNone: () => answers.eventIds,
    onSome: (id) => HashSet.add(answers.eventIds, id)
  })
})

/**
 * Posts line `index` of the data set to the API at `baseUrl` with its idempotency key, and
 * judges the answer against the line's `expect`; an unexpected one is logged with its line.
 */
const post = (
  client: HttpClient.HttpClient,
  baseUrl: string,
  datasetPath: string
) =>
(text: string, index: number) =>
  Effect.gen(function*() {
    const line = yield* Schema.decodeUnknown(DatasetLine)(text).pipe(
      Effect.mapError((e) => new DeliveryJobFailed({ detail: `${datasetPath}:${index + 1}: ${e.message}` }))
    )
    const { idempotency_key, expect, ...command } = line
    const response = yield* HttpClientRequest.post(`${baseUrl}/v1/publications`).pipe(
      HttpClientRequest.setHeader("idempotency-key", idempotency_key),
      HttpClientRequest.bodyUnsafeJson(command),
      client.execute
    )
    const isReplay = response.headers["idempotent-replayed"] === "true"
    const outcome: Outcome = response.status === 202
      ? (isReplay ? "replay" : "accepted")
      : response.status === 409
      ? "stale"
      : `HTTP ${response.status}`
    const eventId = response.status === 202
      ? Option.some((yield* Effect.flatMap(response.json, Schema.decodeUnknown(Accepted))).event_id)
      : Option.none()
    // A second run finds every request already accepted: "accepted" lines come back as replays.
    const expected = outcome === expect || (expect === "accepted" && outcome === "replay")
    if (!expected) {
      yield* Effect.logError("unexpected answer").pipe(
        Effect.annotateLogs({ line: index + 1, expected: expect, got: outcome, body: yield* response.text })
      )
    }
    return { outcome, eventId, expected } satisfies Answer
  })

/** How often the job looks again for the receipts still missing. */
export const receiptPolling = Schedule.spaced("100 millis")

/** The events each receiver has no receipt for yet. */
interface Missing {
  readonly catalog: ReadonlyArray<string>
  readonly audit: ReadonlyArray<string>
}

const stillMissing = (handler: "catalog" | "audit", eventIds: ReadonlyArray<string>) =>
  Effect.flatMap(
    Inbox,
    (inbox) => Effect.map(inbox.received(handler, eventIds), (received) => eventIds.filter((id) => !received.has(id)))
  )

/**
 * Polls both inboxes on `receiptPolling` until each holds a receipt for every one of
 * `eventIds`, or fails with `DeliveryJobFailed` once `deadline` has passed. Each poll is
 * one lookup per receiver (`Inbox.received`), for the receipts still missing only.
 */
const awaitReceipts = (
  eventIds: ReadonlyArray<string>,
  catalogDb: Context.Context<Inbox>,
  auditDb: Context.Context<Inbox>,
  deadline: Duration.DurationInput
) =>
  Effect.gen(function*() {
    const missing = yield* Ref.make<Missing>({ catalog: eventIds, audit: eventIds })
    const poll = Ref.get(missing).pipe(
      Effect.flatMap((m) =>
        Effect.all({
          catalog: Effect.provide(stillMissing("catalog", m.catalog), catalogDb),
          audit: Effect.provide(stillMissing("audit", m.audit), auditDb)
        })
      ),
      Effect.tap((m) => Ref.set(missing, m))
    )
    // The deadline's message counts what the last poll still missed, which `timeoutFail`'s
    // synchronous `onTimeout` cannot read: hence `timeout` and a handler.
    yield* poll.pipe(
      Effect.repeat({ schedule: receiptPolling, until: (m) => m.catalog.length === 0 && m.audit.length === 0 }),
      Effect.timeout(deadline),
      Effect.catchTag("TimeoutException", () =>
        Effect.flatMap(Ref.get(missing), (m) =>
          new DeliveryJobFailed({
            detail: `receivers did not apply every event within ${Duration.format(deadline)}: ` +
              `${m.catalog.length} missing at the catalog, ${m.audit.length} at the audit`
          })))
    )
  })

/**
 * The main job: POSTs every line of `datasetPath` (JSON Lines) to the running API, in
 * file order, with its idempotency key; checks each answer against the line's `expect`
 * (202 new, 202 replayed, 409 stale); then waits (at most `deadline`) until the catalog
 * and the audit inboxes hold a receipt for every accepted event, and returns the report
 * read from `readers`. Fails with `DeliveryJobFailed` if an answer was not the expected
 * one or the deadline passed.
 */
export const runDeliveryJob = <E, R>(
  datasetPath: string,
  readers: DeliveryReaders<E, R>,
  deadline: Duration.DurationInput = "120 seconds"
) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const server = yield* HttpServer.HttpServer
    const port = server.address._tag === "TcpAddress" ? server.address.port : 0
    const client = (yield* HttpClient.HttpClient).pipe(HttpClient.filterStatus(() => true))
    const lines = (yield* fs.readFileString(datasetPath)).split("\n").filter((l) => l.trim() !== "")

    const answers = yield* Effect.reduce(
      lines,
      noAnswers,
      (answers, text, index) =>
        Effect.map(post(client, `http://127.0.0.1:${port}`, datasetPath)(text, index), (a) => tally(answers, a))
    )

    const api = yield* Layer.build(readers.api)
    const catalogDb = yield* Layer.build(readers.catalog)
    const auditDb = yield* Layer.build(readers.audit)
    yield* awaitReceipts([...answers.eventIds], catalogDb, auditDb, deadline)

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
    const { eventIds: _, ...counted } = answers
    const report: DeliveryReport = {
      requests: lines.length,
      ...counted,
      published: outbox.published,
      pending: outbox.pending,
      catalog: { ...catalog.counts, entries: catalog.entries },
      audit: { applied: audit.counts.applied, duplicates: audit.counts.duplicates, records: audit.records }
    }
    if (answers.unexpected > 0) {
      return yield* new DeliveryJobFailed({
        detail: `${answers.unexpected} answers differed from the data set's expectations`
      })
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
