import { FileSystem, HttpClient, HttpClientRequest, HttpServer } from "@effect/platform"
import {
  Clock,
  Config,
  Console,
  Context,
  Data,
  Duration,
  Effect,
  HashSet,
  Layer,
  Logger,
  LogLevel,
  Option,
  Ref,
  Schedule,
  Schema
} from "effect"
import { type HandlerName, HandlerNames } from "../domain/HandlerName.js"
import { AuditLog } from "../ports/AuditLog.js"
import { BrokerStats, type HandlerQueueFigures } from "../ports/BrokerStats.js"
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

/**
 * The job did not end as the data set says it must. When the receivers missed the
 * deadline, `report` is what they held by then (the job has printed it) and `detail`
 * ends with the likely cause (`likelyCauses`).
 */
export class DeliveryJobFailed extends Data.TaggedError("DeliveryJobFailed")<{
  readonly detail: string
  readonly report?: DeliveryReport | undefined
}> {
  override get message() {
    return this.detail
  }
}

const Accepted = Schema.Struct({ request_id: Schema.String, event_id: Schema.String, status: Schema.String })

/**
 * Where the job reads its report from, each opened only once every line is posted: the
 * API owner's outbox, and each receiver's inbox and store. The roles' own stores are
 * private to them, so the process gives the job read-only connections of its own.
 * `broker` gives the handler queues' figures (consumers, depths), read only when the
 * deadline passes, to name the likely cause; without it the cause is told from the
 * outbox and the inboxes alone.
 */
