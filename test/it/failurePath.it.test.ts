import { describe, expect, it } from "@effect/vitest"
import * as amqp from "amqplib"
import { Duration, Effect, Layer, Redacted } from "effect"
import { DeadLettersAmqp } from "../../src/adapters/amqp/DeadLettersAmqp.js"
import { toPublish } from "../../src/adapters/amqp/EventBusAmqp.js"
import { KitHeaders, retryCopy } from "../../src/adapters/amqp/FailureHeaders.js"
import { HandlerRoutes, namesOf } from "../../src/adapters/amqp/Topology.js"
import { TransientFailure } from "../../src/app/failures.js"
import { catalogHandler } from "../../src/app/handlers.js"
import type { Handler } from "../../src/app/inboxRule.js"
import { PersistenceError } from "../../src/domain/errors.js"
import type { CatalogStore } from "../../src/ports/CatalogStore.js"
import { DeadLetters, DeadLetterSelection } from "../../src/ports/DeadLetters.js"
import { CatalogStores } from "../../src/roles/databases.js"
import { AuditRole, receiverRole } from "../../src/roles/receivers.js"
import {
  amqpUrl,
  cleanupTopology,
  depthOf,
  eventually,
  hasRabbitmqctl,
  peekQueue,
  publishRaw,
  setPolicy,
  tempDataDir,
  testRetry,
  testVhost,
  uniquePrefix
} from "../support/broker.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { type CapturedLog, countRows, query, startRoles, testSettings } from "../support/roles.js"

/** A catalog handler that fails as `failing` says, for the message it is given, and otherwise is the real one. */
const catalogFailing = (failing: (messageId: string, attempt: number) => "transient" | "bug" | false) => {
  const attempts = new Map<string, Array<number>>()
  const handler: Handler<CatalogStore> = {
    ...catalogHandler,
    apply: (event, message) =>
      Effect.suspend(() => {
        const times = [...(attempts.get(message.messageId) ?? []), Date.now()]
        attempts.set(message.messageId, times)
        const how = failing(message.messageId, times.length)
        if (how === "transient") {
          return Effect.fail(
            new PersistenceError({
              operation: "catalog.put",
              kind: "unavailable",
              cause: new Error("database is locked (test)")
            })
          )
        }
        if (how === "bug") {
          return Effect.sync((): "applied" => {
            throw new Error("a bug in the handler (test)")
          })
        }
        return catalogHandler.apply(event, message)
      })
  }
  return { role: receiverRole(handler).pipe(Layer.provide(CatalogStores)), attempts }
}

const events = (n: number, tag: string) =>
  Array.from(
    { length: n },
    (_, i) => MaterialMother.envelope(MaterialMother.event({ materialId: `${tag}/m${i}`, revision: 1 }))
  )

const publishEvents = (
  prefix: string,
  envelopes: ReadonlyArray<ReturnType<typeof MaterialMother.envelope>>,
  url = amqpUrl
) => publishRaw(url, envelopes.map((e) => toPublish(namesOf(prefix).exchange, e)))

