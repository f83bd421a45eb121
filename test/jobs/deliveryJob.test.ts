import { FileSystem, HttpClient, HttpClientResponse, HttpServer } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import {
  ConfigProvider,
  Deferred,
  Duration,
  Effect,
  Fiber,
  HashMap,
  Layer,
  Logger,
  Option,
  Ref,
  TestClock
} from "effect"
import type { HandlerName } from "../../src/domain/HandlerName.js"
import { runDeliveryJob, withJobLogLevel } from "../../src/jobs/deliveryJob.js"
import type { DeliveryReport } from "../../src/jobs/DeliveryReport.js"
import { ProgressDisplay } from "../../src/jobs/JobProgress.js"
import { likelyCauses, type Stall } from "../../src/jobs/Stall.js"
import { BrokerStats, type HandlerQueueFigures, type QueueFigures } from "../../src/ports/BrokerStats.js"
import { Inbox } from "../../src/ports/Inbox.js"
import { capturedConsole } from "../support/console.js"
import { ApiMemory, ReceiverMemory } from "../support/memory.js"

/** What the API answers to one idempotency key. */
interface Answer {
  readonly status: number
  readonly replayed?: boolean
  readonly eventId?: string
}

/** A data set line expecting `expect`, under idempotency key `key`. */
const line = (key: string, revision: number, expect: "accepted" | "replay" | "stale") =>
  JSON.stringify({
    idempotency_key: key,
    material_id: "guides/quorum-queues",
    revision,
    title: `Quorum queues, revision ${revision}`,
    summary: "",
    body: "",
    expect
  })

/** Two new revisions, a repeat of the first request, and a stale revision under a new key. */
const dataset = [line("k1", 1, "accepted"), line("k2", 2, "accepted"), line("k1", 1, "replay"), line("k3", 1, "stale")]
const answers: Record<string, ReadonlyArray<Answer>> = {
  k1: [{ status: 202, eventId: "event-1" }, { status: 202, replayed: true, eventId: "event-1" }],
  k2: [{ status: 202, eventId: "event-2" }],
  k3: [{ status: 409 }]
}

/**
 * The job's world without a network or a database: the data set as the only file, a
 * server address, and an API that gives each key its scripted answers in turn.
 */
const world = (
  lines: ReadonlyArray<string>,
  script: Record<string, ReadonlyArray<Answer>>,
  answerTime: Duration.DurationInput = Duration.zero
) =>
  Effect.gen(function*() {
    const asked = yield* Ref.make(HashMap.empty<string, number>())
    const client = HttpClient.make((request) =>
      Effect.gen(function*() {
        yield* Effect.sleep(answerTime)
        const key = request.headers["idempotency-key"] ?? ""
        const turn = Option.getOrElse(HashMap.get(yield* Ref.get(asked), key), () => 0)
        yield* Ref.update(asked, HashMap.set(key, turn + 1))
        const answer = script[key]?.[turn] ?? { status: 500 }
        const body = answer.eventId === undefined
          ? { status: answer.status }
          : { request_id: `request-${answer.eventId}`, event_id: answer.eventId, status: "pending" }
        return HttpClientResponse.fromWeb(
          request,
          new Response(JSON.stringify(body), {
            status: answer.status,
            headers: answer.replayed === true ? { "idempotent-replayed": "true" } : {}
          })
        )
      })
    )
    return Layer.mergeAll(
      FileSystem.layerNoop({ readFileString: () => Effect.succeed(lines.join("\n") + "\n") }),
      Layer.succeed(HttpClient.HttpClient, client),
      Layer.succeed(
        HttpServer.HttpServer,
        HttpServer.make({
          serve: () => Effect.void,
          address: { _tag: "TcpAddress", hostname: "127.0.0.1", port: 8080 }
        })
      )
    )
  })

/** The three read-only stores the job reports from, kept by the test so that it can write receipts into them. */
const receivers = Effect.gen(function*() {
  const api = yield* Layer.build(ApiMemory)
  const catalog = yield* Layer.build(ReceiverMemory)
  const audit = yield* Layer.build(ReceiverMemory)
  return {
    contexts: { catalog, audit },
    readers: {
      api: Layer.succeedContext(api),
      catalog: Layer.succeedContext(catalog),
      audit: Layer.succeedContext(audit)
    }
  }
})

const receipt = (handler: "catalog" | "audit", messageId: string) =>
  Effect.flatMap(Inbox, (inbox) => inbox.record({ handler, messageId, outcome: "applied", receivedAtMs: 0 }))

