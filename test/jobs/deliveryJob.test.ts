import { FileSystem, HttpClient, HttpClientResponse, HttpServer } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, HashMap, Layer, Logger, Option, Ref, TestClock } from "effect"
import { type DeliveryReport, runDeliveryJob } from "../../src/jobs/deliveryJob.js"
import { Inbox } from "../../src/ports/Inbox.js"
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
const world = (lines: ReadonlyArray<string>, script: Record<string, ReadonlyArray<Answer>>) =>
  Effect.gen(function*() {
    const asked = yield* Ref.make(HashMap.empty<string, number>())
    const client = HttpClient.make((request) =>
      Effect.gen(function*() {
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

  it.scoped("a receipt that never arrives: DeliveryJobFailed once the deadline has passed, counting what is missing where", () =>
    Effect.gen(function*() {
      const { contexts, readers } = yield* receivers
      const job = yield* runDeliveryJob("materials.jsonl", readers, "10 seconds").pipe(
        Effect.provide(yield* world(dataset, answers)),
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
        detail: "receivers did not apply every event within 10s: 0 missing at the catalog, 1 at the audit"
      })
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
})
