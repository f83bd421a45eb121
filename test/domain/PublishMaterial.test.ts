import { describe, expect, it } from "@effect/vitest"
import { Either, Option } from "effect"
import type { FieldIssue } from "../../src/domain/errors.js"
import { MaxIssueLength, MaxListedIssues, parseJson } from "../../src/domain/JsonInput.js"
import { decodePublishMaterial as decodeDocument } from "../../src/domain/PublishMaterial.js"

const valid = { material_id: "news/2026/budget", revision: 1, title: "Budget passes", summary: "", body: "Text." }
/** A value given to the decoder as it is, without the text it was parsed from (so no number lexemes). */
const decodePublishMaterial = (value: unknown) => decodeDocument({ value, numberLexemes: new Map() })
const fieldsOf = (input: unknown) =>
  Either.match(decodePublishMaterial(input), { onLeft: (e) => e.issues.map((i) => i.field), onRight: () => [] })
/** The request body `text` the way the API reads it: `parseJson`, then the decoder; a parse refusal as one `(body)` issue. */
const issuesOfText = (text: string): ReadonlyArray<FieldIssue> => {
  const document = parseJson(text)
  if (Either.isLeft(document)) return [{ field: "(body)", message: document.left.message }]
  return Either.match(decodeDocument(document.right), { onLeft: (e) => e.issues, onRight: () => [] })
}
/** `valid` as JSON text with `revision` written as `lexeme`. */
const withRevision = (lexeme: string) =>
  JSON.stringify({ ...valid, revision: 0 }).replace("\"revision\":0", `"revision":${lexeme}`)

