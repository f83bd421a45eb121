import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import fc from "fast-check"
import {
  decodeFieldTable,
  encodeFieldEntry,
  encodeFieldTable,
  MaxFieldDepth
} from "../../src/adapters/amqp/FieldTable.js"
import {
  amqplibCodec,
  amqplibEntries,
  i64,
  nestedArrays,
  nestedTables,
  rawEntry,
  sized,
  u64
} from "../support/FieldTables.js"
import { propertyParameters } from "../support/properties.js"

const decoded = (bytes: Uint8Array) => Either.getOrThrow(decodeFieldTable(bytes))
const refused = (bytes: Uint8Array) => Either.getOrThrowWith(Either.flip(decodeFieldTable(bytes)), () => "decoded")

describe("field tables, as RabbitMQ encodes them", () => {
  it("reads every type RabbitMQ accepts, L (unsigned 64-bit) included, each entry's bytes kept as they came", () => {
    const entries = [
      rawEntry("bool", "t", Buffer.of(1)),
      rawEntry("i8", "b", Buffer.of(0xff)),
      rawEntry("u8", "B", Buffer.of(0xff)),
      rawEntry("i16", "s", Buffer.from([0xff, 0xfe])),
      rawEntry("u16", "u", Buffer.from([0xff, 0xfe])),
      rawEntry("i32", "I", Buffer.from([0xff, 0xff, 0xff, 0xfe])),
      rawEntry("u32", "i", Buffer.from([0xff, 0xff, 0xff, 0xfe])),
      rawEntry("i64", "l", i64(9_223_372_036_854_775_807n)),
      rawEntry("small", "l", i64(-5n)),
      rawEntry("u64", "L", u64(18_446_744_073_709_551_615n)),
      rawEntry("float", "f", Buffer.from([0x3f, 0xc0, 0, 0])),
      rawEntry("double", "d", Buffer.from([0x3f, 0xf8, 0, 0, 0, 0, 0, 0])),
      rawEntry("dec", "D", Buffer.from([2, 0, 0, 0x30, 0x39])),
      rawEntry("str", "S", sized(Buffer.from("héllo"))),
      rawEntry("ts", "T", u64(1_700_000_000n)),
      rawEntry("table", "F", sized(rawEntry("x", "V", Buffer.alloc(0)))),
      rawEntry(
        "array",
        "A",
        sized(Buffer.concat([Buffer.from("b"), Buffer.of(1), Buffer.from("S"), sized(Buffer.from("a"))]))
      ),
      rawEntry("void", "V", Buffer.alloc(0)),
      rawEntry("bytes", "x", sized(Buffer.from([0, 1, 2])))
    ]
    const table = decoded(Buffer.concat(entries))
    expect(table.values).toEqual({
      bool: true,
      i8: -1,
      u8: 255,
      i16: -2,
      u16: 65534,
      i32: -2,
      u32: 4294967294,
      i64: 9_223_372_036_854_775_807n,
      small: -5,
      u64: 18_446_744_073_709_551_615n,
      float: 1.5,
      double: 1.5,
      dec: { "!": "decimal", value: { places: 2, digits: 12345 } },
      str: "héllo",
      ts: { "!": "timestamp", value: 1_700_000_000 },
      table: { x: null },
      array: [1, "a"],
      void: null,
      bytes: Buffer.from([0, 1, 2])
    })
    expect(table.entries.map((e) => Buffer.from(e.bytes))).toEqual(entries)
  })

  it("refuses an unknown type tag, a value past the end, and a name given twice, naming which", () => {
    expect(refused(rawEntry("k", "Z", Buffer.of(1)))).toMatchObject({
      reason: "unknown-type",
      message: expect.stringContaining("'Z'")
    })
    expect(refused(rawEntry("k", "S", Buffer.from([0, 0, 0, 50, 65])))).toMatchObject({ reason: "truncated" })
    expect(refused(rawEntry("k", "l", Buffer.of(1, 2)))).toMatchObject({ reason: "truncated" })
    expect(refused(Buffer.of(9, 0x61))).toMatchObject({ reason: "truncated" })
    expect(refused(Buffer.concat([rawEntry("k", "b", Buffer.of(1)), rawEntry("k", "b", Buffer.of(2))]))).toMatchObject({
      reason: "duplicate-name",
      message: expect.stringContaining("\"k\"")
    })
    expect(
      refused(
        rawEntry(
          "t",
          "F",
          sized(Buffer.concat([rawEntry("a", "V", Buffer.alloc(0)), rawEntry("a", "V", Buffer.alloc(0))]))
        )
      )
    )
      .toMatchObject({ reason: "duplicate-name" })
  })

  it(`reads ${MaxFieldDepth} levels of nesting and refuses deeper, 5,000 arrays or 4,000 tables included, without recursing into them`, () => {
    expect(decoded(rawEntry("deep", "A", nestedArrays(MaxFieldDepth - 1))).entries).toHaveLength(1)
    expect(refused(rawEntry("deep", "A", nestedArrays(MaxFieldDepth)))).toMatchObject({ reason: "too-deep" })
    expect(refused(rawEntry("deep", "A", nestedArrays(5_000)))).toMatchObject({ reason: "too-deep" })
    expect(decoded(rawEntry("deep", "F", nestedTables(MaxFieldDepth - 2))).entries).toHaveLength(1)
    expect(refused(rawEntry("deep", "F", nestedTables(4_000)))).toMatchObject({ reason: "too-deep" })
  })

  it("names are compared as the bytes RabbitMQ compares: a leading BOM is kept, and two names that are not UTF-8 are two names", () => {
    const named = (name: Buffer, tag: string, payload: Buffer) =>
      Buffer.concat([Buffer.of(name.length), name, Buffer.from(tag, "latin1"), payload])
    const bom = decoded(named(Buffer.from("\uFEFFx-schema-version"), "b", Buffer.of(1)))
    expect(bom.values["x-schema-version"]).toBeUndefined()
    expect(Object.keys(bom.values)).toEqual(["\uFEFFx-schema-version"])
    expect(
      decoded(Buffer.concat([
        named(Buffer.from("\uFEFFtrace"), "t", Buffer.of(1)),
        named(Buffer.from("trace"), "t", Buffer.of(1))
      ])).entries
    ).toHaveLength(2)
    expect(
      decoded(Buffer.concat([named(Buffer.of(0xff), "t", Buffer.of(1)), named(Buffer.of(0xfe), "t", Buffer.of(1))]))
        .entries
    ).toHaveLength(2)
  })

  it("a name `__proto__` is a field like any other", () => {
    const table = decoded(rawEntry("__proto__", "S", sized(Buffer.from("x"))))
    expect(Object.keys(table.values)).toEqual(["__proto__"])
    expect(table.values["__proto__"]).toBe("x")
  })

  it("the kit's own entries read back as written, with a 64-bit integer for every integer", () => {
    const bytes = encodeFieldTable([
      encodeFieldEntry("s", "täst"),
      encodeFieldEntry("n", 9_007_199_254_740_991),
      encodeFieldEntry("f", 0.5),
      encodeFieldEntry("x", Uint8Array.of(7))
    ])
    expect(bytes.readUInt32BE(0)).toBe(bytes.length - 4)
    expect(decoded(bytes.subarray(4)).values).toEqual({ s: "täst", n: 9_007_199_254_740_991, f: 0.5, x: Buffer.of(7) })
    expect(decoded(bytes.subarray(4)).entries[1]!.bytes[2]).toBe("l".charCodeAt(0))
  })

  it("never throws, whatever the bytes; where amqplib reads them too, both read the same values", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        const ours = decodeFieldTable(bytes)
        let theirs: Record<string, unknown> | undefined
        try {
          theirs = amqplibCodec.decodeFields(Buffer.from(bytes))
        } catch {
          theirs = undefined
        }
        if (Either.isRight(ours) && theirs !== undefined) {
          const plain = JSON.parse(JSON.stringify(ours.right.values, (_, v) => (typeof v === "bigint" ? Number(v) : v)))
          expect(plain).toEqual(JSON.parse(JSON.stringify(theirs)))
        }
      }),
      propertyParameters()
    )
  })

  // amqplib's encoder takes a table with a `!` key for a typed value, and its decoder turns a
  // `__proto__` field into the object's prototype (the kit keeps it: see above), at any depth.
  const ownName = (name: string) => name !== "!" && name !== "__proto__"

  it("reads what amqplib writes as amqplib reads it", () => {
    const leaf = fc.oneof(
      fc.string({ maxLength: 30 }),
      fc.integer(),
      fc.maxSafeInteger(),
      fc.double({ noNaN: true, min: -1e15, max: 1e15 }),
      fc.boolean(),
      fc.constant(null)
    )
    const { value } = fc.letrec((tie) => ({
      value: fc.oneof({ depthSize: "small" }, leaf, fc.array(tie("value"), { maxLength: 4 }), tie("table")),
      table: fc.dictionary(fc.string({ minLength: 1, maxLength: 10 }).filter(ownName), tie("value"), {
        maxKeys: 4
      })
    }))
    fc.assert(
      fc.property(
        fc.dictionary(fc.string({ minLength: 1, maxLength: 20 }).filter(ownName), value, { maxKeys: 6 }),
        (headers) => {
          const entries = amqplibEntries(headers)
          expect(decoded(entries).values).toEqual(amqplibCodec.decodeFields(entries))
        }
      ),
      propertyParameters()
    )
  })
})
