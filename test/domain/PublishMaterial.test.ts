import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
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
})
