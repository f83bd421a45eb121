import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Logger, Redacted, Schedule, TestClock } from "effect"
import { runConsumer } from "../../src/adapters/amqp/AmqpConsumer.js"
import { makeAmqpPublisher } from "../../src/adapters/amqp/AmqpPublisher.js"
import { KitHeaders } from "../../src/adapters/amqp/FailureHeaders.js"
import { topologyPlanOf } from "../../src/adapters/amqp/Topology.js"
import type { IncomingMessage } from "../../src/app/admission.js"
import { IncompatibleMessage, TransientFailure } from "../../src/app/failures.js"
import { Verdict } from "../../src/app/verdict.js"
import { testRetry, testRetryByHandler } from "../support/broker.js"
import { FakeAmqp, type FakeChannel, publishedHeaders } from "../support/FakeAmqp.js"

const access = {
  url: Redacted.make("amqp://fake"),
  connectTimeout: Duration.seconds(5),
  heartbeat: Duration.seconds(10)
}
const requeueDelay = Duration.seconds(1)
const failure = new TransientFailure({ errorTag: "PersistenceError.unavailable", detail: "locked (test)" })

/** Starts a catalog consumer over `fake` whose verdicts `decide` gives; returns its fiber. */
const consumerOver = (
  fake: FakeAmqp,
  decide: (batch: ReadonlyArray<IncomingMessage>) => Effect.Effect<ReadonlyArray<Verdict>>,
  brokerAccess: typeof access = access,
  reconnect: Schedule.Schedule<unknown, unknown> = Schedule.spaced("1 second")
) =>
  Effect.gen(function*() {
    const topology = topologyPlanOf({ prefix: "unit", queueType: "classic", retry: testRetryByHandler }, "catalog")
    const copies = yield* makeAmqpPublisher({
      access,
      connectionName: "unit-copies",
      role: "catalog",
      topology,
      confirmTimeout: Duration.seconds(5)
    })
    return yield* Effect.fork(runConsumer({
      access: brokerAccess,
      connectionName: "unit-consumer",
      topology,
      prefix: "unit",
      handler: "catalog",
      retryDelays: testRetry.delays,
      prefetch: 10,
      decide,
      copies,
      requeueDelay,
      maxHandBacks: 2,
      reconnect
    }))
  }).pipe(Effect.provide(fake.layer))

const until = (holds: () => boolean) =>
  Effect.gen(function*() {
    for (let i = 0; i < 1_000 && !holds(); i++) {
      yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
    }
    if (!holds()) return yield* Effect.dieMessage("the condition never held")
  })

/** The consuming channel: the consumer's connection opens it after the one it declares the topology on. */
const consuming = (fake: FakeAmqp): FakeChannel => fake.connections[0]!.last
/** The channel retry and dead copies go out on. */
const copiesChannel = (fake: FakeAmqp): FakeChannel | undefined => fake.connections[1]?.last

const ready = (fake: FakeAmqp) =>
  until(() => fake.connections.length >= 1 && fake.connections[0]!.channels.length === 2)

