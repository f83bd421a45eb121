import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Redacted, TestClock } from "effect"
import {
  makeAmqpPublisher,
  NackedBatchesBeforeReopen,
  type RawPublish,
  SilentConfirmTimeouts
} from "../../src/adapters/amqp/AmqpPublisher.js"
import { topologyPlanOf } from "../../src/adapters/amqp/Topology.js"
import { testRetryByHandler } from "../support/broker.js"
import { FakeAmqp } from "../support/FakeAmqp.js"

const confirmTimeout = Duration.seconds(5)

const publisherOver = (fake: FakeAmqp) =>
  makeAmqpPublisher({
    access: { url: Redacted.make("amqp://fake"), connectTimeout: Duration.seconds(5), heartbeat: Duration.seconds(10) },
    connectionName: "test-publisher",
    role: "relay",
    topology: topologyPlanOf({ prefix: "unit", queueType: "classic", retry: testRetryByHandler }, "relay"),
    confirmTimeout
  }).pipe(Effect.provide(fake.layer))

const message = (id: string, routingKey = "material.published.v1"): RawPublish => ({
  exchange: "unit.events",
  routingKey,
  content: Buffer.from(`{"id":"${id}"}`),
  options: { messageId: id, persistent: true }
})

/** Lets promises and fibers run until `holds` (the fake broker's callbacks and amqplib-like promises are real ones). */
const until = (holds: () => boolean) =>
  Effect.gen(function*() {
    for (let i = 0; i < 1_000 && !holds(); i++) {
      yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
    }
    if (!holds()) return yield* Effect.dieMessage("the condition never held")
  })

const tagsOf = (outcomes: ReadonlyArray<{ readonly _tag: string; readonly reason?: string }>) =>
  outcomes.map((o) => (o._tag === "Confirmed" ? o._tag : `${o._tag}(${o.reason})`))