/** A queue of prefix `demo` as the broker reports it: one consumer and nothing on it, unless `figures` says otherwise. */
const queueFigures = (queue: string, figures: Partial<QueueFigures> = {}): QueueFigures => ({
  queue,
  exists: true,
  ready: 0,
  unacked: 0,
  consumers: 1,
  source: "management",
  asOfMs: 0,
  staleUpToMs: 5_000,
  ...figures
})

/** A handler's queues: its own queue with `queue`'s figures, one retry tier and a dead queue with `retry` and `dead` ready. */
const handlerFigures = (
  handler: HandlerName,
  queue: Partial<QueueFigures> = {},
  retry = 0,
  dead = 0
): HandlerQueueFigures => ({
  queue: queueFigures(`demo.${handler}`, queue),
  retry: [{ delayMs: 1_000, figures: queueFigures(`demo.${handler}.retry.1s`, { consumers: 0, ready: retry }) }],
  dead: queueFigures(`demo.${handler}.dead`, { consumers: 0, ready: dead }),
  deadHead: { publishedAtMs: null }
})

/** `BrokerStats` reporting each handler's queue with the figures given for it (see `handlerFigures`). */
const brokerReporting = (queues: Partial<Record<HandlerName, Partial<QueueFigures>>>) =>
  Layer.succeed(BrokerStats, {
    target: { broker: "127.0.0.1:5672", vhost: "/" },
    handlerQueues: (handler) => Effect.succeed(handlerFigures(handler, queues[handler]))
  })

