import { describe, expect, it } from "@effect/vitest"
import { Context, Duration, Effect, Option, TestClock } from "effect"
import { DefaultReceiveLimits, type IncomingMessage } from "../../src/app/admission.js"
import type { RetryPolicy } from "../../src/app/failures.js"
import { auditHandler, catalogHandler } from "../../src/app/handlers.js"
import { judge, judgeAll, receive } from "../../src/app/receive.js"
import { Verdict } from "../../src/app/verdict.js"
import { PersistenceError } from "../../src/domain/errors.js"
import { AuditLog } from "../../src/ports/AuditLog.js"
import { CatalogStore } from "../../src/ports/CatalogStore.js"
import { Inbox } from "../../src/ports/Inbox.js"
import { Transaction } from "../../src/ports/Transaction.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { ReceiverMemory } from "../support/memory.js"

const deliver = <R>(handler: Parameters<typeof receive<R>>[0], event: ReturnType<typeof MaterialMother.event>) =>
  receive(handler, event, { messageId: event.eventId, correlationId: "req" })

const catalogRevision = Effect.flatMap(CatalogStore, (c) => c.get(MaterialMother.materialId)).pipe(
  Effect.map((entry) => Option.getOrUndefined(entry)?.revision)
)

describe("the catalog handler", () => {
  it.effect("revision 3 arrives before revision 2: the catalog still shows 3 and 2 is recorded stale", () =>
    Effect.gen(function*() {
      expect(yield* deliver(catalogHandler, MaterialMother.event({ revision: 3 }))).toBe("applied")
      expect(yield* deliver(catalogHandler, MaterialMother.event({ revision: 2 }))).toBe("stale")
      expect(yield* catalogRevision).toBe(3)
      expect(yield* Effect.flatMap(Inbox, (i) => i.counts("catalog"))).toMatchObject({
        applied: 1,
        stale: 1,
        duplicates: 0
      })
    }).pipe(Effect.provide(ReceiverMemory)))

  it.effect("the same revision again under a new event id is stale; a newer one replaces it", () =>
    Effect.gen(function*() {
      yield* deliver(catalogHandler, MaterialMother.event({ revision: 1 }))
      expect(yield* deliver(catalogHandler, MaterialMother.event({ revision: 1 }))).toBe("stale")
      expect(yield* deliver(catalogHandler, MaterialMother.event({ revision: 2, title: "Second" }))).toBe("applied")
      const entry = Option.getOrThrow(yield* Effect.flatMap(CatalogStore, (c) => c.get(MaterialMother.materialId)))
      expect(entry).toMatchObject({ revision: 2, title: "Second" })
    }).pipe(Effect.provide(ReceiverMemory)))
})