describe.each(["classic", "quorum"] as const)("the failure path on %s queues", (queueType) => {
  it.scopedLive(
    "a handler that fails twice, then succeeds: applied once after exactly 2 retries, each after its tier's delay; the audit applied it once, at once, and saw no retry",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix(`twice-${queueType}`)
        yield* cleanupTopology(prefix)
        const flaky = catalogFailing((_, attempt) => (attempt <= 2 ? "transient" : false))
        yield* startRoles(Layer.merge(flaky.role, AuditRole), testSettings(prefix, dir, { queueType }))
        const [event] = events(1, "twice")
        yield* publishEvents(prefix, [event!])

        yield* eventually(Effect.sync(() => countRows(dir, "catalog", "inbox")), (n) => n === 1)
        const times = flaky.attempts.get(event!.messageId)!
        expect(times).toHaveLength(3)
        const [first, second, third] = times as [number, number, number]
        expect(second - first).toBeGreaterThanOrEqual(Duration.toMillis(testRetry.delays[0]!))
        expect(third - second).toBeGreaterThanOrEqual(Duration.toMillis(testRetry.delays[1]!))
        expect(query(dir, "catalog", "SELECT outcome, duplicates FROM inbox")).toEqual([{
          outcome: "applied",
          duplicates: 0
        }])
        // The audit receiver is another consumer, with a transaction of its own: wait for its receipt too.
        yield* eventually(Effect.sync(() => countRows(dir, "audit", "inbox")), (n) => n === 1)
        expect(query(dir, "audit", "SELECT outcome, duplicates FROM inbox")).toEqual([{
          outcome: "applied",
          duplicates: 0
        }])
        const [auditAt] = query<{ received_at: number }>(dir, "audit", "SELECT received_at FROM inbox")
        expect(auditAt!.received_at).toBeLessThan(second)
        const names = namesOf(prefix)
        for (const delay of testRetry.delays) {
          expect(yield* depthOf(amqpUrl, names.retryQueue("catalog", delay))).toBe(0)
          expect(yield* depthOf(amqpUrl, names.retryQueue("audit", delay))).toBe(0)
        }
      }),
    60_000
  )

  it.scopedLive(
    "a handler that always fails: after the attempts, exactly one dead copy per message, with every header and the same bytes",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix(`always-${queueType}`)
        yield* cleanupTopology(prefix)
        const broken = catalogFailing(() => "transient")
        yield* startRoles(broken.role, testSettings(prefix, dir, { queueType }))
        const sent = events(5, "always")
        yield* publishEvents(prefix, sent)
        const names = namesOf(prefix)

        yield* eventually(depthOf(amqpUrl, names.deadQueue("catalog")), (n) => n === 5, 30_000)
        // Nothing loops or multiplies: the count stays put once the attempts are spent.
        yield* Effect.sleep("1500 millis")
        const dead = yield* peekQueue(amqpUrl, names.deadQueue("catalog"))
        expect(dead.map((m) => m.properties.messageId).sort()).toEqual(sent.map((e) => e.messageId).sort())
        for (const attempts of broken.attempts.values()) expect(attempts).toHaveLength(testRetry.maxAttempts)
        for (const message of dead) {
          const original = sent.find((e) => e.messageId === message.properties.messageId)!
          expect(message.content.toString("utf8")).toBe(original.body)
          expect(message.properties).toMatchObject({
            correlationId: original.correlationId,
            type: "material.published.v1",
            contentType: "application/json",
            appId: "dostavka-test",
            deliveryMode: 2,
            timestamp: Math.floor(original.timestampMs / 1000)
          })
          const headers = message.properties.headers!
          expect(headers).toMatchObject({
            "x-schema-version": 1,
            [KitHeaders.reason]: "exhausted",
            [KitHeaders.attempts]: testRetry.maxAttempts,
            [KitHeaders.errorTag]: "TransientFailure/PersistenceError.unavailable",
            [KitHeaders.error]: expect.stringContaining("database is locked (test)"),
            [KitHeaders.handler]: "catalog",
            [KitHeaders.originalExchange]: names.exchange,
            [KitHeaders.originalRoutingKey]: "material.published.v1"
          })
          expect(Date.parse(headers[KitHeaders.lastFailureAt])).toBeGreaterThan(
            Date.parse(headers[KitHeaders.firstFailureAt])
          )
          expect(Date.parse(headers[KitHeaders.deadAt])).toBeGreaterThanOrEqual(
            Date.parse(headers[KitHeaders.lastFailureAt])
          )
        }
        expect(yield* depthOf(amqpUrl, names.queue("catalog"))).toBe(0)
        expect(countRows(dir, "catalog", "inbox")).toBe(0)
      }),
    60_000
  )
})