describe("the publisher, against a scripted broker", () => {
  it.scoped("sends a batch in order, all in flight, and gives one outcome each: ack, nack, return", () =>
    Effect.gen(function*() {
      const fake = new FakeAmqp()
      const publisher = yield* publisherOver(fake)
      const fiber = yield* Effect.fork(publisher.publish([message("a"), message("b"), message("c")]))
      yield* until(() => fake.last?.last?.published.length === 3)
      const channel = fake.last.last
      expect(channel.published.map((p) => [p.options.messageId, p.options.mandatory])).toEqual([["a", true], [
        "b",
        true
      ], ["c", true]])
      channel.confirm(0)
      channel.nackPublish(1)
      channel.returnPublish(2)
      expect(tagsOf(yield* Fiber.join(fiber))).toEqual(["Confirmed", "Rejected(nacked)", "Rejected(returned)"])
      // A return drops the connection: the next batch opens another, declaring the topology again.
      const next = yield* Effect.fork(publisher.publish([message("d")]))
      yield* until(() => fake.connections.length === 2 && fake.last.last?.published.length === 1)
      fake.last.last.confirm(0)
      expect(tagsOf(yield* Fiber.join(next))).toEqual(["Confirmed"])
      expect(fake.connections[0]!.closed).toBe(true)
    }))

  it.scoped("a publish without a confirm within the confirm timeout is Unknown, no sooner", () =>
    Effect.gen(function*() {
      const fake = new FakeAmqp()
      const publisher = yield* publisherOver(fake)
      const fiber = yield* Effect.fork(publisher.publish([message("a")]))
      yield* until(() => fake.last?.last?.published.length === 1)
      yield* TestClock.adjust(Duration.subtract(confirmTimeout, Duration.millis(1)))
      expect(fiber.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 millis")
      expect(tagsOf(yield* Fiber.join(fiber))).toEqual(["Unknown(confirm-timeout)"])
    }))

  it.scoped("at the batch's deadline, the publishes confirmed by then keep their outcome and only the silent one is Unknown", () =>
    Effect.gen(function*() {
      const fake = new FakeAmqp()
      const publisher = yield* publisherOver(fake)
      const fiber = yield* Effect.fork(publisher.publish([message("a"), message("b"), message("c")]))
      yield* until(() => fake.last?.last?.published.length === 3)
      const channel = fake.last.last
      channel.confirm(0)
      channel.nackPublish(2)
      yield* TestClock.adjust(confirmTimeout)
      expect(tagsOf(yield* Fiber.join(fiber))).toEqual(["Confirmed", "Unknown(confirm-timeout)", "Rejected(nacked)"])
    }))

  it.scoped("a channel that closes before the confirm makes the publish Unknown, and the next batch reconnects", () =>
    Effect.gen(function*() {
      const fake = new FakeAmqp()
      const publisher = yield* publisherOver(fake)
      const fiber = yield* Effect.fork(publisher.publish([message("a")]))
      yield* until(() => fake.last?.last?.published.length === 1)
      fake.last.last.closeChannel()
      expect(tagsOf(yield* Fiber.join(fiber))).toEqual(["Unknown(channel-closed)"])
      const again = yield* Effect.fork(publisher.publish([message("a")]))
      yield* until(() => fake.connections.length === 2 && fake.last.last?.published.length === 1)
      fake.last.last.confirm(0)
      expect(tagsOf(yield* Fiber.join(again))).toEqual(["Confirmed"])
    }))

  it.scoped("no broker: every outcome is Unknown(broker-unavailable), nothing is sent", () =>
    Effect.gen(function*() {
      const fake = new FakeAmqp()
      fake.failures.push(Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5672"), { code: "ECONNREFUSED" }))
      const publisher = yield* publisherOver(fake)
      expect(tagsOf(yield* publisher.publish([message("a"), message("b")]))).toEqual([
        "Unknown(broker-unavailable)",
        "Unknown(broker-unavailable)"
      ])
      expect(fake.connections).toHaveLength(0)
    }))

  it.scoped("a message still in flight after its confirm timed out is not sent again: the next call waits for its confirm", () =>
    Effect.gen(function*() {
      const fake = new FakeAmqp()
      const publisher = yield* publisherOver(fake)
      const first = yield* Effect.fork(publisher.publish([message("a")]))
      yield* until(() => fake.last?.last?.published.length === 1)
      yield* TestClock.adjust(confirmTimeout)
      expect(tagsOf(yield* Fiber.join(first))).toEqual(["Unknown(confirm-timeout)"])
      const second = yield* Effect.fork(publisher.publish([message("a"), message("b")]))
      yield* until(() => fake.last.last.published.length === 2)
      expect(fake.last.last.published.map((p) => p.options.messageId)).toEqual(["a", "b"])
      fake.last.last.confirmAll()
      expect(tagsOf(yield* Fiber.join(second))).toEqual(["Confirmed", "Confirmed"])
      // Its confirm reached a caller: a later publish of "a" is a message of its own, and is sent.
      const third = yield* Effect.fork(publisher.publish([message("a")]))
      yield* until(() => fake.last.last.published.length === 3)
      fake.last.last.confirm(2)
      expect(tagsOf(yield* Fiber.join(third))).toEqual(["Confirmed"])
    }))

  it.scoped("a confirm that comes after its call gave up is given to the next call of that message, once, without sending it again", () =>
    Effect.gen(function*() {
      const fake = new FakeAmqp()
      const publisher = yield* publisherOver(fake)
      const first = yield* Effect.fork(publisher.publish([message("a")]))
      yield* until(() => fake.last?.last?.published.length === 1)
      yield* TestClock.adjust(confirmTimeout)
      expect(tagsOf(yield* Fiber.join(first))).toEqual(["Unknown(confirm-timeout)"])
      fake.last.last.confirm(0)
      expect(tagsOf(yield* publisher.publish([message("a")]))).toEqual(["Confirmed"])
      expect(fake.last.last.published).toHaveLength(1)
      const again = yield* Effect.fork(publisher.publish([message("a")]))
      yield* until(() => fake.last.last.published.length === 2)
      fake.last.last.confirm(1)
      expect(tagsOf(yield* Fiber.join(again))).toEqual(["Confirmed"])
    }))

  it.scoped("while the broker blocks the connection nothing is sent; publishing resumes when it is unblocked", () =>
    Effect.gen(function*() {
      const fake = new FakeAmqp()
      const publisher = yield* publisherOver(fake)
      const warm = yield* Effect.fork(publisher.publish([message("a")]))
      yield* until(() => fake.last?.last?.published.length === 1)
      fake.last.last.confirm(0)
      yield* Fiber.join(warm)
      fake.last.block()
      const blocked = yield* Effect.fork(publisher.publish([message("b")]))
      yield* TestClock.adjust("1 minute")
      yield* until(() => true)
      expect(fake.last.last.published).toHaveLength(1)
      expect(blocked.unsafePoll()).toBeNull()
      fake.last.unblock()
      yield* until(() => fake.last.last.published.length === 2)
      fake.last.last.confirm(1)
      expect(tagsOf(yield* Fiber.join(blocked))).toEqual(["Confirmed"])
      expect(fake.connections).toHaveLength(1)
    }))

  it.scoped(`a session whose confirms stopped for ${SilentConfirmTimeouts} confirm timeouts is dropped, and the message is sent once more on a new one`, () =>
    Effect.gen(function*() {
      const fake = new FakeAmqp()
      const publisher = yield* publisherOver(fake)
      for (let i = 0; i < SilentConfirmTimeouts; i++) {
        const call = yield* Effect.fork(publisher.publish([message("a")]))
        yield* until(() => fake.last?.last?.published.length === 1)
        yield* TestClock.adjust(confirmTimeout)
        expect(tagsOf(yield* Fiber.join(call))).toEqual(["Unknown(confirm-timeout)"])
      }
      expect(fake.connections).toHaveLength(1)
      yield* TestClock.adjust("1 millis")
      const call = yield* Effect.fork(publisher.publish([message("a")]))
      yield* until(() => fake.connections.length === 2 && fake.last.last?.published.length === 1)
      expect(fake.connections[0]!.closed).toBe(true)
      fake.last.last.confirm(0)
      expect(tagsOf(yield* Fiber.join(call))).toEqual(["Confirmed"])
    }))

  it.scoped(`after ${NackedBatchesBeforeReopen} batches in a row wholly nacked, the next batch opens a fresh connection`, () =>
    Effect.gen(function*() {
      const fake = new FakeAmqp()
      const publisher = yield* publisherOver(fake)
      for (let i = 0; i < NackedBatchesBeforeReopen; i++) {
        const call = yield* Effect.fork(publisher.publish([message(`n${i}`)]))
        yield* until(() => fake.last?.last?.published.length === i + 1)
        fake.last.last.nackPublish(i)
        expect(tagsOf(yield* Fiber.join(call))).toEqual(["Rejected(nacked)"])
        expect(fake.connections).toHaveLength(1)
      }
      const call = yield* Effect.fork(publisher.publish([message("fresh")]))
      yield* until(() => fake.connections.length === 2 && fake.last.last?.published.length === 1)
      fake.last.last.confirm(0)
      expect(tagsOf(yield* Fiber.join(call))).toEqual(["Confirmed"])
    }))
})
