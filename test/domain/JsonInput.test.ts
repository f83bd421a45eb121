import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import {
  decodeUtf8,
  depthExceeds,
  MaxJsonDepth,
  MaxJsonMembers,
  parseJson,
  parseJsonBytes,
  scanShape,
  truncate
} from "../../src/domain/JsonInput.js"

const nestedArrays = (levels: number, leaf = "1") => "[".repeat(levels) + leaf + "]".repeat(levels)
const nestedObjects = (levels: number) => "{\"a\":".repeat(levels) + "1" + "}".repeat(levels)
const refusal = <A>(result: Either.Either<A, { reason: string }>) =>
  Either.isLeft(result) ? result.left.reason : "accepted"

describe("bounded JSON input", () => {
  it("refuses raw Latin-1 bytes instead of replacing them with U+FFFD", () => {
    const latin1 = Buffer.from([...Buffer.from("{\"title\":\"caf"), 0xe9, 0x20, 0xff, 0xfe, ...Buffer.from("\"}")])
    expect(refusal(decodeUtf8(latin1))).toBe("invalid-utf8")
    expect(refusal(parseJsonBytes(latin1))).toBe("invalid-utf8")
  })

  it.each([
    ["an overlong '/'", [0xc0, 0xaf]],
    ["a lone continuation byte", [0x80]],
    ["an encoded surrogate", [0xed, 0xa0, 0x80]],
    ["a truncated sequence", [0xe2, 0x82]]
  ])("refuses %s", (_, bytes) => {
    expect(refusal(decodeUtf8(Buffer.from(bytes)))).toBe("invalid-utf8")
  })

  it("accepts well-formed UTF-8 and drops a leading byte order mark", () => {
    expect(decodeUtf8(Buffer.from("\ufeff{\"t\":\"café ж 🐇\"}", "utf8"))).toEqual(
      Either.right("{\"t\":\"café ж 🐇\"}")
    )
  })

  it("refuses nesting past the bound, for arrays and objects, at 10,000 and 100,000 levels", () => {
    for (const text of [nestedArrays(10_000), nestedObjects(10_000), nestedArrays(100_000), nestedObjects(100_000)]) {
      expect(refusal(parseJson(text))).toBe("too-deep")
    }
  })

  it("accepts exactly the bound and refuses one level more", () => {
    expect(Either.isRight(parseJson(nestedArrays(MaxJsonDepth)))).toBe(true)
    expect(refusal(parseJson(nestedArrays(MaxJsonDepth + 1)))).toBe("too-deep")
    expect(depthExceeds(JSON.parse(nestedObjects(3)), 3)).toBe(false)
    expect(depthExceeds(JSON.parse(nestedObjects(3)), 2)).toBe(true)
    expect(depthExceeds("scalar", 0)).toBe(false)
  })

  it("finds a deep branch beside shallow ones", () => {
    const value = { a: 1, b: [1, 2, { c: JSON.parse(nestedArrays(40)) }], d: "x" }
    expect(depthExceeds(value, MaxJsonDepth)).toBe(true)
  })

  it("reports bad JSON with the parser's reason, cut short", () => {
    const result = parseJson("{\"a\": " + "x".repeat(100_000))
    expect(refusal(result)).toBe("invalid-json")
    expect(Either.isLeft(result) && result.left.message.length).toBeLessThanOrEqual(300)
  })

  it("cuts text at a code unit bound with an ellipsis, never inside a surrogate pair", () => {
    expect(truncate("abcdef", 4)).toBe("abc…")
    expect(truncate("abc", 4)).toBe("abc")
    expect(truncate("ab🐇cd", 4)).toBe("ab…")
  })

  it("refuses an object of 200,000 keys before parsing it, and accepts MaxJsonMembers of them", () => {
    const object = (n: number) => `{${Array.from({ length: n }, (_, i) => `"k${i}":${i}`).join(",")}}`
    expect(refusal(parseJson(object(200_000)))).toBe("too-many-members")
    expect(Either.isRight(parseJson(object(MaxJsonMembers)))).toBe(true)
    expect(refusal(parseJson(object(MaxJsonMembers + 1)))).toBe("too-many-members")
    expect(refusal(parseJson(`[${"0,".repeat(MaxJsonMembers)}0]`))).toBe("too-many-members")
  })

  it("the shape scan skips brackets, commas and escaped quotes inside strings", () => {
    const tricky = JSON.stringify({ a: "[[[[,,,,\"]]]]{{", b: ["\\", "\"", "x,y"] })
    expect(scanShape(tricky, 2, 3)).toBeUndefined()
    expect(Either.isRight(parseJson(tricky))).toBe(true)
    expect(scanShape(JSON.stringify({ a: [[1]] }), 2, 10)).toMatchObject({ reason: "too-deep" })
  })
})