export interface DeliveryReaders<E, R> {
  readonly api: Layer.Layer<Outbox, E, R>
  readonly catalog: Layer.Layer<Inbox | CatalogStore, E, R>
  readonly audit: Layer.Layer<Inbox | AuditLog, E, R>
  readonly broker?: Layer.Layer<BrokerStats, E, R> | undefined
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

/** Where the job is: posting the data set, or waiting for each receiver's receipts of the `of` accepted events. */
type Progress =
  | { readonly phase: "sending"; readonly sent: number; readonly total: number }
  | { readonly phase: "applying"; readonly of: number; readonly applied: Readonly<Record<HandlerName, number>> }

/** The progress as one line: `sent 120/237`, then `applied catalog 180/221, audit 221/221`. */
const describeProgress = (progress: Progress): string =>
  progress.phase === "sending"
    ? `sent ${progress.sent}/${progress.total}`
    : `applied ${HandlerNames.map((h) => `${h} ${progress.applied[h]}/${progress.of}`).join(", ")}`

/** Where the progress line goes: `show` one line, and `end` once after the last one shown. */
export interface ProgressDisplayShape {
  readonly show: (line: string) => Effect.Effect<void>
  readonly end: Effect.Effect<void>
}

/**
 * On a terminal each line replaces the one before (carriage return, then ECMA-48 EL
 * `CSI 2 K` erases the line), and `end` moves to a new line, so the report starts on a
 * line of its own. A log line written meanwhile follows the progress line on the same
 * row: the roles log warnings and errors only (`withJobLogLevel`), which are rare.
 */
const terminalDisplay = (stream: NodeJS.WriteStream): ProgressDisplayShape => ({
  show: (line) =>
    Effect.sync(() => {
      stream.write(`\r\x1b[2K${line}`)
    }),
  end: Effect.sync(() => {
    stream.write("\n")
  })
})

/** Anywhere else (a pipe, a file, a CI log): one plain line each, no control sequence. */
const plainDisplay: ProgressDisplayShape = { show: (line) => Console.error(line), end: Effect.void }

/**
 * The job's progress display, stderr by default (so stdout holds the report alone): in
 * place on a terminal (`process.stderr.isTTY`), plain lines otherwise. A test provides a
 * recording one.
 */
export class ProgressDisplay extends Context.Reference<ProgressDisplay>()("dostavka/ProgressDisplay", {
  defaultValue: (): ProgressDisplayShape => (process.stderr.isTTY ? terminalDisplay(process.stderr) : plainDisplay)
}) {}

/** How often the progress line may be shown: at most once a second, and only when its text changed. */
export const progressInterval = Schedule.spaced("1 second")

/**
 * Shows `progress` on the `ProgressDisplay` on `progressInterval`, the first time one
 * interval after it starts (a job done sooner shows nothing), and never the same line
 * twice in a row. Runs until interrupted, and then ends the display if it showed anything.
 */
const showProgress = (progress: Ref.Ref<Progress>) =>
  Effect.gen(function*() {
    const display = yield* ProgressDisplay
    const shown = yield* Ref.make(Option.none<string>())
    const tick = Effect.gen(function*() {
      const line = describeProgress(yield* Ref.get(progress))
      if (!Option.contains(yield* Ref.getAndSet(shown, Option.some(line)), line)) yield* display.show(line)
    })
    return yield* Effect.schedule(tick, progressInterval).pipe(
      Effect.zipRight(Effect.never),
      Effect.ensuring(Effect.flatMap(Ref.get(shown), (s) => (Option.isSome(s) ? display.end : Effect.void)))
    )
  })

/** Runs `effect` with `progress` shown beside it; the display has ended when `effect` has. */
const withProgress = (progress: Ref.Ref<Progress>) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.raceFirst(effect, showProgress(progress))

/** How often the job looks again for the receipts still missing. */
export const receiptPolling = Schedule.spaced("100 millis")

/** The events each receiver has no receipt for yet. */
type Missing = Readonly<Record<HandlerName, ReadonlyArray<string>>>

const nothingMissing = (missing: Missing) => HandlerNames.every((h) => missing[h].length === 0)

const stillMissing = (handler: HandlerName, eventIds: ReadonlyArray<string>) =>
  Effect.flatMap(
    Inbox,
    (inbox) => Effect.map(inbox.received(handler, eventIds), (received) => eventIds.filter((id) => !received.has(id)))
  )

/**
 * Polls every receiver's inbox on `receiptPolling` until each holds a receipt for every
 * one of `eventIds`, or `deadline` has passed; returns what is still missing where (nothing
 * when all arrived), and keeps `progress` at what the last poll found. Each poll is one
 * lookup per receiver (`Inbox.received`), for the receipts still missing only.
 */
const awaitReceipts = (
  eventIds: ReadonlyArray<string>,
  inboxes: Readonly<Record<HandlerName, Context.Context<Inbox>>>,
  deadline: Duration.DurationInput,
  progress: Ref.Ref<Progress>
) =>
  Effect.gen(function*() {
    const missing = yield* Ref.make<Missing>({ catalog: eventIds, audit: eventIds })
    const poll = Ref.get(missing).pipe(
      Effect.flatMap((m) =>
        Effect.all({
          catalog: Effect.provide(stillMissing("catalog", m.catalog), inboxes.catalog),
          audit: Effect.provide(stillMissing("audit", m.audit), inboxes.audit)
        })
      ),
      Effect.tap((m) =>
        Effect.zipRight(
          Ref.set(missing, m),
          Ref.set(progress, {
            phase: "applying",
            of: eventIds.length,
            applied: { catalog: eventIds.length - m.catalog.length, audit: eventIds.length - m.audit.length }
          })
        )
      )
    )
    yield* poll.pipe(
      Effect.repeat({ schedule: receiptPolling, until: nothingMissing }),
      Effect.timeout(deadline),
      Effect.catchTag("TimeoutException", () => Effect.void)
    )
    return yield* Ref.get(missing)
  })

/** What the job knows when the deadline passes: receipts missing per receiver, the outbox, and the broker's figures. */
export interface Stall {
  readonly missing: Readonly<Record<HandlerName, number>>
  readonly outboxPending: number
  /** Each handler's queues as `BrokerStats` reports them; absent when they were not read. */
  readonly queues: Partial<Record<HandlerName, HandlerQueueFigures>>
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`

/**
 * Why receipts are missing, most telling first, from what the job can see. The main job
 * runs one receiver per handler in its own process, so a handler queue should have
 * exactly one consumer: two or more means another process takes deliveries away (round
 * robin among consumers, RabbitMQ "Consumers"), none means this process's receiver is not
 * consuming. Then what holds the missing events: the outbox (not yet confirmed), the
 * dead and retry queues, the queue itself (the receiver is behind); a queue holding none
 * of them while the outbox is drained means something took them off it, which
 * `reconcile` repairs. Management API figures may be up to 5 s old (`QueueFigures`).
 */
export const likelyCauses = (stall: Stall): ReadonlyArray<string> => {
  const causes: Array<string> = []
  if (stall.outboxPending > 0) {
    causes.push(
      `${plural(stall.outboxPending, "event")} still in the outbox, not confirmed by the broker (see the relay's log)`
    )
  }
  for (const handler of HandlerNames) {
    const missing = stall.missing[handler]
    const figures = stall.queues[handler]
    if (missing === 0 || figures === undefined) continue
    const { queue } = figures
    const before = causes.length
    if (queue.exists === false) {
      causes.push(`the ${handler} queue ${queue.queue} does not exist`)
      continue
    }
    if (queue.source === "unavailable") {
      causes.push(`the ${handler} queue's figures could not be read: ${queue.detail ?? "no detail"}`)
      continue
    }
    if (queue.consumers !== null && queue.consumers > 1) {
      causes.push(
        `the ${handler} queue has ${queue.consumers} consumers: another process consumes ${queue.queue} ` +
          "(stop it, or use another DOSTAVKA_PREFIX)"
      )
    }
    if (queue.consumers === 0) {
      causes.push(
        `the ${handler} queue has no consumer: this process's ${handler} receiver is not consuming (see its log)`
      )
    }
    const dead = figures.dead.ready ?? 0
    if (dead > 0) {
      causes.push(
        `${plural(dead, "message")} on ${figures.dead.queue} (npm run main -- dead list --handler ${handler})`
      )
    }
    const retrying = figures.retry.reduce((n, r) => n + (r.figures.ready ?? 0), 0)
    if (retrying > 0) causes.push(`${plural(retrying, "message")} waiting in the ${handler} retry queues`)
    const held = (queue.ready ?? 0) + (queue.unacked ?? 0)
    if (causes.length === before && held > 0) {
      causes.push(`${plural(held, "message")} still on ${queue.queue}: the ${handler} receiver is behind`)
    }
    if (causes.length === before && stall.outboxPending === 0) {
      causes.push(
        `${queue.queue} holds none of the ${missing} events ${handler} misses: something else took them off it ` +
          `(npm run main -- reconcile --handler ${handler} sends them again)`
      )
    }
  }
  return causes
}

