import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { auditHandler, catalogHandler } from "../../src/app/handlers.js"
import { type IncomingMessage, judge, receive } from "../../src/app/receive.js"
import { PersistenceError } from "../../src/domain/errors.js"
import { AuditLog } from "../../src/ports/AuditLog.js"
import { CatalogStore } from "../../src/ports/CatalogStore.js"
import { Inbox } from "../../src/ports/Inbox.js"
import { ReceiverMemory } from "../support/memory.js"
import { MaterialMother } from "../support/MaterialMother.js"

const deliver = <R>(handler: Parameters<typeof receive<R>>[0], event: ReturnType<typeof MaterialMother.event>) =>
  receive(handler, event, { messageId: event.eventId, correlationId: "req" })

const catalogRevision = Effect.flatMap(CatalogStore, (c) => c.get("guides/quorum-queues")).pipe(
  Effect.map((entry) => Option.getOrUndefined(entry)?.revision)
)

describe("the catalog handler", () => {
  it.effect("revision 3 arrives before revision 2: the catalog still shows 3 and 2 is recorded stale", () =>
    Effect.gen(function*() {
      expect(yield* deliver(catalogHandler, MaterialMother.event({ revision: 3 }))).toBe("applied")
      expect(yield* deliver(catalogHandler, MaterialMother.event({ revision: 2 }))).toBe("stale")
      expect(yield* catalogRevision).toBe(3)
      expect(yield* Effect.flatMap(Inbox, (i) => i.counts("catalog"))).toEqual({ applied: 1, stale: 1, duplicates: 0 })
    }).pipe(Effect.provide(ReceiverMemory)))

  it.effect("the same revision again under a new event id is stale; a newer one replaces it", () =>
    Effect.gen(function*() {
      yield* deliver(catalogHandler, MaterialMother.event({ revision: 1 }))
      expect(yield* deliver(catalogHandler, MaterialMother.event({ revision: 1 }))).toBe("stale")
      expect(yield* deliver(catalogHandler, MaterialMother.event({ revision: 2, title: "Second" }))).toBe("applied")
      const entry = Option.getOrThrow(yield* Effect.flatMap(CatalogStore, (c) => c.get("guides/quorum-queues")))
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
      expect(yield* Effect.flatMap(Inbox, (i) => i.counts("audit"))).toEqual({ applied: 1, stale: 0, duplicates: 2 })
    }).pipe(Effect.provide(ReceiverMemory)))

  it.effect("receipts are per handler: catalog and audit each apply the same message once", () =>
    Effect.gen(function*() {
      const event = MaterialMother.event()
      expect(yield* deliver(catalogHandler, event)).toBe("applied")
      expect(yield* deliver(auditHandler, event)).toBe("applied")
    }).pipe(Effect.provide(ReceiverMemory)))

  it.effect("a failing effect leaves no receipt, so the redelivery applies it", () =>
    Effect.gen(function*() {
      const event = MaterialMother.event()
      const failing = { ...auditHandler, apply: () => Effect.fail(new PersistenceError({ operation: "audit.append", kind: "unavailable", cause: "locked" })) }
      const verdict = yield* judge(failing)(MaterialMother.incoming(event))
      expect(verdict._tag).toBe("Requeue")
      expect(Option.isNone(yield* Effect.flatMap(Inbox, (i) => i.find("audit", event.eventId)))).toBe(true)
      expect(yield* deliver(auditHandler, event)).toBe("applied")
    }).pipe(Effect.provide(ReceiverMemory)))
})

describe("judge", () => {
  const incoming = (overrides: Partial<IncomingMessage>) => MaterialMother.incoming(MaterialMother.event(), overrides)

  it.effect("sends undecodable and unknown-version messages to the dead-letter queue with the reason", () =>
    Effect.gen(function*() {
      expect(yield* judge(catalogHandler)(incoming({ body: Buffer.from("{") }))).toMatchObject({ _tag: "DeadLetter", reason: "bad-body" })
      expect(yield* judge(catalogHandler)(incoming({ schemaVersion: 7 }))).toMatchObject({ _tag: "DeadLetter", reason: "unknown-version" })
      expect(yield* judge(catalogHandler)(incoming({ messageId: undefined }))).toMatchObject({ _tag: "DeadLetter", reason: "no-message-id" })
      expect(yield* judge(catalogHandler)(incoming({ messageId: "another-id" }))).toMatchObject({ _tag: "DeadLetter", reason: "id-mismatch" })
      expect(yield* Effect.flatMap(CatalogStore, (c) => c.count)).toBe(0)
    }).pipe(Effect.provide(ReceiverMemory)))

  it.effect("acks a valid message with its disposition", () =>
    Effect.gen(function*() {
      expect(yield* judge(catalogHandler)(incoming({}))).toEqual({ _tag: "Ack", disposition: "applied" })
    }).pipe(Effect.provide(ReceiverMemory)))
})