describe("the inbox", () => {
  it.effect("a redelivered message is acked as duplicate with no second audit record", () =>
    Effect.gen(function*() {
      const event = MaterialMother.event()
      expect(yield* deliver(auditHandler, event)).toBe("applied")
      expect(yield* deliver(auditHandler, event)).toBe("duplicate")
      expect(yield* deliver(auditHandler, event)).toBe("duplicate")
      expect(yield* Effect.flatMap(AuditLog, (a) => a.count)).toBe(1)
      expect(yield* Effect.flatMap(Inbox, (i) => i.counts("audit"))).toMatchObject({
        applied: 1,
        stale: 0,
        duplicates: 2
      })
    }).pipe(Effect.provide(ReceiverMemory)))

  it.effect("receipts are per handler: catalog and audit each apply the same message once, and only once", () =>
    Effect.gen(function*() {
      const event = MaterialMother.event()
      expect(yield* deliver(catalogHandler, event)).toBe("applied")
      expect(yield* deliver(auditHandler, event)).toBe("applied")
      expect(yield* deliver(catalogHandler, event)).toBe("duplicate")
      expect(yield* deliver(auditHandler, event)).toBe("duplicate")
      expect(yield* Effect.flatMap(AuditLog, (a) => a.count)).toBe(1)
      expect(yield* Effect.flatMap(Inbox, (i) => i.counts("catalog"))).toMatchObject({
        applied: 1,
        stale: 0,
        duplicates: 1
      })
      expect(yield* Effect.flatMap(Inbox, (i) => i.counts("audit"))).toMatchObject({
        applied: 1,
        stale: 0,
        duplicates: 1
      })
    }).pipe(Effect.provide(ReceiverMemory)))

  it.effect("the same event with message_id and event_id in upper, then lower case is applied once, then a duplicate", () =>
    Effect.gen(function*() {
      const event = MaterialMother.event()
      const shouted = MaterialMother.incomingInUpperCase(event)
      expect(shouted.messageId).not.toBe(event.eventId)
      expect(yield* judge(auditHandler, policy)(shouted)).toEqual(Verdict.Ack({ disposition: "applied" }))
      expect(yield* judge(auditHandler, policy)(MaterialMother.incoming(event))).toEqual(
        Verdict.Ack({ disposition: "duplicate" })
      )
      expect(yield* Effect.flatMap(AuditLog, (a) => a.count)).toBe(1)
      expect(yield* Effect.flatMap(Inbox, (i) => i.counts("audit"))).toMatchObject({ applied: 1, duplicates: 1 })
      // The receipt is kept under the lower-case id, whatever spelling came first.
      expect(Option.isSome(yield* Effect.flatMap(Inbox, (i) => i.find("audit", event.eventId)))).toBe(true)
    }).pipe(Effect.provide(ReceiverMemory)))

  it.effect("the two spellings of one event in one batch: applied once, one duplicate", () =>
    Effect.gen(function*() {
      const event = MaterialMother.event()
      const verdicts = yield* judgeAll(auditHandler, policy)([
        MaterialMother.incoming(event),
        MaterialMother.incomingInUpperCase(event)
      ])
      expect(verdicts.map((v) => v._tag === "Ack" && v.disposition)).toEqual(["applied", "duplicate"])
      expect(yield* Effect.flatMap(AuditLog, (a) => a.count)).toBe(1)
    }).pipe(Effect.provide(ReceiverMemory)))

  it.effect("a message_id in upper case with its event_id in lower case is the same id, not a mismatch", () =>
    Effect.gen(function*() {
      const event = MaterialMother.event()
      const upperId = MaterialMother.incoming(event, { messageId: event.eventId.toUpperCase() })
      expect(yield* judge(catalogHandler, policy)(upperId)).toEqual(Verdict.Ack({ disposition: "applied" }))
      const other = MaterialMother.incoming(event, { messageId: MaterialMother.eventId("other").toUpperCase() })
      expect(yield* judge(catalogHandler, policy)(other)).toMatchObject({
        _tag: "DeadLetter",
        failure: { errorTag: "UndecodableMessage.id-mismatch" }
      })
    }).pipe(Effect.provide(ReceiverMemory)))

  it.effect("a failing effect leaves no receipt, so the retry applies it", () =>
    Effect.gen(function*() {
      const event = MaterialMother.event()
      const failing = {
        ...auditHandler,
        apply: () =>
          Effect.fail(new PersistenceError({ operation: "audit.append", kind: "unavailable", cause: "locked" }))
      }
      const verdict = yield* judge(failing, policy)(MaterialMother.incoming(event))
      expect(verdict).toMatchObject({
        _tag: "Retry",
        tier: 0,
        attempts: 1,
        failure: { _tag: "TransientFailure", errorTag: "PersistenceError.unavailable" }
      })
      expect(Option.isNone(yield* Effect.flatMap(Inbox, (i) => i.find("audit", event.eventId)))).toBe(true)
      expect(yield* deliver(auditHandler, event)).toBe("applied")
    }).pipe(Effect.provide(ReceiverMemory)))
})

const policy: RetryPolicy = {
  delays: [Duration.seconds(1), Duration.seconds(10), Duration.seconds(60)],
  maxAttempts: 5
}