/** The queues of each of `handlers` as `BrokerStats` reports them (it never fails). */
const queuesOf = (handlers: ReadonlyArray<HandlerName>) =>
  Effect.flatMap(BrokerStats, (stats) =>
    Effect.map(
      Effect.forEach(handlers, (h) => Effect.map(stats.handlerQueues(h), (figures) => [h, figures] as const)),
      (pairs): Partial<Record<HandlerName, HandlerQueueFigures>> => Object.fromEntries(pairs)
    ))

/** Reads the report: this run's `answers` to `requests` lines, the outbox, and what each receiver holds. */
const readReport = (
  requests: number,
  answers: Answers,
  api: Context.Context<Outbox>,
  catalogDb: Context.Context<Inbox | CatalogStore>,
  auditDb: Context.Context<Inbox | AuditLog>
) =>
  Effect.gen(function*() {
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
    return {
      requests,
      ...counted,
      published: outbox.published,
      pending: outbox.pending,
      catalog: {
        applied: catalog.counts.applied,
        stale: catalog.counts.stale,
        duplicates: catalog.counts.duplicates,
        entries: catalog.entries
      },
      audit: { applied: audit.counts.applied, duplicates: audit.counts.duplicates, records: audit.records }
    } satisfies DeliveryReport
  })

/**
 * The main job: POSTs every line of `datasetPath` (JSON Lines) to the running API, in
 * file order, with its idempotency key; checks each answer against the line's `expect`
 * (202 new, 202 replayed, 409 stale); then waits (at most `deadline`, counted from the
 * last answer) until the catalog and the audit inboxes hold a receipt for every accepted
 * event, and returns the report read from `readers`. Meanwhile it shows its progress on
 * the `ProgressDisplay` (stderr): `sent 120/237`, then `applied catalog 180/221, audit
 * 221/221`.
 *
 * Fails with `DeliveryJobFailed` if an answer was not the expected one, or if the
 * deadline passed: then it first prints the partial report (stdout, as `printReport`),
 * and the error's detail counts what is missing where and names the likely cause
 * (`likelyCauses`, from `readers.broker`'s figures when given).
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
    const progress = yield* Ref.make<Progress>({ phase: "sending", sent: 0, total: lines.length })
    const send = post(client, `http://127.0.0.1:${port}`, datasetPath)

    const answers = yield* Effect.reduce(
      lines,
      noAnswers,
      (answers, text, index) =>
        send(text, index).pipe(
          Effect.map((a) => tally(answers, a)),
          Effect.tap(() => Ref.set(progress, { phase: "sending", sent: index + 1, total: lines.length }))
        )
    ).pipe(withProgress(progress))

    const api = yield* Layer.build(readers.api)
    const catalogDb = yield* Layer.build(readers.catalog)
    const auditDb = yield* Layer.build(readers.audit)
    const missing = yield* awaitReceipts(
      [...answers.eventIds],
      { catalog: catalogDb, audit: auditDb },
      deadline,
      progress
    ).pipe(withProgress(progress))
    const report = yield* readReport(lines.length, answers, api, catalogDb, auditDb)

    if (!nothingMissing(missing)) {
      const queues = readers.broker === undefined
        ? {}
        : yield* Effect.provide(queuesOf(HandlerNames.filter((h) => missing[h].length > 0)), readers.broker)
      const causes = likelyCauses({
        missing: { catalog: missing.catalog.length, audit: missing.audit.length },
        outboxPending: report.pending,
        queues
      })
      const within = Duration.format(deadline)
      yield* printReport(report, `Dostavka delivery report (incomplete: the receivers missed the ${within} deadline)`)
      return yield* new DeliveryJobFailed({
        detail: `receivers did not apply every event within ${within}: ` +
          `${missing.catalog.length} missing at the catalog, ${missing.audit.length} at the audit; likely cause: ` +
          (causes.length === 0 ? "none seen in the outbox or the broker's figures" : causes.join("; ")),
        report
      })
    }
    if (answers.unexpected > 0) {
      return yield* new DeliveryJobFailed({
        detail: `${answers.unexpected} answers differed from the data set's expectations`
      })
    }
    return report
  }).pipe(Effect.scoped, Effect.withSpan("DeliveryJob.run"))

/** The level the main job's roles log at when `DOSTAVKA_LOG_LEVEL` is not set: warnings and errors. */
export const JobRolesLogLevel = LogLevel.Warning

