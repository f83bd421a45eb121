import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer, Metric } from "effect"
import { DeadLettersAmqp } from "../../src/adapters/amqp/DeadLettersAmqp.js"
import { toPublish } from "../../src/adapters/amqp/EventBusAmqp.js"
import { KitHeaders } from "../../src/adapters/amqp/FailureHeaders.js"
import { decodeFieldTable } from "../../src/adapters/amqp/FieldTable.js"
import { namesOf } from "../../src/adapters/amqp/Topology.js"
import { Metrics } from "../../src/app/Metrics.js"
import type { Settings } from "../../src/config.js"
import { DeadLetters, DeadLetterSelection } from "../../src/ports/DeadLetters.js"
import { CatalogRole } from "../../src/roles/receivers.js"
import {
  amqpUrl,
  cleanupTopology,
  depthOf,
  eventually,
  peekQueue,
  publishRaw,
  tempDataDir,
  uniquePrefix
} from "../support/broker.js"
import { i64, nestedArrays, rawEntry, rawTable, u64 } from "../support/FieldTables.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { countRows, startRoles, testSettings } from "../support/roles.js"

const version1 = rawEntry("x-schema-version", "b", Buffer.of(1))

/** A valid event published to the events exchange with `headers` as the exact bytes of its field table. */
const eventWith = (prefix: string, tag: string, headers: Buffer) => {
  const envelope = MaterialMother.envelope(MaterialMother.event({ materialId: `poison/${tag}`, revision: 1 }))
  const publish = toPublish(namesOf(prefix).exchange, envelope)
  return { envelope, publish: { ...publish, options: { ...publish.options, headers } } }
}

/** The dead-letter port over the broker, as the `dead` commands use it, for `settings`' prefix. */
const deadLettersOf = (settings: Layer.Layer<Settings>) =>
  Effect.provide(DeadLetters, DeadLettersAmqp.pipe(Layer.provide(settings)))

const reconnects = Metric.value(Metric.tagged(Metrics.reconnects, "role", "catalog"))

describe.each(["classic", "quorum"] as const)("AMQP properties amqplib cannot decode, on %s queues", (queueType) => {
  it.scopedLive(
    "an L header, tables 5,000 deep, a name given twice and a body padded past 64 KiB never cost the consumer its connection: the first is applied, the others dead-lettered as incompatible with their header bytes and body, and the next event applied",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix(`props-${queueType}`)
        yield* cleanupTopology(prefix)
        const names = namesOf(prefix)
        const settings = testSettings(prefix, dir, { queueType })
        yield* startRoles(CatalogRole, settings)
        const before = (yield* reconnects).count

        const unsigned = eventWith(prefix, "unsigned", rawTable(version1, rawEntry("L", "L", u64(2n ** 64n - 1n))))
        const deepHeaders = rawTable(version1, rawEntry("deep", "A", nestedArrays(5_000)))
        const deep = eventWith(prefix, "deep", deepHeaders)
        const twiceHeaders = rawTable(version1, rawEntry("x-schema-version", "b", Buffer.of(9)))
        const twice = eventWith(prefix, "twice", twiceHeaders)
        const big = eventWith(
          prefix,
          "big",
          rawTable(rawEntry("x-schema-version", "b", Buffer.of(2)), rawEntry("big", "l", i64(2n ** 63n - 1n)))
        )
        const padded = eventWith(prefix, "padded", rawTable(version1))
        const paddedBody = Buffer.concat([padded.publish.content, Buffer.alloc(1024 * 1024, 0x20)])
        const next = eventWith(prefix, "next", rawTable(version1))
        yield* publishRaw(amqpUrl, [
          ...[unsigned, deep, twice, big].map((e) => e.publish),
          { ...padded.publish, content: paddedBody },
          next.publish
        ])

        const applied = yield* eventually(
          Effect.sync(() => countRows(dir, "catalog", "inbox")),
          (n) => n === 2
        )
        expect(applied).toBe(2)
        yield* eventually(depthOf(amqpUrl, names.deadQueue("catalog")), (n) => n === 4)
        expect((yield* reconnects).count).toBe(before)

        const letters = yield* Effect.flatMap(deadLettersOf(settings), (d) => d.list("catalog", 10))
        expect(letters.map((l) => [l.messageId, l.reason, l.errorTag])).toEqual([
          [deep.envelope.messageId, "incompatible", "IncompatibleMessage/UndecodableMessage.bad-headers"],
          [twice.envelope.messageId, "incompatible", "IncompatibleMessage/UndecodableMessage.bad-headers"],
          [big.envelope.messageId, "incompatible", "IncompatibleMessage/UndecodableMessage.unknown-version"],
          [padded.envelope.messageId, "incompatible", "IncompatibleMessage/UndecodableMessage.too-large"]
        ])
        expect(Buffer.from(letters[3]!.body)).toEqual(paddedBody)
        expect(letters[0]!.error).toContain("deeper than 32 levels")
        expect(letters[1]!.error).toContain("appears twice")
        const [deadDeep, deadTwice, deadBig] = yield* peekQueue(amqpUrl, names.deadQueue("catalog"))
        const tableOf = (m: typeof deadDeep) =>
          Either.getOrThrow(decodeFieldTable((m!.properties as unknown as { rawHeaders: Buffer }).rawHeaders))
        // The original header tables, byte for byte, with their length.
        expect(Buffer.from(tableOf(deadDeep).values[KitHeaders.originalHeaders] as Uint8Array)).toEqual(deepHeaders)
        expect(Buffer.from(tableOf(deadTwice).values[KitHeaders.originalHeaders] as Uint8Array)).toEqual(twiceHeaders)
        // A decodable table keeps every entry as it came: int64 2^63 − 1 stays an int64, exactly.
        const bigEntry = tableOf(deadBig).entries.find((e) => e.name === "big")!
        expect(Buffer.from(bigEntry.bytes)).toEqual(rawEntry("big", "l", i64(2n ** 63n - 1n)))
        expect(deadDeep!.content.toString()).toBe(deep.envelope.body)
      }),
    120_000
  )
})

