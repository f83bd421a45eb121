import { FileSystem, HttpClient, HttpServer } from "@effect/platform"
import { Clock, Config, Context, Duration, Effect, Layer, Logger, LogLevel, Option, Ref, Schedule } from "effect"
import { type HandlerName, HandlerNames } from "../domain/HandlerName.js"
import { AuditLog } from "../ports/AuditLog.js"
import { BrokerStats } from "../ports/BrokerStats.js"
import { CatalogStore } from "../ports/CatalogStore.js"
import { Inbox } from "../ports/Inbox.js"
import { Outbox } from "../ports/Outbox.js"
import {
  type Answers,
  DeliveryJobFailed,
  type DeliveryReport,
  noAnswers,
  printReport,
  tally
} from "./DeliveryReport.js"
import { type Progress, withProgress } from "./JobProgress.js"
import { post } from "./postDataset.js"
import { likelyCauses, queuesOf } from "./Stall.js"

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
