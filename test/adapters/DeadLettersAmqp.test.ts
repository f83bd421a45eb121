import { describe, expect, it } from "@effect/vitest"
import type { Message } from "amqplib"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { readDeadLetter } from "../../src/adapters/amqp/DeadLettersAmqp.js"
import { KitHeaders } from "../../src/adapters/amqp/FailureHeaders.js"
import { deadLetterJson } from "../../src/cli/DeadLetterCommands.js"
import { amqplibEntries, rawEntry, rawTable, sized } from "../support/FieldTables.js"

const requireHere = createRequire(import.meta.url)
const amqplibDefs = requireHere(join(dirname(requireHere.resolve("amqplib")), "lib", "defs.js")) as {
  readonly encodeProperties: (id: number, channel: number, size: number, fields: object) => Buffer
  readonly decode: (id: number, bytes: Buffer) => Record<string, unknown>
}

/**
 * `fields` through the patched amqplib's own content-header codec, as a consumer receives
 * them: encoded into a header frame, then decoded from its property bytes (after the frame
 * header and the class, weight and body size), so that `rawHeaders` is there as amqplib leaves it.
 */
const asReceived = (fields: object): Message["properties"] => {
  const frame = amqplibDefs.encodeProperties(60, 1, 3, fields)
  return amqplibDefs.decode(60, frame.subarray(7 + 12, frame.length - 1)) as unknown as Message["properties"]
}

const letterWith = (properties: Message["properties"]) =>
  readDeadLetter("catalog", "p.catalog", {
    fields: { deliveryTag: 1, redelivered: false, exchange: "p.catalog.dlx", routingKey: "dead" },
    properties,
    content: Buffer.from("body")
  } as unknown as Message)

describe("a dead letter as the dead commands show it", () => {
  it("its properties are the AMQP properties only, not the patched amqplib's rawHeaders", () => {
    const letter = letterWith(
      asReceived({ messageId: "m-1", headers: rawTable(rawEntry("x-note", "S", sized(Buffer.from("hi")))) })
    )
    const json = deadLetterJson(letter) as { properties: Record<string, unknown> }
    expect(Object.keys(json.properties)).not.toContain("rawHeaders")
    expect(json.properties.headers).toEqual({ "x-note": "hi" })
  })

  it("a byte-array header is { base64 }, not a Buffer's { type, data }", () => {
    const letter = letterWith(
      asReceived({ messageId: "m-2", headers: rawTable(rawEntry("bytes", "x", sized(Buffer.from("hi")))) })
    )
    const json = deadLetterJson(letter) as { properties: { headers: Record<string, unknown> } }
    expect(json.properties.headers.bytes).toEqual({ base64: Buffer.from("hi").toString("base64") })
  })

  it("one the broker dead-lettered from the handler's own queue is told by its x-death, not by the kit headers its publisher forged", () => {
    const letter = letterWith(asReceived({
      messageId: "m-3",
      headers: rawTable(amqplibEntries({
        [KitHeaders.reason]: "exhausted",
        [KitHeaders.attempts]: 1_000_000,
        [KitHeaders.errorTag]: "PermanentFailure/forged",
        "x-death": [{
          count: 1,
          reason: "expired",
          queue: "p.catalog",
          exchange: "p.events",
          time: { "!": "timestamp", value: 1 }
        }]
      }))
    }))
    expect(letter).toMatchObject({
      reason: "rejected-by-broker",
      errorTag: "x-death/expired",
      attempts: 0,
      deadAtMs: 1000
    })
  })

  it("a kit dead copy whose message expired on its way through a retry queue keeps the kit's story", () => {
    const letter = letterWith(asReceived({
      messageId: "m-4",
      headers: rawTable(amqplibEntries({
        [KitHeaders.reason]: "exhausted",
        [KitHeaders.attempts]: 3,
        "x-death": [{ count: 1, reason: "expired", queue: "p.catalog.retry.1s", time: { "!": "timestamp", value: 1 } }]
      }))
    }))
    expect(letter).toMatchObject({ reason: "exhausted", attempts: 3 })
  })
})