describe("failures that are not the broker's", () => {
  it.scopedLive(
    "a handler that throws a plain Error: no reconnect, no 'broker' in the log; the next messages go on, the message retries and ends dead",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("bug")
        yield* cleanupTopology(prefix)
        const [buggy, ...fine] = events(4, "bug")
        const role = catalogFailing((messageId) => (messageId === buggy!.messageId ? "bug" : false))
        const logs: Array<CapturedLog> = []
        yield* startRoles(role.role, testSettings(prefix, dir), { logs })
        yield* publishEvents(prefix, [buggy!, ...fine])

        yield* eventually(Effect.sync(() => countRows(dir, "catalog", "inbox")), (n) => n === 3)
        const names = namesOf(prefix)
        yield* eventually(depthOf(amqpUrl, names.deadQueue("catalog")), (n) => n === 1, 30_000)
        const [dead] = yield* peekQueue(amqpUrl, names.deadQueue("catalog"))
        expect(dead!.properties.headers).toMatchObject({
          [KitHeaders.reason]: "exhausted",
          [KitHeaders.errorTag]: "PermanentFailure/Defect.Error",
          [KitHeaders.error]: "a bug in the handler (test)"
        })
        expect(role.attempts.get(buggy!.messageId)).toHaveLength(testRetry.maxAttempts)
        expect(logs.filter((l) => /broker|reconnect|lost its channel/i.test(l.message))).toEqual([])
        expect(logs.filter((l) => l.message === "handler failed; retrying later")).toHaveLength(
          testRetry.maxAttempts - 1
        )
      }),
    60_000
  )

  it.scopedLive("incompatible inputs are dead at once as incompatible; the next valid message is processed", () =>
    Effect.gen(function*() {
      const dir = yield* tempDataDir
      const prefix = uniquePrefix("incompatible")
      yield* cleanupTopology(prefix)
      yield* startRoles(catalogFailing(() => false).role, testSettings(prefix, dir))
      const names = namesOf(prefix)
      const base = MaterialMother.envelope(MaterialMother.event())
      const raw = (id: string, body: string, overrides: Record<string, unknown> = {}) => ({
        exchange: names.exchange,
        routingKey: "material.published.v1",
        content: Buffer.from(body),
        options: {
          messageId: id,
          type: "material.published.v1",
          contentType: "application/json",
          headers: { "x-schema-version": 1 },
          ...overrides
        }
      })
      const negative = JSON.stringify({
        ...JSON.parse(base.body),
        event_id: "00000000-0000-4000-8000-000000000001",
        revision: -1
      })
      const valid = MaterialMother.envelope(MaterialMother.event({ revision: 2 }))
      yield* publishRaw(amqpUrl, [
        raw("bad-json", "{not json"),
        raw("plain-text", base.body, { contentType: "text/plain" }),
        raw("v2", base.body, { type: "material.published.v2" }),
        raw("00000000-0000-4000-8000-000000000001", negative),
        raw("empty", ""),
        toPublish(names.exchange, valid)
      ])
      yield* eventually(depthOf(amqpUrl, names.deadQueue("catalog")), (n) => n === 5)
      yield* eventually(Effect.sync(() => countRows(dir, "catalog", "inbox")), (n) => n === 1)
      const dead = yield* peekQueue(amqpUrl, names.deadQueue("catalog"))
      expect(
        dead.map((
          m
        ) => [
          m.properties.messageId,
          m.properties.headers?.[KitHeaders.reason],
          m.properties.headers?.[KitHeaders.attempts]
        ])
      ).toEqual([
        ["bad-json", "incompatible", 0],
        ["plain-text", "incompatible", 0],
        ["v2", "incompatible", 0],
        ["00000000-0000-4000-8000-000000000001", "incompatible", 0],
        ["empty", "incompatible", 0]
      ])
      for (const delay of testRetry.delays) expect(yield* depthOf(amqpUrl, names.retryQueue("catalog", delay))).toBe(0)
    }))
})