describe("the consumer, against a scripted broker", () => {
  it.scoped("acks a batch of applied messages with one basic.ack, multiple set, after the verdicts", () =>
    Effect.gen(function*() {
      const fake = new FakeAmqp()
      const seen: Array<number> = []
      const gate = yield* Deferred.make<void>()
      yield* consumerOver(fake, (batch) => {
        seen.push(batch.length)
        return Effect.as(
          seen.length === 1 ? Deferred.await(gate) : Effect.void,
          batch.map(() => Verdict.Ack({ disposition: "applied" }))
        )
      })
      yield* ready(fake)
      // The first delivery is being decided while three more arrive: they are the next batch.
      consuming(fake).deliver(Buffer.from("{}"), { messageId: "first" })
      yield* until(() => seen.length === 1)
      for (const id of ["a", "b", "c"]) consuming(fake).deliver(Buffer.from("{}"), { messageId: id })
      yield* Deferred.succeed(gate, undefined)
      yield* until(() => consuming(fake).settlements.length === 2)
      expect(seen).toEqual([1, 3])
      expect(consuming(fake).settlements).toEqual([{ kind: "ack", tag: 1, multiple: true }, {
        kind: "ack",
        tag: 4,
        multiple: true
      }])
    }))

  it.scoped("a retry goes to its tier on the handler's own exchange, with the attempt counted, and the original is acked once the copy is confirmed", () =>
    Effect.gen(function*() {
      const fake = new FakeAmqp()
      yield* consumerOver(
        fake,
        (batch) =>
          Effect.succeed(batch.map(() => Verdict.Retry({ failure, tier: 1, delay: testRetry.delays[1]!, attempts: 2 })))
      )
      yield* ready(fake)
      consuming(fake).deliver(Buffer.from("body bytes"), {
        messageId: "m1",
        correlationId: "c1",
        userId: "relay",
        headers: { "x-schema-version": 1, [KitHeaders.attempts]: 1 }
      })
      yield* until(() => copiesChannel(fake)?.published.length === 1)
      const copy = copiesChannel(fake)!.published[0]!
      expect({ exchange: copy.exchange, routingKey: copy.routingKey, body: copy.content.toString() }).toEqual({
        exchange: "unit.catalog.dlx",
        routingKey: "retry.600ms",
        body: "body bytes"
      })
      expect(copy.options).toMatchObject({ messageId: "m1", correlationId: "c1", persistent: true })
      expect(publishedHeaders(copy)).toMatchObject({
        "x-schema-version": 1,
        [KitHeaders.attempts]: 2,
        [KitHeaders.errorTag]: "TransientFailure/PersistenceError.unavailable",
        [KitHeaders.originalUserId]: "relay"
      })
      expect(copy.options.userId).toBeUndefined()
      expect(consuming(fake).settlements).toEqual([])
      copiesChannel(fake)!.confirm(0)
      yield* until(() => consuming(fake).settlements.length === 1)
      expect(consuming(fake).settlements).toEqual([{ kind: "ack", tag: 1, multiple: true }])
    }))

  it.scoped("the failure times on a copy are the Clock's: first and last on a first failure, the first kept and last and dead-at moved on a later one", () =>
    Effect.gen(function*() {
      const fake = new FakeAmqp()
      const firstAt = Date.parse("2031-02-03T04:05:06.789Z")
      yield* TestClock.setTime(firstAt)
      yield* consumerOver(fake, (batch) =>
        Effect.succeed(batch.map((m) =>
          m.messageId === "m1"
            ? Verdict.Retry({ failure, tier: 0, delay: testRetry.delays[0]!, attempts: 1 })
            : Verdict.DeadLetter({ reason: "exhausted", failure, attempts: 3 })
        )))
      yield* ready(fake)
      consuming(fake).deliver(Buffer.from("{}"), { messageId: "m1", headers: {} })
      yield* until(() => copiesChannel(fake)?.published.length === 1)
      expect(publishedHeaders(copiesChannel(fake)!.published[0]!)).toMatchObject({
        [KitHeaders.firstFailureAt]: "2031-02-03T04:05:06.789Z",
        [KitHeaders.lastFailureAt]: "2031-02-03T04:05:06.789Z"
      })
      copiesChannel(fake)!.confirm(0)
      yield* until(() => consuming(fake).settlements.length === 1)

      yield* TestClock.adjust("90 seconds")
      // m2 is a retry copy coming back through the handler's exchange: its story is the kit's own.
      consuming(fake).deliver(Buffer.from("{}"), {
        messageId: "m2",
        headers: { [KitHeaders.attempts]: 2, [KitHeaders.firstFailureAt]: "2031-02-03T04:05:06.789Z" }
      }, { exchange: "unit.catalog.dlx" })
      yield* until(() => copiesChannel(fake)?.published.length === 2)
      expect(publishedHeaders(copiesChannel(fake)!.published[1]!)).toMatchObject({
        [KitHeaders.firstFailureAt]: "2031-02-03T04:05:06.789Z",
        [KitHeaders.lastFailureAt]: "2031-02-03T04:06:36.789Z",
        [KitHeaders.deadAt]: "2031-02-03T04:06:36.789Z",
        [KitHeaders.reason]: "exhausted"
      })
      copiesChannel(fake)!.confirm(1)
      yield* until(() => consuming(fake).settlements.length === 2)
    }))

  it.scoped("the same poison published twice is dead-lettered twice: a copy confirmed to its call is not taken for the next one", () =>
    Effect.gen(function*() {
      const fake = new FakeAmqp()
      const incompatible = new IncompatibleMessage({ errorTag: "UndecodableMessage.bad-body", detail: "not JSON" })
      yield* consumerOver(
        fake,
        (batch) =>
          Effect.succeed(
            batch.map(() => Verdict.DeadLetter({ reason: "incompatible", failure: incompatible, attempts: 0 }))
          )
      )
      yield* ready(fake)
      for (const [i, expected] of [[0, 1], [1, 2]] as const) {
        consuming(fake).deliver(Buffer.from("this is not json"), { messageId: "poison-1", headers: {} })
        yield* until(() => copiesChannel(fake)?.published.length === expected)
        copiesChannel(fake)!.confirm(i)
        yield* until(() => consuming(fake).settlements.length === expected)
      }
      expect(copiesChannel(fake)!.published.map((p) => p.routingKey)).toEqual(["dead", "dead"])
    }))

  it.scoped("a retry copy moved back by hand starts afresh, and its copy is sent, not taken for its first life's copy of the same attempt", () =>
    Effect.gen(function*() {
      const fake = new FakeAmqp()
      yield* consumerOver(
        fake,
        (batch) =>
          Effect.succeed(
            batch.map((m) => Verdict.Retry({ failure, tier: 0, delay: testRetry.delays[0]!, attempts: m.attempts + 1 }))
          )
      )
      yield* ready(fake)
      consuming(fake).deliver(Buffer.from("{}"), { messageId: "m1", headers: {} })
      yield* until(() => copiesChannel(fake)?.published.length === 1)
      copiesChannel(fake)!.confirm(0)
      yield* until(() => consuming(fake).settlements.length === 1)
      // Its second life: the retry copy, moved from the retry queue onto the handler's queue by a
      // shovel (the default exchange), so its attempts header does not count and its story restarts.
      consuming(fake).deliver(
        Buffer.from("{}"),
        {
          messageId: "m1",
          headers: { [KitHeaders.attempts]: 1, [KitHeaders.firstFailureAt]: "2031-01-01T00:00:00.000Z" }
        },
        { exchange: "" }
      )
      yield* until(() => copiesChannel(fake)?.published.length === 2)
      expect(publishedHeaders(copiesChannel(fake)!.published[1]!)).toMatchObject({ [KitHeaders.attempts]: 1 })
      expect(publishedHeaders(copiesChannel(fake)!.published[1]!)[KitHeaders.firstFailureAt]).not.toBe(
        "2031-01-01T00:00:00.000Z"
      )
      expect(consuming(fake).settlements).toHaveLength(1)
      copiesChannel(fake)!.confirm(1)
      yield* until(() => consuming(fake).settlements.length === 2)
    }))

  it.scoped("a copy without a confirm hands the message back (requeue) after the delay; past the hand-backs it is rejected to the dead-letter exchange", () =>
    Effect.gen(function*() {
      const fake = new FakeAmqp()
      yield* consumerOver(
        fake,
        (batch) =>
          Effect.succeed(batch.map(() =>
            Verdict.DeadLetter({
              reason: "incompatible",
              failure: new IncompatibleMessage({ errorTag: "UndecodableMessage.bad-body", detail: "x" }),
              attempts: 0
            })
          ))
      )
      yield* ready(fake)
      for (let round = 1; round <= 3; round++) {
        consuming(fake).deliver(Buffer.from("{bad"), { messageId: "poison" })
        yield* until(() => copiesChannel(fake)?.published.length === round)
        copiesChannel(fake)!.nackPublish(round - 1)
        copiesChannel(fake)!.published[round - 1]!.settled = true
      }
      // The nacks above are refusals for good: each rejects at once, without requeue.
      yield* until(() => consuming(fake).settlements.length === 3)
      expect(consuming(fake).settlements.map((s) => s.kind === "nack" && s.requeue)).toEqual([false, false, false])
    }))

  it.scoped("an unknown outcome hands back with requeue, only after the delay, at most twice, then rejects", () =>
    Effect.gen(function*() {
      const fake = new FakeAmqp()
      yield* consumerOver(
        fake,
        (batch) =>
          Effect.succeed(batch.map(() => Verdict.Retry({ failure, tier: 0, delay: testRetry.delays[0]!, attempts: 1 })))
      )
      yield* ready(fake)
      const settlements = () => consuming(fake).settlements
      for (let round = 1; round <= 3; round++) {
        consuming(fake).deliver(Buffer.from("{}"), { messageId: "slow" })
        yield* until(() => copiesChannel(fake)?.published.length === 1)
        yield* TestClock.adjust("5 seconds")
        if (round < 3) {
          yield* TestClock.adjust(Duration.subtract(requeueDelay, Duration.millis(1)))
          expect(settlements()).toHaveLength(round - 1)
          yield* TestClock.adjust("1 millis")
        }
        yield* until(() => settlements().length === round)
      }
      expect(settlements().map((s) => s.kind === "nack" && s.requeue)).toEqual([true, true, false])
      // The copy was sent once: the hand-backs waited for the same publish instead of sending it again.
      expect(copiesChannel(fake)!.published).toHaveLength(1)
    }))

  it.scoped("a Halt verdict settles nothing and ends the consumer with ReceiverHalted", () =>
    Effect.gen(function*() {
      const fake = new FakeAmqp()
      const fiber = yield* consumerOver(fake, (batch) =>
        Effect.succeed(batch.map(() => Verdict.Halt({ detail: "catalog.db was removed" }))))
      yield* ready(fake)
      consuming(fake).deliver(Buffer.from("{}"), { messageId: "m" })
      const exit = yield* Fiber.await(fiber)
      expect(Exit.isFailure(exit) && exit.cause.toString()).toContain("ReceiverHalted")
      expect(consuming(fake).settlements).toEqual([])
    }))

  it.scoped("a defect while deciding hands the batch back; the consumer keeps its connection and goes on", () =>
    Effect.gen(function*() {
      const fake = new FakeAmqp()
      let calls = 0
      yield* consumerOver(
        fake,
        (batch) =>
          ++calls === 1
            ? Effect.die(new Error("a bug outside any handler"))
            : Effect.succeed(batch.map(() => Verdict.Ack({ disposition: "applied" })))
      )
      yield* ready(fake)
      consuming(fake).deliver(Buffer.from("{}"), { messageId: "m1" })
      yield* TestClock.adjust(requeueDelay)
      yield* until(() => consuming(fake).settlements.length === 1)
      consuming(fake).deliver(Buffer.from("{}"), { messageId: "m2" })
      yield* until(() => consuming(fake).settlements.length === 2)
      expect(consuming(fake).settlements).toEqual([{ kind: "nack", tag: 1, multiple: false, requeue: true }, {
        kind: "ack",
        tag: 2,
        multiple: true
      }])
      expect(fake.connections.filter((c) => c.name === "unit-consumer")).toHaveLength(1)
    }))

  it.scoped("a refused login is retried after a successful start, and the log line never carries the password", () =>
    Effect.gen(function*() {
      const fake = new FakeAmqp()
      fake.failures.push(
        new Error(
          "Handshake terminated by server: 403 (ACCESS-REFUSED) with message \"ACCESS_REFUSED - Login was refused for user 'svc' with password s3cr3t-pw\""
        )
      )
      const lines: Array<string> = []
      const logger = Logger.make(({ annotations, message }) => {
        lines.push(`${String(message)} ${JSON.stringify(Object.fromEntries(annotations))}`)
      })
      yield* consumerOver(
        fake,
        (batch) => Effect.succeed(batch.map(() => Verdict.Ack({ disposition: "applied" }))),
        { ...access, url: Redacted.make("amqp://svc:s3cr3t-pw@fake:5672") }
      ).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
      yield* TestClock.adjust("1 second")
      yield* ready(fake)
      expect(lines.some((l) => l.includes("refuses the consumer's connection") && l.includes("ACCESS"))).toBe(true)
      expect(lines.join("\n")).not.toContain("s3cr3t-pw")
    }))

  it.scoped("after an outage, a session that settled deliveries and is lost soon reconnects at the policy's first step, not its longest", () =>
    Effect.gen(function*() {
      const fake = new FakeAmqp()
      for (let i = 0; i < 4; i++) fake.failures.push(new Error("connect ECONNREFUSED 127.0.0.1:5672"))
      // Failed attempts wait 1, 2, 4 then 8 s; the fifth connects.
      yield* consumerOver(
        fake,
        (batch) => Effect.succeed(batch.map(() => Verdict.Ack({ disposition: "applied" }))),
        access,
        Schedule.exponential("1 second")
      )
      yield* until(() => fake.failures.length === 3)
      for (const step of [1, 2, 4, 8]) yield* TestClock.adjust(Duration.seconds(step))
      yield* ready(fake)
      consuming(fake).deliver(Buffer.from("{}"), { messageId: "m1" })
      yield* until(() => consuming(fake).settlements.length === 1)
      yield* TestClock.adjust("2 seconds")
      yield* Effect.promise(() => fake.connections[0]!.close())
      // Healthy: the backoff starts afresh, at 1 s (it would otherwise be 16 s).
      yield* TestClock.adjust("1 second")
      yield* until(() => fake.connections.length === 2)
      expect(fake.connections).toHaveLength(2)

      // Sessions that settle nothing and are lost within 10 s still count as failed attempts: 1 s, then 2 s.
      for (const [k, wait] of [[1, 1], [2, 2]] as const) {
        yield* until(() => fake.connections[k]!.channels.length === 2)
        yield* TestClock.adjust("2 seconds")
        yield* Effect.promise(() => fake.connections[k]!.close())
        yield* TestClock.adjust(Duration.seconds(wait - 0.5))
        yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
        expect(fake.connections).toHaveLength(k + 1)
        yield* TestClock.adjust("500 millis")
        yield* until(() => fake.connections.length === k + 2)
      }
    }))
})
