import { describe, expect, it } from "@effect/vitest"
import { Either, Option } from "effect"
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
    expect(Either.isRight(scanShape(tricky, 2, 3))).toBe(true)
    expect(Either.isRight(parseJson(tricky))).toBe(true)
    expect(Either.getLeft(scanShape(JSON.stringify({ a: [[1]] }), 2, 10))).toMatchObject(
      Option.some({ reason: "too-deep" })
    )
  })
})

describe("member names (I-JSON, RFC 7493 §2.3)", () => {
  const duplicateOf = (text: string) => {
    const parsed = parseJson(text)
    return Either.isLeft(parsed) && parsed.left.reason === "duplicate-name" ? parsed.left.message : "accepted"
  }

  it("refuses {\"revision\":1,\"revision\":9} instead of keeping the last member; text that is no JSON stays invalid-json", () => {
    expect(duplicateOf("{\"revision\":1,\"revision\":9}")).toBe(
      "has the member name \"revision\" twice in one object (I-JSON, RFC 7493 §2.3)"
    )
    // The parser judges syntax before the names are looked at.
    expect(refusal(parseJson("{\"a\":1,\"a\":"))).toBe("invalid-json")
    expect(refusal(parseJson("{\"a\",\"a\"}"))).toBe("invalid-json")
  })

  it.each([
    ["an object in an object", "{\"a\":{\"b\":1,\"c\":2,\"b\":3}}", "b"],
    ["the second object of an array", "[{\"x\":1},{\"x\":1,\"x\":2}]", "x"],
    ["an object 32 levels deep", "[".repeat(31) + "{\"k\":1,\"k\":2}" + "]".repeat(31), "k"],
    ["after a nested object closes", "{\"a\":1,\"o\":{\"a\":2},\"a\":3}", "a"],
    ["names equal after unescaping", "{\"revision\":1,\"rev\\u0069sion\":9}", "revision"],
    ["an escaped quote", "{\"a\\\"b\":1,\"a\\u0022b\":2}", "a\"b"],
    ["an escaped solidus", "{\"a/b\":1,\"a\\/b\":2}", "a/b"],
    ["a surrogate pair and its escapes", "{\"🐇\":1,\"\\ud83d\\udc07\":2}", "🐇"],
    ["the empty name", "{\"\":1,\"\":2}", ""],
    ["__proto__", "{\"__proto__\":1,\"__proto__\":2}", "__proto__"]
  ])("refuses a duplicate in %s", (_, text, name) => {
    expect(duplicateOf(text)).toBe(
      `has the member name ${JSON.stringify(name)} twice in one object (I-JSON, RFC 7493 §2.3)`
    )
  })

  it("a name again in a sibling object, at another depth, as a value or in another spelling is no duplicate", () => {
    for (
      const text of [
        "[{\"x\":1},{\"x\":2}]",
        "{\"a\":{\"a\":{\"a\":1}}}",
        "{\"a\":\"b\",\"b\":\"a\"}",
        "{\"a\":[\"a\",\"a\"]}",
        "{\"Revision\":1,\"revision\":2}",
        "{\"é\":1,\"e\\u0301\":2}" // two names: RFC 8259 §8.3 compares code units, without normalization
      ]
    ) expect(duplicateOf(text)).toBe("accepted")
    expect(duplicateOf("[{\"x\":1},{\"x\":2,\"x\":3}]")).not.toBe("accepted")
  })

  it("a long duplicated name is cut to 100 characters in the message; 1,000 distinct long names pass", () => {
    const name = "n".repeat(100_000)
    const message = duplicateOf(`{"${name}":1,"${name}":2}`)
    expect(message).toBe(`has the member name "${"n".repeat(99)}…" twice in one object (I-JSON, RFC 7493 §2.3)`)
    const names = Array.from({ length: MaxJsonMembers }, (_, i) => `${i}`.padStart(5_000, "k"))
    expect(refusal(parseJson(`{${names.map((n) => `"${n}":0`).join(",")}}`))).toBe("accepted")
  })
})

describe("number lexemes of the top-level object", () => {
  it("records the text of each number that is a direct member, as written, and nothing deeper", () => {
    const parsed = parseJson(
      "{\"revision\" : 0.1e1, \"n\":-0,\"big\":142305660233966512, \"o\":{\"deep\":1.0}, \"a\":[2.0], \"s\":\"3\", \"t\":true}"
    )
    expect(Either.map(parsed, (d) => Object.fromEntries(d.numberLexemes))).toEqual(
      Either.right({ revision: "0.1e1", n: "-0", big: "142305660233966512" })
    )
  })

  it("records none for a document that is not an object", () => {
    expect(Either.map(parseJson("[1.0, {\"a\": 2}]"), (d) => d.numberLexemes.size)).toEqual(Either.right(0))
    expect(Either.map(parseJson("1.0"), (d) => d.numberLexemes.size)).toEqual(Either.right(0))
  })
})