/**
 * Runs `job` (the main job with the roles it provides itself) at `JobRolesLogLevel`
 * unless `DOSTAVKA_LOG_LEVEL` is set (or `--log-level`, which stands for it), in which case
 * the level `LoggingLive` applied from it stays. The API role logs one `request` line per HTTP request at info level: 237 of them
 * would bury the job's progress and report, which is what an operator running the job
 * reads. The level is a fiber-local setting, inherited by every fiber the roles fork, so
 * the roles must be built inside `job`.
 */
export const withJobLogLevel = <A, E, R>(job: Effect.Effect<A, E, R>) =>
  Effect.flatMap(
    Config.option(Config.string("DOSTAVKA_LOG_LEVEL")),
    Option.match({ onNone: () => Logger.withMinimumLogLevel(job, JobRolesLogLevel), onSome: () => job })
  )

/** The report as a person reads it, under `heading`: this run's answers, then what the databases hold. */
export const formatReport = (r: DeliveryReport, heading = "Dostavka delivery report"): string => {
  const line = (label: string, n: number, note = "") =>
    `  ${label.padEnd(30)}${String(n).padStart(5)}${note ? `   ${note}` : ""}`
  return [
    heading,
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

/** Prints the report on stdout (`formatReport`). */
export const printReport = (r: DeliveryReport, heading?: string) => Console.log(formatReport(r, heading))