describe("dead letters and deliberate replay", () => {
  it.scopedLive(
    "replay after the fix applies each dead message exactly once and empties the dead queue; --dry-run changes nothing; an applied one is a duplicate; list keeps its order",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("replay")
        yield* cleanupTopology(prefix)
        const settings = testSettings(prefix, dir)
        let fixed = false
        const [x, ...broken] = events(4, "replay")
        const role = catalogFailing((messageId) => (!fixed && messageId !== x!.messageId ? "transient" : false))
        yield* startRoles(role.role, settings)
        yield* publishEvents(prefix, [x!, ...broken])
        const names = namesOf(prefix)
        yield* eventually(depthOf(amqpUrl, names.deadQueue("catalog")), (n) => n === 3, 30_000)
        yield* eventually(Effect.sync(() => countRows(dir, "catalog", "inbox")), (n) => n === 1)
        // A dead copy of x, which the catalog applied already, as a crash at the wrong moment leaves.
        yield* publishRaw(amqpUrl, [{ ...toPublish(names.handlerExchange("catalog"), x!), routingKey: "dead" }])
        yield* eventually(depthOf(amqpUrl, names.deadQueue("catalog")), (n) => n === 4)

        const deadLetters = Effect.provide(DeadLetters, DeadLettersAmqp.pipe(Layer.provide(settings)))
        const firstList = yield* Effect.flatMap(deadLetters, (d) => d.list("catalog", 100))
        const secondList = yield* Effect.flatMap(deadLetters, (d) => d.list("catalog", 100))
        expect(secondList.map((l) => l.messageId)).toEqual(firstList.map((l) => l.messageId))
        expect(firstList.map((l) => l.messageId)).toEqual([...broken.map((e) => e.messageId), x!.messageId])
        expect(firstList.slice(0, 3).map((l) => [l.reason, l.attempts])).toEqual([["exhausted", 3], ["exhausted", 3], [
          "exhausted",
          3
        ]])

        const dry = yield* Effect.flatMap(deadLetters, (d) =>
          d.replay("catalog", DeadLetterSelection.All(), { dryRun: true }))
        expect(dry.moved).toHaveLength(4)
        expect(yield* depthOf(amqpUrl, names.deadQueue("catalog"))).toBe(4)
        expect(countRows(dir, "catalog", "inbox")).toBe(1)

        fixed = true
        const done = yield* Effect.flatMap(deadLetters, (d) =>
          d.replay("catalog", DeadLetterSelection.All(), { dryRun: false }))
        expect(done).toEqual({
          moved: firstList.map((l) =>
            l.messageId
          ),
          failed: [],
          undecodable: [],
          notFound: []
        })
        const receipts = Effect.sync(() =>
          query(dir, "catalog", "SELECT message_id, outcome, duplicates FROM inbox ORDER BY message_id")
        )
        const expected = [x!, ...broken].map((e) => ({
          message_id: e.messageId,
          outcome: "applied",
          duplicates: e === x ? 1 : 0
        })).sort((a, b) =>
          a.message_id.localeCompare(b.message_id)
        )
        // x is replayed last: its duplicate may be counted after the other three reached the inbox,
        // so wait for every receipt as asserted, not for the count of rows.
        yield* eventually(receipts, (rows) => JSON.stringify(rows) === JSON.stringify(expected))
        expect(yield* depthOf(amqpUrl, names.deadQueue("catalog"))).toBe(0)
        expect(yield* receipts).toEqual(expected)
        for (const e of broken) expect(role.attempts.get(e.messageId)).toHaveLength(testRetry.maxAttempts + 1)
      }),
    60_000
  )

  it.scopedLive("replay by id moves that one only, to its own handler's queue; purge by id removes one; unknown ids are reported", () =>
    Effect.gen(function*() {
      const prefix = uniquePrefix("replay-id")
      const dir = yield* tempDataDir
      yield* cleanupTopology(prefix)
      const settings = testSettings(prefix, dir)
      yield* startRoles(catalogFailing(() => false).role, settings)
      const names = namesOf(prefix)
      const [a, b, c] = events(3, "by-id")
      yield* publishRaw(
        amqpUrl,
        [a!, b!, c!].map((e) => ({ ...toPublish(names.handlerExchange("catalog"), e), routingKey: "dead" }))
      )
      yield* eventually(depthOf(amqpUrl, names.deadQueue("catalog")), (n) => n === 3)
      const deadLetters = Effect.provide(DeadLetters, DeadLettersAmqp.pipe(Layer.provide(settings)))

      const replayed = yield* Effect.flatMap(
        deadLetters,
        (d) => d.replay("catalog", DeadLetterSelection.Ids({ ids: [b!.messageId, "nope"] }), { dryRun: false })
      )
      expect(replayed).toEqual({ moved: [b!.messageId], failed: [], undecodable: [], notFound: ["nope"] })
      yield* eventually(Effect.sync(() => countRows(dir, "catalog", "inbox")), (n) => n === 1)
      expect(query(dir, "catalog", "SELECT message_id FROM inbox")).toEqual([{ message_id: b!.messageId }])
      expect(yield* depthOf(amqpUrl, names.queue("audit"))).toBe(0)

      const purged = yield* Effect.flatMap(
        deadLetters,
        (d) => d.purge("catalog", DeadLetterSelection.Ids({ ids: [a!.messageId] }))
      )
      expect(purged.moved).toEqual([a!.messageId])
      expect((yield* peekQueue(amqpUrl, names.deadQueue("catalog"))).map((m) => m.properties.messageId)).toEqual([
        c!.messageId
      ])
    }))

  it.scopedLive(
    "a dead copy moved back by hand is processed as a replay, not dead-lettered again because of its own headers",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("moved")
        yield* cleanupTopology(prefix)
        // It fails every attempt until the dead copy is moved back, and that copy's first attempt;
        // then it is fixed. Decided by the attempt, not by a flag the test would set after seeing
        // that attempt: its retry (0.3 s later) could come before the test got to it.
        const role = catalogFailing((_, attempt) => (attempt <= testRetry.maxAttempts + 1 ? "transient" : false))
        yield* startRoles(role.role, testSettings(prefix, dir))
        const [event] = events(1, "moved")
        yield* publishEvents(prefix, [event!])
        const names = namesOf(prefix)
        yield* eventually(depthOf(amqpUrl, names.deadQueue("catalog")), (n) => n === 1, 30_000)
        const [dead] = yield* peekQueue(amqpUrl, names.deadQueue("catalog"))
        // As a shovel or the management UI's "move messages" would: the dead copy, headers and all, onto the handler's queue.
        yield* publishRaw(amqpUrl, [{
          exchange: "",
          routingKey: names.queue("catalog"),
          content: dead!.content,
          options: { ...dead!.properties, headers: dead!.properties.headers }
        }])
        // It fails again once: a replay starts from zero attempts, so it goes to the first retry tier, not to the dead queue.
        yield* eventually(Effect.sync(() => role.attempts.get(event!.messageId)?.length ?? 0), (n) =>
          n >= testRetry.maxAttempts + 1)
        yield* eventually(
          Effect.sync(() =>
            countRows(dir, "catalog", "inbox")
          ),
          (n) => n === 1,
          30_000
        )
        expect(role.attempts.get(event!.messageId)).toHaveLength(testRetry.maxAttempts + 2)
        expect(yield* depthOf(amqpUrl, names.deadQueue("catalog"))).toBe(1)
      }),
    60_000
  )
})

