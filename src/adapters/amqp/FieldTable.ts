import { Either } from "effect"

/**
 * AMQP 0-9-1 field tables (the `headers` property), read and written by the kit itself
 * instead of amqplib's codec, which recurses without a bound, knows no `L`, turns an int64
 * into a rounded double and a float into an integer type when re-encoded, and throws in
 * its frame parser, closing the whole connection, on anything it cannot read. amqplib is
 * patched (`patches/amqplib+*.patch`) to leave the table undecoded in `rawHeaders` and to
 * send a table given as bytes as it is; this module is what reads and writes those bytes.
 *
 * The types are the ones RabbitMQ's parser accepts (RabbitMQ "AMQP 0-9-1 Errata", "Field
 * types"; checked against a 3.10 broker, which also takes `L`, an unsigned 64-bit integer):
 * `t` bool, `b`/`B` signed/unsigned 8-bit, `s`/`u` 16-bit, `I`/`i` 32-bit, `l`/`L` 64-bit,
 * `f` float, `d` double, `D` decimal, `S` long string, `T` timestamp, `F` table,
 * `A` array, `V` void, `x` byte array.
 */

/** The deepest nesting of tables and arrays the kit reads; the headers table itself is level 1, the broker's own `x-death` reaches 4. */
export const MaxFieldDepth = 32

/** A timestamp value (`T`), in seconds since the epoch, in the shape amqplib uses for it. */
export interface FieldTimestamp {
  readonly "!": "timestamp"
  readonly value: number
}

/** A decimal value (`D`): `digits` × 10^−`places`, in the shape amqplib uses for it. */
export interface FieldDecimal {
  readonly "!": "decimal"
  readonly value: { readonly places: number; readonly digits: number }
}

/**
 * A field value as JavaScript: the shapes amqplib gives, except that a 64-bit integer
 * outside ±(2^53 − 1) is a `bigint` instead of a rounded number. A long string is decoded
 * as UTF-8 (bytes that are not become U+FFFD); the entry's own bytes keep the original.
 */
export type FieldValue =
  | boolean
  | number
  | bigint
  | string
  | null
  | Uint8Array
  | FieldTimestamp
  | FieldDecimal
  | ReadonlyArray<FieldValue>
  | FieldRecord

/** A nested table as JavaScript: a null-prototype object, so that a field named `__proto__` is a field. */
export interface FieldRecord {
  readonly [name: string]: FieldValue
}

/** One entry of a table: its name, its value, and its exact bytes on the wire (name, type tag and value). */
export interface FieldEntry {
  readonly name: string
  readonly value: FieldValue
  readonly bytes: Uint8Array
}

/** A decoded table: its entries in wire order, and the same as a record (names are unique). */
export interface FieldTable {
  readonly entries: ReadonlyArray<FieldEntry>
  readonly values: FieldRecord
}

/** Why a table's bytes are not one the kit reads. */
export interface FieldTableRefusal {
  readonly reason: "unknown-type" | "truncated" | "too-deep" | "duplicate-name"
  readonly message: string
}

/** The table with no entries. */
export const EmptyFieldTable: FieldTable = { entries: [], values: Object.create(null) }

class Refused {
  constructor(readonly refusal: FieldTableRefusal) {}
}

const refuse = (reason: FieldTableRefusal["reason"], message: string): never => {
  throw new Refused({ reason, message })
}

// `ignoreBOM`: a leading U+FEFF is part of a name or string, not a marker to drop.
const utf8 = new TextDecoder("utf-8", { ignoreBOM: true })

/** A cursor over `bytes[offset, end)`, every read checked against `end`. */
class Cursor {
  readonly view: DataView
  constructor(readonly bytes: Uint8Array, public offset: number, readonly end: number) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  }
  /** The offset of the next `n` bytes, which it moves past. */
  take(n: number): number {
    const at = this.offset
    if (n > this.end - at) refuse("truncated", `a value runs past the end of its table (at byte ${at})`)
    this.offset = at + n
    return at
  }
  slice(n: number): Uint8Array {
    const at = this.take(n)
    return this.bytes.subarray(at, at + n)
  }
  uint8(): number {
    return this.view.getUint8(this.take(1))
  }
  uint32(): number {
    return this.view.getUint32(this.take(4))
  }
}

