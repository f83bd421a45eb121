import { describe, expect, it } from "@effect/vitest"
import type { Message } from "amqplib"
import { Either } from "effect"
import { toIncoming } from "../../src/adapters/amqp/AmqpConsumer.js"
import {
  BrokerDeathHeaders,
  CopyNotEncodable,
  deadCopy,
  type FailureContext,
  KitHeaders,
  MaxCopyHeaderBytes,
  replayCopy,
  retryCopy
} from "../../src/adapters/amqp/FailureHeaders.js"
import { decodeFieldTable } from "../../src/adapters/amqp/FieldTable.js"
import { IncompatibleMessage, TransientFailure } from "../../src/app/failures.js"
import { amqplibEntries, i64, nestedArrays, rawEntry, sized, u64 } from "../support/FieldTables.js"

/** A delivery whose header table arrives as `entries`, the way the patched amqplib hands it over. */
const delivery = (entries: Buffer, exchange = "p.catalog.dlx"): Message => ({
  content: Buffer.from("{}"),
  fields: { deliveryTag: 1, redelivered: false, exchange, routingKey: "redeliver" },
  properties: Object.defineProperty(
    { messageId: "m-1", contentType: "application/json", deliveryMode: 2, timestamp: 1, type: "t", userId: "relay" },
    "rawHeaders",
    { value: entries }
  )
} as unknown as Message)

const context = (overrides: Partial<FailureContext> = {}): FailureContext => ({
  handler: "catalog",
  failure: new TransientFailure({ errorTag: "PersistenceError.busy", detail: "locked" }),
  attempts: 1,
  nowMs: Date.parse("2031-01-01T00:00:00Z"),
  kitHeadersTrusted: true,
  ...overrides
})

/** The header table a copy carries: its entries' names and bytes, and their values. */
const copyTable = (headers: unknown) => {
  const bytes = headers as Buffer
  expect(bytes.readUInt32BE(0)).toBe(bytes.length - 4)
  return Either.getOrThrow(decodeFieldTable(bytes.subarray(4)))
}

const death = amqplibEntries({
  "x-death": [{ count: 1, reason: "maxlen", queue: "p.catalog", time: { "!": "timestamp", value: 1 } }],
  "x-first-death-queue": "p.catalog",
  "x-first-death-reason": "maxlen",
  "x-first-death-exchange": "p.events",
  "x-last-death-queue": "p.catalog",
  "x-last-death-reason": "maxlen",
  "x-last-death-exchange": "p.events"
})

describe("the headers of the kit's copies", () => {
  it("keep every original entry byte for byte, AMQP types included (int64 2^63 − 1, L, float, a bare integer double)", () => {
    const originals = [
      rawEntry("x-schema-version", "b", Buffer.of(1)),
      rawEntry("big", "l", i64(9_223_372_036_854_775_807n)),
      rawEntry("unsigned", "L", u64(18_446_744_073_709_551_615n)),
      rawEntry("float", "f", Buffer.from([0x3f, 0x80, 0, 0])),
      rawEntry("double", "d", Buffer.from([0x3f, 0xf0, 0, 0, 0, 0, 0, 0])),
      rawEntry("latin1", "S", sized(Buffer.from([0xe9])))
    ]
    const copy = retryCopy(delivery(Buffer.concat(originals)), context(), "p.catalog.dlx", "retry.1s")
    const table = copyTable(copy.options.headers)
    expect(table.entries.slice(0, originals.length).map((e) => Buffer.from(e.bytes))).toEqual(originals)
    expect(table.values).toMatchObject({ [KitHeaders.attempts]: 1, [KitHeaders.originalUserId]: "relay" })
  })

  it("never carry the broker's death headers (x-death, x-first-death-*, x-last-death-*), on retry, dead or replayed copies", () => {
    const message = delivery(Buffer.concat([death, rawEntry("x-schema-version", "b", Buffer.of(1))]))
    for (
      const copy of [
        retryCopy(message, context(), "p.catalog.dlx", "retry.1s"),
        deadCopy(message, { ...context(), reason: "exhausted" }, "p.catalog.dlx", "dead"),
        replayCopy(message, "p.catalog.dlx", "redeliver")!
      ]
    ) {
      const names = copyTable(copy.options.headers).entries.map((e) => e.name)
      expect(names).toContain("x-schema-version")
      for (const name of BrokerDeathHeaders) expect(names).not.toContain(name)
    }
  })

  it("an original whose table cannot be decoded is dead-lettered with that table's bytes, and is not replayed", () => {
    const deep = rawEntry("deep", "A", nestedArrays(5_000))
    const message = delivery(deep, "p.events")
    const failure = new IncompatibleMessage({ errorTag: "UndecodableMessage.bad-headers", detail: "too deep" })
    const copy = deadCopy(
      message,
      { ...context({ failure, kitHeadersTrusted: false }), reason: "incompatible" },
      "x",
      "dead"
    )
    const table = copyTable(copy.options.headers)
    expect(Buffer.from(table.values[KitHeaders.originalHeaders] as Uint8Array)).toEqual(sized(deep))
    expect(table.values[KitHeaders.reason]).toBe("incompatible")
    const dead = delivery(copy.options.headers.subarray(4), "")
    expect(replayCopy(dead, "p.catalog.dlx", "redeliver")).toBeDefined()
    expect(replayCopy(message, "p.catalog.dlx", "redeliver")).toBeUndefined()
  })

  it("from outside the handler's exchange, the kit's headers an original claims are dropped and the story starts afresh", () => {
    const claims = amqplibEntries({
      [KitHeaders.attempts]: 1_000_000_000,
      [KitHeaders.firstFailureAt]: "1999-01-01T00:00:00.000Z",
      [KitHeaders.replays]: 7,
      [KitHeaders.reason]: "exhausted"
    })
    const fromEvents = delivery(claims, "p.events")
    const origins = { eventsExchange: "p.events", handlerExchange: "p.catalog.dlx" }
    expect(toIncoming(fromEvents, origins).attempts).toBe(0)
    const retried = amqplibEntries({ [KitHeaders.attempts]: 1_000_000_000 })
    expect(toIncoming(delivery(retried, "p.events"), origins).attempts).toBe(0)
    expect(toIncoming(delivery(retried, "p.catalog.dlx"), origins).attempts).toBe(1_000_000_000)
    const copy = retryCopy(fromEvents, context({ kitHeadersTrusted: false }), "p.catalog.dlx", "retry.1s")
    const values = copyTable(copy.options.headers).values
    expect(values[KitHeaders.attempts]).toBe(1)
    expect(values[KitHeaders.firstFailureAt]).toBe("2031-01-01T00:00:00.000Z")
    expect(values[KitHeaders.replays]).toBeUndefined()
    expect(values[KitHeaders.reason]).toBeUndefined()
    expect(values[KitHeaders.originalExchange]).toBe("p.events")
  })

  it("a copy whose table would not fit one frame says so instead of being sent", () => {
    const huge = rawEntry("huge", "S", sized(Buffer.alloc(MaxCopyHeaderBytes)))
    expect(() => retryCopy(delivery(huge), context(), "x", "retry.1s")).toThrow(CopyNotEncodable)
    expect(() => retryCopy(delivery(huge), context(), "x", "retry.1s")).toThrow(/header table would be \d+ bytes/)
  })
})