describe("PublishMaterial command validation", () => {
  it("accepts a valid command and maps snake_case to the domain", () => {
    const decoded = decodePublishMaterial(valid)
    expect(Either.getOrThrow(decoded)).toMatchObject({ materialId: "news/2026/budget", revision: 1, summary: "" })
  })

  it.each([
    ["material_id", { ...valid, material_id: "has space" }],
    ["material_id", { ...valid, material_id: "" }],
    ["material_id", { ...valid, material_id: "a".repeat(201) }],
    ["material_id", { ...valid, material_id: ".." }],
    ["material_id", { ...valid, material_id: "news/../secret" }],
    ["material_id", { ...valid, material_id: "/leading-slash" }],
    ["material_id", { ...valid, material_id: "double//slash" }],
    ["title", { ...valid, title: "lone \ud800 surrogate" }],
    ["body", { ...valid, body: "\udc00" }],
    ["revision", { ...valid, revision: 0 }],
    ["revision", { ...valid, revision: 1.5 }],
    ["revision", { ...valid, revision: "2" }],
    ["title", { ...valid, title: "" }],
    ["title", { ...valid, title: "t".repeat(501) }],
    ["summary", { ...valid, summary: "s".repeat(2001) }],
    ["body", { ...valid, body: "b".repeat(1024 * 1024 + 1) }],
    ["body", { ...valid, body: "é".repeat(600 * 1024) }]
  ])("refuses a bad %s and names it", (field, input) => {
    expect(fieldsOf(input)).toEqual([field])
  })

  it("accepts the limits themselves: 200-char id, 500-char title, 2000-char summary, 1 MiB body", () => {
    const input = {
      material_id: "a".repeat(200),
      revision: 1,
      title: "ж".repeat(500),
      summary: "s".repeat(2000),
      body: "b".repeat(1024 * 1024)
    }
    expect(Either.isRight(decodePublishMaterial(input))).toBe(true)
  })

  it("reports every missing field at once, and unknown fields", () => {
    expect(fieldsOf({ extra: 1 })).toEqual(["extra", "material_id", "revision", "title", "summary", "body"])
  })

  it("200,000 unknown keys are one bounded refusal: 20 listed, then how many more", () => {
    const input: Record<string, unknown> = { ...valid }
    for (let i = 0; i < 200_000; i++) input[`k${i}`] = i
    const decoded = decodePublishMaterial(input)
    if (Either.isRight(decoded)) return expect.unreachable("accepted")
    const issues = decoded.left.issues
    expect(issues).toHaveLength(MaxListedIssues + 1)
    expect(issues.slice(0, 3).map((i) => i.field)).toEqual(["k0", "k1", "k2"])
    expect(issues.at(-1)).toEqual({ field: "(body)", message: "and 199980 more issues" })
  })

  it("unknown keys and bad known fields together stay within the bound and count every issue", () => {
    const input: Record<string, unknown> = { revision: "x" }
    for (let i = 0; i < 30; i++) input[`k${i}`] = i
    const decoded = decodePublishMaterial(input)
    if (Either.isRight(decoded)) return expect.unreachable("accepted")
    // 30 unknown + revision + 4 missing fields = 35 issues.
    expect(decoded.left.issues.at(-1)).toEqual({ field: "(body)", message: "and 15 more issues" })
  })

  it("a huge wrong value is reported in at most MaxIssueLength characters", () => {
    const decoded = decodePublishMaterial({ ...valid, title: Array.from({ length: 100_000 }, (_, i) => i) })
    if (Either.isRight(decoded)) return expect.unreachable("accepted")
    expect(decoded.left.issues.map((i) => i.field)).toEqual(["title"])
    expect(decoded.left.issues[0]!.message.length).toBeLessThanOrEqual(MaxIssueLength)
  })

  it("a field nested 10,000 levels deep never reaches the schema: the parser refuses it", () => {
    const text = JSON.stringify({ ...valid, title: "PLACEHOLDER" }).replace(
      "\"PLACEHOLDER\"",
      "[".repeat(10_000) + "]".repeat(10_000)
    )
    expect(Either.getLeft(parseJson(text))).toMatchObject(Option.some({ reason: "too-deep" }))
  })

  it("a revision given twice is refused as a duplicate name, not read as the last one (9)", () => {
    const text = JSON.stringify(valid).replace("\"revision\":1", "\"revision\":1,\"revision\":9")
    expect(issuesOfText(text)).toEqual([{
      field: "(body)",
      message: "has the member name \"revision\" twice in one object (I-JSON, RFC 7493 §2.3)"
    }])
    const escaped = JSON.stringify(valid).replace("\"revision\":1", "\"revision\":1,\"rev\\u0069sion\":9")
    expect(issuesOfText(escaped)).toMatchObject([{ field: "(body)", message: expect.stringContaining("\"revision\"") }])
  })

  it("a duplicate anywhere in the body is refused, its long name cut to 100 characters in the message", () => {
    const name = "n".repeat(5_000)
    const text = JSON.stringify({ ...valid, extra: [{ [name]: 1 }] }).replace(`"${name}":1`, `"${name}":1,"${name}":2`)
    const issues = issuesOfText(text)
    expect(issues.map((i) => i.field)).toEqual(["(body)"])
    expect(issues[0]!.message).toContain(`"${"n".repeat(99)}…"`)
    expect(issues[0]!.message.length).toBeLessThan(200)
  })

  it.each(["0.1e1", "1.0000000000000001", "1.0", "1e0", "1E0", "10e-1", "-0", "-0.0", "2.5e0"])(
    "a revision written %s is refused as not an integer literal, whatever it parses to",
    (lexeme) => {
      expect(issuesOfText(withRevision(lexeme))).toEqual([{
        field: "revision",
        message:
          `must be written as an integer, without a fraction, an exponent or a minus zero (it is written ${lexeme})`
      }])
    }
  )

  it.each([
    ["142305660233966512", "142305660233966512"],
    ["a 401-digit integer (Infinity once parsed)", "1" + "0".repeat(400)]
  ])("a revision of %s is refused as at most 9007199254740991, not as 'not an integer'", (_, lexeme) => {
    expect(issuesOfText(withRevision(lexeme))).toEqual([{
      field: "revision",
      message: "must be at most 9007199254740991"
    }])
  })

  it("9007199254740991 and ` 3 ` are revisions, 9007199254740992 is over the limit, and `1.` is no JSON at all", () => {
    expect(issuesOfText(withRevision("9007199254740991"))).toEqual([])
    expect(issuesOfText(withRevision(" 3 "))).toEqual([])
    expect(issuesOfText(withRevision("9007199254740992"))).toEqual([{
      field: "revision",
      message: "must be at most 9007199254740991"
    }])
    expect(issuesOfText(withRevision("1."))).toMatchObject([{
      field: "(body)",
      message: expect.stringContaining("is not valid JSON")
    }])
  })

  it("a value given without its text is judged by its value alone: 142305660233966512 is too large, not 'not an integer'", () => {
    expect(Either.getLeft(decodePublishMaterial({ ...valid, revision: 142305660233966512 }))).toEqual(
      Option.some(
        expect.objectContaining({ issues: [{ field: "revision", message: "must be at most 9007199254740991" }] })
      )
    )
  })
})