if (!hasRabbitmqctl) {
  console.log(
    "the policy tests of failurePath.it.test.ts are skipped: they set policies in a vhost of their own with rabbitmqctl, which is not available here"
  )
}

describe.skipIf(!hasRabbitmqctl)("what the broker dead-letters by itself", () => {
  it.scopedLive(
    "a max-length overflow with drop-head while the receiver is stopped: the dropped messages are on that handler's dead queue",
    () =>
      Effect.gen(function*() {
        const { url, vhost } = yield* testVhost("overflow")
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("overflow")
        const settings = testSettings(prefix, dir, { amqpUrl: Redacted.make(url) })
        const catalog = yield* startRoles(catalogFailing(() => false).role, settings)
        yield* catalog.stop
        yield* setPolicy(vhost, "overflow", `^${prefix.replace(/[.-]/g, "\\$&")}\\.catalog$`, {
          "max-length": 5,
          overflow: "drop-head"
        })
        const sent = events(8, "overflow")
        yield* publishEvents(prefix, sent, url)
        const names = namesOf(prefix)
        yield* eventually(depthOf(url, names.deadQueue("catalog")), (n) => n === 3)
        const dead = yield* peekQueue(url, names.deadQueue("catalog"))
        expect(dead.map((m) => m.properties.messageId)).toEqual(sent.slice(0, 3).map((e) => e.messageId))
        const deadLetters = Effect.provide(DeadLetters, DeadLettersAmqp.pipe(Layer.provide(settings)))
        const [first] = yield* Effect.flatMap(deadLetters, (d) => d.list("catalog", 1))
        expect(first).toMatchObject({
          reason: "rejected-by-broker",
          errorTag: "x-death/maxlen",
          originalExchange: names.exchange,
          originalRoutingKey: "material.published.v1"
        })
      }),
    60_000
  )
})