const integer = (value: bigint): number | bigint =>
  value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value

const describeTag = (tag: number) =>
  tag >= 0x21 && tag <= 0x7e ? `'${String.fromCharCode(tag)}'` : `0x${tag.toString(16).padStart(2, "0")}`

const readValue = (cursor: Cursor, depth: number): FieldValue => {
  const tag = cursor.uint8()
  switch (tag) {
    case 0x74: // t
      return cursor.uint8() !== 0
    case 0x62: // b
      return cursor.view.getInt8(cursor.take(1))
    case 0x42: // B
      return cursor.uint8()
    case 0x73: // s
      return cursor.view.getInt16(cursor.take(2))
    case 0x75: // u
      return cursor.view.getUint16(cursor.take(2))
    case 0x49: // I
      return cursor.view.getInt32(cursor.take(4))
    case 0x69: // i
      return cursor.uint32()
    case 0x6c: // l
      return integer(cursor.view.getBigInt64(cursor.take(8)))
    case 0x4c: // L
      return integer(cursor.view.getBigUint64(cursor.take(8)))
    case 0x66: // f
      return cursor.view.getFloat32(cursor.take(4))
    case 0x64: // d
      return cursor.view.getFloat64(cursor.take(8))
    case 0x44: { // D
      const places = cursor.uint8()
      return { "!": "decimal", value: { places, digits: cursor.uint32() } }
    }
    case 0x53: // S
      return utf8.decode(cursor.slice(cursor.uint32()))
    case 0x54: // T
      return { "!": "timestamp", value: Number(cursor.view.getBigUint64(cursor.take(8))) }
    case 0x46: { // F
      const length = cursor.uint32()
      const at = cursor.take(length)
      return readEntries(new Cursor(cursor.bytes, at, at + length), depth + 1).values
    }
    case 0x41: { // A
      const length = cursor.uint32()
      const at = cursor.take(length)
      if (depth + 1 > MaxFieldDepth) tooDeep()
      const items = new Cursor(cursor.bytes, at, at + length)
      const values: Array<FieldValue> = []
      while (items.offset < items.end) values.push(readValue(items, depth + 1))
      return values
    }
    case 0x56: // V
      return null
    case 0x78: // x
      return cursor.slice(cursor.uint32())
    default:
      return refuse("unknown-type", `a value has the type tag ${describeTag(tag)}, which is not an AMQP field type`)
  }
}

const tooDeep = () => refuse("too-deep", `nests tables or arrays deeper than ${MaxFieldDepth} levels`)

/** The entries of the table in `cursor` (its bytes after the length prefix), at nesting level `depth`. */
const readEntries = (cursor: Cursor, depth: number): FieldTable => {
  if (depth > MaxFieldDepth) tooDeep()
  const entries: Array<FieldEntry> = []
  const values: Record<string, FieldValue> = Object.create(null)
  // Names as RabbitMQ compares them: their bytes (two names that are not UTF-8 decode alike).
  const seen = new Set<string>()
  while (cursor.offset < cursor.end) {
    const start = cursor.offset
    const nameBytes = cursor.slice(cursor.uint8())
    const name = utf8.decode(nameBytes)
    const value = readValue(cursor, depth)
    const key = Buffer.from(nameBytes.buffer, nameBytes.byteOffset, nameBytes.byteLength).toString("latin1")
    if (seen.has(key)) {
      refuse("duplicate-name", `the name ${JSON.stringify(name.slice(0, 100))} appears twice in one table`)
    }
    seen.add(key)
    values[name] = value
    entries.push({ name, value, bytes: cursor.bytes.subarray(start, cursor.offset) })
  }
  return { entries, values }
}

/**
 * Decodes the entries of a field table (its bytes after the 4-byte length, as amqplib's
 * `rawHeaders` holds them). Linear in the bytes, nested at most `MaxFieldDepth` levels
 * (so it never recurses deeper than that), and never throws: fails with a
 * `FieldTableRefusal` for an unknown type tag, a value that runs past its table, a table
 * nested too deep, or a name given twice in one table, compared as bytes as RabbitMQ
 * compares them (it would read the first, amqplib the last). Names and strings decode as
 * UTF-8 with a leading U+FEFF kept; `values` is keyed by the decoded name, `entries` keep
 * the bytes.
 */