describe("dead letters amqplib cannot decode", () => {
  it.scopedLive(
    "list shows them with why, replay leaves them in place and says so, purge --head removes one; letters in front of it are served as usual",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("dead-props")
        yield* cleanupTopology(prefix)
        const names = namesOf(prefix)
        const settings = testSettings(prefix, dir)
        yield* startRoles(CatalogRole, settings)
        // An undecodable event, dead-lettered by the receiver, then one put straight on the dead
        // queue as a shovel or the broker's own dead-lettering could: no kit headers at all.
        const deep = eventWith(prefix, "deep", rawTable(version1, rawEntry("deep", "F", sizedDeepTable())))
        yield* publishRaw(amqpUrl, [deep.publish])
        yield* eventually(depthOf(amqpUrl, names.deadQueue("catalog")), (n) => n === 1)
        yield* publishRaw(amqpUrl, [{
          exchange: "",
          routingKey: names.deadQueue("catalog"),
          content: Buffer.from("raw"),
          options: { messageId: "raw-deep", headers: rawTable(rawEntry("deep", "A", nestedArrays(5_000))) }
        }])
        const dead = yield* deadLettersOf(settings)
        const letters = yield* dead.list("catalog", 10)
        expect(letters.map((l) => [l.messageId, l.reason, l.headersRefused === undefined])).toEqual([
          [deep.envelope.messageId, "incompatible", true],
          ["raw-deep", "rejected-by-broker", false]
        ])
        expect(letters[1]).toMatchObject({
          errorTag: "headers/undecodable",
          error: expect.stringContaining("deeper than 32 levels"),
          body: Buffer.from("raw")
        })
        const replayed = yield* dead.replay("catalog", DeadLetterSelection.All(), { dryRun: false })
        expect(replayed).toMatchObject({ moved: [deep.envelope.messageId], undecodable: ["raw-deep"], failed: [] })
        // The replayed copy is incompatible still, and dead again, behind the letter left in place.
        yield* eventually(depthOf(amqpUrl, names.deadQueue("catalog")), (n) => n === 2)
        const purged = yield* dead.purge("catalog", DeadLetterSelection.Head())
        expect(purged.moved).toEqual(["raw-deep"])
        expect((yield* dead.list("catalog", 10)).map((l) => l.messageId)).toEqual([deep.envelope.messageId])
      }),
    120_000
  )
})

/** A table payload nested 4,000 tables deep. */
const sizedDeepTable = () => {
  let table: Buffer = rawTable()
  for (let i = 0; i < 4_000; i++) table = rawTable(rawEntry("n", "F", table))
  return table
}
