import { describe, expect, it } from "@effect/vitest"
import { Either, Option } from "effect"
import { MaxIssueLength, MaxListedIssues, parseJson } from "../../src/domain/JsonInput.js"
import { decodePublishMaterial } from "../../src/domain/PublishMaterial.js"

const valid = { material_id: "news/2026/budget", revision: 1, title: "Budget passes", summary: "", body: "Text." }
const fieldsOf = (input: unknown) =>
  Either.match(decodePublishMaterial(input), { onLeft: (e) => e.issues.map((i) => i.field), onRight: () => [] })

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
})