export const decodeFieldTable = (bytes: Uint8Array): Either.Either<FieldTable, FieldTableRefusal> => {
  try {
    return Either.right(readEntries(new Cursor(bytes, 0, bytes.byteLength), 1))
  } catch (error) {
    if (error instanceof Refused) return Either.left(error.refusal)
    throw error
  }
}

/** A value the kit writes into a header: a long string, an integer (as `l`), another number (as `d`), or bytes (`x`). */
export type KitFieldValue = string | number | Uint8Array

const shortString = (name: string) => {
  const bytes = Buffer.from(name, "utf8")
  if (bytes.length > 255) throw new RangeError(`a field name is at most 255 bytes; ${JSON.stringify(name)} is not`)
  return Buffer.concat([Buffer.of(bytes.length), bytes])
}

const lengthPrefixed = (tag: string, bytes: Uint8Array) => {
  const head = Buffer.alloc(5)
  head.write(tag, 0, "latin1")
  head.writeUInt32BE(bytes.byteLength, 1)
  return Buffer.concat([head, bytes])
}

/** One entry's bytes: `name` as a short string, then `value` with its type tag (see `KitFieldValue`). */
export const encodeFieldEntry = (name: string, value: KitFieldValue): Buffer => {
  let encoded: Buffer
  if (typeof value === "string") {
    encoded = lengthPrefixed("S", Buffer.from(value, "utf8"))
  } else if (typeof value === "number") {
    encoded = Buffer.alloc(9)
    if (Number.isSafeInteger(value)) {
      encoded.write("l", 0, "latin1")
      encoded.writeBigInt64BE(BigInt(value), 1)
    } else {
      encoded.write("d", 0, "latin1")
      encoded.writeDoubleBE(value, 1)
    }
  } else {
    encoded = lengthPrefixed("x", value)
  }
  return Buffer.concat([shortString(name), encoded])
}

/** A whole field table (its 4-byte length, then `entries` as they are), as the patched amqplib sends `headers` given as a Buffer. */
export const encodeFieldTable = (entries: ReadonlyArray<Uint8Array>): Buffer => {
  const size = entries.reduce((n, entry) => n + entry.byteLength, 0)
  const length = Buffer.alloc(4)
  length.writeUInt32BE(size)
  return Buffer.concat([length, ...entries], 4 + size)
}

/** A message's header table as the patched amqplib delivers it: decoded, or refused with its bytes kept. */
export type MessageHeaders =
  | { readonly _tag: "Decoded"; readonly table: FieldTable }
  | { readonly _tag: "Undecodable"; readonly refusal: FieldTableRefusal; readonly bytes: Uint8Array }

/** What the patched amqplib adds to a message's properties: the header table's bytes, undecoded (absent when it has none). */
interface RawHeadersProperty {
  readonly rawHeaders?: Uint8Array
}

const decodedOnce = new WeakMap<object, MessageHeaders>()

/**
 * The header table of a received message (`message.properties`), decoded by
 * `decodeFieldTable` from amqplib's `rawHeaders` once per message object (later calls
 * return the same result). A message with no table has `EmptyFieldTable`.
 */
export const headersOf = (properties: object): MessageHeaders => {
  const known = decodedOnce.get(properties)
  if (known !== undefined) return known
  const raw = (properties as RawHeadersProperty).rawHeaders
  const decoded: MessageHeaders = raw === undefined
    ? { _tag: "Decoded", table: EmptyFieldTable }
    : Either.match(decodeFieldTable(raw), {
      onLeft: (refusal) => ({ _tag: "Undecodable", refusal, bytes: raw }),
      onRight: (table) => ({ _tag: "Decoded", table })
    })
  decodedOnce.set(properties, decoded)
  return decoded
}

/** The value of header `name`, or `undefined` when it is absent or the table could not be decoded. */
export const headerValue = (headers: MessageHeaders, name: string): FieldValue | undefined =>
  headers._tag === "Decoded" ? headers.table.values[name] : undefined