describe("judge", () => {
  const incoming = (overrides: Partial<IncomingMessage>) => MaterialMother.incoming(MaterialMother.event(), overrides)

  it.effect("dead-letters undecodable, unknown-version and id-less messages at once as incompatible, naming why", () =>
    Effect.gen(function*() {
      const cases = [
        [{ body: Buffer.from("{") }, "UndecodableMessage.bad-body"],
        [{ schemaVersion: 7 }, "UndecodableMessage.unknown-version"],
        [{ messageId: undefined }, "UndecodableMessage.no-message-id"],
        [{ messageId: "another-id" }, "UndecodableMessage.id-mismatch"],
        [{ contentType: "text/plain" }, "UndecodableMessage.bad-content-type"],
        [{ type: "material.published.v2" }, "UndecodableMessage.unknown-type"],
        [{ body: Buffer.alloc(0) }, "UndecodableMessage.bad-body"],
        [{ headersRefused: "nests tables or arrays deeper than 32 levels" }, "UndecodableMessage.bad-headers"],
        [{ body: Buffer.alloc(64 * 1024 + 1, 0x20) }, "UndecodableMessage.too-large"]
      ] as const
      for (const [overrides, errorTag] of cases) {
        expect(yield* judge(catalogHandler, policy)(incoming({ ...overrides, attempts: 2 }))).toMatchObject({
          _tag: "DeadLetter",
          reason: "incompatible",
          attempts: 2,
          failure: { _tag: "IncompatibleMessage", errorTag }
        })
      }
      expect(yield* Effect.flatMap(CatalogStore, (c) => c.count)).toBe(0)
    }).pipe(Effect.provide(ReceiverMemory)))

  it.effect("an event of exactly the byte limit is decoded; one byte more is incompatible, unread", () =>
    Effect.gen(function*() {
      const event = MaterialMother.event()
      const valid = MaterialMother.incoming(event)
      const limits = { ...DefaultReceiveLimits, maxEventBytes: valid.body.byteLength }
      expect(yield* judge(catalogHandler, policy, limits)(valid)).toEqual(Verdict.Ack({ disposition: "applied" }))
      const padded = { ...valid, body: Buffer.concat([Buffer.from(valid.body), Buffer.from(" ")]) }
      expect(yield* judge(catalogHandler, policy, limits)(padded)).toMatchObject({
        _tag: "DeadLetter",
        failure: {
          errorTag: "UndecodableMessage.too-large",
          detail: expect.stringContaining(`at most ${valid.body.byteLength}`)
        }
      })
    }).pipe(Effect.provide(ReceiverMemory)))

  it.effect("remembers each routed failure beside the receipts: retrying, then dead, and incompatible ones with an id as dead", () =>
    Effect.gen(function*() {
      const event = MaterialMother.event()
      const buggy = { ...catalogHandler, apply: () => Effect.die(new TypeError("boom")) }
      const bad = incoming({ messageId: "bad-1", body: Buffer.from("{") })
      yield* TestClock.setTime(5_000)
      yield* judgeAll(buggy, policy)([MaterialMother.incoming(event, { attempts: 0 }), bad])
      const unreceived = (ids: ReadonlyArray<string>) => Effect.flatMap(Inbox, (i) => i.unreceived("catalog", ids))
      expect(yield* unreceived([event.eventId, "bad-1"])).toEqual([
        {
          messageId: event.eventId,
          failure: { handler: "catalog", messageId: event.eventId, state: "retrying", attempts: 1, atMs: 5_000 }
        },
        {
          messageId: "bad-1",
          failure: { handler: "catalog", messageId: "bad-1", state: "dead", attempts: 0, atMs: 5_000 }
        }
      ])
      yield* judge(buggy, policy)(MaterialMother.incoming(event, { attempts: 4 }))
      expect((yield* unreceived([event.eventId]))[0]?.failure).toMatchObject({ state: "dead", attempts: 5 })
      expect(yield* Effect.flatMap(Inbox, (i) => i.counts("catalog"))).toMatchObject({
        applied: 0,
        retrying: 0,
        dead: 2
      })
    }).pipe(Effect.provide(ReceiverMemory)))

  it.effect("acks a valid message with its disposition", () =>
    Effect.gen(function*() {
      expect(yield* judge(catalogHandler, policy)(incoming({}))).toEqual(Verdict.Ack({ disposition: "applied" }))
    }).pipe(Effect.provide(ReceiverMemory)))

  it.effect("a handler that throws is a permanent failure of that message, retried like any other", () =>
    Effect.gen(function*() {
      const buggy = {
        ...catalogHandler,
        apply: () =>
          Effect.sync((): "applied" => {
            throw new TypeError("cannot read 'title' of undefined")
          })
      }
      expect(yield* judge(buggy, policy)(incoming({ attempts: 1 }))).toMatchObject({
        _tag: "Retry",
        tier: 1,
        attempts: 2,
        failure: { _tag: "PermanentFailure", errorTag: "Defect.TypeError", detail: "cannot read 'title' of undefined" }
      })
    }).pipe(Effect.provide(ReceiverMemory)))

  it.effect("a constraint violation is permanent; a busy store is transient", () =>
    Effect.gen(function*() {
      const failingWith = (kind: "constraint" | "unavailable") => ({
        ...auditHandler,
        apply: () => Effect.fail(new PersistenceError({ operation: "audit.append", kind, cause: "x" }))
      })
      expect(yield* judge(failingWith("constraint"), policy)(incoming({}))).toMatchObject({
        failure: { _tag: "PermanentFailure" }
      })
      expect(yield* judge(failingWith("unavailable"), policy)(incoming({}))).toMatchObject({
        failure: { _tag: "TransientFailure" }
      })
    }).pipe(Effect.provide(ReceiverMemory)))

  it.effect("the last allowed attempt's failure dead-letters the message as exhausted", () =>
    Effect.gen(function*() {
      const failing = {
        ...auditHandler,
        apply: () => Effect.fail(new PersistenceError({ operation: "audit.append", kind: "unavailable", cause: "x" }))
      }
      expect(yield* judge(failing, policy)(incoming({ attempts: 3 }))).toMatchObject({
        _tag: "Retry",
        tier: 2,
        attempts: 4
      })
      expect(yield* judge(failing, policy)(incoming({ attempts: 4 }))).toMatchObject({
        _tag: "DeadLetter",
        reason: "exhausted",
        attempts: 5
      })
      expect(yield* judge(failing, policy)(incoming({ attempts: 9 }))).toMatchObject({
        _tag: "DeadLetter",
        reason: "exhausted",
        attempts: 10
      })
    }).pipe(Effect.provide(ReceiverMemory)))

  it.effect("a lost database file halts the receiver instead of retrying", () =>
    Effect.gen(function*() {
      const lost = {
        ...catalogHandler,
        apply: () => Effect.fail(new PersistenceError({ operation: "catalog.put", kind: "lost", cause: "removed" }))
      }
      expect(yield* judge(lost, policy)(incoming({}))).toMatchObject({ _tag: "Halt" })
    }).pipe(Effect.provide(ReceiverMemory)))
})