describe("the delivery job", () => {
  it.scoped("every answer as the data set expects, receipts arriving after a few polls: the report counts this run's answers and what the receivers hold", () =>
    Effect.gen(function*() {
      const { contexts, readers } = yield* receivers
      const job = yield* runDeliveryJob("materials.jsonl", readers).pipe(
        Effect.provide(yield* world(dataset, answers)),
        Effect.fork
      )
      yield* TestClock.adjust("250 millis")
      yield* Effect.provide(
        Effect.all([receipt("catalog", "event-1"), receipt("catalog", "event-2")]),
        contexts.catalog
      )
      yield* Effect.provide(receipt("audit", "event-1"), contexts.audit)
      yield* TestClock.adjust("300 millis")
      expect(yield* Fiber.poll(job)).toMatchObject({ _tag: "None" })
      yield* Effect.provide(receipt("audit", "event-2"), contexts.audit)
      yield* TestClock.adjust("100 millis")
      const report = yield* Fiber.join(job)
      expect(report).toMatchObject(
        {
          requests: 4,
          accepted: 2,
          replayed: 1,
          rejectedStale: 1,
          rejectedOther: 0,
          unexpected: 0,
          published: 0,
          pending: 0,
          catalog: { applied: 2, stale: 0, duplicates: 0, entries: 0 },
          audit: { applied: 2, duplicates: 0, records: 0 }
        } satisfies DeliveryReport
      )
    }))

  it.scoped("a receipt that never arrives: DeliveryJobFailed once the deadline has passed, counting what is missing where, after printing the partial report", () =>
    Effect.gen(function*() {
      const { contexts, readers } = yield* receivers
      const { printed, capture } = yield* capturedConsole
      const job = yield* runDeliveryJob("materials.jsonl", readers, "10 seconds").pipe(
        Effect.provide(yield* world(dataset, answers)),
        capture,
        Effect.flip,
        Effect.fork
      )
      yield* Effect.provide(
        Effect.all([receipt("catalog", "event-1"), receipt("catalog", "event-2")]),
        contexts.catalog
      )
      yield* Effect.provide(receipt("audit", "event-1"), contexts.audit)
      yield* TestClock.adjust("9900 millis")
      expect(yield* Fiber.poll(job)).toMatchObject({ _tag: "None" })
      yield* TestClock.adjust("100 millis")
      expect(yield* Fiber.join(job)).toMatchObject({
        _tag: "DeliveryJobFailed",
        detail: "receivers did not apply every event within 10s: 0 missing at the catalog, 1 at the audit; " +
          "likely cause: none seen in the outbox or the broker's figures",
        report: { requests: 4, accepted: 2, catalog: { applied: 2 }, audit: { applied: 1 } }
      })
      expect(printed.stdout.join("\n")).toMatch(
        /^Dostavka delivery report \(incomplete: the receivers missed the 10s deadline\)\n {2}requests sent +4\n/
      )
      expect(printed.stdout.join("\n")).toMatch(/audit: applied +1 /)
    }))

  it.scoped("another process consumes the catalog queue and takes half the deliveries: at the deadline the partial report is printed and the failure names the queue's 2 consumers", () =>
    Effect.gen(function*() {
      const { contexts, readers } = yield* receivers
      const { printed, capture } = yield* capturedConsole
      // The catalog queue is empty: the other consumer holds event-2 unacked.
      const broker = brokerReporting({ catalog: { consumers: 2, ready: 0, unacked: 1 } })
      const job = yield* runDeliveryJob("materials.jsonl", { ...readers, broker }, "10 seconds").pipe(
        Effect.provide(yield* world(dataset, answers)),
        capture,
        Effect.flip,
        Effect.fork
      )
      yield* Effect.provide(receipt("catalog", "event-1"), contexts.catalog)
      yield* Effect.provide(Effect.all([receipt("audit", "event-1"), receipt("audit", "event-2")]), contexts.audit)
      yield* TestClock.adjust("10 seconds")
      expect(yield* Fiber.join(job)).toMatchObject({
        _tag: "DeliveryJobFailed",
        detail: "receivers did not apply every event within 10s: 1 missing at the catalog, 0 at the audit; " +
          "likely cause: the catalog queue has 2 consumers: another process consumes demo.catalog " +
          "(stop it, or use another DOSTAVKA_PREFIX)",
        report: {
          requests: 4,
          accepted: 2,
          replayed: 1,
          rejectedStale: 1,
          catalog: { applied: 1 },
          audit: { applied: 2 }
        }
      })
      expect(printed.stdout.join("\n")).toMatch(/catalog: applied +1 /)
    }))

  it.scoped("progress on the display while it changes, at most one line a second: sent n/4 while posting, then applied per receiver while waiting", () =>
    Effect.gen(function*() {
      const { contexts, readers } = yield* receivers
      const shown: Array<string> = []
      const display = Layer.succeed(ProgressDisplay, {
        show: (line) => Effect.sync(() => shown.push(line)),
        end: Effect.sync(() => shown.push("(end)"))
      })
      // Each answer takes 400 ms: the four are in at 1.6 s, and the wait's first line comes one second later.
      const job = yield* runDeliveryJob("materials.jsonl", readers).pipe(
        Effect.provide(yield* world(dataset, answers, "400 millis")),
        Effect.provide(display),
        Effect.fork
      )
      yield* TestClock.adjust("1 second")
      expect(shown).toEqual(["sent 2/4"])
      yield* TestClock.adjust("1 second")
      expect(shown).toEqual(["sent 2/4", "(end)"])
      yield* Effect.provide(receipt("catalog", "event-1"), contexts.catalog)
      yield* TestClock.adjust("700 millis")
      expect(shown.slice(2)).toEqual(["applied catalog 1/2, audit 0/2"])
      // Nothing changed: no line.
      yield* TestClock.adjust("1 second")
      expect(shown.slice(2)).toEqual(["applied catalog 1/2, audit 0/2"])
      yield* Effect.provide(receipt("catalog", "event-2"), contexts.catalog)
      yield* Effect.provide(receipt("audit", "event-1"), contexts.audit)
      yield* TestClock.adjust("1 second")
      expect(shown.slice(2)).toEqual(["applied catalog 1/2, audit 0/2", "applied catalog 2/2, audit 1/2"])
      yield* Effect.provide(receipt("audit", "event-2"), contexts.audit)
      yield* TestClock.adjust("100 millis")
      yield* Fiber.join(job)
      expect(shown.slice(2)).toEqual(["applied catalog 1/2, audit 0/2", "applied catalog 2/2, audit 1/2", "(end)"])
    }))

  it.scoped("a run done within a second shows no progress at all", () =>
    Effect.gen(function*() {
      const { contexts, readers } = yield* receivers
      const shown: Array<string> = []
      const job = yield* runDeliveryJob("materials.jsonl", readers).pipe(
        Effect.provide(yield* world(dataset, answers, "100 millis")),
        Effect.provideService(ProgressDisplay, {
          show: (line) => Effect.sync(() => shown.push(line)),
          end: Effect.sync(() => shown.push("(end)"))
        }),
        Effect.fork
      )
      for (const id of ["event-1", "event-2"]) {
        yield* Effect.provide(receipt("catalog", id), contexts.catalog)
        yield* Effect.provide(receipt("audit", id), contexts.audit)
      }
      yield* TestClock.adjust("500 millis")
      yield* Fiber.join(job)
      expect(shown).toEqual([])
    }))

  it.scoped("an answer the data set did not expect: the job fails, and the log names the line, what was expected and what came", () =>
    Effect.gen(function*() {
      const logs: Array<Record<string, unknown>> = []
      const capture = Logger.replace(
        Logger.defaultLogger,
        Logger.make(({ annotations, message }) => {
          logs.push({ message: String(message), ...Object.fromEntries(HashMap.toEntries(annotations)) })
        })
      )
      const { contexts, readers } = yield* receivers
      // The stale revision is accepted instead.
      const job = yield* runDeliveryJob("materials.jsonl", readers).pipe(
        Effect.provide(yield* world(dataset, { ...answers, k3: [{ status: 202, eventId: "event-3" }] })),
        Effect.provide(capture),
        Effect.flip,
        Effect.fork
      )
      for (const id of ["event-1", "event-2", "event-3"]) {
        yield* Effect.provide(receipt("catalog", id), contexts.catalog)
        yield* Effect.provide(receipt("audit", id), contexts.audit)
      }
      yield* TestClock.adjust("100 millis")
      expect(yield* Fiber.join(job)).toMatchObject({
        _tag: "DeliveryJobFailed",
        detail: "1 answers differed from the data set's expectations"
      })
      expect(logs).toContainEqual(
        expect.objectContaining({ message: "unexpected answer", line: 4, expected: "stale", got: "accepted" })
      )
    }))

  describe("the likely cause of a missed deadline", () => {
    const stall = (overrides: Partial<Stall>): Stall => ({
      missing: { catalog: 3, audit: 0 },
      outboxPending: 0,
      queues: { catalog: handlerFigures("catalog") },
      ...overrides
    })

    it("each thing the outbox and the broker show, for the receivers that miss events only", () => {
      expect(likelyCauses(stall({ queues: { catalog: handlerFigures("catalog", { consumers: 0 }) } }))).toEqual([
        "the catalog queue has no consumer: this process's catalog receiver is not consuming (see its log)"
      ])
      expect(likelyCauses(stall({ queues: { catalog: handlerFigures("catalog", { exists: false, consumers: 0 }) } })))
        .toContain("the catalog queue demo.catalog does not exist")
      expect(likelyCauses(stall({ outboxPending: 2, queues: { catalog: handlerFigures("catalog", {}, 1, 2) } })))
        .toEqual([
          "2 events still in the outbox, not confirmed by the broker (see the relay's log)",
          "2 messages on demo.catalog.dead (npm run main -- dead list --handler catalog)",
          "1 message waiting in the catalog retry queues"
        ])
      expect(likelyCauses(stall({ queues: { catalog: handlerFigures("catalog", { ready: 40, unacked: 50 }) } })))
        .toEqual(["90 messages still on demo.catalog: the catalog receiver is behind"])
      expect(likelyCauses(stall({}))).toEqual([
        "demo.catalog holds none of the 3 events catalog misses: something else took them off it " +
        "(npm run main -- reconcile --handler catalog sends them again)"
      ])
      // The audit misses nothing: its second consumer is not why.
      expect(
        likelyCauses(stall({
          missing: { catalog: 0, audit: 0 },
          queues: { audit: handlerFigures("audit", { consumers: 2 }) }
        }))
      ).toEqual([])
    })
  })

  describe("the roles' log level in the main job", () => {
    /** A role that logs a request line at info from a fiber of its own, as the API does per request. */
    const roleThatLogs = (logged: Deferred.Deferred<void>) =>
      Layer.scopedDiscard(
        Effect.forkScoped(Effect.logInfo("request").pipe(Effect.zipRight(Deferred.succeed(logged, undefined))))
      )
    const runWith = (env: ReadonlyArray<readonly [string, string]>) =>
      Effect.gen(function*() {
        const messages: Array<string> = []
        const logged = yield* Deferred.make<void>()
        const job = Deferred.await(logged).pipe(
          Effect.zipRight(Effect.logWarning("the job's own warning")),
          Effect.provide(roleThatLogs(logged))
        )
        yield* withJobLogLevel(job).pipe(
          Effect.withConfigProvider(ConfigProvider.fromMap(new Map(env))),
          Effect.provide(Logger.replace(
            Logger.defaultLogger,
            Logger.make(({ message }) => {
              messages.push(String(message))
            })
          ))
        )
        return messages
      })

    it.effect("without DOSTAVKA_LOG_LEVEL the roles' info lines (one request line per HTTP request) stay out of the terminal; warnings stay", () =>
      Effect.gen(function*() {
        expect(yield* runWith([])).toEqual(["the job's own warning"])
      }))

    it.effect("DOSTAVKA_LOG_LEVEL set explicitly: the level it names applies, request lines included", () =>
      Effect.gen(function*() {
        expect(yield* runWith([["DOSTAVKA_LOG_LEVEL", "info"]])).toEqual(["request", "the job's own warning"])
      }))
  })
})
