import { createRequire } from "node:module"
import { dirname, join } from "node:path"

/**
 * Field tables written byte by byte, the way another client (or a hostile publisher) may
 * write them, and amqplib's own codec for comparison: what the kit's `FieldTable` must
 * read, refuse or keep.
 */

const requireHere = createRequire(import.meta.url)
const amqplibLib = join(dirname(requireHere.resolve("amqplib")), "lib")

/** amqplib's own field-table codec (its `lib/codec.js`). */
export const amqplibCodec = requireHere(join(amqplibLib, "codec.js")) as {
  readonly encodeTable: (buffer: Buffer, table: object, offset: number) => number
  readonly decodeFields: (bytes: Buffer) => Record<string, unknown>
}

/** `table` encoded by amqplib: the entries only, without the 4-byte length (as `rawHeaders` holds them). */
export const amqplibEntries = (table: object): Buffer => {
  const scratch = Buffer.alloc(1024 * 1024)
  const size = amqplibCodec.encodeTable(scratch, table, 0)
  return Buffer.from(scratch.subarray(4, size))
}

const u32 = (n: number) => {
  const b = Buffer.alloc(4)
  b.writeUInt32BE(n)
  return b
}

/** One entry: `name`, the type `tag`, then `payload` as it is. */
export const rawEntry = (name: string, tag: string, payload: Uint8Array): Buffer =>
  Buffer.concat([Buffer.of(Buffer.byteLength(name)), Buffer.from(name), Buffer.from(tag, "latin1"), payload])

/** A value with a 4-byte length before it (`S`, `x`, `F`, `A`). */
export const sized = (bytes: Uint8Array): Buffer => Buffer.concat([u32(bytes.length), bytes])

/** An unsigned 64-bit value (`L`, `T`) or a signed one (`l`). */
export const u64 = (n: bigint): Buffer => {
  const b = Buffer.alloc(8)
  b.writeBigUInt64BE(n)
  return b
}
export const i64 = (n: bigint): Buffer => {
  const b = Buffer.alloc(8)
  b.writeBigInt64BE(n)
  return b
}

/** A complete field table (its length, then `entries`), as `headers` is sent on the wire. */
export const rawTable = (...entries: ReadonlyArray<Uint8Array>): Buffer => sized(Buffer.concat(entries))

/** An array value (`A`'s payload) nested `levels` deep around a void, built without recursion. */
export const nestedArrays = (levels: number): Buffer => {
  let value: Buffer = Buffer.from("V", "latin1")
  for (let i = 0; i < levels; i++) value = Buffer.concat([Buffer.from("A", "latin1"), sized(value)])
  return value.subarray(1)
}

/** A table value (`F`'s payload) nested `levels` deep, each level one entry `n`. */
export const nestedTables = (levels: number): Buffer => {
  let table: Buffer = sized(Buffer.alloc(0))
  for (let i = 0; i < levels; i++) table = sized(rawEntry("n", "F", table))
  return table
}