describe("crashes on the failure path", () => {
  it.scopedLive("a receiver killed between its retry copy's confirm and the ack: nothing lost, at most a duplicate the inbox absorbs", () =>
    Effect.gen(function*() {
      const dir = yield* tempDataDir
      const prefix = uniquePrefix("crash-retry")
      yield* cleanupTopology(prefix)
      const settings = testSettings(prefix, dir)
      const names = namesOf(prefix)
      // Declare the topology, then stop: the "receiver" below is a process of its own that dies.
      const first = yield* startRoles(catalogFailing(() => false).role, settings)
      yield* first.stop
      const [event] = events(1, "crash")
      yield* publishEvents(prefix, [event!])

      // It takes the delivery, fails, publishes the retry copy with confirm, and dies before acking.
      yield* Effect.promise(async () => {
        const connection = await amqp.connect(amqpUrl)
        const channel = await connection.createConfirmChannel()
        const delivery = await channel.get(names.queue("catalog"), { noAck: false })
        if (delivery === false) throw new Error("no delivery")
        const copy = retryCopy(
          delivery,
          {
            handler: "catalog",
            failure: new TransientFailure({ errorTag: "PersistenceError.unavailable", detail: "test" }),
            attempts: 1,
            nowMs: Date.now(),
            kitHeadersTrusted: false
          },
          names.handlerExchange("catalog"),
          HandlerRoutes.retry(testRetry.delays[0]!)
        )
        channel.publish(copy.exchange, copy.routingKey, copy.content, copy.options)
        await channel.waitForConfirms()
        await connection.close()
      })

      // The next receiver gets the redelivered original and, later, the retry copy: one effect.
      yield* startRoles(catalogFailing(() => false).role, settings)
      yield* eventually(
        Effect.sync(() => query<{ duplicates: number }>(dir, "catalog", "SELECT duplicates FROM inbox")[0]?.duplicates),
        (n) => n === 1
      )
      expect(countRows(dir, "catalog", "inbox")).toBe(1)
      expect(yield* depthOf(amqpUrl, names.queue("catalog"))).toBe(0)
      expect(yield* depthOf(amqpUrl, names.retryQueue("catalog", testRetry.delays[0]!))).toBe(0)
    }))
})

describe("variants a break-it session found", () => {
  it.scopedLive("a correlation_id that was not valid UTF-8 (U+FFFD after decoding) is dead-lettered, never stored", () =>
    Effect.gen(function*() {
      const dir = yield* tempDataDir
      const prefix = uniquePrefix("corr")
      yield* cleanupTopology(prefix)
      yield* startRoles(Layer.merge(catalogFailing(() => false).role, AuditRole), testSettings(prefix, dir))
      const names = namesOf(prefix)
      const [bad, good] = events(2, "corr")
      // A lone surrogate goes out as the bytes of U+FFFD, as invalid UTF-8 comes back from amqplib.
      yield* publishRaw(amqpUrl, [
        {
          ...toPublish(names.exchange, bad!),
          options: { ...toPublish(names.exchange, bad!).options, correlationId: "c\ud800c" }
        },
        toPublish(names.exchange, good!)
      ])
      yield* eventually(Effect.sync(() => countRows(dir, "audit", "audit_records")), (n) => n === 1)
      yield* eventually(depthOf(amqpUrl, names.deadQueue("audit")), (n) => n === 1)
      const [dead] = yield* peekQueue(amqpUrl, names.deadQueue("audit"))
      expect(dead!.properties.headers?.[KitHeaders.errorTag]).toBe(
        "IncompatibleMessage/UndecodableMessage.bad-correlation-id"
      )
      expect(query(dir, "audit", "SELECT correlation_id FROM audit_records")).toEqual([{
        correlation_id: good!.correlationId
      }])
    }))

  it.scopedLive("with the dead queue deleted, a dead letter is not dropped: the topology is declared again and it lands there", () =>
    Effect.gen(function*() {
      const dir = yield* tempDataDir
      const prefix = uniquePrefix("deadq-gone")
      yield* cleanupTopology(prefix)
      yield* startRoles(catalogFailing(() => false).role, testSettings(prefix, dir))
      const names = namesOf(prefix)
      const connection = yield* Effect.acquireRelease(
        Effect.promise(() => amqp.connect(amqpUrl)),
        (c) => Effect.promise(() => c.close())
      )
      const channel = yield* Effect.promise(() => connection.createChannel())
      yield* Effect.promise(() => channel.deleteQueue(names.deadQueue("catalog")))
      yield* publishRaw(amqpUrl, [{
        exchange: names.exchange,
        routingKey: "material.published.v1",
        content: Buffer.from("{bad"),
        options: {
          messageId: "gone-1",
          type: "material.published.v1",
          contentType: "application/json",
          headers: { "x-schema-version": 1 }
        }
      }])
      yield* eventually(
        depthOf(amqpUrl, names.deadQueue("catalog")).pipe(Effect.orElseSucceed(() => 0)),
        (n) => n === 1
      )
      const [dead] = yield* peekQueue(amqpUrl, names.deadQueue("catalog"))
      expect(dead!.properties).toMatchObject({ messageId: "gone-1", headers: { [KitHeaders.reason]: "incompatible" } })
      expect(yield* depthOf(amqpUrl, names.queue("catalog"))).toBe(0)
    }))
})
