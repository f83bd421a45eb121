import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import fc from "fast-check"
import { decodeEvent, MaxDetailLength } from "../../src/domain/Envelope.js"
import { MaxIssueLength, MaxListedIssues, parseJsonBytes } from "../../src/domain/JsonInput.js"
import { decodePublishMaterial } from "../../src/domain/PublishMaterial.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { deepJson, manyUnknownKeys, propertyParameters } from "../support/properties.js"

const validBody = MaterialMother.envelope(MaterialMother.event()).body

/** Bodies of every kind: random bytes, any JSON, deep nesting, the valid event with a field replaced by anything. */
const bodies = fc.oneof(
  fc.uint8Array({ maxLength: 512 }),
  fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v))),
  deepJson.map((text) => Buffer.from(text)),
  manyUnknownKeys(5_000).map((text) => Buffer.from(text)),
  fc.tuple(
    fc.constantFrom("event_id", "material_id", "revision", "title", "summary", "published_at", "extra"),
    fc.jsonValue()
  )
    .map(([field, value]) => Buffer.from(JSON.stringify({ ...JSON.parse(validBody), [field]: value }))),
  fc.constant(Buffer.from(validBody))
)

/** Header values as amqplib may hand them over: any JSON-like value, tables and lists included, or nothing. */
const anyHeader = fc.oneof(fc.constant(1), fc.constant(undefined), fc.anything({ maxDepth: 6 }))

describe("the bus decoder, given anything", () => {
  it("returns a known event or a typed refusal with a bounded detail, and never throws", () => {
    fc.assert(
      fc.property(
        bodies,
        fc.oneof(fc.constant("material.published.v1"), fc.constant(undefined), fc.string()),
        anyHeader,
        fc.oneof(fc.constant("application/json"), fc.constant(undefined), fc.string()),
        (body, type, schemaVersion, contentType) => {
          const decoded = decodeEvent({ type, schemaVersion, contentType, body })
          if (Either.isLeft(decoded)) {
            expect(decoded.left._tag).toBe("UndecodableMessage")
            expect(decoded.left.detail.length).toBeLessThanOrEqual(MaxDetailLength)
          } else {
            expect(decoded.right.eventId).toMatch(/^[0-9a-f-]{36}$/)
          }
        }
      ),
      propertyParameters()
    )
  })
})

describe("the command decoder, given any JSON", () => {
  it("returns a command or at most MaxListedIssues + 1 issues of bounded length, and never throws", () => {
    fc.assert(
      fc.property(fc.oneof(bodies, manyUnknownKeys(20_000).map((t) => Buffer.from(t))), (bytes) => {
        const json = parseJsonBytes(bytes)
        if (Either.isLeft(json)) return
        const decoded = decodePublishMaterial(json.right)
        if (Either.isLeft(decoded)) {
          expect(decoded.left.issues.length).toBeGreaterThan(0)
          expect(decoded.left.issues.length).toBeLessThanOrEqual(MaxListedIssues + 1)
          for (const issue of decoded.left.issues) expect(issue.message.length).toBeLessThanOrEqual(MaxIssueLength)
        }
      }),
      propertyParameters()
    )
  })
})