describe("group commit (judgeAll)", () => {
  it.effect("a poison message in a batch neither loses nor double-applies its neighbours", () =>
    Effect.gen(function*() {
      const events = [1, 2, 3, 4].map((revision) =>
        MaterialMother.event({ materialId: `batch/m${revision}`, revision })
      )
      const poisoned = events[2]!.eventId
      let poisonedCalls = 0
      const picky = {
        ...auditHandler,
        // It writes its record, then dies: the savepoint must take the record back.
        apply: (event: typeof events[number], message: { messageId: string; correlationId: string }) =>
          event.eventId === poisoned
            ? Effect.zipRight(
              Effect.zipRight(Effect.sync(() => poisonedCalls++), auditHandler.apply(event, message)),
              Effect.die(new Error("bug on this one"))
            )
            : auditHandler.apply(event, message)
      }
      const batch = [...events.map((e) => MaterialMother.incoming(e)), MaterialMother.incoming(events[0]!)]
      const verdicts = yield* judgeAll(picky, policy)(batch)
      expect(verdicts.map((v) => v._tag === "Ack" ? v.disposition : v._tag)).toEqual([
        "applied",
        "applied",
        "Retry",
        "applied",
        "duplicate"
      ])
      // One delivery, one attempt: the failed handler is not run again for its neighbours' sake.
      expect(poisonedCalls).toBe(1)
      expect(yield* Effect.flatMap(AuditLog, (a) => a.count)).toBe(3)
      expect(Option.isNone(yield* Effect.flatMap(Inbox, (i) => i.find("audit", poisoned)))).toBe(true)
      // The retry applies it once; the others are duplicates now.
      const again = yield* judgeAll(auditHandler, policy)(events.map((e) => MaterialMother.incoming(e)))
      expect(again.map((v) => v._tag === "Ack" && v.disposition)).toEqual([
        "duplicate",
        "duplicate",
        "applied",
        "duplicate"
      ])
      expect(yield* Effect.flatMap(AuditLog, (a) => a.count)).toBe(4)
    }).pipe(Effect.provide(ReceiverMemory)))

  it.effect("a clean batch commits in one transaction without savepoints; a redelivery and a repeat inside the batch are duplicates", () =>
    Effect.gen(function*() {
      const events = [1, 2, 3].map((revision) => MaterialMother.event({ materialId: `clean/m${revision}`, revision }))
      expect(yield* judgeAll(auditHandler, policy)([MaterialMother.incoming(events[0]!)])).toMatchObject([{
        _tag: "Ack",
        disposition: "applied"
      }])
      let runs = 0
      const batch = [events[1]!, events[0]!, events[2]!, events[1]!].map((e) => MaterialMother.incoming(e))
      const verdicts = yield* judgeAll(auditHandler, policy)(batch).pipe(
        Effect.provideServiceEffect(
          Transaction,
          Effect.map(Transaction, (t) => ({
            run: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.suspend(() => (runs++, t.run(effect)))
          }))
        )
      )
      expect(verdicts.map((v) => v._tag === "Ack" ? v.disposition : v._tag)).toEqual([
        "applied",
        "duplicate",
        "applied",
        "duplicate"
      ])
      expect(runs).toBe(1)
      expect(yield* Effect.flatMap(AuditLog, (a) => a.count)).toBe(3)
      expect(yield* Effect.flatMap(Inbox, (i) => i.counts("audit"))).toMatchObject({ applied: 3, duplicates: 2 })
    }).pipe(Effect.provide(ReceiverMemory)))

  it.effect("a transaction that cannot commit fails every message of the batch transiently, and keeps nothing", () =>
    Effect.gen(function*() {
      const events = [1, 2].map((revision) => MaterialMother.event({ revision }))
      const verdicts = yield* judgeAll(auditHandler, policy)(events.map((e) => MaterialMother.incoming(e))).pipe(
        Effect.provideServiceEffect(
          Transaction,
          Effect.map(Transaction, (t) => ({
            run: <A, E, R>(effect: Effect.Effect<A, E, R>) =>
              Effect.flatMap(Effect.serviceOption(InTransaction), (inner) =>
                Option.isSome(inner)
                  ? t.run(effect)
                  : t.run(
                    Effect.zipRight(
                      Effect.provideService(effect, InTransaction, true),
                      Effect.fail(
                        new PersistenceError({ operation: "commit", kind: "unavailable", cause: "disk full" })
                      )
                    )
                  ))
          }))
        )
      )
      expect(verdicts.map((v) => v._tag)).toEqual(["Retry", "Retry"])
      expect(yield* Effect.flatMap(AuditLog, (a) => a.count)).toBe(0)
    }).pipe(Effect.provide(ReceiverMemory)))

  it.effect("a message whose first delivery in the batch failed is applied by its second: a failure is not a receipt", () =>
    Effect.gen(function*() {
      const event = MaterialMother.event({ materialId: "batch/again" })
      let calls = 0
      const flaky = {
        ...auditHandler,
        apply: (e: typeof event, message: { messageId: string; correlationId: string }) =>
          ++calls === 1
            ? Effect.fail(new PersistenceError({ operation: "append", kind: "unavailable", cause: "busy" }))
            : auditHandler.apply(e, message)
      }
      const verdicts = yield* judgeAll(flaky, policy)([MaterialMother.incoming(event), MaterialMother.incoming(event)])
      expect(verdicts.map((v) => v._tag === "Ack" ? v.disposition : v._tag)).toEqual(["Retry", "applied"])
      expect(calls).toBe(2)
      expect(yield* Effect.flatMap(AuditLog, (a) => a.count)).toBe(1)
      expect(yield* Effect.flatMap(Inbox, (i) => i.counts("audit"))).toMatchObject({ applied: 1, duplicates: 0 })
    }).pipe(Effect.provide(ReceiverMemory)))
})

class InTransaction extends Context.Tag("test/InTransaction")<InTransaction, true>() {}
